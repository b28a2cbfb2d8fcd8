/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "netallow.h"

struct pattern_case {
    const char *spec;
    int r;
    const char *describe; /* netallow_describe() of the list on success */
};

Test(netallow, patterns)
{
    static const struct pattern_case cases[] = {
        {"pypi.org", 0, "pypi.org"},
        {"PyPI.org.", 0, "pypi.org"},
        {"pypi.org,files.pythonhosted.org", 0, "pypi.org, files.pythonhosted.org"},
        {" pypi.org , *.Example.com:8443", 0, "pypi.org, *.example.com:8443"},
        {"192.0.2.7:8080", 0, "192.0.2.7:8080"},
        {"[2001:DB8::1]:443", 0, "[2001:db8::1]:443"},
        {"2001:db8::1", 0, "[2001:db8::1]"},
        {"under_score.example", 0, "under_score.example"},
        {"", -EINVAL, NULL},
        {",", -EINVAL, NULL},
        {"pypi.org,", -EINVAL, NULL},
        {"bad_host!", -EINVAL, NULL},
        {"*.1.2.3.4", -EINVAL, NULL},
        {"*", -EINVAL, NULL},
        {"*.", -EINVAL, NULL},
        {"a.*.com", -EINVAL, NULL},
        {"a.com:0", -EINVAL, NULL},
        {"a.com:65536", -EINVAL, NULL},
        {"a.com:+1", -EINVAL, NULL},
        {"a.com:", -EINVAL, NULL},
        {"12345", -EINVAL, NULL},  /* inet_aton() would read it as 0.0.48.57 */
        {"0x7f.1", -EINVAL, NULL}, /* ... and this as 127.0.0.1 */
        {"1.2.3", -EINVAL, NULL},
        {"-a.com", -EINVAL, NULL},
        {"a-.com", -EINVAL, NULL},
        {"a..com", -EINVAL, NULL},
        {"[::1", -EINVAL, NULL},
        {"[::1]x", -EINVAL, NULL},
        {"user@a.com", -EINVAL, NULL},
        {"a.com/path", -EINVAL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct netallow list = {0};
        char text[256];
        int r = netallow_add(&list, cases[i].spec);

        cr_expect_eq(r, cases[i].r, "netallow_add(\"%s\") = %d, want %d", cases[i].spec, r,
                     cases[i].r);
        if (r == 0) {
            netallow_describe(&list, text, sizeof(text));
            cr_expect_str_eq(text, cases[i].describe, "\"%s\"", cases[i].spec);
        } else
            cr_expect_eq(list.n, 0, "\"%s\" added patterns on failure", cases[i].spec);
        netallow_free(&list);
    }
}

Test(netallow, text)
{
    struct netallow list = {0};
    unsigned line = 0;
    static const char good[] =
        "# the index\npypi.org files.pythonhosted.org\r\n\n  *.a.test:81 # x\n";
    static const char bad[] = "pypi.org\n\nnot/valid\n";
    char text[256];

    cr_assert_eq(netallow_add_text(&list, good, strlen(good), &line), 0);
    netallow_describe(&list, text, sizeof(text));
    cr_expect_str_eq(text, "pypi.org, files.pythonhosted.org, *.a.test:81");
    netallow_free(&list);
    cr_expect_eq(netallow_add_text(&list, bad, strlen(bad), &line), -EINVAL);
    cr_expect_eq(line, 3);
    netallow_free(&list);
}

struct match_case {
    const char *host; /* as a client names it */
    uint16_t port;
    bool allowed;
};

Test(netallow, match)
{
    static const struct match_case cases[] = {
        {"pypi.org", 443, true},
        {"PYPI.ORG.", 80, true},
        {"pypi.org", 8080, false}, /* default ports only */
        {"evilpypi.org", 443, false},
        {"pypi.org.evil.com", 443, false},
        {"files.example.com", 443, true}, /* *.example.com */
        {"a.b.example.com", 443, true},
        {"example.com", 443, false}, /* the wildcard is below the domain only */
        {"badexample.com", 443, false},
        {"files.example.com", 8443, true},
        {"198.51.100.1", 443, false}, /* an address matches only an address pattern */
        {"192.0.2.7", 8080, true},
        {"192.0.2.7", 443, false},
        {"[2001:db8:0::1]", 443, true},
        {"[2001:db8::2]", 443, false},
    };
    struct netallow list = {0};

    cr_assert_eq(netallow_add(&list, "pypi.org,*.example.com,*.example.com:8443,"
                                     "192.0.2.7:8080,[2001:db8::1]"),
                 0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char host[NETALLOW_HOST_MAX + 1];
        bool is_ip = false;
        cr_assert_eq(netallow_host_normalise(cases[i].host, strlen(cases[i].host), host, &is_ip), 0,
                     "%s", cases[i].host);
        cr_expect_eq(netallow_match(&list, host, is_ip, cases[i].port) != NULL, cases[i].allowed,
                     "%s:%u", cases[i].host, (unsigned)cases[i].port);
    }
    netallow_free(&list);
}

static bool public_text(const char *text)
{
    struct sockaddr_storage ss = {0};
    if (inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr) == 1)
        ss.ss_family = AF_INET;
    else {
        cr_assert_eq(inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1, "%s",
                     text);
        ss.ss_family = AF_INET6;
    }
    return netallow_addr_is_public((struct sockaddr *)&ss);
}

Test(netallow, public_addresses)
{
    static const char *const private_ones[] = {
        "0.0.0.0",
        "0.1.2.3",
        "10.0.0.1",
        "100.64.0.1",
        "100.127.255.255",
        "127.0.0.1",
        "127.255.0.1",
        "169.254.169.254",
        "172.16.0.1",
        "172.31.255.255",
        "192.168.1.1",
        "192.0.0.8",
        "192.0.2.1",
        "198.18.0.1",
        "198.51.100.2",
        "203.0.113.3",
        "224.0.0.1",
        "239.255.255.250",
        "240.0.0.1",
        "255.255.255.255",
        "::",
        "::1",
        "::ffff:127.0.0.1",
        "::ffff:8.8.8.8",
        "::127.0.0.1",
        "fc00::1",
        "fd12:3456::1",
        "fe80::1",
        "ff02::1",
        "2001::1",
        "2001:db8::1",
        "2002:7f00:1::1",
        "64:ff9b::7f00:1",
    };
    static const char *const public_ones[] = {
        "1.1.1.1",    "8.8.8.8",       "100.63.255.255", "100.128.0.1",     "172.15.0.1",
        "172.32.0.1", "151.101.0.223", "2a04:4e42::223", "2606:4700::1111",
    };
    for (size_t i = 0; i < sizeof(private_ones) / sizeof(private_ones[0]); i++)
        cr_expect(!public_text(private_ones[i]), "%s counted as public", private_ones[i]);
    for (size_t i = 0; i < sizeof(public_ones) / sizeof(public_ones[0]); i++)
        cr_expect(public_text(public_ones[i]), "%s counted as not public", public_ones[i]);
}

struct head_case {
    const char *in;
    int r; /* > 0: the head's length is strlen(in) */
    const char *host;
    uint16_t port;
};

Test(httphead, parse)
{
    static const struct head_case cases[] = {
        {"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", 1, "pypi.org", 443},
        {"CONNECT PyPI.org:443 HTTP/1.1\r\n\r\n", 1, "pypi.org", 443},
        {"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n", 1, "2001:db8::1", 443},
        {"CONNECT 192.0.2.1:22 HTTP/1.0\r\n\r\n", 1, "192.0.2.1", 22},
        {"GET http://a.test/x?y HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\n\r\n", 1, "a.test", 80},
        {"GET http://a.test:8080 HTTP/1.1\r\nHost: A.test:8080\r\n\r\n", 1, "a.test", 8080},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test:80\r\n\r\n", 1, "a.test", 80},
        /* Incomplete: more bytes needed. */
        {"CONNECT pypi.org:443 HTTP/1.1\r\n", 0, NULL, 0},
        {"", 0, NULL, 0},
        {"CONNECT pypi.org:443 HTTP/1.1\r", 0, NULL, 0},
        /* Refused before the head is complete: bare LF or CR line ends, which no more bytes
         * can mend (no wait for the head timeout). */
        {"GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\n", -EBADMSG, NULL, 0},
        {"\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\rHost", -EBADMSG, NULL, 0},
        /* Refused. */
        {"CONNECT pypi.org HTTP/1.1\r\n\r\n", -EINVAL, NULL, 0},
        {"CONNECT pypi.org:0 HTTP/1.1\r\n\r\n", -EINVAL, NULL, 0},
        {"CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n", -EINVAL, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\n\r\n", -EINVAL, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", -EINVAL, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nhost: a.test\r\n\r\n", -EINVAL, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", -EINVAL, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test:8080\r\n\r\n", -EINVAL, NULL, 0},
        {"GET http://user@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", -EINVAL, NULL, 0},
        {"GET https://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", -EINVAL, NULL, 0},
        {"GET /x HTTP/1.1\r\nHost: a.test\r\n\r\n", -EPROTO, NULL, 0},
        {"GET ftp://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", -EPROTO, NULL, 0},
        {"GET http://a.test/ HTTP/2.0\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/  HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\nHost: a.test\r\n\r\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n folded\r\n\r\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nHost: a.test\rX: y\r\n\r\n", -EBADMSG, NULL, 0},
        {"GET http://a.test/ HTTP/1.1\r\nX: a\x01\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL, 0},
        {"G(T http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n", -EBADMSG, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct httphead h = {0};
        const char *why = NULL;
        size_t len = strlen(cases[i].in);
        int r = httphead_parse(cases[i].in, len, &h, &why);
        int want = cases[i].r > 0 ? (int)len : cases[i].r;

        cr_expect_eq(r, want, "case %zu: %d, want %d (%s)", i, r, want, why);
        cr_expect(why != NULL);
        if (want > 0) {
            cr_expect_str_eq(h.host, cases[i].host, "case %zu", i);
            cr_expect_eq(h.port, cases[i].port, "case %zu", i);
        }
    }
}

Test(httphead, too_long)
{
    static char buf[HTTPHEAD_MAX + 100];
    struct httphead h;
    const char *why = NULL;

    memset(buf, 'a', sizeof(buf));
    memcpy(buf, "GET http://a.test/", 18);
    cr_expect_eq(httphead_parse(buf, HTTPHEAD_MAX - 1, &h, &why), 0);
    cr_expect_eq(httphead_parse(buf, HTTPHEAD_MAX, &h, &why), -E2BIG);
    cr_expect_eq(httphead_parse(buf, sizeof(buf), &h, &why), -E2BIG);
}

static struct sockaddr_storage addr_of(const char *text, uint16_t port)
{
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *in = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

    if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
    } else {
        cr_assert_eq(inet_pton(AF_INET6, text, &in6->sin6_addr), 1, "%s", text);
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
    }
    return ss;
}

/* A name must not lead to the host's own interface addresses, public ones included: the list
 * is what getifaddrs(3) gave at the start (here, made up). */
Test(addr, own_addresses)
{
    struct sockaddr_storage own[] = {addr_of("203.0.113.5", 0), addr_of("2001:db8:1::5", 0),
                                     addr_of("127.0.0.1", 0)};
    struct sockaddr_storage in4 = addr_of("203.0.113.5", 443), other4 = addr_of("203.0.113.6", 443),
                            in6 = addr_of("2001:db8:1::5", 80),
                            other6 = addr_of("2001:db8:1::6", 80),
                            mapped = addr_of("::ffff:203.0.113.5", 443);

    cr_expect(netallow_addr_in((struct sockaddr *)&in4, own, 3));
    cr_expect(netallow_addr_in((struct sockaddr *)&in6, own, 3));
    cr_expect(!netallow_addr_in((struct sockaddr *)&other4, own, 3));
    cr_expect(!netallow_addr_in((struct sockaddr *)&other6, own, 3));
    /* The family counts: the mapped form is another address (and never public anyway). */
    cr_expect(!netallow_addr_in((struct sockaddr *)&mapped, own, 3));
    cr_expect(!netallow_addr_is_public((struct sockaddr *)&mapped));
    cr_expect(!netallow_addr_in((struct sockaddr *)&in4, own, 0));
}

/* A plain request as it goes upstream: origin form, hop-by-hop headers dropped, one
 * "Connection: close"; too small a buffer is -E2BIG, never a cut head. */
Test(httphead, rewrite)
{
    static const char in[] = "GET http://a.test:8080?q=1 HTTP/1.1\r\nHost: a.test:8080\r\n"
                             "Proxy-Connection: keep-alive\r\nAccept: */*\r\nConnection: x\r\n"
                             "Te: trailers\r\n\r\nbody";
    static const char want[] = "GET /?q=1 HTTP/1.1\r\nHost: a.test:8080\r\nAccept: */*\r\n"
                               "Connection: close\r\n\r\n";
    struct httphead h;
    const char *why = NULL;
    char out[256];

    cr_assert_eq(httphead_parse(in, sizeof(in) - 1, &h, &why), (int)(sizeof(in) - 5), "%s", why);
    cr_expect_eq(httphead_rewrite(in, &h, out, sizeof(out)), (int)(sizeof(want) - 1));
    cr_expect(memcmp(out, want, sizeof(want) - 1) == 0, "%.*s", (int)(sizeof(want) - 1), out);
    cr_expect_eq(httphead_rewrite(in, &h, out, sizeof(want) - 1), -E2BIG);
    cr_expect_eq(httphead_rewrite(in, &h, out, 10), -E2BIG);
}
