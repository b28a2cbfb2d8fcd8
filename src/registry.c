/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "registry.h"
#include "result.h"

int run_id_new(char ret[33])
{
    unsigned char id[16];

    if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
        return negative_errno();
    for (size_t i = 0; i < sizeof(id); i++)
        (void)sprintf(ret + 2 * i, "%02x", id[i]);
    return 0;
}

/* The registry directory, created if needed; refused unless it is a real directory of ours
 * with mode 0700 (another user could otherwise plant records, or read ours). */
static int registry_dir(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    char run_user[64];

    (void)snprintf(run_user, sizeof(run_user), "/run/user/%u", (unsigned)getuid());
    if (xdg && xdg[0] == '/' && stat(xdg, &st) == 0 && st.st_uid == getuid())
        (void)snprintf(buf, size, "%s/nsbox", xdg);
    else if (stat(run_user, &st) == 0 && st.st_uid == getuid())
        (void)snprintf(buf, size, "%s/nsbox", run_user);
    else
        (void)snprintf(buf, size, "/tmp/nsbox-%u", (unsigned)getuid());
    if (mkdir(buf, 0700) < 0 && errno != EEXIST)
        return negative_errno();
    if (lstat(buf, &st) < 0)
        return negative_errno();
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077))
        return -EPERM;
    return 0;
}

struct entry;
static int for_each_entry(int (*fn)(const struct entry *e, void *userdata), void *userdata);

static int keep_entry(const struct entry *e, void *userdata)
{
    (void)e;
    (void)userdata;
    return 0;
}

int registry_add(const char *run_id, int argc, char *const argv[], const struct nsbox_config *c,
                 char *ret_path, size_t size)
{
    char dir[512], tmp[600];
    json_t *argv_json = json_array(), *record;
    char *text;
    int fd, r;

    r = registry_dir(dir, sizeof(dir));
    if (r < 0)
        return r;
    /* The records of an nsbox that was SIGKILLed go with the next run, as its cgroup leaf does. */
    (void)for_each_entry(keep_entry, NULL);
    for (int i = 0; argv_json && i < argc; i++)
        (void)json_array_append_new(argv_json, json_text(argv[i], strlen(argv[i])));
    record = json_pack("{s:s, s:i, s:I, s:I, s:o, s:{s:I, s:I, s:f, s:f}}", "run_id", run_id,
                       "pid", (int)getpid(), "start", (json_int_t)process_start_time(getpid()),
                       "started", (json_int_t)time(NULL), "argv", argv_json, "limits", "memory",
                       (json_int_t)c->memory, "pids", (json_int_t)c->pids_limit, "cpus",
                       (double)c->cpus_milli / 1000.0, "timeout", (double)c->timeout / 1e6);
    if (!record)
        return -ENOMEM;
    text = json_dumps(record, JSON_COMPACT);
    json_decref(record);
    if (!text)
        return -ENOMEM;
    /* Written whole under a temporary name, then renamed: ps never reads half a record. */
    (void)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, run_id);
    (void)snprintf(ret_path, size, "%s/%s.json", dir, run_id);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        free(text);
        return negative_errno();
    }
    r = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -EIO;
    free(text);
    (void)close(fd);
    if (r >= 0 && rename(tmp, ret_path) < 0)
        r = negative_errno();
    if (r < 0) {
        (void)unlink(tmp);
        ret_path[0] = '\0';
    }
    return r;
}

void registry_remove(const char *path)
{
    if (path && path[0])
        (void)unlink(path);
}

struct entry {
    char path[600];
    char run_id[40];
    int pid;
    json_t *record;
};

/* Call fn for each record of a live nsbox; remove the records of dead ones. */
static int for_each_entry(int (*fn)(const struct entry *e, void *userdata), void *userdata)
{
    char dir[512];
    DIR *d;
    struct dirent *de;
    int r = registry_dir(dir, sizeof(dir));

    if (r < 0)
        return r;
    d = opendir(dir);
    if (!d)
        return negative_errno();
    while ((de = readdir(d))) {
        struct entry e = {0};
        size_t n = strlen(de->d_name);
        json_t *pid, *start, *id;

        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0 || de->d_name[0] == '.')
            continue;
        (void)snprintf(e.path, sizeof(e.path), "%s/%s", dir, de->d_name);
        e.record = json_load_file(e.path, 0, NULL);
        pid = json_object_get(e.record, "pid");
        start = json_object_get(e.record, "start");
        id = json_object_get(e.record, "run_id");
        /* process_start_time() is 0 for a process that is gone: a start of 0 is no record. */
        if (!json_is_integer(pid) || !json_is_integer(start) || !json_is_string(id) ||
            json_integer_value(start) <= 0 ||
            process_start_time((pid_t)json_integer_value(pid)) !=
                (unsigned long long)json_integer_value(start)) {
            (void)unlink(e.path); /* its nsbox is gone (or the record is not one) */
            json_decref(e.record);
            continue;
        }
        e.pid = (int)json_integer_value(pid);
        (void)snprintf(e.run_id, sizeof(e.run_id), "%s", json_string_value(id));
        r = fn(&e, userdata);
        json_decref(e.record);
        if (r < 0)
            break;
    }
    closedir(d);
    return r < 0 ? r : 0;
}

static int print_entry(const struct entry *e, void *userdata)
{
    bool json = *(bool *)userdata;
    json_t *argv = json_object_get(e->record, "argv"), *limits = json_object_get(e->record, "limits");
    long age = (long)(time(NULL) - json_integer_value(json_object_get(e->record, "started")));
    char command[200] = "";

    if (json) {
        char *text = json_dumps(e->record, JSON_COMPACT);
        if (text)
            (void)printf("%s\n", text);
        free(text);
        return 0;
    }
    /* The program: what follows "--", else what follows "run". */
    size_t first = 2;
    for (size_t i = 2; i < json_array_size(argv); i++)
        if (strcmp(json_string_value(json_array_get(argv, i)) ?: "", "--") == 0) {
            first = i + 1;
            break;
        }
    for (size_t i = first; i < json_array_size(argv); i++) {
        size_t n = strlen(command);
        (void)snprintf(command + n, sizeof(command) - n, "%s%s", n ? " " : "",
                       json_string_value(json_array_get(argv, i)));
    }
    (void)printf("%-32s %7d %6lds %8lldM %5lld %5.2f  %s\n", e->run_id, e->pid, age,
                 (long long)json_integer_value(json_object_get(limits, "memory")) >> 20,
                 (long long)json_integer_value(json_object_get(limits, "pids")),
                 json_real_value(json_object_get(limits, "cpus")), command);
    return 0;
}

int registry_ps(bool json)
{
    int r;

    if (!json)
        (void)printf("%-32s %7s %7s %9s %5s %5s  %s\n", "RUN ID", "PID", "AGE", "MEMORY", "PIDS",
                     "CPUS", "COMMAND");
    r = for_each_entry(print_entry, &json);
    if (r < 0) {
        log_error_errno(r, "cannot read the registry of running sandboxes: %m");
        return 125;
    }
    return 0;
}

struct kill_context {
    const char *run_id; /* a run id or a prefix of one; NULL: all */
    unsigned matched, failed;
    bool dry_run;       /* only count the matches */
};

static int kill_entry(const struct entry *e, void *userdata)
{
    struct kill_context *k = userdata;

    if (k->run_id && strncmp(k->run_id, e->run_id, strlen(k->run_id)) != 0)
        return 0;
    k->matched++;
    if (k->dry_run)
        return 0;
    if (kill(e->pid, SIGUSR1) < 0) {
        log_error("cannot kill sandbox %s (nsbox pid %d): %s", e->run_id, e->pid,
                  strerror(errno));
        k->failed++;
        return 0;
    }
    /* Its nsbox kills the sandbox, reports "killed" and exits, removing the record. */
    for (int i = 0; i < 500 && access(e->path, F_OK) == 0; i++)
        (void)usleep(10000);
    if (access(e->path, F_OK) == 0) {
        log_error("sandbox %s did not end within 5 s", e->run_id);
        k->failed++;
    } else
        (void)printf("killed %s\n", e->run_id);
    return 0;
}

int registry_kill(const char *run_id)
{
    struct kill_context k = {.run_id = run_id, .dry_run = true};
    int r;

    /* A prefix must name one sandbox. */
    if (run_id) {
        r = for_each_entry(kill_entry, &k);
        if (r >= 0 && k.matched > 1) {
            log_error("'%s' names %u running sandboxes: give more of the run id", run_id,
                      k.matched);
            return 1;
        }
    }
    k = (struct kill_context){.run_id = run_id};
    r = for_each_entry(kill_entry, &k);

    if (r < 0) {
        log_error_errno(r, "cannot read the registry of running sandboxes: %m");
        return 125;
    }
    if (k.matched == 0) {
        if (run_id)
            log_error("no running sandbox %s (see 'nsbox ps')", run_id);
        return run_id ? 1 : 0;
    }
    return k.failed ? 1 : 0;
}
