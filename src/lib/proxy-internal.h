/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The proxy of `--network allow=` inside (internal): its state, shared by proxy.c (the
 * connections) and proxy-report.c (what the result says of them). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "macro.h"
#include "netallow.h"
#include "nsbox.h"

#define BUF_SIZE (16 * 1024)
#define MAX_ADDRS 8
/* Slots beyond max_connections, for answering a connection over the limit with a 503. */
#define OVERFLOW_SLOTS 8
/* After an answer, what the client still sends is read and dropped for this long (at most
 * BUF_SIZE x 4 bytes) before the close: closing a socket with unread data sends a reset, which
 * can destroy the answer before the client reads it (RFC 9112 9.6, "lingering close"). */
#define LINGER_USEC (2 * 1000000ULL)
/* Descriptors: a connection holds at most two (the client, and the upstream or the lookup's
 * pipe; a third for a moment between pipe2() and fork()); the supervisor keeps this many for
 * itself (the sandbox's pidfd, pipes, signalfd, the audit log, ...). */
#define FDS_PER_SLOT 2
#define FDS_RESERVE 64
/* accept4() failed for want of descriptors or memory: the listener is left out of poll(2)
 * until a connection closes or this passes (it stays readable, and would wake the loop at
 * once, again and again). */
#define ACCEPT_PAUSE_USEC (1 * 1000000ULL)
/* Names looked up are kept for the run (a lookup is a process outside the sandbox, beyond
 * --cpus): this many, the least recently used one making room. A name that did not resolve
 * is kept for NEGATIVE_USEC only, so that a passing DNS failure does not last the run. */
#define CACHE_SIZE 256
#define NEGATIVE_USEC (5 * 1000000ULL)

enum conn_state { ST_HEAD, ST_RESOLVE, ST_CONNECT, ST_RELAY, ST_ANSWER, ST_LINGER };

struct conn {
    enum conn_state state;
    int client, upstream;
    char up[BUF_SIZE]; /* from the client to the host */
    char down[BUF_SIZE];
    size_t up_len, up_off, down_len, down_off;
    bool client_eof, upstream_eof, up_shut, down_shut;
    uint64_t deadline;
    struct httphead head;
    /* The lookup: a child writing struct sockaddr_storage values to a pipe. */
    pid_t lookup_pid;
    int lookup_fd;
    size_t lookup_have;  /* bytes of addrs[] read */
    bool lookup_waiting; /* ST_RESOLVE, waiting for its turn (PROXY_LOOKUP_BURST) */
    struct sockaddr_storage addrs[MAX_ADDRS];
    size_t n_addrs, next_addr;
    bool explicit_addr; /* the caller gave the address: no range check */
    size_t record;      /* index in report.connections, or SIZE_MAX */
    /* Where proxy_poll_fill() put this connection's descriptors in fds[], or SIZE_MAX. */
    size_t pi_client, pi_upstream, pi_lookup;
    uint64_t bytes_up, bytes_down;
    const struct netallow_rule *rule; /* allowed by this rule, or NULL: refused */
    size_t host;                      /* its entry in report.hosts (host_slot()), or SIZE_MAX */
};

struct host_entry {
    char name[NETALLOW_HOST_MAX + 1];
    struct sockaddr_storage addr;
};

struct cache_entry {
    char name[NETALLOW_HOST_MAX + 1]; /* "": unused */
    struct sockaddr_storage addrs[MAX_ADDRS];
    size_t n_addrs;
    uint64_t expires; /* 0: for the run */
    uint64_t used;    /* p->cache_clock when last found or stored */
};

struct proxy {
    struct netallow allow;
    struct cache_entry *cache; /* CACHE_SIZE entries, allocated on the first lookup */
    uint64_t cache_clock;
    struct host_entry *hosts;
    size_t n_hosts;
    struct sockaddr_storage *own; /* this host's interface addresses, at the start */
    size_t n_own;
    size_t max_connections;
    size_t n_slots; /* max_connections + OVERFLOW_SLOTS */
    uint64_t max_bytes, bytes;
    int listener;
    uint64_t accept_paused_until; /* 0: the listener is polled */
    uint64_t conn_at, lookup_at;  /* the paces of proxy.h (PROXY_CONN_BURST), pace_take() */
    struct rlimit nofile_saved;   /* RLIMIT_NOFILE before proxy_new() raised it */
    bool nofile_raised;
    struct conn **conns; /* n_slots slots */
    struct nsbox_network_report report;
    size_t refused_listed; /* refused connections in report.connections */
    char allowed_text[512];
};

/* ---- proxy-report.c: the report of the run's connections (nsbox_network_report) ---- */

/* Record connection c (NULL: one refused before it had a slot) to host:port as allowed or
 * refused, for reason; a connection recorded already gets a later word instead. */
void conn_record(struct proxy *p, struct conn *c, const char *host, uint16_t port, bool allowed,
                 const char *reason);
/* The entry of report.hosts for c's bytes, chosen once (see proxy-report.c). */
size_t host_slot(struct proxy *p, struct conn *c);
/* Add an allowed connection's bytes to its host's totals. */
void host_account(struct proxy *p, struct conn *c);
/* A refusal or cut after the record was made: say why, once. */
void conn_note(struct proxy *p, struct conn *c, const char *reason);
/* A connection its rule allowed, refused once its name was looked up. */
void refuse_after_lookup(struct proxy *p, struct conn *c, const char *reason);

/* ---- proxy-lookup.c: name lookups ---- */

/* The lookup child: getaddrinfo(3) of host in a process of its own, so that the supervisor
 * never waits on DNS; it writes the addresses (struct sockaddr_storage, MAX_ADDRS at most) to
 * fd and exits. It dies with the supervisor. */
_noreturn_ void lookup_child(const char *host, int fd);
/* The cache entry of name (a negative one until it expires), or NULL. */
struct cache_entry *cache_find(struct proxy *p, const char *name, uint64_t now);
/* Keep what a lookup of name found (n addresses, maybe none). Nothing kept without memory:
 * the next request looks up again. */
void cache_put(struct proxy *p, const char *name, const struct sockaddr_storage *addrs, size_t n,
               uint64_t now);
