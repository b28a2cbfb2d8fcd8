/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The result (result.h, nsbox.h): its text made safe for JSON (utf8_sanitize(), the JSON
 * meter), the names of statuses, enforcers and limits, the exit status, the wording of a run's
 * end (nsbox_result_reason(), nsbox_result_notes()) and the JSON object; writing JSON text with
 * hidden characters escaped is result-dump.c, the output fields result-output.c. */
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "isolation.h"
#include "macro.h"
#include "nsbox.h"
#include "outputs.h"
#include "proxy.h"
#include "result.h"
#include "uidpool.h"
#include "utf8.h"

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    int len = utf8_check(s, n);
    return len > 0 ? (size_t)len : 0;
}

char *utf8_sanitize(const char *s, size_t n, size_t *ret_len)
{
    /* Each invalid byte becomes 3 bytes (U+FFFD). */
    char *out = malloc(n * 3 + 1);
    size_t o = 0;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n;) {
        size_t len = utf8_sequence_length((const unsigned char *)s + i, n - i);
        if (len == 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, s + i, len);
            o += len;
            i += len;
        }
    }
    out[o] = '\0';
    *ret_len = o;
    return out;
}

/* Bytes jansson writes for an ASCII character in a string (without JSON_ENSURE_ASCII): the
 * two-character escapes of RFC 8259 section 7, \u00XX for the other controls below 0x20. */
static unsigned json_ascii_cost(unsigned char c)
{
    switch (c) {
    case '"':
    case '\\':
    case '\b':
    case '\f':
    case '\n':
    case '\r':
    case '\t':
        return 2;
    default:
        return c < 0x20 || c == 0x7f ? 6 : 1; /* DEL: \u007f, see json_hide() */
    }
}

/* Bytes json_hide() makes of the well-formed len-byte sequence at s. */
static unsigned json_utf8_cost(const unsigned char *s, int len)
{
    uint32_t cp = utf8_decode(s, len);

    if (!utf8_hidden(cp))
        return (unsigned)len;
    return cp > 0xffff ? 12 : 6; /* a surrogate pair, \udXXX\udXXX */
}

size_t json_meter_fit(struct json_meter *m, const char *s, size_t kept, size_t n, uint64_t bound)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t end = kept + n, i = m->settled, tail;
    uint64_t cost = m->cost;

    while (i < end) {
        size_t len = 1;
        unsigned w;

        if (u[i] < 0x80)
            w = json_ascii_cost(u[i]);
        else {
            int l = utf8_check(u + i, end - i);
            if (l < 0)
                break; /* unfinished: settled when more bytes come */
            if (l > 0) {
                len = (size_t)l;
                w = json_utf8_cost(u + i, l);
            } else
                w = 3; /* U+FFFD, see utf8_sanitize() */
        }
        if (cost + w > bound) {
            /* The cut goes before this character. Bytes already kept never land here: their
             * worst case was counted when they were kept, and settling only lowers it. */
            m->cost = cost;
            m->settled = i;
            return i > kept ? i - kept : 0;
        }
        cost += w;
        i += len;
    }
    /* An unfinished sequence ends s: kept only as far as it fits as U+FFFDs, its cost should the
     * stream end there. */
    tail = end - i;
    if (cost + 3 * (uint64_t)tail > bound)
        tail = (size_t)((bound - cost) / 3);
    m->cost = cost;
    m->settled = i;
    return i + tail > kept ? i + tail - kept : 0;
}

const char *nsbox_status_to_string(enum nsbox_status status)
{
    switch (status) {
    case NSBOX_STATUS_EXITED:
        return "exited";
    case NSBOX_STATUS_SIGNALED:
        return "signaled";
    case NSBOX_STATUS_TIMEOUT:
        return "timeout";
    case NSBOX_STATUS_ERROR:
        return "error";
    case NSBOX_STATUS_OOM:
        return "oom";
    case NSBOX_STATUS_KILLED:
        return "killed";
    }
    return "error";
}

const char *nsbox_enforcer_to_string(enum nsbox_enforcer enforcer)
{
    switch (enforcer) {
    case NSBOX_ENFORCER_NONE:
        return "none";
    case NSBOX_ENFORCER_RLIMIT:
        return "rlimit";
    case NSBOX_ENFORCER_CGROUP:
        return "cgroup";
    }
    return "none";
}

int nsbox_exit_status(const struct nsbox_result *result)
{
    switch (result->status) {
    case NSBOX_STATUS_EXITED:
        return result->exit_code;
    case NSBOX_STATUS_SIGNALED:
        return 128 + result->signal;
    case NSBOX_STATUS_TIMEOUT:
        return 124;
    case NSBOX_STATUS_ERROR:
        return result->exit_code == 126 || result->exit_code == 127 ? result->exit_code : 125;
    case NSBOX_STATUS_OOM:
    case NSBOX_STATUS_KILLED:
        return 128 + 9; /* SIGKILL */
    }
    return 125;
}

uint64_t result_rlimit_cpu_seconds(uint64_t cpus_milli, uint64_t timeout_usec)
{
    /* cpus x timeout in microseconds; the timeout is divided first so that the product stays
     * far from overflow (--cpus is at most the CPU count, --timeout at most years). */
    uint64_t cpu_usec = cpus_milli * (timeout_usec / 1000);
    uint64_t seconds = (cpu_usec + 999999) / 1000000;

    if (cpus_milli == 0 || timeout_usec == 0)
        return 0;
    if (seconds == 0)
        seconds = 1; /* RLIMIT_CPU 0 would be taken as 1 s anyway (setrlimit(2)) */
    /* Less than 1 s away from the timeout, on either side: 1 s past it (see result.h). */
    if (seconds * 1000000 + 1000000 > timeout_usec && seconds * 1000000 < timeout_usec + 1000000)
        seconds = (timeout_usec + 1000000 + 999999) / 1000000;
    return seconds;
}

const char *nsbox_limit_to_string(enum nsbox_limit limit)
{
    switch (limit) {
    case NSBOX_LIMIT_NONE:
        return "none";
    case NSBOX_LIMIT_TIMEOUT:
        return "timeout";
    case NSBOX_LIMIT_MEMORY:
        return "memory";
    case NSBOX_LIMIT_PIDS:
        return "pids";
    case NSBOX_LIMIT_CPU:
        return "cpu";
    case NSBOX_LIMIT_OUTPUT:
        return "output";
    }
    return "none";
}

enum nsbox_limit nsbox_result_limit(const struct nsbox_result *r, bool *ret_stopped)
{
    enum nsbox_limit limit = NSBOX_LIMIT_NONE;
    bool stopped = true;

    if (r->status == NSBOX_STATUS_TIMEOUT)
        limit = NSBOX_LIMIT_TIMEOUT;
    else if (r->status == NSBOX_STATUS_OOM)
        limit = NSBOX_LIMIT_MEMORY;
    else if (r->status == NSBOX_STATUS_SIGNALED && r->signal == SIGXCPU &&
             r->cpus.enforced_by == NSBOX_ENFORCER_RLIMIT)
        /* RLIMIT_CPU's soft limit sends SIGXCPU (setrlimit(2)); with a cgroup, nsbox sets no
         * RLIMIT_CPU, and a SIGXCPU is the payload's own business. */
        limit = NSBOX_LIMIT_CPU;
    else if (r->status != NSBOX_STATUS_ERROR) {
        stopped = false;
        if (r->cgroup.valid && r->cgroup.pids_limit_hits > 0 && r->pids_limit.value)
            limit = NSBOX_LIMIT_PIDS;
        else if (r->out.truncated || r->err.truncated)
            limit = NSBOX_LIMIT_OUTPUT;
    }
    if (ret_stopped)
        *ret_stopped = stopped && limit != NSBOX_LIMIT_NONE;
    return limit;
}

/* "256 MiB", "1 GiB", "1000 bytes": sizes as a person reads them. */
static void format_size(char *buf, size_t size, uint64_t bytes)
{
    static const struct {
        uint64_t unit;
        const char *name;
    } units[] = {{1ULL << 30, "GiB"}, {1ULL << 20, "MiB"}, {1ULL << 10, "KiB"}};

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (bytes >= units[i].unit && bytes % units[i].unit == 0) {
            (void)snprintf(buf, size, "%llu %s", (unsigned long long)(bytes / units[i].unit),
                           units[i].name);
            return;
        }
    (void)snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
}

void result_format_size(char *buf, size_t size, uint64_t bytes)
{
    format_size(buf, size, bytes);
}

/* "SIGSEGV (signal 11)", or "signal 70" for a number without a name. */
static void format_signal(char *buf, size_t size, int sig)
{
    const char *abbrev = sigabbrev_np(sig);

    if (abbrev)
        (void)snprintf(buf, size, "SIG%s (signal %d)", abbrev, sig);
    else
        (void)snprintf(buf, size, "signal %d", sig);
}

void nsbox_result_reason(const struct nsbox_result *r, char *buf, size_t size)
{
    char what[64];

    if (size == 0)
        return;
    switch (nsbox_result_limit(r, NULL) == NSBOX_LIMIT_CPU ? -1 : (int)r->status) {
    case -1:
        (void)snprintf(buf, size,
                       "stopped: CPU time limit: the payload used up its %llu s of CPU time "
                       "(--cpus %.3g x --timeout %.3g s, RLIMIT_CPU under rlimits) and was "
                       "killed by SIGXCPU",
                       (unsigned long long)result_rlimit_cpu_seconds(r->cpus.value,
                                                                     r->timeout.value),
                       (double)r->cpus.value / 1000.0, (double)r->timeout.value / 1e6);
        return;
    case NSBOX_STATUS_EXITED:
        (void)snprintf(buf, size, "exited with status %d", r->exit_code);
        return;
    case NSBOX_STATUS_SIGNALED:
        format_signal(what, sizeof(what), r->signal);
        (void)snprintf(buf, size, "killed by %s", what);
        return;
    case NSBOX_STATUS_TIMEOUT:
        (void)snprintf(buf, size, "timed out after %.3g s; the sandbox was killed",
                       (double)r->timeout.value / 1e6);
        return;
    case NSBOX_STATUS_OOM:
        format_size(what, sizeof(what), r->memory.value);
        (void)snprintf(buf, size,
                       "stopped: out of memory (limit %s, after %.3g s); the cgroup's OOM killer "
                       "killed the payload",
                       what, (double)r->wall_time / 1e6);
        return;
    case NSBOX_STATUS_KILLED:
        (void)snprintf(buf, size, "killed on request (nsbox kill)");
        return;
    case NSBOX_STATUS_ERROR:
        (void)snprintf(buf, size, "%s", r->error[0] ? r->error : "nsbox failed");
        return;
    }
    (void)snprintf(buf, size, "ended in an unknown way");
}

/* One note, formatted, handed to the caller's function. */
static void emit(void (*note)(const char *, void *), void *userdata, size_t *count, const char *fmt,
                 ...) _printf_(4, 5);
static void emit(void (*note)(const char *, void *), void *userdata, size_t *count, const char *fmt,
                 ...)
{
    char buf[2048];
    va_list ap;

    va_start(ap, fmt);
    (void)vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    (*count)++;
    if (note)
        note(buf, userdata);
}

/* Whether the captured stderr holds text. Under rlimits the kernel refuses an allocation or a
 * fork quietly (no counter says so, as memory.events and pids.events do for a cgroup), and a
 * tmpfs that filled up and emptied again leaves no trace: the program's own error message is
 * then the only witness, and the notes below quote what it said rather than guess. */
static bool stderr_mentions(const struct nsbox_result *r, const char *text)
{
    return r->err.data && memmem(r->err.data, r->err.captured, text, strlen(text));
}

/* A fork or a thread start refused with EAGAIN, as Python, glibc's pthread users and shells
 * word it (RLIMIT_NPROC and pids.max both answer EAGAIN: fork(2), pthread_create(3)): 2 when
 * the message names process creation, 1 for a bare "Resource temporarily unavailable" (also a
 * non-blocking socket's answer, and all a traceback of `python3 -c` shows of os.fork()), else
 * 0. */
static int stderr_mentions_failed_fork(const struct nsbox_result *r)
{
    static const char *const creators[] = {"fork", "spawn", "Popen", "Thread", "thread"};

    if (stderr_mentions(r, "can't start new thread") || stderr_mentions(r, "Cannot fork"))
        return 2;
    if (!stderr_mentions(r, "Resource temporarily unavailable"))
        return 0;
    for (size_t i = 0; i < sizeof(creators) / sizeof(creators[0]); i++)
        if (stderr_mentions(r, creators[i]))
            return 2;
    return 1;
}

size_t result_notes(const struct nsbox_result *r, void (*note)(const char *, void *),
                    void *userdata, struct result_note_marks *marks)
{
    const struct nsbox_stream *streams[] = {&r->out, &r->err};
    static const char *const names[] = {"stdout", "stderr"};
    size_t count = 0;
    int fork_failed;

    /* A timeout says what ended the run; what to do next depends on the program: both ways. */
    if (r->status == NSBOX_STATUS_TIMEOUT)
        emit(note, userdata, &count,
             "the program ran until its time limit (--timeout %.3g s) and was killed: if it "
             "needs longer, raise --timeout; if it should have ended sooner, look for an endless "
             "loop or a read that waits for input (stdin is empty unless given) or for the "
             "network (none unless allowed)",
             (double)r->timeout.value / 1e6);
    /* RLIMIT_DATA caps private writable mappings, reserved or used (setrlimit(2)): a program
     * denied one it did not check for (the dynamic loader, a thread stack) dies of SIGSEGV
     * instead of raising MemoryError. */
    if (r->status == NSBOX_STATUS_SIGNALED && (r->signal == SIGSEGV || r->signal == SIGBUS) &&
        r->memory.enforced_by == NSBOX_ENFORCER_RLIMIT && !r->shm_full) {
        emit(note, userdata, &count,
             "the payload died of SIG%s; if it ran out of memory: under rlimits, --memory %llum "
             "caps its writable mappings (RLIMIT_DATA), not its use, and a program denied a "
             "mapping may crash instead of failing cleanly",
             sigabbrev_np(r->signal), (unsigned long long)(r->memory.value >> 20));
    }
    if (r->status != NSBOX_STATUS_OOM && r->status != NSBOX_STATUS_ERROR && r->memory.value &&
        stderr_mentions(r, "MemoryError"))
        emit(note, userdata, &count,
             "the program's stderr mentions MemoryError: an allocation was refused within "
             "--memory %llum (%s); raise --memory if the program needs more, or make it use "
             "less",
             (unsigned long long)(r->memory.value >> 20),
             r->memory.enforced_by == NSBOX_ENFORCER_RLIMIT
                 ? "under rlimits, RLIMIT_DATA: each process's writable mappings, reserved or used"
                 : "the cgroup's memory.max");
    if (r->status != NSBOX_STATUS_ERROR && r->rootfs[0] &&
        stderr_mentions(r, "ModuleNotFoundError")) {
        char module[64] = "";
        result_module_not_found(r, module, sizeof(module));
        emit(note, userdata, &count,
             "the program's stderr mentions ModuleNotFoundError%s%s%s: the rootfs %s%s%s%s does "
             "not have it. If it is a module of your own, put its file beside the code in the "
             "working directory (--copy-in, files= in Python). The science profile has numpy, "
             "pandas, matplotlib, seaborn, scipy, "
             "scikit-learn, openpyxl and requests: `nsbox rootfs build --profile science DIR`; "
             "any Debian package: `nsbox rootfs build --packages python3-NAME DIR` (with "
             "--profile to start from); then --rootfs DIR",
             module[0] ? " (" : "", module, module[0] ? ")" : "", r->rootfs,
             r->rootfs_profile[0] ? " (profile " : "", r->rootfs_profile,
             r->rootfs_profile[0] ? ")" : "");
        if (marks)
            marks->module_not_found = count;
    }
    if (r->cgroup.valid && r->cgroup.pids_limit_hits > 0 && r->pids_limit.value)
        emit(note, userdata, &count, "the process limit (--pids-limit %llu) refused %llu forks",
             (unsigned long long)r->pids_limit.value,
             (unsigned long long)r->cgroup.pids_limit_hits);
    else if (r->status != NSBOX_STATUS_ERROR && r->pids_limit.value &&
             r->pids_limit.enforced_by == NSBOX_ENFORCER_RLIMIT &&
             (fork_failed = stderr_mentions_failed_fork(r)) > 0)
        emit(note, userdata, &count,
             "the program's stderr mentions %s: under rlimits, --pids-limit %llu is "
             "RLIMIT_NPROC, the processes and threads of the sandbox's user together; raise "
             "--pids-limit if the program needs more",
             fork_failed == 2 ? "a fork or thread start that failed with EAGAIN (Resource "
                                "temporarily unavailable)"
                              : "EAGAIN (Resource temporarily unavailable); if a fork or a "
                                "thread start failed with it",
             (unsigned long long)r->pids_limit.value);
    if (r->status != NSBOX_STATUS_ERROR && r->writable_binds && r->host_uid != 0 &&
        stderr_mentions(r, "Permission denied"))
        emit(note, userdata, &count,
             "the program's stderr mentions EACCES (Permission denied); if it was writing "
             "through a -v SRC:DST:rw bind: the sandbox writes there as host uid %u, gid %u%s, "
             "so the directory must be writable by them (--host-user UID[:GID] chooses other "
             "ids, never 0)",
             (unsigned)r->host_uid, (unsigned)r->host_gid,
             r->host_uid >= UIDPOOL_BASE ? " (root's runs get ids of their own)" : "");
    if (r->status != NSBOX_STATUS_ERROR && !r->work_full && !r->shm_full &&
        stderr_mentions(r, "No space left on device"))
        emit(note, userdata, &count,
             "the program's stderr mentions ENOSPC (No space left on device): the sandbox's "
             "writable places are memory file systems of a fixed size: /tmp (--tmpfs "
             "/tmp:size=...), /work (--workdir-size), /dev/shm (--shm-size), and each --tmpfs; "
             "raise the size of the one it wrote to");
    if (r->n_refused > 0) {
        char list[1536] = "";
        size_t n = 0;
        for (size_t i = 0; i < r->n_refused && n < sizeof(list); i++) {
            int k = snprintf(list + n, sizeof(list) - n, "%s%s (%llu)", i ? ", " : "",
                             r->refused[i].name, (unsigned long long)r->refused[i].count);
            n += k > 0 ? (size_t)k : 0;
        }
        emit(note, userdata, &count, "the seccomp policy refused: %s%s", list,
             r->refused_other ? ", and others" : "");
        for (size_t i = 0; i < r->n_refused; i++)
            if (strcmp(r->refused[i].name, "shmget") == 0 &&
                r->memory.enforced_by == NSBOX_ENFORCER_RLIMIT)
                emit(note, userdata, &count,
                     "System V shared memory (shmget) is refused in this run: without a cgroup "
                     "nothing would hold it within --memory (only the host's root can set "
                     "kernel.shmall in the sandbox's IPC namespace); POSIX shared memory works, "
                     "in /dev/shm (shm_open, multiprocessing.shared_memory), within --shm-size");
            else if ((strcmp(r->refused[i].name, "semget") == 0 ||
                      strcmp(r->refused[i].name, "msgget") == 0) &&
                     r->memory.enforced_by == NSBOX_ENFORCER_RLIMIT)
                emit(note, userdata, &count,
                     "System V %s (%s) are refused in this run: without a cgroup nothing would "
                     "hold their kernel memory within --memory; POSIX ones work (%s)",
                     r->refused[i].name[0] == 's' ? "semaphores" : "message queues",
                     r->refused[i].name,
                     r->refused[i].name[0] == 's'
                         ? "sem_open, multiprocessing's locks"
                         : "mq_open, within RLIMIT_MSGQUEUE; or a pipe or a socket");
    }
    if (r->network.enabled && r->network.connections_refused > 0) {
        /* What the proxy of --network allow= refused, so that a caller sees it without the
         * JSON: the payload's own error may hide it. */
        char list[1536] = "";
        size_t n = 0, shown = 0;
        for (size_t i = 0; i < r->network.n_connections && n < sizeof(list); i++) {
            const struct nsbox_network_connection *e = &r->network.connections[i];
            int k;
            if (e->allowed || shown == 8)
                continue;
            k = e->host[0]
                    ? snprintf(list + n, sizeof(list) - n, "%s%s:%u (%s)", shown ? ", " : "",
                               e->host, (unsigned)e->port, e->reason)
                    : snprintf(list + n, sizeof(list) - n, "%s%s", shown ? ", " : "", e->reason);
            n += k > 0 ? (size_t)k : 0;
            shown++;
        }
        emit(note, userdata, &count,
             "the network proxy (--network allow) refused %llu connection%s: %s%s",
             (unsigned long long)r->network.connections_refused,
             r->network.connections_refused == 1 ? "" : "s", list,
             r->network.connections_refused > shown ? ", and more" : "");
    }
    if (r->network.enabled && (r->network.connections_throttled || r->network.lookups_throttled))
        emit(note, userdata, &count,
             "the network proxy paced the program (its work is outside the sandbox's limits): "
             "%llu connections waited for their turn (%d at once, then %llu a second) and %llu "
             "new names for their lookup (%d at once, then %llu a second); reusing connections "
             "(keep-alive, one CONNECT tunnel) and names avoids the wait",
             (unsigned long long)r->network.connections_throttled, PROXY_CONN_BURST,
             1000000ULL / PROXY_CONN_INTERVAL_USEC,
             (unsigned long long)r->network.lookups_throttled, PROXY_LOOKUP_BURST,
             1000000ULL / PROXY_LOOKUP_INTERVAL_USEC);
    if (r->network.enabled && r->network.lookups_refused_budget)
        emit(note, userdata, &count,
             "the network proxy refused %llu connection%s to names it had not looked up yet: a "
             "run may look up %d names; names looked up already, --add-host NAME:ADDRESS and "
             "address patterns still work",
             (unsigned long long)r->network.lookups_refused_budget,
             r->network.lookups_refused_budget == 1 ? "" : "s", PROXY_LOOKUP_BUDGET);
    if (r->network.enabled && r->network.bytes_limit_hit)
        emit(note, userdata, &count,
             "the network proxy cut the connections at --network-max-bytes (%llu bytes relayed)",
             (unsigned long long)(r->network.bytes_sent + r->network.bytes_received));
    outputs_notes(r, note, userdata, &count);
    if (r->refused_throttled)
        emit(note, userdata, &count,
             "the program made refused system calls faster than nsbox "
             "answers them (1000 a second after the first 1000), so those calls waited for their "
             "EPERM (a loop on a refused call runs at that pace)");
    if (r->refused_inet_socket) {
        emit(note, userdata, &count,
             "an internet socket (AF_INET/AF_INET6) was refused: the sandbox has no network "
             "(--network none, the default); --network allow=HOST[:PORT],... reaches the hosts "
             "named through nsbox's HTTP(S) proxy (the proxy variables are set for it), and "
             "--network loopback gives it a loopback interface (127.0.0.1, ::1) for servers "
             "and clients of its own, and nothing beyond");
        if (marks)
            marks->inet_socket = count;
    }
    if (r->refused_setid_mode)
        emit(note, userdata, &count,
             "a set-user-ID or set-group-ID bit was refused (EPERM from chmod, or from mkdir, "
             "open or mknod with S_ISUID/S_ISGID in the mode): nsbox never lets a sandbox make "
             "set-ID files or directories, which keep the bit on the host through a writable "
             "bind; use a mode without them (0o755, not 0o4755 or 0o2775): every other "
             "permission bit and the sticky bit work");
    if (r->refused_core_limit)
        emit(note, userdata, &count,
             "setting RLIMIT_CORE was refused (EPERM; Python's resource.setrlimit raises "
             "ValueError): nsbox holds it at 1 byte, which already turns core dumps off (at 0 "
             "the kernel would still hand a crash to the host's core_pattern helper); leave "
             "RLIMIT_CORE as it is, no core file is ever written; every other limit can be set");
    if (r->refused_tty_ldisc)
        emit(note, userdata, &count,
             "changing a terminal's line discipline (ioctl TIOCSETD) was refused (EPERM): "
             "asking for one the kernel lacks loads a kernel module on the host; terminals in "
             "the sandbox keep N_TTY, the ordinary one, which needs no TIOCSETD");
    if (r->refused_inotify)
        emit(note, userdata, &count,
             "inotify was refused (ENOSYS from inotify_init1): a watch would also see what "
             "processes outside the sandbox do to the files it shares with them; poll for "
             "changes instead (os.stat in a loop, or watchdog's PollingObserver)");
    if (r->status != NSBOX_STATUS_ERROR && stderr_mentions(r, "memfd_create") &&
        stderr_mentions(r, "Permission denied"))
        emit(note, userdata, &count,
             "the program's stderr mentions memfd_create and EACCES (Permission denied): a memfd "
             "here must be one that can never be executed, asked for with MFD_NOEXEC_SEAL "
             "(os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_NOEXEC_SEAL)); MFD_EXEC and "
             "MFD_HUGETLB are refused");
    if (r->landlock_missing && r->status != NSBOX_STATUS_ERROR)
        emit(note, userdata, &count,
             "Landlock was not applied: %s; the files and network the sandbox reaches rest on "
             "its mount and network namespaces alone (--landlock required refuses to run "
             "without it)",
             r->landlock_missing == EPROTO   ? "this kernel has Landlock ABI 1 only (Linux "
                                               "5.13-5.18), whose rules would refuse every rename "
                                               "across directories"
             : r->landlock_missing == ENOSYS ? "this kernel has no Landlock (Linux 5.19 or later "
                                               "with CONFIG_SECURITY_LANDLOCK)"
             : r->landlock_missing == EOPNOTSUPP
                 ? "Landlock is built into this kernel but not enabled ('landlock' in the lsm= "
                   "boot parameter)"
                 : "its system calls were refused (EPERM), as a container's seccomp profile "
                   "may do");
    /* Tier 3 (tier3.h): what the program was given, so that a PermissionError reads as the
     * wall it is, not as a bug to work around. */
    if (r->isolation_tier == 3 && r->status != NSBOX_STATUS_ERROR)
        emit(note, userdata, &count,
             "this ran at isolation tier 3 (--isolation landlock, where no user namespace can be "
             "made): the host's own python3 and packages, no network, and only its working "
             "directory (its cwd, HOME and TMPDIR, deleted after the run) is writable; every "
             "other file outside /usr, /lib* and a few of /etc is refused (PermissionError) "
             "by design");
    for (size_t i = 0; i < 2; i++)
        if (streams[i]->file_asked && streams[i]->file_error)
            emit(note, userdata, &count,
                 "the %s file (--%s-file) holds only the first %llu of %llu bytes: writing it "
                 "failed with %s",
                 names[i], names[i], (unsigned long long)streams[i]->file_bytes,
                 (unsigned long long)streams[i]->total, strerror(streams[i]->file_error));
    for (size_t i = 0; i < 2; i++) {
        const struct nsbox_stream *st = streams[i];
        size_t head = result_stream_head(st);

        if (!st->truncated)
            continue;
        if (st->captured > head)
            emit(note, userdata, &count,
                 "%s cut: kept its first %zu and last %zu of %llu bytes; %llu bytes (%llu lines) "
                 "between them were cut (--output-limit)",
                 names[i], head, st->captured - head, (unsigned long long)st->total,
                 (unsigned long long)(st->total - st->captured), (unsigned long long)st->cut_lines);
        else
            emit(note, userdata, &count,
                 "%s cut: kept its first %zu of %llu bytes; %llu bytes (%llu lines) after them "
                 "were cut (--output-limit)",
                 names[i], head, (unsigned long long)st->total,
                 (unsigned long long)(st->total - st->captured), (unsigned long long)st->cut_lines);
    }
    return count;
}

size_t nsbox_result_notes(const struct nsbox_result *r,
                          void (*note)(const char *sentence, void *userdata), void *userdata)
{
    return result_notes(r, note, userdata, NULL);
}

/* Landlock as applied: {"abi": N, "restricts": ["fs", "net", "scope"]}, or null where it was
 * not (off, missing: the notes say why; a run that failed in its setup). */
static json_t *result_landlock_json(const struct nsbox_result *r)
{
    static const struct {
        unsigned bit;
        const char *name;
    } parts[] = {{NSBOX_LANDLOCK_FS, "fs"},
                 {NSBOX_LANDLOCK_NET, "net"},
                 {NSBOX_LANDLOCK_SCOPE, "scope"}};
    json_t *list;

    if (r->landlock_abi == 0 || r->status == NSBOX_STATUS_ERROR)
        return json_null();
    list = json_array();
    for (size_t i = 0; list && i < ELEMENTSOF(parts); i++)
        if (r->landlock_restricts & parts[i].bit)
            (void)json_array_append_new(list, json_string(parts[i].name));
    return json_pack("{s:i, s:o}", "abi", r->landlock_abi, "restricts", list ? list : json_array());
}

/* The proxy of --network allow=: each connection (NSBOX_NETWORK_MAX at most), the allowed
 * connections' bytes by host and port, the totals, the limits hit; null without it. */
static json_t *network_json(const struct nsbox_network_report *n)
{
    json_t *list, *hosts, *root;

    if (!n->enabled)
        return json_null();
    list = json_array();
    for (size_t i = 0; list && i < n->n_connections; i++) {
        const struct nsbox_network_connection *e = &n->connections[i];
        (void)json_array_append_new(list,
                                    json_pack("{s:o, s:o, s:b, s:o, s:I, s:I}", "host",
                                              e->host[0] ? json_text(e->host, strlen(e->host))
                                                         : json_null(),
                                              "port", e->port ? json_integer(e->port) : json_null(),
                                              "allowed", e->allowed, "reason",
                                              e->reason[0] ? json_text(e->reason, strlen(e->reason))
                                                           : json_null(),
                                              "bytes_sent", (json_int_t)e->bytes_sent,
                                              "bytes_received", (json_int_t)e->bytes_received));
    }
    hosts = json_array();
    for (size_t i = 0; hosts && i < n->n_hosts; i++) {
        const struct nsbox_network_host *e = &n->hosts[i];
        (void)json_array_append_new(hosts,
                                    json_pack("{s:o, s:o, s:I, s:I, s:I}", "host",
                                              e->host[0] ? json_text(e->host, strlen(e->host))
                                                         : json_null(),
                                              "port", e->port ? json_integer(e->port) : json_null(),
                                              "connections", (json_int_t)e->connections,
                                              "bytes_sent", (json_int_t)e->bytes_sent,
                                              "bytes_received", (json_int_t)e->bytes_received));
    }
    root = json_pack("{s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:b, s:b, s:I, s:I, s:I, s:I}",
                     "connections", list ? list : json_null(), "hosts", hosts ? hosts : json_null(),
                     "connections_total", (json_int_t)n->connections_total, "connections_refused",
                     (json_int_t)n->connections_refused, "connections_omitted",
                     (json_int_t)n->connections_omitted, "bytes_sent", (json_int_t)n->bytes_sent,
                     "bytes_received", (json_int_t)n->bytes_received, "bytes_limit_hit",
                     n->bytes_limit_hit, "connections_limit_hit", n->connections_limit_hit,
                     "connections_throttled", (json_int_t)n->connections_throttled, "lookups",
                     (json_int_t)n->lookups, "lookups_throttled", (json_int_t)n->lookups_throttled,
                     "lookups_refused_budget", (json_int_t)n->lookups_refused_budget);
    return root ? root : json_null();
}

static void note_to_json(const char *sentence, void *userdata)
{
    (void)json_array_append_new((json_t *)userdata, json_text(sentence, strlen(sentence)));
}

/* The '\n'-separated lines of text as a JSON array of strings (json_text()), or null when out
 * of memory. */
static json_t *lines_json(const char *text)
{
    json_t *list = json_array();

    for (const char *w = text; list && *w;) {
        size_t n = strcspn(w, "\n");
        (void)json_array_append_new(list, json_text(w, n));
        w += n + (w[n] == '\n');
    }
    return list ? list : json_null();
}

const char *result_skip_kind_name(enum nsbox_skip_kind kind)
{
    static const char *const names[] = {
        [NSBOX_SKIP_NOT_COPIED] = "not_copied",
        [NSBOX_SKIP_OVER_CAP] = "over_cap",
        [NSBOX_SKIP_UNREADABLE] = "unreadable",
    };
    return (size_t)kind < ELEMENTSOF(names) ? names[kind] : names[NSBOX_SKIP_UNREADABLE];
}

/* What was copied out, and what not and why; null when nothing was to be copied. Names are
 * the sandbox's: shown through json_text(), like the output. */
json_t *result_copy_out_json(const struct nsbox_result *r)
{
    json_t *copied, *skipped;

    if (!r->copy_out_asked)
        return json_null();
    copied = json_array();
    skipped = json_array();
    for (size_t i = 0; i < r->n_copied; i++) {
        const struct nsbox_copied_file *f = &r->copied[i];
        (void)json_array_append_new(copied,
                                    json_pack("{s:o, s:o, s:I, s:s}", "path",
                                              json_text(f->path, strlen(f->path)), "host_path",
                                              f->host_path
                                                  ? json_text(f->host_path, strlen(f->host_path))
                                                  : json_null(),
                                              "size", (json_int_t)f->size, "sha256", f->sha256));
    }
    for (size_t i = 0; i < r->n_skipped; i++)
        (void)json_array_append_new(skipped,
                                    json_pack("{s:o, s:o, s:s}", "path",
                                              json_text(r->skipped[i].path,
                                                        strlen(r->skipped[i].path)),
                                              "reason",
                                              json_text(r->skipped[i].reason,
                                                        strlen(r->skipped[i].reason)),
                                              "kind", result_skip_kind_name(r->skipped[i].kind)));
    return json_pack("{s:b, s:b, s:o, s:o, s:I}", "done", r->copy_out_done, "complete",
                     r->copy_out_complete, "copied", copied, "skipped", skipped, "skipped_unlisted",
                     (json_int_t)r->skipped_more);
}

/* The "limit" object of the JSON result: which limit ended the run (or was run into), or null. */
static json_t *limit_json(const struct nsbox_result *r)
{
    bool stopped = false;
    enum nsbox_limit limit = nsbox_result_limit(r, &stopped);
    json_t *value = NULL;
    const char *unit = NULL, *by = "supervisor";

    switch (limit) {
    case NSBOX_LIMIT_NONE:
        return json_null();
    case NSBOX_LIMIT_TIMEOUT:
        value = json_real((double)r->timeout.value / 1e6);
        unit = "seconds";
        break;
    case NSBOX_LIMIT_MEMORY:
        value = json_integer((json_int_t)r->memory.value);
        unit = "bytes";
        by = nsbox_enforcer_to_string(r->memory.enforced_by);
        break;
    case NSBOX_LIMIT_PIDS:
        value = json_integer((json_int_t)r->pids_limit.value);
        unit = "processes";
        by = nsbox_enforcer_to_string(r->pids_limit.enforced_by);
        break;
    case NSBOX_LIMIT_CPU:
        value = json_integer(
            (json_int_t)result_rlimit_cpu_seconds(r->cpus.value, r->timeout.value));
        unit = "cpu_seconds";
        by = nsbox_enforcer_to_string(r->cpus.enforced_by);
        break;
    case NSBOX_LIMIT_OUTPUT:
        value = json_integer((json_int_t)r->output_limit);
        unit = "bytes";
        break;
    }
    return json_pack("{s:s, s:o, s:s, s:s, s:b}", "name", nsbox_limit_to_string(limit), "value",
                     value, "unit", unit, "enforced_by", by, "stopped", stopped);
}

json_t *json_text(const char *s, size_t n)
{
    size_t len = 0;
    char *clean = utf8_sanitize(s, n, &len);
    json_t *j;

    if (!clean)
        return NULL;
    j = json_stringn_nocheck(clean, len);
    free(clean);
    return j;
}

static json_t *limit_object(const char *key, json_t *value, enum nsbox_enforcer e)
{
    if (e == NSBOX_ENFORCER_NONE) {
        json_decref(value);
        value = json_null();
    }
    return json_pack("{s:o, s:s}", key, value, "enforced_by", nsbox_enforcer_to_string(e));
}

char *nsbox_result_to_json(const struct nsbox_result *r)
{
    json_t *root = result_to_json_object(r);
    char *text;

    if (!root)
        return NULL;
    text = json_dump_exact(root, JSON_COMPACT | JSON_REAL_PRECISION(6));
    json_decref(root);
    return text;
}

json_t *result_to_json_object(const struct nsbox_result *r)
{
    json_t *root, *limits, *error = NULL;
    json_t *out_text = result_stream_text(&r->out), *err_text = result_stream_text(&r->err);
    enum nsbox_enforcer overall = NSBOX_ENFORCER_NONE;

    if (!out_text || !err_text) {
        json_decref(out_text);
        json_decref(err_text);
        return NULL;
    }
    if (r->status == NSBOX_STATUS_ERROR)
        error = json_pack("{s:s, s:i, s:s}", "step", r->error_step, "errno", r->error_errno,
                          "message", r->error);

    /* "cgroup" only when every limit that is set is a cgroup's; else the weakest mechanism. */
    const struct nsbox_limit_report *all[] = {&r->memory, &r->pids_limit, &r->cpus};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        if (all[i]->enforced_by != NSBOX_ENFORCER_NONE &&
            (overall == NSBOX_ENFORCER_NONE || all[i]->enforced_by == NSBOX_ENFORCER_RLIMIT))
            overall = all[i]->enforced_by;

    limits = json_pack("{s:o, s:o, s:o, s:{s:o, s:s}, s:{s:I, s:s}}", "memory",
                       limit_object("bytes", json_integer((json_int_t)r->memory.value),
                                    r->memory.enforced_by),
                       "pids",
                       limit_object("max", json_integer((json_int_t)r->pids_limit.value),
                                    r->pids_limit.enforced_by),
                       "cpus",
                       limit_object("cpus", json_real((double)r->cpus.value / 1000.0),
                                    r->cpus.enforced_by),
                       "timeout", "seconds",
                       r->timeout.value ? json_real((double)r->timeout.value / 1e6) : json_null(),
                       "enforced_by", r->timeout.value ? "supervisor" : "none", "output", "bytes",
                       (json_int_t)r->output_limit, "enforced_by", "supervisor");
    /* The size of /work: the tmpfs itself refuses writes past it (ENOSPC). */
    if (limits)
        (void)json_object_set_new(limits, "workdir",
                                  json_pack("{s:o, s:s}", "bytes",
                                            r->workdir_size
                                                ? json_integer((json_int_t)r->workdir_size)
                                                : json_null(),
                                            "enforced_by", r->workdir_size ? "tmpfs" : "none"));

    root = json_pack("{s:s, s:i, s:o, s:f, s:o, s:o, s:I, s:I, s:b, s:b, s:o, s:o, s:s, s:s?}",
                     "status", nsbox_status_to_string(r->status), "exit_code", nsbox_exit_status(r),
                     "signal",
                     r->status == NSBOX_STATUS_SIGNALED || r->status == NSBOX_STATUS_OOM ||
                             r->status == NSBOX_STATUS_KILLED
                         ? json_integer(r->status == NSBOX_STATUS_SIGNALED ? r->signal : 9)
                         : json_null(),
                     "wall_time_ms", (double)r->wall_time / 1000.0, "stdout", out_text, "stderr",
                     err_text, "stdout_bytes", (json_int_t)r->out.total, "stderr_bytes",
                     (json_int_t)r->err.total, "stdout_truncated", r->out.truncated,
                     "stderr_truncated", r->err.truncated, "error", error ? error : json_null(),
                     "limits", limits, "limits_enforced_by", nsbox_enforcer_to_string(overall),
                     "limits_note", r->limits_note[0] ? r->limits_note : NULL);
    if (!root)
        return NULL;
    outputs_json(r, root);
    if (r->interpreter != NSBOX_INTERPRETER_NONE) {
        /* A code step of a started sandbox: the interpreter it ran in. */
        static const char *const words[] = {[NSBOX_INTERPRETER_STARTED] = "started",
                                            [NSBOX_INTERPRETER_KEPT] = "kept",
                                            [NSBOX_INTERPRETER_RESTARTED] = "restarted",
                                            [NSBOX_INTERPRETER_CRASHED] = "crashed"};
        if ((size_t)r->interpreter < ELEMENTSOF(words))
            (void)json_object_set_new(root, "interpreter", json_string(words[r->interpreter]));
    }
    (void)json_object_set_new(root, "stdout_incomplete", json_boolean(r->out.incomplete));
    result_output_json(r, root);
    (void)json_object_set_new(root, "stderr_incomplete", json_boolean(r->err.incomplete));
    {
        /* How the run ended, in the words `nsbox run` prints on stderr (one source). */
        char reason[sizeof(r->error) + 64];
        json_t *notes = json_array();
        struct result_note_marks marks = {0};

        nsbox_result_reason(r, reason, sizeof(reason));
        (void)json_object_set_new(root, "reason", json_text(reason, strlen(reason)));
        (void)json_object_set_new(root, "limit", limit_json(r));
        if (notes)
            (void)result_notes(r, note_to_json, notes, &marks);
        (void)json_object_set_new(root, "notes", notes ? notes : json_null());
        (void)json_object_set_new(root, "note_kinds",
                                  result_note_kinds_json(&marks, json_array_size(notes)));
    }
    /* Every warning, the opt-outs among them: a result says what protection it ran without;
     * and those of them that explain the outcome, which a model is shown. */
    (void)json_object_set_new(root, "warnings", lines_json(r->warnings));
    (void)json_object_set_new(root, "outcome_warnings", lines_json(r->outcome_warnings));
    if (r->seccomp_reporting) {
        json_t *list = json_array();
        for (size_t i = 0; list && i < r->n_refused; i++)
            (void)json_array_append_new(list, json_pack("{s:s, s:I}", "syscall", r->refused[i].name,
                                                        "count", (json_int_t)r->refused[i].count));
        if (list && r->refused_other)
            (void)json_array_append_new(list, json_pack("{s:s, s:I}", "syscall", "(others)",
                                                        "count", (json_int_t)r->refused_other));
        (void)json_object_set_new(root, "seccomp_refused", list ? list : json_null());
    } else
        (void)json_object_set_new(root, "seccomp_refused", json_null());
    {
        /* Who the run is: its --name and --labels (a later KEY wins). */
        json_t *labels = json_object();
        for (char **l = r->labels; labels && l && *l; l++) {
            size_t key_len = strcspn(*l, "=");
            char key[256];
            (void)snprintf(key, sizeof(key), "%.*s", (int)key_len, *l);
            (void)json_object_set_new(labels, key,
                                      json_text((*l)[key_len] ? *l + key_len + 1 : "",
                                                (*l)[key_len] ? strlen(*l + key_len + 1) : 0));
        }
        (void)json_object_set_new(root, "name", r->name[0] ? json_string(r->name) : json_null());
        (void)json_object_set_new(root, "labels", labels ? labels : json_null());
    }
    (void)json_object_set_new(root, "network", network_json(&r->network));
    (void)json_object_set_new(root, "landlock", result_landlock_json(r));
    (void)json_object_set_new(root, "isolation", isolation_json(r));
    (void)json_object_set_new(root, "host_uid",
                              r->host_uid ? json_integer((json_int_t)r->host_uid) : json_null());
    (void)json_object_set_new(root, "host_gid",
                              r->host_uid ? json_integer((json_int_t)r->host_gid) : json_null());
    if (r->cgroup.valid)
        (void)json_object_set_new(root, "cgroup",
                                  json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "path",
                                            r->cgroup.path, "memory_peak",
                                            (json_int_t)r->cgroup.memory_peak, "oom_kills",
                                            (json_int_t)r->cgroup.oom_kills, "pids_limit_hits",
                                            (json_int_t)r->cgroup.pids_limit_hits, "cpu_user_usec",
                                            (json_int_t)r->cgroup.cpu_user, "cpu_system_usec",
                                            (json_int_t)r->cgroup.cpu_system));
    else
        (void)json_object_set_new(root, "cgroup", json_null());
    (void)json_object_set_new(root, "workdir",
                              r->work_used || r->work_free
                                  ? json_pack("{s:I, s:I, s:b}", "used", (json_int_t)r->work_used,
                                              "free", (json_int_t)r->work_free, "full",
                                              r->work_full)
                                  : json_null());
    (void)json_object_set_new(root, "copy_out", result_copy_out_json(r));
    (void)json_object_set_new(root, "workspace",
                              r->workspace[0] ? json_pack("{s:s, s:b}", "name", r->workspace,
                                                          "saved", r->workspace_saved)
                                              : json_null());
    return root;
}
