/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Isolation tier 3 (README, "Isolation tiers"; NSBOX_ISOLATION_LANDLOCK): where no user
 * namespace can be made (a container runtime's default seccomp profile, Ubuntu's
 * apparmor_restrict_unprivileged_userns, user.max_user_namespaces = 0), the program runs
 * without namespaces, on the host's own programs, under:
 *   Landlock   read (and execute) /usr, /lib*, /bin, /sbin and a few files of /etc (the
 *              dynamic loader's cache, alternatives, the time zone, Python's site files),
 *              read and write a few device nodes (/dev/null, ...), read and write (never
 *              execute) a private scratch directory; nothing else; TCP refused (ABI 4);
 *              signals and abstract sockets only within (ABI 6);
 *   seccomp    the default policy (sockets of AF_UNIX only; no namespaces, mounts, ptrace,
 *              ...), and setsid(2)/setpgid(2) refused, so that the program stays in the
 *              process group nsbox kills at the end (there is no pid namespace to do it);
 *   no_new_privs, no capabilities (root's runs switch to a host id of their own first), the
 *   rlimit fallback's limits, the wall clock, output caps, the JSON result.
 * Its steps: supervisor: refuse what needs a namespace -> Landlock ABI (else fail) -> root: a
 * pool id -> scratch directory (and main.py) -> argv, environment, Landlock paths, the extra
 * filter -> pipes -> clone3 (no namespace) -> supervise(kill_group) -> cell outputs -> sweep
 * the pool id, remove the scratch directory. Init: a process group of its own -> root:
 * empty the bounding set, switch ids -> parent-death signal (SIGUSR2) -> drop capabilities,
 * verify -> non-dumpable, no_new_privs -> chdir scratch -> Landlock (with the removal of the
 * scratch directory from its parent) -> block signals -> RLIMIT_CORE, budgets -> fork the
 * payload (a Landlock layer without that removal, the default policy and the extra filter,
 * sandbox_payload_exec()) -> back to nsbox's group, the default policy -> tier3_loop().
 * The scratch directory (0700, below $TMPDIR or /tmp) is the program's cwd, HOME and TMPDIR,
 * holds --code's main.py, and is removed after the run. Options that need a namespace are
 * refused (tier3_run() says which).
 */
#pragma once

#include <signal.h>

#include "nsbox.h"

/* Whether a run with config c must take tier 3: 1 where c->isolation is
 * NSBOX_ISOLATION_LANDLOCK and a child process cannot make a user namespace (or, unprivileged,
 * map its own id in it, which Ubuntu's AppArmor restriction refuses), 0 otherwise (at once for any
 * other mode: nothing on an ordinary run's path). */
int tier3_needed(const struct nsbox_config *c);

/* Run c at tier 3, filling *ret as nsbox_run() does (isolation_tier 3 and what is missing,
 * with one warning). sigfd: supervise_signal_set()'s signalfd when forwarding signals, or -1.
 * Returns 0 (also when the run failed: *ret says why), or -EINVAL for an invalid config. */
int tier3_run(const struct nsbox_config *c, int sigfd, struct nsbox_result *ret);
