/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Pools (pool.c): sandboxes started ahead, each used for one step. A pool is a detached process
 * of the caller, as a session's supervisor is, holding `size` members: sessions (session.h),
 * each its supervisor forked by the pool (PR_SET_PDEATHSIG: a SIGKILL of the pool takes them
 * along, and their sandboxes with them), its interpreter started and the preload imported as
 * its first, trusted step, then waiting. A client takes a member on the pool's socket and runs
 * one step on the member's own socket; the member ends after that step (max_steps), and the
 * pool starts another in the background.
 *
 * The pool's socket (REGISTRY/ID.sock, found by its name as a session's is) takes one JSON
 * line per connection:
 *   {"op":"take"}    -> {"id":MEMBER,"socket":PATH,"pool":NAME} once a member is ready (the
 *                       oldest first), or {"error":...}. The connection is the lease: when the
 *                       client closes it the member is ended (SIGTERM) if it still runs.
 *   {"op":"status"}  -> {"name","id","size","ready","starting","leased","served","failures",
 *                       "last_error","refill_ms"}
 *   {"op":"stop"}    -> every member ended, then {"stopped":true,...}; EOF when the pool exits.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsbox.h"
#include "session.h"

/* Whether the peer of connection fd (pid: its SO_PEERCRED pid) runs in this process's user
 * namespace; false when that cannot be read. A sandbox of an ordinary user's has the caller's uid
 * on the host: this keeps it from the session's and the pool's sockets (defined in
 * session-client.c). */
bool peer_in_own_user_namespace(int fd, pid_t pid);

#define POOL_SIZE_MAX 32
#define POOL_LABEL "nsbox.pool"               /* the pool's own record */
#define POOL_MEMBER_LABEL "nsbox.pool.member" /* its members' (=NAME) */

struct pool_options {
    const char *name;
    unsigned size;
    const char *preload_code;      /* the first step of each member: imports, or "pass" */
    const char *preload;           /* as given (--preload), for the status; or "" */
    bool json;                     /* print {"id","name","socket"} */
    struct session_options member; /* each member's: max_steps 2, no idle timeout */
};

/* `nsbox pool start`: detach the pool's process, wait until all its members are up and their
 * preload done, print its id. pool_config: the pool's record (name, labels); member_config:
 * each member's sandbox. argc/argv: nsbox's command line, for `nsbox ps`. Returns the exit
 * status (0, or 125 with one line on stderr: a member that failed to start, or its preload). */
int pool_start(const struct nsbox_config *pool_config, const struct nsbox_config *member_config,
               const struct pool_options *o, int argc, char *argv[]);
