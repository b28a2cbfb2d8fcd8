/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nsbox.h"
#include "parse.h"

struct size_case {
    const char *in;
    int r;
    uint64_t bytes;
};

Test(parse, size)
{
    /* clang-format off */
    static const struct size_case cases[] = {
        {"256m", 0, 256ULL << 20},  {"256M", 0, 256ULL << 20}, {"1g", 0, 1ULL << 30},
        {"1.5g", 0, 3ULL << 29},    {"4000", 0, 4000},         {"4000b", 0, 4000},
        {"16mb", 0, 16ULL << 20},   {"16MiB", 0, 16ULL << 20}, {"2k", 0, 2048},
        {"1t", 0, 1ULL << 40},      {"0", 0, 0},               {"12Q", -EINVAL, 0},
        {"", -EINVAL, 0},           {"m", -EINVAL, 0},         {"-1m", -EINVAL, 0},
        {" 1m", -EINVAL, 0},        {"1 m", -EINVAL, 0},       {"1e3", -EINVAL, 0},
        {"nan", -EINVAL, 0},        {"1..2m", -EINVAL, 0},     {"99999999999999999999", -ERANGE, 0},
        {"20000000t", -ERANGE, 0},
    };
    /* clang-format on */
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 12345;
        int r = parse_size(cases[i].in, &v);
        cr_expect_eq(r, cases[i].r, "parse_size(\"%s\") = %d, want %d", cases[i].in, r, cases[i].r);
        if (cases[i].r == 0)
            cr_expect_eq(v, cases[i].bytes, "parse_size(\"%s\") = %llu", cases[i].in,
                         (unsigned long long)v);
        else
            cr_expect_eq(v, 12345, "output written on failure for \"%s\"", cases[i].in);
    }
}

Test(parse, duration)
{
    uint64_t v = 0;
    cr_expect_eq(parse_duration("10", &v), 0);
    cr_expect_eq(v, 10000000);
    cr_expect_eq(parse_duration("1.5", &v), 0);
    cr_expect_eq(v, 1500000);
    cr_expect_eq(parse_duration("0.25s", &v), 0);
    cr_expect_eq(v, 250000);
    cr_expect_eq(parse_duration("-1", &v), -EINVAL);
    cr_expect_eq(parse_duration("0", &v), -ERANGE);
    cr_expect_eq(parse_duration("0.0000001", &v), -ERANGE); /* rounds to 0 us */
    cr_expect_eq(parse_duration("inf", &v), -EINVAL);
    cr_expect_eq(parse_duration("s", &v), -EINVAL);
    cr_expect_eq(parse_duration("250ms", &v), 0);
    cr_expect_eq(v, 250000);
    cr_expect_eq(parse_duration("10m", &v), 0);
    cr_expect_eq(v, 600ULL * 1000000);
    cr_expect_eq(parse_duration("0.5h", &v), 0);
    cr_expect_eq(v, 1800ULL * 1000000);
    cr_expect_eq(parse_duration("10x", &v), -EINVAL);
    cr_expect_eq(parse_duration("10 m", &v), -EINVAL);
    cr_expect_eq(parse_duration("1m5s", &v), -EINVAL);
    cr_expect_eq(parse_duration("ms", &v), -EINVAL);
    cr_expect_eq(parse_duration("9000h", &v), -ERANGE);
    cr_expect_eq(parse_duration("", &v), -EINVAL);
    cr_expect_eq(parse_duration("99999999", &v), -ERANGE);
}

Test(parse, cpus_and_counts)
{
    uint64_t v = 0;
    cr_expect_eq(parse_cpus("0.5", &v), 0);
    cr_expect_eq(v, 500);
    cr_expect_eq(parse_cpus("2", &v), 0);
    cr_expect_eq(v, 2000);
    cr_expect_eq(parse_cpus("0", &v), -ERANGE);
    cr_expect_eq(parse_cpus("0.0001", &v), -ERANGE);
    cr_expect_eq(parse_cpus("-0.5", &v), -EINVAL);
    cr_expect_eq(parse_count("64", 100, &v), 0);
    cr_expect_eq(v, 64);
    cr_expect_eq(parse_count("0", 100, &v), -ERANGE);
    cr_expect_eq(parse_count("101", 100, &v), -ERANGE);
    cr_expect_eq(parse_count("6.4", 100, &v), -EINVAL);
    cr_expect_eq(parse_count("x", 100, &v), -EINVAL);
}

Test(parse, safe_targets)
{
    cr_expect(path_is_safe_target("/data"));
    cr_expect(path_is_safe_target("/tmp/a/b"));
    cr_expect(!path_is_safe_target("/"));
    cr_expect(!path_is_safe_target("data"));
    cr_expect(!path_is_safe_target("/a/../etc"));
    cr_expect(!path_is_safe_target("/a/./b"));
    cr_expect(!path_is_safe_target("/a//b"));
    cr_expect(!path_is_safe_target("/a/"));
    cr_expect(!path_is_safe_target(""));
    cr_expect(!path_is_safe_target(NULL));
}

Test(parse, bind)
{
    char *src = NULL, *dst = NULL;
    bool rw = true;

    cr_assert_eq(parse_bind("/host/dir:/data", &src, &dst, &rw), 0);
    cr_expect_str_eq(src, "/host/dir");
    cr_expect_str_eq(dst, "/data");
    cr_expect(!rw, "binds are read-only unless :rw is said");
    free(src);
    free(dst);

    cr_assert_eq(parse_bind("./rel:/tmp/x:rw", &src, &dst, &rw), 0);
    cr_expect_str_eq(src, "./rel");
    cr_expect_str_eq(dst, "/tmp/x");
    cr_expect(rw);
    free(src);
    free(dst);

    cr_assert_eq(parse_bind("/a:/b:ro", &src, &dst, &rw), 0);
    cr_expect(!rw);
    free(src);
    free(dst);

    /* Docker takes a trailing slash on the target. */
    cr_assert_eq(parse_bind("/a:/mnt/", &src, &dst, &rw), 0);
    cr_expect_str_eq(dst, "/mnt");
    free(src);
    free(dst);
    cr_assert_eq(parse_bind("/a:/mnt/x//:rw", &src, &dst, &rw), 0);
    cr_expect_str_eq(dst, "/mnt/x");
    cr_expect(rw);
    free(src);
    free(dst);

    static const char *const bad[] = {"/a",         ":/b",         "/a:",  "/a:b",
                                      "/a:/b:rx",   "/a:/b:ro:rw", "/a:/", "/a://",
                                      "/a:/x/../y", "/a:/x/./",    ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(parse_bind(bad[i], &src, &dst, &rw), -EINVAL, "'%s' accepted", bad[i]);
}

Test(parse, tmpfs)
{
    char *t = NULL;
    uint64_t size = 0;
    unsigned mode = 0;
    bool exec = true;

    cr_assert_eq(parse_tmpfs("/tmp:size=16m", 1, &t, &size, &mode, &exec), 0);
    cr_expect_str_eq(t, "/tmp");
    cr_expect_eq(size, 16ULL << 20);
    cr_expect_eq(mode, 01777);
    cr_expect_not(exec, "noexec is the default");
    free(t);

    cr_assert_eq(parse_tmpfs("/scratch", 4096, &t, &size, &mode, &exec), 0);
    cr_expect_eq(size, 4096);
    cr_expect_not(exec);
    free(t);

    cr_assert_eq(parse_tmpfs("/x:mode=0700,size=1k,exec", 1, &t, &size, &mode, &exec), 0);
    cr_expect_eq(mode, 0700);
    cr_expect_eq(size, 1024);
    cr_expect(exec);
    free(t);

    cr_assert_eq(parse_tmpfs("/x:exec,noexec", 1, &t, &size, &mode, &exec), 0);
    cr_expect_not(exec, "the last word wins");
    free(t);

    static const char *const bad[] = {"tmp",         "/tmp:size=0",     "/tmp:size=",
                                      "/tmp:mode=8", "/tmp:mode=77777", "/tmp:execute",
                                      "/tmp:exe",    "/tmp:",           "/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(parse_tmpfs(bad[i], 1, &t, &size, &mode, &exec), -EINVAL, "'%s' accepted",
                     bad[i]);
}

Test(parse, mount_bind)
{
    struct parsed_mount m = {0};

    cr_assert_eq(parse_mount("type=bind,source=/a:b,target=/data", 1, &m), 0);
    cr_expect(!m.is_tmpfs);
    cr_expect_str_eq(m.source, "/a:b", "a source may hold ':'");
    cr_expect_str_eq(m.target, "/data");
    cr_expect(!m.writable, "read-only unless readonly=false, as -v");
    parsed_mount_done(&m);

    cr_assert_eq(parse_mount("dst=/mnt/,src=rel,type=bind,readonly=false", 1, &m), 0);
    cr_expect_str_eq(m.source, "rel");
    cr_expect_str_eq(m.target, "/mnt");
    cr_expect(m.writable);
    parsed_mount_done(&m);

    cr_assert_eq(parse_mount("type=bind,src=/a,destination=/b,readonly", 1, &m), 0);
    cr_expect(!m.writable);
    parsed_mount_done(&m);
    cr_assert_eq(parse_mount("type=bind,src=/a,destination=/b,ro=1", 1, &m), 0);
    cr_expect(!m.writable);
    parsed_mount_done(&m);
    cr_assert_eq(parse_mount("type=bind,src=/a,destination=/b,ro=0", 1, &m), 0);
    cr_expect(m.writable);
    parsed_mount_done(&m);

    /* CSV quoting, as Docker's: a field in quotes holds ',' and (doubled) '"'. */
    cr_assert_eq(parse_mount("type=bind,\"source=/x,y \"\"z\"\"\",target=/t", 1, &m), 0);
    cr_expect_str_eq(m.source, "/x,y \"z\"");
    parsed_mount_done(&m);
    cr_assert_eq(parse_mount("type=bind,src=/a,\"target=/t\"", 1, &m), 0);
    cr_expect_str_eq(m.target, "/t");
    parsed_mount_done(&m);

    static const char *const bad[] = {"",
                                      "type=bind",
                                      "type=bind,src=/a",
                                      "type=bind,target=/b",
                                      "src=/a,target=/b",
                                      "type=volume,src=v,target=/b",
                                      "type=bind,src=/a,target=b",
                                      "type=bind,src=/a,target=/",
                                      "type=bind,src=/a,target=/x/../y",
                                      "type=bind,src=,target=/b",
                                      "type=bind,src=/a,target=/b,readonly=yes",
                                      "type=bind,src=/a,target=/b,tmpfs-size=1m",
                                      "type=bind,src=/a,target=/b,bind-propagation=shared",
                                      "type=bind,src=/a,target=/b,x",
                                      "type=bind,src=/a,target=/b,\"unterminated",
                                      "type=bind,\"src=/a\"x,target=/b",
                                      "type=bind,src=/a\"b,target=/b",
                                      "type,src=/a,target=/b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(parse_mount(bad[i], 1, &m), -EINVAL, "'%s' accepted", bad[i]);
}

Test(parse, mount_tmpfs)
{
    struct parsed_mount m = {0};

    cr_assert_eq(parse_mount("type=tmpfs,target=/scratch", 4096, &m), 0);
    cr_expect(m.is_tmpfs);
    cr_expect_null(m.source);
    cr_expect_str_eq(m.target, "/scratch");
    cr_expect_eq(m.size, 4096);
    cr_expect_eq(m.mode, 01777);
    cr_expect(m.writable);
    parsed_mount_done(&m);

    cr_assert_eq(parse_mount("type=tmpfs,dst=/s/,tmpfs-size=64m,tmpfs-mode=700", 1, &m), 0);
    cr_expect_str_eq(m.target, "/s");
    cr_expect_eq(m.size, 64ULL << 20);
    cr_expect_eq(m.mode, 0700);
    parsed_mount_done(&m);

    static const char *const bad[] = {"type=tmpfs",
                                      "type=tmpfs,src=/a,target=/b",
                                      "type=tmpfs,target=/b,readonly",
                                      "type=tmpfs,target=/b,tmpfs-size=0",
                                      "type=tmpfs,target=/b,tmpfs-size=",
                                      "type=tmpfs,target=/b,tmpfs-mode=8",
                                      "type=tmpfs,target=/b,tmpfs-mode=77777"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect_eq(parse_mount(bad[i], 1, &m), -EINVAL, "'%s' accepted", bad[i]);
}

Test(parse, user)
{
    uid_t u = 1;
    gid_t g = 1;
    cr_expect_eq(parse_user("65534:65534", &u, &g), 0);
    cr_expect_eq(u, 65534);
    cr_expect_eq(g, 65534);
    cr_expect_eq(parse_user("1000", &u, &g), 0);
    cr_expect_eq(u, 1000);
    cr_expect_eq(g, 1000);
    cr_expect_eq(parse_user("0:0", &u, &g), 0);
    cr_expect_eq(parse_user("4294967295", &u, &g), -ERANGE);
    cr_expect_eq(parse_user("nobody", &u, &g), -EINVAL);
    cr_expect_eq(parse_user("1:", &u, &g), -EINVAL);
    cr_expect_eq(parse_user(":1", &u, &g), -EINVAL);
    cr_expect_eq(parse_user("-1", &u, &g), -EINVAL);
}

Test(parse, env_names)
{
    cr_expect(env_name_is_valid("KEY=v", 3));
    cr_expect(!env_name_is_valid("=v", 0));
    cr_expect(!env_name_is_valid("A=B", 3));
}

Test(parse, run_names)
{
    static const char *const good[] = {"a", "web", "Web-1", "x.y_z-9", "0"};
    static const char *const bad[] = {"", "-a", ".a", "_a", "a/b", "a b", "a:b", "\x1b[31m", "é"};
    char longest[NSBOX_NAME_MAX + 2];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        cr_expect(run_name_is_valid(good[i]), "'%s' should be a valid name", good[i]);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_expect(!run_name_is_valid(bad[i]), "'%s' should be refused", bad[i]);
    cr_expect(!run_name_is_valid(NULL));
    memset(longest, 'a', NSBOX_NAME_MAX);
    longest[NSBOX_NAME_MAX] = '\0';
    cr_expect(run_name_is_valid(longest));
    longest[NSBOX_NAME_MAX] = 'a';
    longest[NSBOX_NAME_MAX + 1] = '\0';
    cr_expect(!run_name_is_valid(longest));
}

Test(parse, labels)
{
    static const struct {
        const char *in;
        bool ok;
        size_t key_len;
    } cases[] = {
        {"suite=unit", true, 5},
        {"com.example/x=1", true, 13},
        {"k", true, 1},
        {"k=", true, 1},
        {"k=a=b", true, 1},
        {"k=ünïcode", true, 1},
        {"=v", false, 0},
        {"-k=v", false, 0},
        {"k y=v", false, 0},
        {"k=a\nb", false, 0},
        {"k=\x1b[31m", false, 0},
        {"k=\x7f", false, 0},
        {"k=\xc2\x9b"
         "31m",
         false, 0},
        {"", false, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t key_len = 99;
        bool ok = label_is_valid(cases[i].in, &key_len);
        cr_expect_eq(ok, cases[i].ok, "label_is_valid(\"%s\") = %d", cases[i].in, ok);
        if (ok && cases[i].ok)
            cr_expect_eq(key_len, cases[i].key_len, "key length of \"%s\"", cases[i].in);
    }
}

Test(parse, copy_names)
{
    static const struct {
        const char *in;
        bool ok;
    } cases[] = {
        {"work/a.csv", true},
        {"0/out/plot.png", true},
        {"a", true},
        {"..a/b..", true},
        {"", false},
        {"/etc/shadow", false},
        {"../x", false},
        {"a/../b", false},
        {"a/..", false},
        {"./a", false},
        {"a//b", false},
        {"a/", false},
        {"a/\x1b[2J", false},
        {"a\nb", false},
        {"a\x7f", false},
        /* UTF-8 text is fine; not UTF-8 (two names would show as one U+FFFD), C1 controls,
         * bidi overrides and invisible format characters are not. */
        {"r\xc3\xa9sum\xc3\xa9.txt", true},
        {"report\xff.txt", false},
        {"a\xc2\x9b"
         "31m",
         false},
        {"evil\xe2\x80\xaetxt.exe", false},
        {"ns\xe2\x80\x8b"
         "box",
         false},
    };
    char long_component[300];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        cr_expect_eq(copy_name_is_valid(cases[i].in), cases[i].ok, "copy_name_is_valid(\"%s\")",
                     cases[i].in);
    cr_expect(!copy_name_is_valid(NULL));
    memset(long_component, 'a', sizeof(long_component) - 1);
    long_component[sizeof(long_component) - 1] = '\0';
    cr_expect(!copy_name_is_valid(long_component));
}
