/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The HTTP proxy of `--network allow=`, run by the supervisor outside the sandbox.
 *
 * The sandbox's init creates a listening TCP socket on 127.0.0.1:3128 in the sandbox's network
 * namespace (which has only lo) and the supervisor takes it with pidfd_getfd(2) before any
 * untrusted code runs; init then closes its copy, so the payload can only connect to it. The
 * supervisor accepts there, and opens the upstream connections in its own (the host's) network
 * namespace: a socket belongs to the namespace it was created in, wherever its descriptor goes
 * (socket(7), network_namespaces(7)). Decisions are by the name the client asks for (CONNECT's
 * target, or a plain request's absolute URI, which must agree with Host:), names are resolved
 * outside (a forked child per lookup runs getaddrinfo(3), so the supervisor never blocks; a
 * name is looked up once a run, without the resolv.conf search list), an address that is not
 * public or is one of the host's own is refused for a name, TLS is relayed untouched.
 *
 * Single-threaded and non-blocking: supervise.c's poll loop asks for the descriptors
 * (proxy_poll_fill()) and hands back what poll(2) said (proxy_poll_handle()). Memory is
 * bounded: at most max_connections connections with two 16 KiB buffers each.
 */
#pragma once

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#include "netallow.h"
#include "nsbox.h"

/* Where the proxy listens inside the sandbox. */
#define PROXY_ADDRESS "127.0.0.1"
#define PROXY_PORT 3128

/* The payload's environment with --network allow= (plan_env(), plan.h): the proxy for every
 * scheme, in both spellings, and nothing exempt (proxy.c). */
#define PROXY_N_ENV 8
extern const char *const proxy_env[PROXY_N_ENV];

/* Defaults of nsbox_config.network_max_connections and network_max_bytes. */
#define PROXY_DEFAULT_MAX_CONNECTIONS NSBOX_NETWORK_MAX_CONNECTIONS_DEFAULT
#define PROXY_DEFAULT_MAX_BYTES NSBOX_NETWORK_MAX_BYTES_DEFAULT

/* How long a client has to send its request head, a connection upstream to be made (name
 * lookup included), and a relayed connection may stay silent both ways (microseconds). */
#define PROXY_HEAD_TIMEOUT_USEC (10 * 1000000ULL)
#define PROXY_CONNECT_TIMEOUT_USEC (10 * 1000000ULL)
#define PROXY_IDLE_TIMEOUT_USEC (120 * 1000000ULL)

/* The proxy's own work is paced, as refused system calls are (supervise.c, NOTIF_BURST), and
 * for the same reason: it is done outside every limit of the sandbox (--cpus, --pids-limit
 * do not hold the supervisor). A connection costs an accept(2), a parse and an answer, refused
 * or not: PROXY_CONN_BURST at once, then one every PROXY_CONN_INTERVAL_USEC; past it the
 * listener is not polled and a connection waits in its listen queue. A name lookup costs a
 * fork(2), a getaddrinfo(3) and, on a real host, queries to the host's resolver: at most
 * PROXY_LOOKUP_BURST at once, then one every PROXY_LOOKUP_INTERVAL_USEC (a connection waits
 * for its turn within PROXY_CONNECT_TIMEOUT_USEC), and PROXY_LOOKUP_BUDGET in a run (as many
 * names as the cache keeps, CACHE_SIZE in proxy-internal.h); past it a name not looked up yet
 * is refused (503), while names looked up already, --add-host names and addresses still work.
 * A payload opening connections to new names under a wildcard pattern made about 3,400
 * lookups a second without them. */
#define PROXY_CONN_BURST 200
#define PROXY_CONN_INTERVAL_USEC 10000ULL /* 100 connections a second */
#define PROXY_LOOKUP_BURST 32
#define PROXY_LOOKUP_INTERVAL_USEC 50000ULL /* 20 lookups a second */
#define PROXY_LOOKUP_BUDGET 256

struct proxy;

/* A proxy for config c (network_allow, network_hosts, the limits). Checks the patterns and the
 * hosts, takes the host's interface addresses (getifaddrs(3)), and raises the process's soft
 * RLIMIT_NOFILE as far as network_max_connections need (proxy_free() puts it back): on
 * -EINVAL, why[why_size] says what is wrong (a pattern, a host, a limit that cannot fit under
 * the hard RLIMIT_NOFILE). Returns 0 or -errno (-ENOMEM). */
int proxy_new(const struct nsbox_config *c, struct proxy **ret, char *why, size_t why_size);

/* Serve on listener (a listening TCP socket, taken: closed by proxy_free()). */
void proxy_set_listener(struct proxy *p, int listener);

/* How many pollfd entries proxy_poll_fill() may use. */
size_t proxy_max_pollfds(const struct proxy *p);

/* Fill fds[] with what the proxy waits for; lower *timeout_ms (-1: none) to its next deadline.
 * Returns the number of entries. */
size_t proxy_poll_fill(struct proxy *p, struct pollfd *fds, uint64_t now, int *timeout_ms);

/* Act on what poll(2) returned for the entries proxy_poll_fill() filled, and on the deadlines
 * that passed. */
void proxy_poll_handle(struct proxy *p, const struct pollfd *fds, size_t n, uint64_t now);

/* The report so far into *ret, the connections left open (their bytes are counted when they
 * end): a session's step results (session.c). */
void proxy_report_snapshot(const struct proxy *p, struct nsbox_network_report *ret);

/* Close every connection (the sandbox ended) and write the report into *ret. */
void proxy_finish(struct proxy *p, struct nsbox_network_report *ret);

/* Close everything, kill and reap the lookups still running, free. Safe on NULL. */
void proxy_free(struct proxy *p);
