/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The HTTP proxy of `--network allow=` (see proxy.h). One connection goes through:
 *
 *   HEAD     read the request head (at most HTTPHEAD_MAX bytes, PROXY_HEAD_TIMEOUT_USEC)
 *            -> parse (netallow.c) -> match the allowlist: a refusal is an ANSWER
 *   RESOLVE  --add-host, an address pattern, or a forked child's getaddrinfo(3); a name whose
 *            addresses are not all public is refused (ANSWER)
 *   CONNECT  non-blocking connect(2) to each address in turn (PROXY_CONNECT_TIMEOUT_USEC for
 *            the lookup and the connects together); none answers: a 502 ANSWER
 *   RELAY    CONNECT: "200" to the client, then bytes both ways, untouched. A plain request:
 *            its head rewritten (origin-form target, hop-by-hop headers dropped,
 *            "Connection: close", so one request per connection and the host decided once),
 *            then bytes both ways. Cut after PROXY_IDLE_TIMEOUT_USEC of silence, or when the
 *            run's byte budget is spent.
 *   ANSWER   write a short error response, then close.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fileio.h"
#include "macro.h"
#include "proxy.h"
#include "syscalls.h"

#include "proxy-internal.h"

/* curl reads only http_proxy in lower case, CGI-minded tools only the upper: both. */
#define PROXY_URL "http://" PROXY_ADDRESS ":" STRINGIFY(PROXY_PORT)
const char *const proxy_env[PROXY_N_ENV] = {"HTTP_PROXY=" PROXY_URL,
                                            "HTTPS_PROXY=" PROXY_URL,
                                            "ALL_PROXY=" PROXY_URL,
                                            "http_proxy=" PROXY_URL,
                                            "https_proxy=" PROXY_URL,
                                            "all_proxy=" PROXY_URL,
                                            "NO_PROXY=",
                                            "no_proxy="};
#undef PROXY_URL

static void lookup_stop(struct conn *c)
{
    if (c->lookup_fd >= 0) {
        (void)close(c->lookup_fd);
        c->lookup_fd = -1;
    }
    if (c->lookup_pid > 0) {
        /* The child may still wait on DNS: end it, and reap it (it is ours, and its end is
         * near: SIGKILL cannot be blocked). */
        (void)kill(c->lookup_pid, SIGKILL);
        (void)RETRY_EINTR(waitpid(c->lookup_pid, NULL, 0));
        c->lookup_pid = 0;
    }
}

static void conn_close(struct proxy *p, size_t i)
{
    struct conn *c = p->conns[i];

    if (!c)
        return;
    /* A client that went (or was left when the sandbox ended) before its head was complete:
     * counted too, so that the result accounts for every connection. */
    if (c->state == ST_HEAD && c->record == SIZE_MAX)
        conn_record(p, c, "", 0, false, "incomplete request");
    lookup_stop(c);
    if (c->client >= 0)
        (void)close(c->client);
    if (c->upstream >= 0)
        (void)close(c->upstream);
    if (c->record != SIZE_MAX) {
        p->report.connections[c->record].bytes_sent = c->bytes_up;
        p->report.connections[c->record].bytes_received = c->bytes_down;
    }
    p->report.bytes_sent += c->bytes_up;
    p->report.bytes_received += c->bytes_down;
    if (c->rule)
        host_account(p, c);
    free(c);
    p->conns[i] = NULL;
    p->accept_paused_until = 0; /* descriptors were freed: accept again */
}

/* Answer the client with status and one line, then close (ST_ANSWER). The line names what
 * is allowed, so that a person or a model reading the payload's error can act on it. */
static void conn_answer(struct proxy *p, struct conn *c, const char *status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void conn_answer(struct proxy *p, struct conn *c, const char *status, const char *fmt, ...)
{
    char body[1024];
    va_list ap;
    int n;

    (void)p;
    va_start(ap, fmt);
    (void)vsnprintf(body, sizeof(body) - 1, fmt, ap);
    va_end(ap);
    strcat(body, "\n");
    n = snprintf(c->down, sizeof(c->down),
                 "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 status, strlen(body), body);
    c->down_len = n > 0 && (size_t)n < sizeof(c->down) ? (size_t)n : 0;
    c->down_off = 0;
    /* Refused or failed before the relay: what the client sent with its head (counted against
     * the budget when it was taken) never left. */
    if (c->state == ST_RESOLVE || c->state == ST_CONNECT)
        c->bytes_up = 0;
    lookup_stop(c);
    if (c->upstream >= 0) {
        (void)close(c->upstream);
        c->upstream = -1;
    }
    c->state = ST_ANSWER;
}

static const struct host_entry *hosts_find(const struct proxy *p, const char *name)
{
    for (size_t i = 0; i < p->n_hosts; i++)
        if (strcmp(p->hosts[i].name, name) == 0)
            return &p->hosts[i];
    return NULL;
}

static void set_port(struct sockaddr_storage *ss, uint16_t port)
{
    if (ss->ss_family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static void addr_text(const struct sockaddr_storage *ss, char *buf, size_t size)
{
    const void *a = ss->ss_family == AF_INET
                        ? (const void *)&((const struct sockaddr_in *)ss)->sin_addr
                        : (const void *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
    if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)size))
        (void)snprintf(buf, size, "?");
}

static int addr_from_text(const char *text, struct sockaddr_storage *ss)
{
    *ss = (struct sockaddr_storage){0};
    if (inet_pton(AF_INET, text, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
        ss->ss_family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
        ss->ss_family = AF_INET6;
        return 0;
    }
    return -EINVAL;
}

static void conn_connect_next(struct proxy *p, struct conn *c);

/* The addresses are known: check them, then connect. */
static void conn_resolved(struct proxy *p, struct conn *c)
{
    char text[INET6_ADDRSTRLEN];

    if (c->n_addrs == 0) {
        refuse_after_lookup(p, c, "the name did not resolve");
        conn_answer(p, c, "502 Bad Gateway", "nsbox: %s did not resolve to an address",
                    c->head.host);
        return;
    }
    /* Every address, not the first: a name with one public and one private address would
     * otherwise reach the private one when the first does not answer. */
    for (size_t i = 0; i < c->n_addrs && !c->explicit_addr; i++) {
        const struct sockaddr *sa = (const struct sockaddr *)&c->addrs[i];
        bool own = netallow_addr_in(sa, p->own, p->n_own);
        char reason[96];

        if (!own && netallow_addr_is_public(sa))
            continue;
        addr_text(&c->addrs[i], text, sizeof(text));
        (void)snprintf(reason, sizeof(reason), "resolves to %s %s",
                       own ? "this host's address" : "non-public address", text);
        refuse_after_lookup(p, c, reason);
        conn_answer(p, c, "403 Forbidden",
                    "nsbox: %s resolves to %s, %s, which --network allow refuses for a name (%s)",
                    c->head.host, text,
                    own ? "an address of the host nsbox runs on"
                        : "a loopback, private or link-local address",
                    own ? "an address pattern or --add-host allows it"
                        : "an address pattern allows an address");
        return;
    }
    for (size_t i = 0; i < c->n_addrs; i++)
        set_port(&c->addrs[i], c->head.port);
    c->state = ST_CONNECT;
    c->next_addr = 0;
    conn_connect_next(p, c);
}

static void conn_start_lookup(struct proxy *p, struct conn *c, uint64_t now)
{
    const struct host_entry *h;
    const struct cache_entry *e;
    int fds[2];
    pid_t pid;

    c->state = ST_RESOLVE;
    if (c->head.is_ip) {
        c->explicit_addr = true;
        c->n_addrs = addr_from_text(c->head.host, &c->addrs[0]) == 0 ? 1 : 0;
        conn_resolved(p, c);
        return;
    }
    h = hosts_find(p, c->head.host);
    if (h) {
        c->explicit_addr = true;
        c->addrs[0] = h->addr;
        c->n_addrs = 1;
        conn_resolved(p, c);
        return;
    }
    e = cache_find(p, c->head.host, now);
    if (e) {
        memcpy(c->addrs, e->addrs, e->n_addrs * sizeof(e->addrs[0]));
        c->n_addrs = e->n_addrs;
        conn_resolved(p, c);
        return;
    }
    /* A lookup is a process of the supervisor's (proxy.h, PROXY_LOOKUP_BUDGET): a budget for
     * the run, and a pace, the connection waiting for its turn (lookups_next()). */
    if (p->report.lookups >= PROXY_LOOKUP_BUDGET) {
        p->report.lookups_refused_budget++;
        refuse_after_lookup(p, c, "the proxy's budget of name lookups was spent");
        conn_answer(p, c, "503 Service Unavailable",
                    "nsbox: the proxy looked up as many names as it may in one run (%d); %s was "
                    "not looked up (names looked up already, --add-host names and addresses "
                    "still work)",
                    PROXY_LOOKUP_BUDGET, c->head.host);
        return;
    }
    if (now < p->lookup_at) {
        c->lookup_waiting = true;
        return;
    }
    c->lookup_waiting = false;
    if (pace_take(&p->lookup_at, now, PROXY_LOOKUP_BURST, PROXY_LOOKUP_INTERVAL_USEC))
        p->report.lookups_throttled++;
    p->report.lookups++;
    if (pipe2(fds, O_CLOEXEC) < 0) {
        conn_note(p, c, "the proxy could not look the name up");
        conn_answer(p, c, "502 Bad Gateway", "nsbox: looking up %s failed: %s", c->head.host,
                    strerror(errno));
        return;
    }
    pid = fork();
    if (pid < 0) {
        (void)close(fds[0]);
        (void)close(fds[1]);
        conn_note(p, c, "the proxy could not look the name up");
        conn_answer(p, c, "502 Bad Gateway", "nsbox: looking up %s failed: %s", c->head.host,
                    strerror(errno));
        return;
    }
    if (pid == 0)
        lookup_child(c->head.host, fds[1]);
    (void)close(fds[1]);
    (void)fcntl(fds[0], F_SETFL, O_NONBLOCK);
    c->lookup_pid = pid;
    c->lookup_fd = fds[0];
}

static void conn_connect_next(struct proxy *p, struct conn *c)
{
    while (c->next_addr < c->n_addrs) {
        const struct sockaddr_storage *a = &c->addrs[c->next_addr++];
        socklen_t len = a->ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6);
        int fd = socket(a->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

        if (fd < 0)
            continue;
        if (connect(fd, (const struct sockaddr *)a, len) == 0 || errno == EINPROGRESS) {
            c->upstream = fd;
            return;
        }
        (void)close(fd);
    }
    conn_note(p, c, "the host did not accept the connection");
    conn_answer(p, c, "502 Bad Gateway", "nsbox: connecting to %s port %u failed", c->head.host,
                (unsigned)c->head.port);
}

/* A plain request's head rewritten for upstream (httphead_rewrite()), then what the client sent
 * after the head. In place in c->up. */
static int conn_rewrite(struct conn *c)
{
    char out[HTTPHEAD_MAX + 128];
    size_t rest = c->up_len - c->head.head_len;
    int n = httphead_rewrite(c->up, &c->head, out, sizeof(out));

    if (n < 0 || (size_t)n + rest > sizeof(c->up))
        return -E2BIG;
    memmove(c->up + n, c->up + c->head.head_len, rest);
    memcpy(c->up, out, (size_t)n);
    c->up_len = (size_t)n + rest;
    c->up_off = 0;
    return 0;
}

static bool budget(struct proxy *p, size_t n);

static void conn_head(struct proxy *p, struct conn *c, uint64_t now)
{
    const char *why = "";
    const struct netallow_rule *rule;
    int r = httphead_parse(c->up, c->up_len, &c->head, &why);

    if (r == 0)
        return;
    if (r < 0) {
        conn_record(p, c, "", 0, false, why);
        if (r == -E2BIG)
            conn_answer(p, c, "431 Request Header Fields Too Large", "nsbox: request refused: %s",
                        why);
        else
            conn_answer(p, c, "400 Bad Request", "nsbox: request refused: %s", why);
        return;
    }
    rule = netallow_match(&p->allow, c->head.host, c->head.is_ip, c->head.port);
    if (!rule) {
        conn_record(p, c, c->head.host, c->head.port, false, "not in --network allow");
        conn_answer(p, c, "403 Forbidden",
                    "nsbox: %s port %u is not in --network allow (allowed: %s)", c->head.host,
                    (unsigned)c->head.port, p->allowed_text);
        return;
    }
    conn_record(p, c, c->head.host, c->head.port, true, "");
    c->rule = rule;
    if (c->head.kind == HTTPHEAD_CONNECT) {
        /* Bytes after a CONNECT head are the start of the tunnel (a TLS ClientHello sent
         * early): kept, to go upstream. */
        memmove(c->up, c->up + c->head.head_len, c->up_len - c->head.head_len);
        c->up_len -= c->head.head_len;
        c->up_off = 0;
    } else if (conn_rewrite(c) < 0) {
        conn_note(p, c, "the request head is too long to forward");
        conn_answer(p, c, "431 Request Header Fields Too Large",
                    "nsbox: the request head is too long to forward");
        return;
    }
    /* What goes upstream from here on is counted as it enters c->up: the rewritten head of a
     * plain request, and what the client sent after the head (CONNECT's early data, a request
     * body), up to HTTPHEAD_MAX bytes that the relay never reads again. */
    if (!budget(p, c->up_len)) {
        conn_note(p, c, "cut: --network-max-bytes reached");
        conn_answer(p, c, "503 Service Unavailable",
                    "nsbox: the proxy relayed all the bytes it may (--network-max-bytes)");
        return;
    }
    c->bytes_up += c->up_len;
    c->deadline = now + PROXY_CONNECT_TIMEOUT_USEC;
    conn_start_lookup(p, c, now);
}

static void cut_all(struct proxy *p, const char *reason)
{
    for (size_t i = 0; i < p->n_slots; i++)
        if (p->conns[i]) {
            conn_note(p, p->conns[i], reason);
            conn_close(p, i);
        }
}

/* Count n relayed bytes against the run's budget; false when it is spent. */
static bool budget(struct proxy *p, size_t n)
{
    p->bytes += n;
    if (p->bytes <= p->max_bytes)
        return true;
    p->report.bytes_limit_hit = true;
    return false;
}

/* Make sure max_connections fit under RLIMIT_NOFILE: raise the soft limit as far as needed
 * (an unprivileged process may, up to the hard limit: setrlimit(2)), or refuse. Past it,
 * accept4() fails with EMFILE while the payload holds connections it was promised. The
 * sandbox's own limit is set apart (sandbox.c, BUDGET_NOFILE); proxy_free() puts the soft
 * limit back. */
static int nofile_fit(struct proxy *p, char *why, size_t why_size)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)(FDS_PER_SLOT * p->n_slots + FDS_RESERVE);

    if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        (void)snprintf(why, why_size,
                       "--network-max-connections %zu needs %llu file descriptors, but "
                       "RLIMIT_NOFILE allows %llu (ulimit -Hn): lower --network-max-connections "
                       "to %llu or raise the limit",
                       p->max_connections, (unsigned long long)need,
                       (unsigned long long)rl.rlim_max,
                       rl.rlim_max > FDS_RESERVE + FDS_PER_SLOT * OVERFLOW_SLOTS
                           ? (unsigned long long)((rl.rlim_max - FDS_RESERVE) / FDS_PER_SLOT -
                                                  OVERFLOW_SLOTS)
                           : 0ULL);
        return -EINVAL;
    }
    p->nofile_saved = rl;
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
        return -errno;
    p->nofile_raised = true;
    return 0;
}

/* The host's own interface addresses (getifaddrs(3), one netlink dump): a name that
 * resolves to one of them reaches a service of this host, loopback or not. Taken once, at
 * the start; an address added during the run is not among them. */
static int own_addresses(struct proxy *p, char *why, size_t why_size)
{
    struct ifaddrs *list = NULL;
    size_t n = 0;

    if (getifaddrs(&list) < 0) {
        int r = -errno;
        (void)snprintf(why, why_size,
                       "--network allow: listing this host's addresses failed (getifaddrs): %s",
                       strerror(-r));
        return r == -ENOMEM ? r : -EINVAL;
    }
    for (struct ifaddrs *i = list; i; i = i->ifa_next)
        n += i->ifa_addr &&
             (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6);
    p->own = calloc(n + 1, sizeof(*p->own));
    if (!p->own) {
        freeifaddrs(list);
        return -ENOMEM;
    }
    for (struct ifaddrs *i = list; i; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
            memcpy(&p->own[p->n_own++], i->ifa_addr, sizeof(struct sockaddr_in));
        else if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET6)
            memcpy(&p->own[p->n_own++], i->ifa_addr, sizeof(struct sockaddr_in6));
    freeifaddrs(list);
    return 0;
}

int proxy_new(const struct nsbox_config *c, struct proxy **ret, char *why, size_t why_size)
{
    struct proxy *p = calloc(1, sizeof(*p));
    size_t n_hosts = 0;
    int r;

    if (!p)
        return -ENOMEM;
    p->listener = -1;
    p->max_connections = c->network_max_connections ? c->network_max_connections
                                                    : PROXY_DEFAULT_MAX_CONNECTIONS;
    p->max_bytes = c->network_max_bytes ? c->network_max_bytes : PROXY_DEFAULT_MAX_BYTES;
    p->report.enabled = true;
    for (char *const *s = c->network_allow; s && *s; s++) {
        r = netallow_add(&p->allow, *s);
        if (r < 0) {
            (void)snprintf(why, why_size,
                           "--network allow: '%s' is not a list of host, *.domain, IPv4 or "
                           "[IPv6] address patterns with an optional :PORT",
                           *s);
            proxy_free(p);
            return r;
        }
    }
    if (p->allow.n == 0) {
        (void)snprintf(why, why_size, "--network allow: no pattern given");
        proxy_free(p);
        return -EINVAL;
    }
    netallow_describe(&p->allow, p->allowed_text, sizeof(p->allowed_text));
    while (c->network_hosts && c->network_hosts[n_hosts])
        n_hosts++;
    p->hosts = calloc(n_hosts + 1, sizeof(*p->hosts));
    p->n_slots = p->max_connections + OVERFLOW_SLOTS;
    p->conns = calloc(p->n_slots, sizeof(*p->conns));
    if (!p->hosts || !p->conns) {
        proxy_free(p);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n_hosts; i++) {
        const char *s = c->network_hosts[i], *colon = strchr(s, ':');
        bool is_ip = true;
        if (!colon ||
            netallow_host_normalise(s, (size_t)(colon - s), p->hosts[i].name, &is_ip) < 0 ||
            is_ip || addr_from_text(colon + 1, &p->hosts[i].addr) < 0) {
            (void)snprintf(why, why_size, "--add-host: '%s' is not NAME:ADDRESS", s);
            proxy_free(p);
            return -EINVAL;
        }
    }
    p->n_hosts = n_hosts;
    r = own_addresses(p, why, why_size);
    if (r < 0) {
        proxy_free(p);
        return r;
    }
    r = nofile_fit(p, why, why_size);
    if (r < 0) {
        proxy_free(p);
        return r;
    }
    *ret = p;
    return 0;
}

void proxy_set_listener(struct proxy *p, int listener)
{
    p->listener = listener;
    (void)fcntl(listener, F_SETFL, O_NONBLOCK);
}

size_t proxy_max_pollfds(const struct proxy *p)
{
    return 1 + 2 * p->n_slots;
}

static void lower_timeout(int *timeout_ms, uint64_t deadline, uint64_t now)
{
    uint64_t ms = deadline > now ? (deadline - now + 999) / 1000 : 0;
    if (ms > 60000)
        ms = 60000;
    if (*timeout_ms < 0 || (int)ms < *timeout_ms)
        *timeout_ms = (int)ms;
}

size_t proxy_poll_fill(struct proxy *p, struct pollfd *fds, uint64_t now, int *timeout_ms)
{
    size_t n = 0;

    if (p->accept_paused_until && now >= p->accept_paused_until)
        p->accept_paused_until = 0;
    if (p->listener >= 0 && !p->accept_paused_until && now >= p->conn_at)
        fds[n++] = (struct pollfd){.fd = p->listener, .events = POLLIN};
    else if (p->listener >= 0) /* paused, or paced (PROXY_CONN_BURST) */
        lower_timeout(timeout_ms,
                      p->accept_paused_until > p->conn_at ? p->accept_paused_until : p->conn_at,
                      now);
    for (size_t i = 0; i < p->n_slots; i++) {
        struct conn *c = p->conns[i];
        short ce = 0, ue = 0;
        if (!c)
            continue;
        c->pi_client = c->pi_upstream = c->pi_lookup = SIZE_MAX;
        lower_timeout(timeout_ms, c->deadline, now);
        switch (c->state) {
        case ST_HEAD:
            ce = POLLIN;
            break;
        case ST_RESOLVE:
            if (c->lookup_waiting) { /* its turn comes at p->lookup_at (PROXY_LOOKUP_BURST) */
                lower_timeout(timeout_ms, p->lookup_at, now);
                break;
            }
            c->pi_lookup = n;
            fds[n++] = (struct pollfd){.fd = c->lookup_fd, .events = POLLIN};
            break;
        case ST_CONNECT:
            ue = POLLOUT;
            break;
        case ST_RELAY:
            if (c->up_off < c->up_len)
                ue |= POLLOUT;
            else if (!c->client_eof)
                ce |= POLLIN;
            if (c->down_off < c->down_len)
                ce |= POLLOUT;
            else if (!c->upstream_eof)
                ue |= POLLIN;
            break;
        case ST_ANSWER:
            ce = POLLOUT;
            break;
        case ST_LINGER:
            ce = POLLIN;
            break;
        }
        /* Only a descriptor waited on for something: poll(2) reports POLLHUP and POLLERR
         * whatever the events, and a peer that hung up while the other side cannot move
         * would wake the loop at once, again and again. Its end shows at the next read or
         * write. */
        if (c->client >= 0 && ce) {
            c->pi_client = n;
            fds[n++] = (struct pollfd){.fd = c->client, .events = ce};
        }
        if (c->upstream >= 0 && ue) {
            c->pi_upstream = n;
            fds[n++] = (struct pollfd){.fd = c->upstream, .events = ue};
        }
    }
    return n;
}

static void accept_all(struct proxy *p, uint64_t now)
{
    for (int k = 0; k < 16 && now >= p->conn_at; k++) {
        int fd = accept4(p->listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        size_t busy = 0, free_slot = SIZE_MAX;
        if (fd < 0) {
            /* Out of descriptors (the caller's own may use up what nofile_fit() counted on)
             * or memory: the connection waits in the listen queue (accept(2)). */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                p->accept_paused_until = now + ACCEPT_PAUSE_USEC;
            return;
        }
        /* Every connection is paced, refused ones too: each costs this process (proxy.h). */
        if (pace_take(&p->conn_at, now, PROXY_CONN_BURST, PROXY_CONN_INTERVAL_USEC))
            p->report.connections_throttled++;
        for (size_t i = 0; i < p->n_slots; i++)
            if (!p->conns[i])
                free_slot = free_slot == SIZE_MAX ? i : free_slot;
            else if (p->conns[i]->state != ST_ANSWER && p->conns[i]->state != ST_LINGER)
                busy++;
        if (free_slot == SIZE_MAX) {
            /* Every slot, the overflow ones too, is taken: a 503 in one try (a new socket's
             * send buffer is empty), no lingering close, so the client may see a reset
             * instead. */
#define BUSY_BODY                                                                                  \
    "nsbox: the proxy holds as many connections as it may (--network-max-connections)\n"
            static const char busy503[] =
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
                "Connection: close\r\nContent-Length: 81\r\n\r\n" BUSY_BODY;
            _Static_assert(sizeof(BUSY_BODY) - 1 == 81, "Content-Length of BUSY_BODY");
            p->report.connections_limit_hit = true;
            conn_record(p, NULL, "", 0, false, "--network-max-connections reached");
            (void)!send(fd, busy503, sizeof(busy503) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
            (void)shutdown(fd, SHUT_WR);
            (void)close(fd);
            continue;
        }
        p->conns[free_slot] = calloc(1, sizeof(struct conn));
        if (!p->conns[free_slot]) {
            (void)close(fd);
            continue;
        }
        *p->conns[free_slot] = (struct conn){.state = ST_HEAD,
                                             .client = fd,
                                             .upstream = -1,
                                             .lookup_fd = -1,
                                             .record = SIZE_MAX,
                                             .host = SIZE_MAX,
                                             .pi_client = SIZE_MAX,
                                             .pi_upstream = SIZE_MAX,
                                             .pi_lookup = SIZE_MAX,
                                             .deadline = now + PROXY_HEAD_TIMEOUT_USEC};
        if (busy >= p->max_connections || p->report.bytes_limit_hit) {
            struct conn *c = p->conns[free_slot];
            if (p->report.bytes_limit_hit)
                conn_record(p, c, "", 0, false, "--network-max-bytes reached");
            else {
                p->report.connections_limit_hit = true;
                conn_record(p, c, "", 0, false, "--network-max-connections reached");
            }
            conn_answer(p, c, "503 Service Unavailable", "nsbox: the proxy %s (%s)",
                        p->report.bytes_limit_hit ? "relayed all the bytes it may"
                                                  : "holds as many connections as it may",
                        p->report.bytes_limit_hit ? "--network-max-bytes"
                                                  : "--network-max-connections");
        }
    }
}

/* Move bytes one way: read from `from` into buf when it is empty, write to `to` what it holds.
 * Returns false when the connection must be cut (an error, or the budget spent). */
static bool relay_way(struct proxy *p, int from, int to, short rev_from, short rev_to, char *buf,
                      size_t *len, size_t *off, bool *eof, bool *shut, uint64_t *count)
{
    if ((rev_from & (POLLIN | POLLHUP | POLLERR)) && *len == 0 && !*eof) {
        ssize_t n = recv(from, buf, BUF_SIZE, MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (n == 0)
            *eof = true;
        if (n > 0) {
            *len = (size_t)n;
            *off = 0;
            *count += (uint64_t)n;
            if (!budget(p, (size_t)n))
                return false;
        }
    }
    if ((rev_to & (POLLOUT | POLLERR | POLLHUP)) && *off < *len) {
        ssize_t n = send(to, buf + *off, *len - *off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        if (n > 0)
            *off += (size_t)n;
    }
    if (*off == *len)
        *len = *off = 0;
    if (*eof && *len == 0 && !*shut) {
        (void)shutdown(to, SHUT_WR);
        *shut = true;
    }
    return true;
}

/* What poll(2) said of the entry proxy_poll_fill() put at index i for fd (SIZE_MAX: none).
 * The descriptor is checked too: one closed since (and its number reused) has nothing. */
static short revents_at(const struct pollfd *fds, size_t n, size_t i, int fd)
{
    return i < n && fd >= 0 && fds[i].fd == fd ? fds[i].revents : 0;
}

/* Start the lookups that waited for their turn (PROXY_LOOKUP_BURST), the oldest first: the
 * one with the nearest deadline, set when its request head was complete. */
static void lookups_next(struct proxy *p, uint64_t now)
{
    while (now >= p->lookup_at) {
        struct conn *oldest = NULL;
        for (size_t i = 0; i < p->n_slots; i++) {
            struct conn *c = p->conns[i];
            if (c && c->state == ST_RESOLVE && c->lookup_waiting &&
                (!oldest || c->deadline < oldest->deadline))
                oldest = c;
        }
        if (!oldest)
            return;
        conn_start_lookup(p, oldest, now);
    }
}

void proxy_poll_handle(struct proxy *p, const struct pollfd *fds, size_t n, uint64_t now)
{
    lookups_next(p, now);
    if (p->listener >= 0 && n > 0 && fds[0].fd == p->listener && fds[0].revents)
        accept_all(p, now);
    for (size_t i = 0; i < p->n_slots; i++) {
        struct conn *c = p->conns[i];
        short cr, ur;
        if (!c)
            continue;
        cr = revents_at(fds, n, c->pi_client, c->client);
        ur = revents_at(fds, n, c->pi_upstream, c->upstream);
        switch (c->state) {
        case ST_HEAD:
            if (cr) {
                ssize_t k = recv(c->client, c->up + c->up_len, HTTPHEAD_MAX - c->up_len,
                                 MSG_DONTWAIT);
                if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                    conn_close(p, i);
                    continue;
                }
                if (k > 0) {
                    c->up_len += (size_t)k;
                    conn_head(p, c, now);
                }
            }
            break;
        case ST_RESOLVE:
            if (revents_at(fds, n, c->pi_lookup, c->lookup_fd)) {
                ssize_t k = read(c->lookup_fd, (char *)c->addrs + c->lookup_have,
                                 sizeof(c->addrs) - c->lookup_have);
                if (k > 0)
                    c->lookup_have += (size_t)k;
                else if (k == 0 || (errno != EAGAIN && errno != EINTR)) {
                    lookup_stop(c);
                    c->n_addrs = c->lookup_have / sizeof(c->addrs[0]);
                    cache_put(p, c->head.host, c->addrs, c->n_addrs, now);
                    conn_resolved(p, c);
                }
            }
            break;
        case ST_CONNECT:
            if (ur) {
                int err = 0;
                socklen_t len = sizeof(err);
                if (getsockopt(c->upstream, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
                    err = errno;
                if (err) {
                    (void)close(c->upstream);
                    c->upstream = -1;
                    conn_connect_next(p, c);
                    break;
                }
                c->state = ST_RELAY;
                c->deadline = now + PROXY_IDLE_TIMEOUT_USEC;
                (void)host_slot(p, c);
                if (c->head.kind == HTTPHEAD_CONNECT) {
                    static const char ok[] = "HTTP/1.1 200 Connection established\r\n\r\n";
                    memcpy(c->down, ok, sizeof(ok) - 1);
                    c->down_len = sizeof(ok) - 1;
                    c->down_off = 0;
                }
            }
            break;
        case ST_RELAY:
            if (cr || ur) {
                size_t up_before = c->bytes_up, down_before = c->bytes_down;
                bool ok = relay_way(p, c->client, c->upstream, cr, ur, c->up, &c->up_len,
                                    &c->up_off, &c->client_eof, &c->up_shut, &c->bytes_up) &&
                          relay_way(p, c->upstream, c->client, ur, cr, c->down, &c->down_len,
                                    &c->down_off, &c->upstream_eof, &c->down_shut, &c->bytes_down);
                if (!ok) {
                    if (p->report.bytes_limit_hit) {
                        cut_all(p, "cut: --network-max-bytes reached");
                        return;
                    }
                    conn_close(p, i);
                    continue;
                }
                if (c->bytes_up != up_before || c->bytes_down != down_before)
                    c->deadline = now + PROXY_IDLE_TIMEOUT_USEC;
                if (c->up_shut && c->down_shut) {
                    conn_close(p, i);
                    continue;
                }
            }
            break;
        case ST_ANSWER:
            if (cr) {
                ssize_t k = send(c->client, c->down + c->down_off, c->down_len - c->down_off,
                                 MSG_NOSIGNAL | MSG_DONTWAIT);
                if (k > 0)
                    c->down_off += (size_t)k;
                if (k < 0 && errno != EAGAIN && errno != EINTR) {
                    conn_close(p, i);
                    continue;
                }
                if (c->down_off >= c->down_len) {
                    (void)shutdown(c->client, SHUT_WR);
                    c->state = ST_LINGER;
                    c->deadline = now + LINGER_USEC;
                    c->up_len = 0;
                }
            }
            break;
        case ST_LINGER:
            if (cr) {
                ssize_t k = recv(c->client, c->up, sizeof(c->up), MSG_DONTWAIT);
                if (k > 0)
                    c->up_len += (size_t)k;
                if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR) ||
                    c->up_len > 4 * sizeof(c->up)) {
                    conn_close(p, i);
                    continue;
                }
            }
            break;
        }
        c = p->conns[i];
        if (c && c->deadline && now >= c->deadline) {
            switch (c->state) {
            case ST_HEAD:
                conn_record(p, c, "", 0, false, "no complete request head in time");
                conn_close(p, i);
                break;
            case ST_RESOLVE:
                if (c->lookup_waiting) {
                    c->lookup_waiting = false;
                    conn_note(p, c, "no turn for a name lookup in time (the proxy's pace)");
                    conn_answer(p, c, "504 Gateway Timeout",
                                "nsbox: %s was not looked up in time: the proxy looks up at most "
                                "%llu new names a second",
                                c->head.host, 1000000ULL / PROXY_LOOKUP_INTERVAL_USEC);
                    c->deadline = now + PROXY_HEAD_TIMEOUT_USEC;
                    break;
                }
                /* fall through */
            case ST_CONNECT:
                conn_note(p, c, "connect timeout");
                conn_answer(p, c, "504 Gateway Timeout", "nsbox: %s port %u did not answer in time",
                            c->head.host, (unsigned)c->head.port);
                c->deadline = now + PROXY_HEAD_TIMEOUT_USEC;
                break;
            case ST_RELAY:
                conn_note(p, c, "cut: idle timeout");
                conn_close(p, i);
                break;
            case ST_ANSWER:
            case ST_LINGER:
                conn_close(p, i);
                break;
            }
        }
    }
}

void proxy_report_snapshot(const struct proxy *p, struct nsbox_network_report *ret)
{
    *ret = p->report;
}

void proxy_finish(struct proxy *p, struct nsbox_network_report *ret)
{
    if (p->conns)
        for (size_t i = 0; i < p->n_slots; i++)
            conn_close(p, i);
    *ret = p->report;
}

void proxy_free(struct proxy *p)
{
    if (!p)
        return;
    if (p->conns)
        for (size_t i = 0; i < p->n_slots; i++)
            conn_close(p, i);
    if (p->listener >= 0)
        (void)close(p->listener);
    if (p->nofile_raised)
        (void)setrlimit(RLIMIT_NOFILE, &p->nofile_saved);
    netallow_free(&p->allow);
    free(p->cache);
    free(p->own);
    free(p->hosts);
    free(p->conns);
    free(p);
}
