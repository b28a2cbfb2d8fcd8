/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The pure half of `--network allow=` (see netallow.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "netallow.h"

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static char lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* A host name: labels of letters, digits, '-' and '_' (which some real names have), 1-63
 * characters each, not starting or ending with '-'; a letter in the last label, so that digits
 * and dots (which inet_aton(3) reads as an address in forms like "0x7f.1" or "2130706433")
 * are never a name. */
static bool host_name_is_valid(const char *s, size_t len)
{
    size_t label = 0;
    bool letter = false;

    if (len == 0 || len > NETALLOW_HOST_MAX)
        return false;
    for (size_t i = 0; i <= len; i++) {
        char c = i < len ? s[i] : '.';
        if (c == '.') {
            if (label == 0 || label > 63 || s[i - 1] == '-' || s[i - label] == '-')
                return false;
            if (i < len)
                letter = false;
            label = 0;
            continue;
        }
        if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '_')
            return false;
        if (is_alpha(c))
            letter = true;
        label++;
    }
    return letter;
}

int netallow_host_normalise(const char *host, size_t len, char *out, bool *ret_is_ip)
{
    char buf[INET6_ADDRSTRLEN + 2];
    unsigned char addr[sizeof(struct in6_addr)];

    if (len >= 2 && host[0] == '[' && host[len - 1] == ']') {
        if (len - 2 >= sizeof(buf))
            return -EINVAL;
        memcpy(buf, host + 1, len - 2);
        buf[len - 2] = '\0';
        if (inet_pton(AF_INET6, buf, addr) != 1 ||
            !inet_ntop(AF_INET6, addr, out, NETALLOW_HOST_MAX + 1))
            return -EINVAL;
        *ret_is_ip = true;
        return 0;
    }
    if (len > 0 && len < sizeof(buf) && memchr(host, ':', len)) {
        /* A bare IPv6 address (patterns only: a client's authority brackets it). */
        memcpy(buf, host, len);
        buf[len] = '\0';
        if (inet_pton(AF_INET6, buf, addr) != 1 ||
            !inet_ntop(AF_INET6, addr, out, NETALLOW_HOST_MAX + 1))
            return -EINVAL;
        *ret_is_ip = true;
        return 0;
    }
    if (len > 0 && len < sizeof(buf)) {
        memcpy(buf, host, len);
        buf[len] = '\0';
        if (inet_pton(AF_INET, buf, addr) == 1) {
            if (!inet_ntop(AF_INET, addr, out, NETALLOW_HOST_MAX + 1))
                return -EINVAL;
            *ret_is_ip = true;
            return 0;
        }
    }
    if (len > 1 && host[len - 1] == '.') /* the root's dot: "pypi.org." is "pypi.org" */
        len--;
    if (!host_name_is_valid(host, len))
        return -EINVAL;
    for (size_t i = 0; i < len; i++)
        out[i] = lower(host[i]);
    out[len] = '\0';
    *ret_is_ip = false;
    return 0;
}

/* A port: 1-65535, digits only. */
static int port_parse(const char *s, size_t len, uint16_t *ret)
{
    unsigned long v = 0;

    if (len == 0 || len > 5)
        return -EINVAL;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(s[i]))
            return -EINVAL;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v == 0 || v > 65535)
        return -EINVAL;
    *ret = (uint16_t)v;
    return 0;
}

/* "host", "host:port", "[v6]", "[v6]:port"; a bare IPv6 address (more than one ':') only when
 * allow_bare_v6. *ret_port is left alone when there is no port. */
static int authority_parse(const char *s, size_t len, bool allow_bare_v6, char *host,
                           bool *ret_is_ip, uint16_t *ret_port)
{
    const char *colon = NULL;
    size_t host_len = len;
    uint16_t port = *ret_port;

    if (len > 0 && s[0] == '[') {
        const char *end = memchr(s, ']', len);
        if (!end)
            return -EINVAL;
        host_len = (size_t)(end - s) + 1;
        if (host_len < len) {
            if (s[host_len] != ':' || port_parse(s + host_len + 1, len - host_len - 1, &port) < 0)
                return -EINVAL;
        }
    } else {
        colon = memrchr(s, ':', len);
        if (colon && memchr(s, ':', (size_t)(colon - s))) {
            if (!allow_bare_v6)
                return -EINVAL;
        } else if (colon) {
            host_len = (size_t)(colon - s);
            if (port_parse(colon + 1, len - host_len - 1, &port) < 0)
                return -EINVAL;
        }
    }
    if (netallow_host_normalise(s, host_len, host, ret_is_ip) < 0)
        return -EINVAL;
    *ret_port = port;
    return 0;
}

static int rule_parse(const char *s, size_t len, struct netallow_rule *ret)
{
    struct netallow_rule r = {0};

    while (len > 0 && (*s == ' ' || *s == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
        len--;
    if (len > 2 && s[0] == '*' && s[1] == '.') {
        r.wildcard = true;
        s += 2;
        len -= 2;
    }
    if (authority_parse(s, len, !r.wildcard, r.host, &r.is_ip, &r.port) < 0)
        return -EINVAL;
    if (r.wildcard && r.is_ip)
        return -EINVAL;
    *ret = r;
    return 0;
}

int netallow_add(struct netallow *list, const char *spec)
{
    size_t count = 1, n = 0;
    struct netallow_rule *rules;

    for (const char *p = spec; *p; p++)
        count += *p == ',';
    rules = realloc(list->rules, (list->n + count) * sizeof(*rules));
    if (!rules)
        return -ENOMEM;
    list->rules = rules;
    for (const char *p = spec;;) {
        const char *end = strchrnul(p, ',');
        if (rule_parse(p, (size_t)(end - p), &rules[list->n + n]) < 0)
            return -EINVAL;
        n++;
        if (!*end)
            break;
        p = end + 1;
    }
    list->n += n;
    return 0;
}

int netallow_add_text(struct netallow *list, const char *text, size_t len, unsigned *ret_line)
{
    unsigned line = 0;

    for (size_t off = 0; off < len;) {
        const char *start = text + off;
        const char *nl = memchr(start, '\n', len - off);
        size_t n = nl ? (size_t)(nl - start) : len - off;
        char buf[4096];
        char *hash;
        size_t k;
        int r;

        line++;
        off += n + (nl ? 1 : 0);
        if (n >= sizeof(buf) || memchr(start, '\0', n)) {
            *ret_line = line;
            return -EINVAL;
        }
        memcpy(buf, start, n);
        buf[n] = '\0';
        hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        for (char *p = buf; *p; p++)
            if (*p == '\r' || *p == ' ' || *p == '\t')
                *p = ' ';
        k = strspn(buf, " ");
        if (buf[k] == '\0')
            continue;
        /* Spaces separate patterns as commas do. */
        for (char *p = buf + k; *p; p++)
            if (*p == ' ')
                *p = ',';
        for (char *p = buf + k; *p;) {
            char *q = p;
            while (*q == ',')
                q++;
            if (!*q)
                break;
            p = strchrnul(q, ',');
            {
                char save = *p;
                *p = '\0';
                r = netallow_add(list, q);
                *p = save;
            }
            if (r == -EINVAL)
                *ret_line = line;
            if (r < 0)
                return r;
        }
    }
    return 0;
}

int netallow_file_patterns(char *text, size_t len, unsigned *ret_line)
{
    struct netallow check = {0};
    size_t n = 0;
    bool comment = false;
    int r;

    *ret_line = 0;
    r = netallow_add_text(&check, text, len, ret_line);
    netallow_free(&check);
    if (r < 0)
        return r;
    /* One pattern list: lines and spaces become commas, comments go. */
    for (size_t i = 0; i < len; i++) {
        char ch = text[i];
        if (ch == '#')
            comment = true;
        if (ch == '\n')
            comment = false;
        if (comment || ch == '\r')
            continue;
        if (ch == '\n' || ch == ' ' || ch == '\t')
            ch = ',';
        if (ch == ',' && (n == 0 || text[n - 1] == ','))
            continue;
        text[n++] = ch;
    }
    while (n > 0 && text[n - 1] == ',')
        n--;
    text[n] = '\0';
    if (n == 0) {
        *ret_line = 0;
        return -EINVAL;
    }
    return 0;
}

void netallow_free(struct netallow *list)
{
    free(list->rules);
    list->rules = NULL;
    list->n = 0;
}

const struct netallow_rule *netallow_match(const struct netallow *list, const char *host,
                                           bool is_ip, uint16_t port)
{
    size_t host_len = strlen(host);

    for (size_t i = 0; i < list->n; i++) {
        const struct netallow_rule *r = &list->rules[i];
        size_t n = strlen(r->host);

        if (r->is_ip != is_ip)
            continue;
        if (r->port ? r->port != port : port != 80 && port != 443)
            continue;
        if (r->wildcard) {
            /* Below the domain: "a.example.com" for "*.example.com", never "example.com" nor
             * "badexample.com". */
            if (host_len > n + 1 && host[host_len - n - 1] == '.' &&
                strcmp(host + host_len - n, r->host) == 0)
                return r;
        } else if (strcmp(host, r->host) == 0)
            return r;
    }
    return NULL;
}

/* IPv4 ranges that are not the public internet (IANA special-purpose registry, RFC 6890 and
 * its updates). */
static bool ipv4_is_public(uint32_t a)
{
    static const struct {
        uint32_t net;
        unsigned bits;
    } special[] = {
        {0x00000000, 8},  /* "this network" 0.0.0.0/8 (RFC 791) */
        {0x0a000000, 8},  /* private (RFC 1918) */
        {0x64400000, 10}, /* shared address space, CGNAT (RFC 6598) */
        {0x7f000000, 8},  /* loopback */
        {0xa9fe0000, 16}, /* link-local (RFC 3927), cloud metadata services */
        {0xac100000, 12}, /* private (RFC 1918) */
        {0xc0000000, 24}, /* IETF protocol assignments (RFC 6890) */
        {0xc0000200, 24}, /* documentation TEST-NET-1 (RFC 5737) */
        {0xc0586300, 24}, /* 6to4 relay anycast (RFC 7526) */
        {0xc0a80000, 16}, /* private (RFC 1918) */
        {0xc6120000, 15}, /* benchmarking (RFC 2544) */
        {0xc6336400, 24}, /* documentation TEST-NET-2 */
        {0xcb007100, 24}, /* documentation TEST-NET-3 */
        {0xe0000000, 4},  /* multicast */
        {0xf0000000, 4},  /* reserved, and the limited broadcast address */
    };

    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        if ((a >> (32 - special[i].bits)) == (special[i].net >> (32 - special[i].bits)))
            return false;
    return true;
}

bool netallow_addr_is_public(const struct sockaddr *addr)
{
    if (addr->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)addr;
        return ipv4_is_public(ntohl(in->sin_addr.s_addr));
    }
    if (addr->sa_family == AF_INET6) {
        const unsigned char *b = ((const struct sockaddr_in6 *)addr)->sin6_addr.s6_addr;
        /* Only global unicast, 2000::/3; inside it, the ranges that embed or reach IPv4 or
         * are not routed. ::/8 (unspecified, loopback, IPv4-compatible and -mapped), fc00::/7
         * (ULA), fe80::/10 (link-local), ff00::/8 (multicast) all fall outside 2000::/3. */
        if ((b[0] & 0xe0) != 0x20)
            return false;
        if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && b[3] == 0x00)
            return false; /* Teredo 2001::/32 (RFC 4380) */
        if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8)
            return false; /* documentation 2001:db8::/32 (RFC 3849) */
        if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x00 && (b[3] & 0xf0) == 0x10)
            return false; /* ORCHIDv2 and friends 2001:10::/28 */
        if (b[0] == 0x20 && b[1] == 0x02)
            return false; /* 6to4 2002::/16 (RFC 3056) embeds an IPv4 address */
        return true;
    }
    return false;
}

bool netallow_addr_in(const struct sockaddr *addr, const struct sockaddr_storage *own, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (own[i].ss_family != addr->sa_family)
            continue;
        if (addr->sa_family == AF_INET &&
            ((const struct sockaddr_in *)addr)->sin_addr.s_addr ==
                ((const struct sockaddr_in *)&own[i])->sin_addr.s_addr)
            return true;
        if (addr->sa_family == AF_INET6 &&
            memcmp(&((const struct sockaddr_in6 *)addr)->sin6_addr,
                   &((const struct sockaddr_in6 *)&own[i])->sin6_addr,
                   sizeof(struct in6_addr)) == 0)
            return true;
    }
    return false;
}

void netallow_describe(const struct netallow *list, char *buf, size_t size)
{
    size_t n = 0;

    if (size == 0)
        return;
    buf[0] = '\0';
    for (size_t i = 0; i < list->n && n < size; i++) {
        const struct netallow_rule *r = &list->rules[i];
        char port[8] = "";
        int k;

        if (r->port)
            (void)snprintf(port, sizeof(port), ":%u", (unsigned)r->port);
        k = snprintf(buf + n, size - n, "%s%s%s%s%s%s", i ? ", " : "", r->wildcard ? "*." : "",
                     r->is_ip && strchr(r->host, ':') ? "[" : "", r->host,
                     r->is_ip && strchr(r->host, ':') ? "]" : "", port);
        if (k < 0)
            break;
        n += (size_t)k;
    }
    if (n >= size && size > 4)
        memcpy(buf + size - 4, "...", 4);
}

/* ---- the request head --------------------------------------------------------------------- */

/* tchar of RFC 9110 section 5.6.2. */
static bool is_tchar(char c)
{
    return is_alpha(c) || is_digit(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

bool httphead_is_hop_header(const char *name, size_t name_len)
{
    static const char *const hop[] =
        {"connection",         "keep-alive", "proxy-connection", "proxy-authorization",
         "proxy-authenticate", "te",         "trailer",          "upgrade"};

    for (size_t i = 0; i < sizeof(hop) / sizeof(hop[0]); i++)
        if (strlen(hop[i]) == name_len && strncasecmp(hop[i], name, name_len) == 0)
            return true;
    return false;
}

#define FAIL(err, text)                                                                            \
    do {                                                                                           \
        *why = (text);                                                                             \
        return (err);                                                                              \
    } while (0)

int httphead_parse(const char *buf, size_t len, struct httphead *ret, const char **why)
{
    struct httphead h = {0};
    const char *end = NULL, *p, *sp1, *sp2, *line_end, *target;
    size_t scan = len < HTTPHEAD_MAX ? len : HTTPHEAD_MAX, target_len;
    char host_hdr[NETALLOW_HOST_MAX + 1];
    bool host_hdr_ip = false, is_connect;
    uint16_t host_hdr_port = 0;
    unsigned n_host = 0;

    *why = "";
    for (size_t i = 0; i + 3 < scan; i++)
        if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') {
            end = buf + i + 4;
            break;
        }
    /* Every byte before the end is checked below; a bare CR or LF is refused there, and a
     * NUL or another control character anywhere in the head too. */
    if (!end) {
        /* Incomplete, but already wrong: a NUL, or a line ended by a bare LF or CR, which
         * no more bytes can mend (waiting for them would hold a client that uses bare LF,
         * RFC 9112 2.2, until the head timeout). */
        for (size_t i = 0; i < scan; i++) {
            if (buf[i] == '\0')
                FAIL(-EBADMSG, "a NUL byte in the request head");
            if (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r'))
                FAIL(-EBADMSG, "a line ended by a bare LF, not CRLF");
            if (buf[i] == '\r' && i + 1 < scan && buf[i + 1] != '\n')
                FAIL(-EBADMSG, "a bare CR in the request head");
        }
        if (len >= HTTPHEAD_MAX)
            FAIL(-E2BIG, "the request head is longer than 8192 bytes");
        return 0;
    }
    h.head_len = (size_t)(end - buf);

    /* The request line: METHOD SP TARGET SP HTTP/1.x CRLF, single spaces (RFC 9112 3). */
    line_end = memchr(buf, '\r', h.head_len);
    if (!line_end || line_end[1] != '\n')
        FAIL(-EBADMSG, "a malformed request line");
    sp1 = memchr(buf, ' ', (size_t)(line_end - buf));
    if (!sp1 || sp1 == buf)
        FAIL(-EBADMSG, "a malformed request line");
    for (p = buf; p < sp1; p++)
        if (!is_tchar(*p))
            FAIL(-EBADMSG, "a malformed method");
    target = sp1 + 1;
    sp2 = memchr(target, ' ', (size_t)(line_end - target));
    if (!sp2 || sp2 == target)
        FAIL(-EBADMSG, "a malformed request line");
    target_len = (size_t)(sp2 - target);
    for (p = target; p < sp2; p++)
        if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
            FAIL(-EBADMSG, "a malformed request target");
    if (line_end - sp2 != 9 || memcmp(sp2, " HTTP/1.", 8) != 0 || (sp2[8] != '0' && sp2[8] != '1'))
        FAIL(-EBADMSG, "not HTTP/1.0 or HTTP/1.1");
    h.method_len = (size_t)(sp1 - buf);
    h.version_off = (size_t)(sp2 - buf);
    is_connect = h.method_len == 7 && memcmp(buf, "CONNECT", 7) == 0;

    if (is_connect) {
        /* CONNECT host:port (RFC 9110 9.3.6): the port is required. */
        const char *colon = memrchr(target, ':', target_len);
        h.kind = HTTPHEAD_CONNECT;
        if (!colon ||
            (colon > target && colon[-1] != ']' && memchr(target, ':', (size_t)(colon - target))))
            FAIL(-EINVAL, "CONNECT needs host:port");
        if (authority_parse(target, target_len, false, h.host, &h.is_ip, &h.port) < 0 ||
            h.port == 0)
            FAIL(-EINVAL, "CONNECT needs host:port with a valid host name or address");
    } else {
        const char *auth, *auth_end, *tend = target + target_len;
        h.kind = HTTPHEAD_FORWARD;
        if (target_len >= 8 && strncasecmp(target, "https://", 8) == 0)
            FAIL(-EINVAL, "https:// goes through CONNECT, not a plain request");
        if (target_len < 7 || strncasecmp(target, "http://", 7) != 0)
            FAIL(-EPROTO, "a proxy request needs an absolute http:// URI or CONNECT");
        auth = target + 7;
        for (auth_end = auth;
             auth_end < tend && *auth_end != '/' && *auth_end != '?' && *auth_end != '#';
             auth_end++)
            if (*auth_end == '@')
                FAIL(-EINVAL, "user information in the URI");
        h.port = 80;
        if (authority_parse(auth, (size_t)(auth_end - auth), false, h.host, &h.is_ip, &h.port) < 0)
            FAIL(-EINVAL, "the URI has no valid host");
        h.path_off = (size_t)(auth_end - buf);
        h.path_len = (size_t)(tend - auth_end);
    }

    /* Header fields: name ":" OWS value OWS CRLF; no obsolete line folding (RFC 9112 5.2),
     * no whitespace before the colon (RFC 9112 5.1), no control characters but HTAB. */
    for (p = line_end + 2; p < end - 2;) {
        const char *colon, *v, *ve;
        line_end = memchr(p, '\r', (size_t)(end - p));
        if (!line_end || line_end[1] != '\n')
            FAIL(-EBADMSG, "a malformed header line");
        if (*p == ' ' || *p == '\t')
            FAIL(-EBADMSG, "obsolete line folding in a header");
        colon = memchr(p, ':', (size_t)(line_end - p));
        if (!colon || colon == p)
            FAIL(-EBADMSG, "a malformed header line");
        for (const char *q = p; q < colon; q++)
            if (!is_tchar(*q))
                FAIL(-EBADMSG, "a malformed header name");
        for (const char *q = colon + 1; q < line_end; q++)
            if (((unsigned char)*q < 0x20 && *q != '\t') || *q == 0x7f)
                FAIL(-EBADMSG, "a control character in a header");
        if (colon - p == 4 && strncasecmp(p, "host", 4) == 0) {
            if (++n_host > 1)
                FAIL(-EINVAL, "more than one Host header");
            v = colon + 1;
            ve = line_end;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            host_hdr_port = h.kind == HTTPHEAD_CONNECT ? h.port : 80;
            if (authority_parse(v, (size_t)(ve - v), false, host_hdr, &host_hdr_ip,
                                &host_hdr_port) < 0)
                FAIL(-EINVAL, "a Host header without a valid host");
        }
        p = line_end + 2;
    }
    /* The host decided on is the URI's (or CONNECT's); a Host header that names another
     * would let a server behind an allowed address serve a name that is not allowed
     * (RFC 9112 3.2.2 lets a proxy reject or rewrite; nsbox rejects). */
    if (h.kind == HTTPHEAD_FORWARD && n_host == 0)
        FAIL(-EINVAL, "no Host header");
    if (n_host == 1 &&
        (strcmp(host_hdr, h.host) != 0 || host_hdr_ip != h.is_ip || host_hdr_port != h.port))
        FAIL(-EINVAL, "the Host header names another host or port than the request target");
    *ret = h;
    return (int)h.head_len;
}

int httphead_rewrite(const char *buf, const struct httphead *h, char *out, size_t out_size)
{
    const char *p, *end = buf + h->head_len - 2; /* the final CRLF */
    size_t n;
    int k;

    k = snprintf(out, out_size, "%.*s %s%.*s%.*s\r\n", (int)h->method_len, buf,
                 h->path_len && buf[h->path_off] == '/' ? "" : "/", (int)h->path_len,
                 buf + h->path_off, 9, buf + h->version_off);
    if (k < 0 || (size_t)k >= out_size)
        return -E2BIG;
    n = (size_t)k;
    /* The header lines, each "name: value CRLF" (httphead_parse() checked them all). */
    p = (const char *)memchr(buf, '\n', h->head_len) + 1;
    while (p < end) {
        const char *le = (const char *)memchr(p, '\n', (size_t)(end - p + 2)) + 1;
        const char *colon = memchr(p, ':', (size_t)(le - p));
        if (!httphead_is_hop_header(p, (size_t)(colon - p))) {
            if (n + (size_t)(le - p) >= out_size)
                return -E2BIG;
            memcpy(out + n, p, (size_t)(le - p));
            n += (size_t)(le - p);
        }
        p = le;
    }
    k = snprintf(out + n, out_size - n, "Connection: close\r\n\r\n");
    if (k < 0 || (size_t)k >= out_size - n)
        return -E2BIG;
    return (int)(n + (size_t)k);
}
