/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The proxy's name lookups (see proxy.h): the child that runs getaddrinfo(3), and the cache of
 * what lookups found, kept for the run. The pace and the budget of lookups are proxy.c's
 * (conn_start_lookup()). */
#include <fcntl.h>
#include <netdb.h>
#include <resolv.h> /* its <sys/param.h> has a MIN() of its own: macro.h's is used */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#undef MIN
#include "macro.h"
#include "syscalls.h"

#include "proxy-internal.h"

/* The lookup child: getaddrinfo(3) in a process of its own, so that the supervisor never
 * waits on DNS; it writes the addresses to fd and exits. It dies with the supervisor. */
_noreturn_ void lookup_child(const char *host, int fd)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = 0};
    struct addrinfo *res = NULL;
    struct sockaddr_storage out[MAX_ADDRS];
    size_t n = 0;

    (void)prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* Not the proxy's sockets: the child must not keep a connection open after the proxy
     * closed it. */
    if (fd != 3 && dup3(fd, 3, O_CLOEXEC) < 0)
        _exit(1);
    fd = 3;
    (void)sys_close_range(4, ~0U, 0);
    /* The name as given, never the host's search list: "pypi.example" with resolv.conf's
     * "search corp.test" (and ndots above its dots) would be looked up as
     * "pypi.example.corp.test" too, a name not on the list, and its address used
     * (resolv.conf(5) search, ndots). RES_DNSRCH and RES_DEFNAMES are what res_nsearch()
     * consults for that (glibc resolv/res_query.c); getaddrinfo() uses the thread's _res
     * once res_init() made it (resolv/resolv_context.c). Not a trailing dot: that is a
     * name /etc/hosts does not match. */
    if (res_init() == 0)
        _res.options &= ~(unsigned long)(RES_DNSRCH | RES_DEFNAMES);
    if (getaddrinfo(host, NULL, &hints, &res) == 0) {
        for (struct addrinfo *ai = res; ai && n < MAX_ADDRS; ai = ai->ai_next)
            if ((ai->ai_family == AF_INET || ai->ai_family == AF_INET6) &&
                ai->ai_addrlen <= sizeof(out[0])) {
                memset(&out[n], 0, sizeof(out[n]));
                memcpy(&out[n++], ai->ai_addr, ai->ai_addrlen);
            }
        freeaddrinfo(res);
    }
    if (n > 0)
        (void)!write(fd, out, n * sizeof(out[0])); /* less than PIPE_BUF: one write */
    _exit(0);
}

struct cache_entry *cache_find(struct proxy *p, const char *name, uint64_t now)
{
    for (size_t i = 0; p->cache && i < CACHE_SIZE; i++) {
        struct cache_entry *e = &p->cache[i];
        if (e->name[0] && strcmp(e->name, name) == 0) {
            if (e->expires && now >= e->expires) {
                e->name[0] = '\0';
                return NULL;
            }
            e->used = ++p->cache_clock;
            return e;
        }
    }
    return NULL;
}

/* Keep what a lookup of name found (n addresses, maybe none). Nothing kept without memory:
 * the next request looks up again. */
void cache_put(struct proxy *p, const char *name, const struct sockaddr_storage *addrs, size_t n,
               uint64_t now)
{
    struct cache_entry *e;

    if (!p->cache && !(p->cache = calloc(CACHE_SIZE, sizeof(*p->cache))))
        return;
    e = &p->cache[0];
    for (size_t i = 0; i < CACHE_SIZE; i++) {
        struct cache_entry *x = &p->cache[i];
        if (x->name[0] && strcmp(x->name, name) == 0) {
            e = x; /* two lookups of a name ran at once: the later one's answer */
            break;
        }
        if (!x->name[0] ? e->name[0] != '\0' : e->name[0] && x->used < e->used)
            e = x;
    }
    (void)snprintf(e->name, sizeof(e->name), "%s", name);
    memcpy(e->addrs, addrs, n * sizeof(addrs[0]));
    e->n_addrs = n;
    e->expires = n ? 0 : now + NEGATIVE_USEC;
    e->used = ++p->cache_clock;
}
