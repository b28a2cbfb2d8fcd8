/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * nsbox rootfs build [--profile NAME] [--packages P,...] [--suite S] [--mirror URL] DIR
 * nsbox rootfs verify DIR
 *
 * build runs the rootfs-build script (mmdebstrap underneath; installed in LIBEXECDIR/nsbox, the
 * source tree's rootfs/nsbox-rootfs-build when nsbox runs from its build tree) with the profiles
 * of DATADIR/nsbox/profiles, then verifies the tree it made. $NSBOX_ROOTFS_BUILD_SCRIPT names
 * another copy of the script (a copied binary, as the tests stage it), which then reads the
 * profiles beside it. verify checks a tree from anywhere:
 * its ELF files are read, never run, and its programs run only inside a sandbox.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "elfcheck.h"
#include "log.h"
#include "macro.h"
#include "nsbox.h"
#include "cmd-rootfs.h"

#define EXIT_USAGE 125

/* Does this nsbox run from its build tree (then the source tree has the script and profiles)? */
static bool from_build_tree(void)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

    if (n <= 0)
        return false;
    exe[n] = '\0';
    return strncmp(exe, NSBOX_BUILD_ROOT "/", strlen(NSBOX_BUILD_ROOT) + 1) == 0;
}

static void linef(rootfs_line_fn line, void *userdata, const char *verdict, const char *fmt, ...)
    _printf_(4, 5);
static void linef(rootfs_line_fn line, void *userdata, const char *verdict, const char *fmt, ...)
{
    char text[1200];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    line(userdata, verdict, text);
}

struct elf_report {
    rootfs_line_fn line;
    void *userdata;
    unsigned shown;
};

#define ELF_SHOWN_MAX 10

static int elf_missing(const char *file, const char *lib, void *userdata)
{
    struct elf_report *er = userdata;

    if (er->shown++ >= ELF_SHOWN_MAX)
        return 0;
    if (lib)
        linef(er->line, er->userdata, "FAIL", "libraries: %s needs %s, which is not in the tree",
              file, lib);
    else
        linef(er->line, er->userdata, "FAIL",
              "libraries: %s is a malformed ELF file (a header, table or string lies outside it)",
              file);
    return 0;
}

/* What a sandbox on the tree should offer every program; then the profile's imports. Prints
 * one line per check: "ok NAME DETAIL" or "FAIL NAME DETAIL". */
static const char check_program[] =
    "import sys\n"
    "def check(name, f):\n"
    "    try:\n"
    "        d = f()\n"
    "        print('ok', name, d or '')\n"
    "    except BaseException as e:\n"
    "        print('FAIL', name, f'{type(e).__name__}: {e}'.replace('\\n', ' '))\n"
    "def loc():\n"
    "    import locale\n"
    "    return 'LC_ALL=' + locale.setlocale(locale.LC_ALL, '')\n"
    "def tz():\n"
    "    import datetime, zoneinfo\n"
    "    z = zoneinfo.ZoneInfo('Europe/Paris')\n"
    "    return 'Europe/Paris is UTC+' + str(datetime.datetime(2024, 7, 1, tzinfo=z).utcoffset())\n"
    "def findlib():\n"
    "    import ctypes.util\n"
    "    r = ctypes.util.find_library('c')\n"
    "    if not r:\n"
    "        raise LookupError(\"ctypes.util.find_library('c') found nothing (no linker "
    "cache?)\")\n"
    "    return r\n"
    "def hosts():\n"
    "    import socket\n"
    "    return 'localhost is ' + socket.getaddrinfo('localhost', None)[0][4][0]\n"
    "def services():\n"
    "    import socket\n"
    "    return 'https is port %d' % socket.getservbyname('https', 'tcp')\n"
    "def imports():\n"
    "    import importlib\n"
    "    mods = []\n"
    "    try:\n"
    "        with open('/usr/share/nsbox/profile') as f:\n"
    "            for l in f:\n"
    "                if l.startswith('imports='):\n"
    "                    mods = l[8:].split()\n"
    "    except FileNotFoundError:\n"
    "        return 'no /usr/share/nsbox/profile, so no import list'\n"
    "    bad = []\n"
    "    for m in mods:\n"
    "        try:\n"
    "            importlib.import_module(m)\n"
    "        except BaseException as e:\n"
    "            why = [l.strip() for l in str(e).splitlines() if l.strip()] or ['']\n"
    "            bad.append(f'{m} ({type(e).__name__}: {why[-1][:200]})')\n"
    "    if bad:\n"
    "        raise ImportError('; '.join(bad))\n"
    "    return ' '.join(mods)\n"
    "for n, f in (('locale', loc), ('zoneinfo', tz), ('find_library', findlib),\n"
    "             ('/etc/hosts', hosts), ('/etc/services', services), ('imports', imports)):\n"
    "    check(n, f)\n";

static unsigned check_in_sandbox(const char *dir, rootfs_line_fn line, void *userdata)
{
    static char *const argv[] = {(char *)"python3", (char *)"-c", (char *)check_program, NULL};
    struct nsbox_config c;
    struct nsbox_result r = {0};
    unsigned failures = 0;

    nsbox_config_init(&c);
    c.rootfs = dir;
    c.argv = argv;
    /* Importing a large profile cold takes seconds and some hundred MB. */
    c.timeout = 120ULL * 1000000;
    c.memory = 1ULL << 30;
    c.output_limit = 64 << 10;
    (void)nsbox_run(&c, &r);
    if (r.status != NSBOX_STATUS_EXITED || r.exit_code != 0 || !r.out.data) {
        linef(line, userdata, "FAIL", "sandbox on %s: the check program did not run: %s", dir,
              r.status == NSBOX_STATUS_ERROR ? r.error
              : r.err.data && r.err.data[0]  ? r.err.data
                                             : "no output");
        nsbox_result_free(&r);
        return 1;
    }
    for (char *l = r.out.data, *next; l && *l; l = next) {
        char *name, *detail;
        next = strchr(l, '\n');
        if (next)
            *next++ = '\0';
        name = strchr(l, ' ');
        if (!name)
            continue;
        *name++ = '\0';
        detail = strchr(name, ' ');
        if (detail)
            *detail++ = '\0';
        if (strcmp(l, "ok") == 0)
            linef(line, userdata, "ok", "in a sandbox: %s: %s", name, detail ? detail : "");
        else {
            failures++;
            linef(line, userdata, "FAIL", "in a sandbox: %s: %s", name, detail ? detail : "");
        }
    }
    nsbox_result_free(&r);
    return failures;
}

unsigned rootfs_check_tree(const char *dir, rootfs_line_fn line, void *userdata)
{
    struct elf_report er = {line, userdata, 0};
    _cleanup_close_ int root_fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    unsigned files = 0, missing = 0, failures = 0;
    struct stat st;
    int r;

    if (root_fd < 0) {
        linef(line, userdata, "FAIL", "rootfs %s: %s", dir, strerror(errno));
        return 1;
    }
    r = elfcheck_tree(root_fd, elf_missing, &er, &files, &missing);
    if (r < 0) {
        linef(line, userdata, "FAIL", "libraries: reading the tree failed: %s", strerror(-r));
        failures++;
    } else if (missing > 0) {
        if (missing > ELF_SHOWN_MAX)
            linef(line, userdata, "FAIL", "libraries: %u more unresolved", missing - ELF_SHOWN_MAX);
        linef(line, userdata, "fix",
              "  add the packages that ship them to the profile "
              "(--packages), or make the missing links (alternatives); "
              "then rebuild (nsbox rootfs build)");
        failures += missing;
    } else
        linef(line, userdata, "ok",
              "libraries: each of %u ELF files finds its shared libraries "
              "in the tree",
              files);
    if (fstatat(root_fd, "etc/ld.so.cache", &st, AT_SYMLINK_NOFOLLOW) < 0)
        linef(line, userdata, "warn",
              "linker cache: no /etc/ld.so.cache: ctypes.util.find_library "
              "and libraries outside the default directories will not be "
              "found (ldconfig -r %s makes it)",
              dir);
    failures += check_in_sandbox(dir, line, userdata);
    return failures;
}

static void print_line(void *userdata, const char *verdict, const char *text)
{
    (void)printf("%-5s %s\n", verdict, text);
    (void)fflush(stdout);
}

static int verify(const char *dir)
{
    unsigned failures;

    (void)printf("nsbox rootfs verify %s\n", dir);
    failures = rootfs_check_tree(dir, print_line, NULL);
    (void)printf("%s\n", failures ? "the rootfs has problems: see the FAIL lines above"
                                  : "the rootfs works");
    return failures ? 1 : 0;
}

static void usage(FILE *f)
{
    fputs("Usage: nsbox rootfs build [--profile minimal|science] [--packages P,...] [--suite S]\n"
          "                          [--mirror URL] DIR\n"
          "       nsbox rootfs verify DIR\n"
          "\n"
          "build: make a root filesystem in DIR with mmdebstrap from the Debian packages of a\n"
          "profile (needs network access to a Debian mirror, and root or subordinate ids for\n"
          "user namespaces), then verify it.\n"
          "  --profile NAME    minimal (default: Python's standard library and basic tools) or\n"
          "                    science (numpy, pandas, matplotlib, scipy, scikit-learn, ...)\n"
          "  --packages P,...  more Debian packages, comma-separated\n"
          "  --suite S         the Debian release (default: the host's on Debian, else bookworm)\n"
          "  --mirror URL      the Debian mirror (default: $NSBOX_DEBIAN_MIRROR, else\n"
          "                    http://deb.debian.org/debian)\n"
          "verify: check that every ELF file of DIR finds its shared libraries there, and that a\n"
          "sandbox on DIR has a locale, time zones, the linker cache, /etc/hosts, /etc/services\n"
          "and the imports of its profile. Exit status 0 if all is well, 1 if not.\n",
          f);
}

static int build(int argc, char **argv)
{
    static const struct option options[] = {
        {"profile", required_argument, NULL, 'p'}, {"packages", required_argument, NULL, 'P'},
        {"suite", required_argument, NULL, 's'},   {"mirror", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},          {},
    };
    const bool dev = from_build_tree();
    const char *env_script = getenv("NSBOX_ROOTFS_BUILD_SCRIPT");
    const char *script = env_script && env_script[0] ? env_script
                         : dev ? NSBOX_SOURCE_ROOT "/rootfs/nsbox-rootfs-build"
                               : NSBOX_LIBEXECDIR "/nsbox/rootfs-build";
    const char *profiles = dev ? NSBOX_SOURCE_ROOT "/rootfs/profiles"
                               : NSBOX_DATADIR "/nsbox/profiles";
    const char *profile = NULL, *packages = NULL, *suite = NULL, *mirror = NULL;
    const char *args[14];
    size_t n = 0;
    pid_t pid;
    int c, status;

    /* ':' and opterr = 0: one line of nsbox's own for a bad option, as for nsbox run. */
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", options, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (strchr(optarg, '/') || optarg[0] == '.' || optarg[0] == '\0') {
                log_error("--profile: a profile name such as minimal or science, not '%s'", optarg);
                return EXIT_USAGE;
            }
            profile = optarg;
            break;
        case 'P':
            packages = optarg;
            break;
        case 's':
            suite = optarg;
            break;
        case 'm':
            mirror = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            log_error("rootfs build: option '%s' needs a value (see nsbox rootfs --help)",
                      argv[optind - 1]);
            return EXIT_USAGE;
        default:
            log_error("rootfs build: unknown option '%s' (see nsbox rootfs --help)",
                      argv[optind - 1]);
            return EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        log_error("rootfs build: give one DIR, where the tree goes (see nsbox rootfs --help)");
        return EXIT_USAGE;
    }
    /* Each option once (the last one given wins), so args[] has a fixed size. */
    args[n++] = script;
    if (script != env_script) {
        args[n++] = "--profiles-dir";
        args[n++] = profiles;
    }
    if (profile) {
        args[n++] = "--profile";
        args[n++] = profile;
    }
    if (packages) {
        args[n++] = "--packages";
        args[n++] = packages;
    }
    if (suite) {
        args[n++] = "--suite";
        args[n++] = suite;
    }
    if (mirror) {
        args[n++] = "--mirror";
        args[n++] = mirror;
    }
    args[n++] = "--";
    args[n++] = argv[optind];
    args[n] = NULL;
    if (access(script, X_OK) < 0) {
        log_error("rootfs build: %s: %s (is nsbox installed completely?)", script, strerror(errno));
        return 1;
    }
    (void)fflush(NULL);
    pid = fork();
    if (pid < 0) {
        log_error("rootfs build: fork: %s", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        (void)setenv("NSBOX_ROOTFS_BUILD_NAME", "nsbox rootfs build", 1);
        execv(script, (char **)args);
        (void)fprintf(stderr, "nsbox: rootfs build: cannot run %s: %s\n", script, strerror(errno));
        _exit(127);
    }
    if (RETRY_EINTR(waitpid(pid, &status, 0)) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return 1; /* the script said why */
    return verify(argv[optind]);
}

int rootfs_main(int argc, char **argv)
{
    if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "build") == 0)
        return build(argc - 1, argv + 1);
    if (argc == 3 && strcmp(argv[1], "verify") == 0)
        return verify(argv[2]);
    if (argc == 4 && strcmp(argv[1], "verify") == 0 && strcmp(argv[2], "--") == 0)
        return verify(argv[3]);
    if (argc >= 2 && strcmp(argv[1], "verify") == 0)
        log_error("rootfs verify: give one DIR, the tree to check (see nsbox rootfs --help)");
    else if (argc >= 2)
        log_error("unknown rootfs command '%s': build or verify (see nsbox rootfs --help)",
                  argv[1]);
    else
        log_error("rootfs: give a command: build [OPTIONS] DIR or verify DIR (see nsbox rootfs "
                  "--help)");
    return EXIT_USAGE;
}
