/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * A transient, delegated scope from the user's systemd manager (scope.h). Only cgroup.c calls
 * it, and only after nsbox's own cgroup turned out unable to hold a leaf: the common path
 * never opens a bus connection.
 */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <systemd/sd-bus.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "scope.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define SYSTEMD_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_MANAGER "org.freedesktop.systemd1.Manager"

/* libsystemd is loaded with dlopen() on this path only: linked at build time it and what it
 * pulls in (libgcrypt, liblzma, libzstd, liblz4, libcap) cost every nsbox start ~0.6 ms in the
 * dynamic loader (hyperfine, `nsbox --version`: 0.9 ms without, 1.5 ms with), for a path most
 * runs never take. The prototypes still come from <systemd/sd-bus.h>, so each pointer is
 * type-checked against the header. The library stays loaded: it keeps thread-local state and
 * is not made to be unloaded. */
static struct {
    __typeof__(sd_bus_open_user) *open_user;
    __typeof__(sd_bus_close_unref) *close_unref;
    __typeof__(sd_bus_is_ready) *is_ready;
    __typeof__(sd_bus_match_signal_async) *match_signal_async;
    __typeof__(sd_bus_slot_unref) *slot_unref;
    __typeof__(sd_bus_message_new_method_call) *message_new_method_call;
    __typeof__(sd_bus_message_append) *message_append;
    __typeof__(sd_bus_message_read) *message_read;
    __typeof__(sd_bus_message_unref) *message_unref;
    __typeof__(sd_bus_send) *send;
    __typeof__(sd_bus_call) *call;
    __typeof__(sd_bus_process) *process;
    __typeof__(sd_bus_wait) *wait;
    __typeof__(sd_bus_error_free) *error_free;
} sym;

static int load_libsystemd(char *reason, size_t size);

struct job_wait {
    const char *unit; /* our scope's name: unique, so it names our job too */
    bool removed;
    char result[32];
};

static int load_libsystemd(char *reason, size_t size)
{
    static const struct {
        const char *name;
        size_t offset;
    } table[] = {
#define SYM(field, name) {#name, offsetof(__typeof__(sym), field)}
        SYM(open_user, sd_bus_open_user),
        SYM(close_unref, sd_bus_close_unref),
        SYM(is_ready, sd_bus_is_ready),
        SYM(match_signal_async, sd_bus_match_signal_async),
        SYM(slot_unref, sd_bus_slot_unref),
        SYM(message_new_method_call, sd_bus_message_new_method_call),
        SYM(message_append, sd_bus_message_append),
        SYM(message_read, sd_bus_message_read),
        SYM(message_unref, sd_bus_message_unref),
        SYM(send, sd_bus_send),
        SYM(call, sd_bus_call),
        SYM(process, sd_bus_process),
        SYM(wait, sd_bus_wait),
        SYM(error_free, sd_bus_error_free),
#undef SYM
    };
    void *lib;

    if (sym.open_user)
        return 0;
    /* The soname, not "libsystemd.so": that symlink comes only with libsystemd-dev. */
    lib = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return reasonf(reason, size, -EOPNOTSUPP, "cannot load libsystemd.so.0: %s", dlerror());
    for (size_t i = 0; i < ELEMENTSOF(table); i++) {
        void *f = dlsym(lib, table[i].name);
        if (!f) {
            sym = (__typeof__(sym)){0};
            return reasonf(reason, size, -EOPNOTSUPP, "libsystemd.so.0 lacks %s", table[i].name);
        }
        memcpy((char *)&sym + table[i].offset, &f, sizeof(f));
    }
    return 0;
}

static void bus_closep(sd_bus **bus)
{
    if (*bus)
        (void)sym.close_unref(*bus);
}

static void message_unrefp(sd_bus_message **m)
{
    if (*m)
        (void)sym.message_unref(*m);
}

static void slot_unrefp(sd_bus_slot **slot)
{
    if (*slot)
        (void)sym.slot_unref(*slot);
}

static void error_freep(sd_bus_error *e)
{
    if (sym.error_free)
        sym.error_free(e);
}

/* Where sd_bus_open_user() looked, for the reason when it fails (sd_bus_open_user(3): the
 * address in $DBUS_SESSION_BUS_ADDRESS, else the socket $XDG_RUNTIME_DIR/bus). */
static void user_bus_where(char *buf, size_t size)
{
    const char *addr = getenv("DBUS_SESSION_BUS_ADDRESS");
    const char *run = getenv("XDG_RUNTIME_DIR");

    if (addr && *addr)
        (void)snprintf(buf, size, "$DBUS_SESSION_BUS_ADDRESS=%.80s", addr);
    else if (run && *run)
        (void)snprintf(buf, size, "%.80s/bus", run);
    else
        (void)snprintf(buf, size, "$XDG_RUNTIME_DIR is not set");
}

/* JobRemoved(u id, o job, s unit, s result): org.freedesktop.systemd1(5). A signal that does
 * not parse or is about another unit is ignored; it is never an error of ours. */
static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret_error)
{
    struct job_wait *w = userdata;
    uint32_t id = 0;
    const char *job = NULL, *unit = NULL, *result = NULL;

    if (sym.message_read(m, "uoss", &id, &job, &unit, &result) < 0)
        return 0;
    if (strcmp(unit, w->unit) == 0) {
        w->removed = true;
        (void)snprintf(w->result, sizeof(w->result), "%s", result);
    }
    return 0;
}

/* Connect to the user bus and wait until it is ready (authenticated, Hello() answered), by
 * deadline (now_usec()). where[where_size] receives where it looked, for messages. */
static int open_user_bus(sd_bus **ret, uint64_t deadline, char *where, size_t where_size,
                         char *reason, size_t size)
{
    _cleanup_(bus_closep) sd_bus *bus = NULL;
    uint64_t t;
    int r;

    r = load_libsystemd(reason, size);
    if (r < 0)
        return r;
    /* Connecting to a unix socket does not block (sd-bus uses SOCK_NONBLOCK). */
    user_bus_where(where, where_size);
    r = sym.open_user(&bus);
    if (r < 0)
        return reasonf(reason, size, r, "no user bus (%s): %s", where, strerror(-r));
    /* The authentication and Hello() are driven here, against our deadline: left to the first
     * sd_bus_call(), they would wait with sd-bus's own authentication timeout (tens of seconds)
     * on a bus that accepts connections and never answers. */
    while ((r = sym.is_ready(bus)) == 0) {
        t = now_usec();
        if (t >= deadline)
            return reasonf(reason, size, -ETIMEDOUT,
                           "the user bus (%s) did not answer within %llu s", where,
                           SCOPE_TIMEOUT_USEC / 1000000);
        r = sym.process(bus, NULL);
        if (r == 0)
            r = sym.wait(bus, deadline - t);
        if (r < 0 && r != -EINTR)
            break;
    }
    if (r < 0)
        return reasonf(reason, size, r, "connecting to the user bus (%s) failed: %s", where,
                       strerror(-r));
    *ret = TAKE_PTR(bus);
    return 0;
}

int scope_manager_reachable(char *reason, size_t size)
{
    _cleanup_(bus_closep) sd_bus *bus = NULL;
    _cleanup_(message_unrefp) sd_bus_message *m = NULL;
    _cleanup_(message_unrefp) sd_bus_message *reply = NULL;
    _cleanup_(error_freep) sd_bus_error error = SD_BUS_ERROR_NULL;
    uint64_t deadline = now_usec() + SCOPE_TIMEOUT_USEC, t;
    char where[128];
    int r;

    r = open_user_bus(&bus, deadline, where, sizeof(where), reason, size);
    if (r < 0)
        return r;
    r = sym.message_new_method_call(bus, &m, "org.freedesktop.DBus", "/org/freedesktop/DBus",
                                    "org.freedesktop.DBus", "GetNameOwner");
    if (r >= 0)
        r = sym.message_append(m, "s", SYSTEMD_DEST);
    if (r < 0)
        return reasonf(reason, size, r, "building the GetNameOwner() call failed: %s",
                       strerror(-r));
    t = now_usec();
    r = sym.call(bus, m, deadline > t ? deadline - t : 1, &error, &reply);
    if (r < 0)
        return reasonf(reason, size, r, "no systemd user manager on the user bus (%s): %s", where,
                       error.message ? error.message : strerror(-r));
    return 0;
}

int scope_start_delegated(char *unit, size_t unit_size, char *reason, size_t size)
{
    _cleanup_(bus_closep) sd_bus *bus = NULL;
    _cleanup_(message_unrefp) sd_bus_message *m = NULL;
    _cleanup_(message_unrefp) sd_bus_message *reply = NULL;
    _cleanup_(slot_unrefp) sd_bus_slot *slot = NULL;
    _cleanup_(error_freep) sd_bus_error error = SD_BUS_ERROR_NULL;
    uint64_t deadline = now_usec() + SCOPE_TIMEOUT_USEC, t;
    struct job_wait w = {.unit = unit};
    pid_t pid = getpid();
    char where[128], description[80];
    uint32_t rnd = 0;
    int r;

    /* The name must be unique (StartTransientUnit() fails on an existing unit): the pid names
     * this nsbox, the random part a second request by the same process. */
    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd))
        rnd = (uint32_t)now_usec();
    (void)snprintf(unit, unit_size, "nsbox-%d-%08" PRIx32 ".scope", (int)pid, rnd);

    r = open_user_bus(&bus, deadline, where, sizeof(where), reason, size);
    if (r < 0)
        return r;

    /* JobRemoved() tells when the start job is over and how. The match is installed before the
     * call, so the signal cannot be missed; _async, so it costs no round trip of its own (the
     * broker handles our messages in order, so it is in place before the manager sees the
     * call). The default install callback closes the connection if the broker refuses it, which
     * ends the wait below with an error. */
    r = sym.match_signal_async(bus, &slot, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                               "JobRemoved", on_job_removed, NULL, &w);
    if (r < 0)
        return reasonf(reason, size, r, "adding a D-Bus match for JobRemoved failed: %s",
                       strerror(-r));
    /* "Signals are only sent out if at least one client invoked [Subscribe()]"
     * (org.freedesktop.systemd1(5)); the manager also tracks us as the job's requester, but the
     * documented contract is Subscribe(). Its reply is not awaited (nor needed): no extra round
     * trip, and the subscription ends when the connection closes. */
    r = sym.message_new_method_call(bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                    "Subscribe");
    if (r >= 0)
        r = sym.send(bus, m, NULL);
    if (r < 0)
        return reasonf(reason, size, r, "sending Subscribe() on the user bus failed: %s",
                       strerror(-r));
    m = sym.message_unref(m);

    /* StartTransientUnit(s name, s mode, a(sv) properties, a(sa(sv)) aux): mode "fail" refuses
     * to replace a conflicting job; PIDs moves this process into the scope as the unit starts;
     * Delegate=yes hands the scope's cgroup to us (systemd.resource-control(5)); CollectMode
     * lets a failed scope be collected instead of lingering (systemd.unit(5)). */
    (void)snprintf(description, sizeof(description), "nsbox sandbox supervisor %d", (int)pid);
    r = sym.message_new_method_call(bus, &m, SYSTEMD_DEST, SYSTEMD_PATH, SYSTEMD_MANAGER,
                                    "StartTransientUnit");
    if (r >= 0)
        r = sym.message_append(m, "ss", unit, "fail");
    /* One property per line: */
    // clang-format off
    if (r >= 0)
        r = sym.message_append(m, "a(sv)", 4,
                                  "Description", "s", description,
                                  "PIDs", "au", 1, (uint32_t)pid,
                                  "Delegate", "b", 1,
                                  "CollectMode", "s", "inactive-or-failed");
    // clang-format on
    if (r >= 0)
        r = sym.message_append(m, "a(sa(sv))", 0);
    if (r < 0)
        return reasonf(reason, size, r, "building the StartTransientUnit() call failed: %s",
                       strerror(-r));

    t = now_usec();
    r = sym.call(bus, m, deadline > t ? deadline - t : 1, &error, &reply);
    if (r < 0) {
        if (r == -ETIMEDOUT)
            return reasonf(reason, size, r,
                           "StartTransientUnit() on the user bus (%s) got no answer within "
                           "%llu s",
                           where, SCOPE_TIMEOUT_USEC / 1000000);
        return reasonf(reason, size, r, "StartTransientUnit() on the user bus (%s) failed: %s",
                       where, error.message ? error.message : strerror(-r));
    }

    /* The reply only says the job is queued; JobRemoved() says how it ended. It may have come
     * before the reply; then it is already queued for sd_bus_process(). */
    while (!w.removed) {
        t = now_usec();
        if (t >= deadline)
            return reasonf(reason, size, -ETIMEDOUT,
                           "the systemd user manager's job starting %s did not end within %llu s",
                           unit, SCOPE_TIMEOUT_USEC / 1000000);
        r = sym.process(bus, NULL);
        if (r > 0)
            continue; /* handled a message: there may be more */
        if (r == 0)
            r = sym.wait(bus, deadline - t);
        if (r < 0 && r != -EINTR)
            return reasonf(reason, size, r,
                           "the user bus failed while waiting for the job starting %s: %s", unit,
                           strerror(-r));
    }
    if (strcmp(w.result, "done") != 0)
        return reasonf(reason, size, -EIO,
                       "the systemd user manager's job starting %s ended with result '%s'", unit,
                       w.result);
    return 0;
}
