/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The pure half of `--network allow=`: the patterns (which hosts and ports the payload may
 * reach), the check of an address the proxy is about to connect to, and the parser of one HTTP
 * request head as a client sends it to a proxy. No OS calls, no output: unit-tested and fuzzed
 * (tests/fuzz/fuzz-httphead.c). The runtime half is proxy.c.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* Longest host name (RFC 1035: 253 characters in text form). */
#define NETALLOW_HOST_MAX 253

struct netallow_rule {
    char host[NETALLOW_HOST_MAX + 1]; /* lower case; for a wildcard, the domain after "*." */
    bool wildcard;                    /* "*.domain": any name below domain, not domain itself */
    bool is_ip;                       /* an IPv4 or IPv6 address (host is its canonical text) */
    uint16_t port;                    /* 0: 80 and 443 */
};

struct netallow {
    struct netallow_rule *rules;
    size_t n;
};

/* Add the patterns of spec, separated by commas: "host", "*.domain", an IPv4 address, an IPv6
 * address in brackets ("[2001:db8::1]"), each with an optional ":PORT" (1-65535). Host names
 * are letters, digits, '-' and '.', case-insensitive, with a letter in their last label (so
 * that "2130706433" is not a name). Returns 0, -EINVAL for bad syntax (nothing added from
 * spec), -ENOMEM. */
int netallow_add(struct netallow *list, const char *spec);

/* Add the patterns of a file's text: one or more per line as in netallow_add(), blank lines
 * and '#' comments skipped. On -EINVAL, *ret_line is the 1-based line at fault. */
int netallow_add_text(struct netallow *list, const char *text, size_t len, unsigned *ret_line);

/* An allowlist file's text (netallow_add_text()'s format) made into one pattern list for
 * nsbox_config.network_allow, in place: the patterns separated by single commas, comments,
 * blank lines and spaces gone, NUL-terminated (text must have room for len + 1 bytes, as
 * read_fd_all() leaves). Returns 0, -EINVAL with *ret_line the line at fault (0: no pattern in
 * the text), -ENOMEM. */
int netallow_file_patterns(char *text, size_t len, unsigned *ret_line);

void netallow_free(struct netallow *list);

/* Normalise a host as a client names it (CONNECT target, absolute URI, Host header) into
 * out[NETALLOW_HOST_MAX + 1]: lower case, a trailing dot dropped, brackets of an IPv6 address
 * dropped and the address in canonical text. *ret_is_ip says which kind it is. Returns 0 or
 * -EINVAL for anything that is neither a host name (as in netallow_add()) nor an address. */
int netallow_host_normalise(const char *host, size_t len, char *out, bool *ret_is_ip);

/* The rule that allows the normalised host (netallow_host_normalise()) on port, or NULL. An
 * address matches only a rule of that address, a name only a rule of names. */
const struct netallow_rule *netallow_match(const struct netallow *list, const char *host,
                                           bool is_ip, uint16_t port);

/* true when addr is an ordinary unicast address on the internet; false for loopback,
 * unspecified and "this network" (0.0.0.0/8), RFC 1918 private, CGNAT (100.64.0.0/10),
 * link-local, multicast, broadcast, benchmarking, documentation and reserved ranges, ULA
 * (fc00::/7), IPv4-mapped and -compatible, NAT64, 6to4 and Teredo addresses that may embed
 * one of those. */
bool netallow_addr_is_public(const struct sockaddr *addr);

/* true when addr's address (its port aside) is one of the n addresses of own[] (IPv4 or IPv6
 * socket addresses; other families never match): for the proxy, the host's own interface
 * addresses (getifaddrs(3)), which a name must not lead to even when they are public. */
bool netallow_addr_in(const struct sockaddr *addr, const struct sockaddr_storage *own, size_t n);

/* The "what is allowed" line of a 403: "allowed: pypi.org, *.example.com:8443" cut to fit
 * size bytes. */
void netallow_describe(const struct netallow *list, char *buf, size_t size);

/* The request head's longest accepted size (bytes, request line and headers). */
#define HTTPHEAD_MAX 8192

enum httphead_kind {
    HTTPHEAD_CONNECT, /* CONNECT host:port HTTP/1.x */
    HTTPHEAD_FORWARD, /* METHOD http://host[:port]/path HTTP/1.x, with a matching Host */
};

struct httphead {
    enum httphead_kind kind;
    char host[NETALLOW_HOST_MAX + 1]; /* normalised (netallow_host_normalise()) */
    bool is_ip;
    uint16_t port;
    size_t head_len; /* bytes of the head, its final CRLF CRLF included */
    /* HTTPHEAD_FORWARD: where the method ends and the path (origin form, "/..." or "*")
     * starts and ends in the buffer, for rewriting the request line. */
    size_t method_len;
    size_t path_off, path_len;
    size_t version_off; /* the " HTTP/1.x" after the target */
};

/*
 * Parse a request head at the start of buf[len]. Returns the head's length (> 0) when it is
 * complete and acceptable, 0 when more bytes are needed (and len < HTTPHEAD_MAX), or a
 * negative errno: -E2BIG for a head past HTTPHEAD_MAX, -EBADMSG for a malformed head (bare LF,
 * control characters, obsolete line folding, a version that is not HTTP/1.0 or 1.1), -EINVAL
 * for a request a proxy refuses (no target host, a Host header missing, repeated or naming
 * another host or port than the absolute URI, a scheme other than http, userinfo in the URI),
 * -EPROTO for a method other than CONNECT with a target
 * that is not an absolute http URI. *why gets a short phrase for the 400 answer.
 */
int httphead_parse(const char *buf, size_t len, struct httphead *ret, const char **why);

/* The head of a plain request (HTTPHEAD_FORWARD, h from httphead_parse() of buf) as the proxy
 * sends it upstream: "METHOD /path HTTP/1.x" (origin form), the client's header lines but
 * the hop-by-hop ones (httphead_is_hop_header()), "Connection: close", the empty line. Into
 * out[out_size]; returns its length, or -E2BIG when it does not fit. */
int httphead_rewrite(const char *buf, const struct httphead *h, char *out, size_t out_size);

/* Is header line name (of name_len bytes) one the proxy drops when it forwards a request
 * (Proxy-*, Connection, Keep-Alive, and what Connection lists is not honoured: the proxy
 * always closes)? */
bool httphead_is_hop_header(const char *name, size_t name_len);
