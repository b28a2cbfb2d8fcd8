/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <regex.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "parse.h"
#include "registry.h"
#include "result.h"
#include "termsafe.h"

int run_id_new(char ret[33])
{
    unsigned char id[16];

    if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
        return negative_errno();
    hex_encode(id, sizeof(id), ret);
    return 0;
}

/* Why registry_dir() last refused the directory, in words for the user ("" if it did not). */
static char dir_problem[900];

/* A directory only its owner, uid, can write in: a place where no other user can have made
 * the registry directory first. */
static bool owned_and_closed(const char *path, uid_t uid)
{
    struct stat st;

    return lstat(path, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == uid && !(st.st_mode & 022);
}

/* Whether a directory owned by owner can hold the registry's path for uid: root's, the
 * caller's, and in a user namespace other than the initial one also the overflow uid's: there
 * a file of an id the namespace does not map (the host's root's /tmp, seen from a container's
 * root) shows as kernel.overflowuid (user_namespaces(7), "Unmapped user and group IDs"), and
 * which host id it is cannot be known from inside. */
static bool owner_trusted(uid_t owner, uid_t uid)
{
    char buf[32] = "";
    struct stat ns;

    if (owner == 0 || owner == uid)
        return true;
    /* PROC_USER_INIT_INO (include/linux/proc_ns.h): the initial user namespace. */
    if (stat("/proc/self/ns/user", &ns) < 0 || ns.st_ino == 0xEFFFFFFDU)
        return false;
    return read_file_at(AT_FDCWD, "/proc/sys/kernel/overflowuid", buf, sizeof(buf)) > 0 &&
           (uid_t)strtoul(buf, NULL, 10) == owner;
}

/* The whole path of the registry directory dir (the directory itself checked already): every
 * directory above it must be root's or the caller's, and writable by no one else unless it is
 * sticky (/tmp, /dev/shm: others cannot rename or remove what is not theirs there, chmod(2),
 * S_ISVTX). Otherwise another user could rename a directory on the way and put one of its own
 * in its place: a registry that ps and kill do not find. By device and inode from the
 * directory's own descriptor (dir_ancestry()), reached without symlinks but root's. Returns 0,
 * -EPERM (dir_problem says why), or -errno. */
static int check_registry_parents(const char *dir, uid_t uid)
{
    _cleanup_free_ struct stat *up = calloc(PATH_MAX / 2, sizeof(*up));
    _cleanup_close_ int fd = -EBADF;
    char walked[PATH_MAX];
    int n;

    if (!up)
        return -ENOMEM;
    fd = path_open_nofollow(dir, true, walked, sizeof(walked));
    if (fd == -ELOOP) {
        (void)snprintf(dir_problem, sizeof(dir_problem),
                       "the registry of running sandboxes, %.200s, is reached through the "
                       "symlink %.200s, which is not root's: set XDG_RUNTIME_DIR to a directory of "
                       "your own "
                       "with mode 0700, reached without symlinks",
                       dir, walked);
        return -EPERM;
    }
    if (fd < 0)
        return fd;
    n = dir_ancestry(fd, up, PATH_MAX / 2);
    if (n < 0)
        return n;
    for (int i = 1; i < n; i++) {
        const struct stat *st = &up[i];
        char *cut;
        if (owner_trusted(st->st_uid, uid) && (!(st->st_mode & 022) || (st->st_mode & S_ISVTX)))
            continue;
        /* walked has no symlink, "." or "..": its i-th parent is the i-th directory up. */
        for (int k = 0; k < i && (cut = strrchr(walked, '/')); k++)
            *(cut == walked ? cut + 1 : cut) = '\0';
        (void)snprintf(dir_problem, sizeof(dir_problem),
                       "the registry of running sandboxes, %.200s, lies below %.200s (uid %u, mode "
                       "%04o), which another user can change: set XDG_RUNTIME_DIR to a directory "
                       "of your own, mode 0700, whose parents only root and you can write",
                       dir, walked, (unsigned)st->st_uid, (unsigned)(st->st_mode & 07777));
        return -EPERM;
    }
    return 0;
}

/*
 * The registry directory, created if needed: $XDG_RUNTIME_DIR/nsbox, else
 * /run/user/UID/nsbox (each only if that directory is the caller's and closed to others),
 * else for root /run/nsbox/registry (beside the uid pool, where only root can write), else
 * /tmp/nsbox-UID, else (no writable /tmp, as in a container with a read-only root)
 * /dev/shm/nsbox-UID. Those last names are predictable in directories everyone can write: another
 * user can make it first (a squat that would hide this user's runs from ps and kill, or plant
 * records). So it is refused unless it is a real directory (not a symlink: lstat) of the
 * caller's with mode 0700, with the squatter named in dir_problem and the fix: a
 * XDG_RUNTIME_DIR of one's own; and so is a directory below one another user can change
 * (check_registry_parents()). Returns 0, -EPERM (dir_problem says why), or -errno.
 */
static int registry_dir(char *buf, size_t size)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    uid_t uid = getuid();
    struct stat st;
    char run_user[64];
    bool in_tmp = false;

    dir_problem[0] = '\0';
    (void)snprintf(run_user, sizeof(run_user), "/run/user/%u", (unsigned)uid);
    if (xdg && xdg[0] == '/' && owned_and_closed(xdg, uid))
        (void)snprintf(buf, size, "%s/nsbox", xdg);
    else if (owned_and_closed(run_user, uid))
        (void)snprintf(buf, size, "%s/nsbox", run_user);
    else if (uid == 0 && (mkdir("/run/nsbox", 0700) == 0 || errno == EEXIST)) {
        if (!owned_and_closed("/run/nsbox", 0))
            return -EPERM;
        (void)snprintf(buf, size, "/run/nsbox/registry");
    } else {
        (void)snprintf(buf, size, "/tmp/nsbox-%u", (unsigned)uid);
        in_tmp = true;
    }
    /* A container with a read-only root (Docker's --read-only, Kubernetes'
     * readOnlyRootFilesystem) may have no writable /run or /tmp: /dev/shm, the tmpfs every
     * container has, is the last place, under the same rule as /tmp. */
    if (mkdir(buf, 0700) < 0 && errno != EEXIST) {
        if ((errno != EROFS && errno != EACCES) || !in_tmp)
            return negative_errno();
        (void)snprintf(buf, size, "/dev/shm/nsbox-%u", (unsigned)uid);
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return negative_errno();
    }
    if (lstat(buf, &st) < 0)
        return negative_errno();
    if (!S_ISDIR(st.st_mode) || st.st_uid != uid || (st.st_mode & 077)) {
        (void)snprintf(dir_problem, sizeof(dir_problem),
                       "the registry of running sandboxes, %s, is not a directory of yours "
                       "with mode 0700 (it is %s of uid %u, mode %04o: another user may have "
                       "made it first); set XDG_RUNTIME_DIR to a directory of your own with "
                       "mode 0700 to keep the registry there",
                       buf,
                       S_ISDIR(st.st_mode)   ? "a directory"
                       : S_ISLNK(st.st_mode) ? "a symlink"
                                             : "a file",
                       (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return check_registry_parents(buf, uid);
}

struct entry {
    char path[600];
    char run_id[40];
    const char *name; /* "" when the run has none */
    int pid;
    json_t *record;
};

/* Whether the nsbox a record names still runs: the same pid with the same start time.
 * process_start_time() is 0 for a process that is gone: a start of 0 is no record. */
static bool record_is_live(json_t *record)
{
    json_t *pid = json_object_get(record, "pid"), *start = json_object_get(record, "start");

    return json_is_integer(pid) && json_is_integer(start) && json_integer_value(start) > 0 &&
           process_start_time((pid_t)json_integer_value(pid)) ==
               (unsigned long long)json_integer_value(start);
}

/* Call fn for each record of a live nsbox in the registry directory dir; remove the records of
 * dead ones. */
static int for_each_entry_in(const char *dir, int (*fn)(const struct entry *e, void *userdata),
                             void *userdata)
{
    DIR *d;
    struct dirent *de;
    int r = 0;

    d = opendir(dir);
    if (!d)
        return negative_errno();
    while ((de = readdir(d))) {
        struct entry e = {0};
        size_t n = strlen(de->d_name);
        json_t *id, *name;

        if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0 || de->d_name[0] == '.')
            continue;
        (void)snprintf(e.path, sizeof(e.path), "%s/%s", dir, de->d_name);
        e.record = json_load_file(e.path, 0, NULL);
        id = json_object_get(e.record, "run_id");
        if (!json_is_string(id) || !record_is_live(e.record)) {
            /* A session's socket (session.h) goes with the record of its supervisor. */
            char sock[700];
            (void)snprintf(sock, sizeof(sock), "%.*s.sock", (int)(strlen(e.path) - 5), e.path);
            (void)unlink(sock);
            (void)unlink(e.path); /* its nsbox is gone (or the record is not one) */
            json_decref(e.record);
            continue;
        }
        e.pid = (int)json_integer_value(json_object_get(e.record, "pid"));
        (void)snprintf(e.run_id, sizeof(e.run_id), "%s", json_string_value(id));
        name = json_object_get(e.record, "name");
        e.name = json_is_string(name) ? json_string_value(name) : "";
        r = fn(&e, userdata);
        json_decref(e.record);
        if (r < 0)
            break;
    }
    closedir(d);
    return r < 0 ? r : 0;
}

/* for_each_entry_in() the registry directory. */
static int for_each_entry(int (*fn)(const struct entry *e, void *userdata), void *userdata)
{
    char dir[512];
    int r = registry_dir(dir, sizeof(dir));

    return r < 0 ? r : for_each_entry_in(dir, fn, userdata);
}

static int keep_entry(const struct entry *e, void *userdata)
{
    (void)e;
    (void)userdata;
    return 0;
}

/* The run holding name dir/NAME.name, if it still runs: its run id in holder[33], its nsbox's
 * pid in *ret_pid. Returns 1 (held), 0 (free: no file, or its run is gone) or -errno. */
static int name_holder(const char *dir, const char *name_path, char holder[33], int *ret_pid)
{
    char text[64] = "", record_path[600];
    _cleanup_close_ int fd = open(name_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    json_t *record;
    ssize_t n;
    bool live;

    if (fd < 0)
        return errno == ENOENT ? 0 : negative_errno();
    n = RETRY_EINTR(read(fd, text, sizeof(text) - 1));
    if (n != 32 || strspn(text, "0123456789abcdef") != 32)
        return 0; /* not a whole run id: a writer that died half-way */
    text[32] = '\0';
    (void)snprintf(record_path, sizeof(record_path), "%s/%s.json", dir, text);
    record = json_load_file(record_path, 0, NULL);
    live = record_is_live(record);
    if (live) {
        memcpy(holder, text, 33);
        *ret_pid = (int)json_integer_value(json_object_get(record, "pid"));
    }
    json_decref(record);
    return live;
}

/* The name files of runs that are gone, removed; only under the directory's lock, where no run
 * can be taking a name meanwhile. */
static void sweep_names(const char *dir)
{
    _cleanup_closedir_ DIR *d = opendir(dir);
    struct dirent *de;

    while (d && (de = readdir(d))) {
        char path[700], holder[33];
        size_t n = strlen(de->d_name);
        int pid;

        if (n < 6 || strcmp(de->d_name + n - 5, ".name") != 0 || de->d_name[0] == '.')
            continue;
        (void)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (name_holder(dir, path, holder, &pid) == 0)
            (void)unlink(path);
    }
}

static json_t *command_json(const struct nsbox_config *c, const char *code_path)
{
    json_t *a = json_array();

    if (a && c->code) {
        (void)json_array_append_new(a, json_string("python3"));
        (void)json_array_append_new(a, strcmp(code_path ? code_path : "-", "-") == 0
                                           ? json_string("<stdin>")
                                           : json_text(code_path, strlen(code_path)));
    }
    for (size_t i = 0; a && c->argv && c->argv[i]; i++)
        (void)json_array_append_new(a, json_text(c->argv[i], strlen(c->argv[i])));
    return a;
}

static json_t *labels_json(char *const *labels)
{
    json_t *o = json_object();

    for (size_t i = 0; o && labels && labels[i]; i++) {
        size_t key_len = strcspn(labels[i], "=");
        const char *value = labels[i][key_len] ? labels[i] + key_len + 1 : "";
        char key[LABEL_KEY_MAX + 1];

        (void)snprintf(key, sizeof(key), "%.*s", (int)key_len, labels[i]);
        (void)json_object_set_new(o, key, json_text(value, strlen(value)));
    }
    return o;
}

/* Write the whole of text to path, or nothing: under a temporary name, then renamed, so that
 * ps never reads half a record. */
static int write_whole(const char *dir, const char *run_id, const char *path, const char *text)
{
    char tmp[600];
    int fd, r;

    (void)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, run_id);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return negative_errno();
    r = write(fd, text, strlen(text)) == (ssize_t)strlen(text) ? 0 : -EIO;
    (void)close(fd);
    if (r >= 0 && rename(tmp, path) < 0)
        r = negative_errno();
    if (r < 0)
        (void)unlink(tmp);
    return r;
}

int registry_path(char *buf, size_t size)
{
    return registry_dir(buf, size);
}

int registry_add(const char *run_id, int argc, char *const argv[], const struct nsbox_config *c,
                 const char *code_path, struct registry_run *ret, char *why, size_t why_size)
{
    char dir[512], holder[33] = "";
    json_t *argv_json = json_array(), *record;
    _cleanup_free_ char *text = NULL;
    _cleanup_close_ int lock = -EBADF;
    int fd, pid = 0, r;

    *ret = (struct registry_run){0};
    why[0] = '\0';
    r = registry_dir(dir, sizeof(dir));
    if (r < 0) {
        (void)snprintf(why, why_size, "%s", dir_problem);
        json_decref(argv_json);
        return r;
    }
    /* The records of an nsbox that was SIGKILLed go with the next run, as its cgroup leaf does. */
    (void)for_each_entry_in(dir, keep_entry, NULL); /* dir found above: not looked up twice */
    for (int i = 0; argv_json && i < argc; i++)
        (void)json_array_append_new(argv_json, json_text(argv[i], strlen(argv[i])));
    record = json_pack("{s:s, s:i, s:I, s:I, s:o, s:o, s:s?, s:o, s:{s:I, s:I, s:f, s:f}}",
                       "run_id", run_id, "pid", (int)getpid(), "start",
                       (json_int_t)process_start_time(getpid()), "started", (json_int_t)time(NULL),
                       "argv", argv_json, "command", command_json(c, code_path), "name", c->name,
                       "labels", labels_json(c->labels), "limits", "memory", (json_int_t)c->memory,
                       "pids", (json_int_t)c->pids_limit, "cpus", (double)c->cpus_milli / 1000.0,
                       "timeout", (double)c->timeout / 1e6);
    if (!record)
        return -ENOMEM;
    if (!c->name)
        (void)json_object_set_new(record, "name", json_null());
    text = json_dumps(record, JSON_COMPACT);
    json_decref(record);
    if (!text)
        return -ENOMEM;

    if (c->name) {
        if (!run_name_is_valid(c->name))
            return -EINVAL;
        /* One name taker at a time (flock(2) on the directory, released with the descriptor):
         * the check, the record and the name's file are one step for other named runs. */
        lock = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lock < 0 || RETRY_EINTR(flock(lock, LOCK_EX)) < 0)
            return negative_errno();
        sweep_names(dir);
        (void)snprintf(ret->name_path, sizeof(ret->name_path), "%s/%s.name", dir, c->name);
        r = name_holder(dir, ret->name_path, holder, &pid);
        if (r != 0) {
            ret->name_path[0] = '\0';
            if (r < 0)
                return r;
            (void)snprintf(why, why_size,
                           "the name '%s' is already in use by running sandbox %s (nsbox pid %d): "
                           "choose another --name, or end that run first ('nsbox kill %s')",
                           c->name, holder, pid, c->name);
            return -EEXIST;
        }
    }

    (void)snprintf(ret->path, sizeof(ret->path), "%s/%s.json", dir, run_id);
    r = write_whole(dir, run_id, ret->path, text);
    if (r < 0) {
        *ret = (struct registry_run){0};
        return r;
    }
    if (c->name) {
        /* After the record, so that a name's file always names a record; O_EXCL, as only a file
         * of a gone run was removed (under the lock, by sweep_names()). */
        (void)unlink(ret->name_path); /* a stale one name_holder() found free */
        fd = open(ret->name_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        r = fd < 0 ? negative_errno() : write(fd, run_id, 32) == 32 ? 0 : -EIO;
        if (fd >= 0)
            (void)close(fd);
        if (r < 0) {
            (void)unlink(ret->name_path);
            (void)unlink(ret->path);
            *ret = (struct registry_run){0};
            return r;
        }
    }
    return 0;
}

void registry_remove(const struct registry_run *run)
{
    /* The name first: while its file exists, the record it names exists, so no other run can
     * take the name from a live one (and this unlink never removes another run's file). */
    if (run->name_path[0])
        (void)unlink(run->name_path);
    if (run->path[0])
        (void)unlink(run->path);
}

/* ---- selecting runs ---------------------------------------------------------------------- */

struct filters {
    regex_t names[16];
    size_t n_names;
    const char *ids[16];
    size_t n_ids;
    const char *labels[16];
    size_t n_labels;
};

static void filters_free(struct filters *f)
{
    for (size_t i = 0; i < f->n_names; i++)
        regfree(&f->names[i]);
    f->n_names = 0;
}

/* Docker's --filter KEY=VALUE for name, id and label. Returns 0 or -EINVAL after an error. */
static int filters_parse(struct filters *f, char *const filters[], size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *fl = filters[i], *value = strchr(fl, '=');
        size_t key_len;

        if (!value)
            goto bad;
        value++;
        if (strncmp(fl, "name=", 5) == 0 && f->n_names < ELEMENTSOF(f->names)) {
            if (regcomp(&f->names[f->n_names], value, REG_EXTENDED | REG_NOSUB) != 0)
                return log_error_errno(-EINVAL, "invalid filter '%s': not a regular expression",
                                       fl);
            f->n_names++;
        } else if (strncmp(fl, "id=", 3) == 0 && value[0] && f->n_ids < ELEMENTSOF(f->ids))
            f->ids[f->n_ids++] = value;
        else if (strncmp(fl, "label=", 6) == 0 && label_is_valid(value, &key_len) &&
                 f->n_labels < ELEMENTSOF(f->labels))
            f->labels[f->n_labels++] = value;
        else
            goto bad;
    }
    return 0;
bad:
    return log_error_errno(-EINVAL,
                           "invalid filter: expected name=NAME, id=RUN-ID or label=KEY[=VALUE] "
                           "(at most 16 of each)");
}

/* Whether the run has every label of labels[] (KEY: any value; KEY=VALUE: that value). */
static bool has_labels(const struct entry *e, const char *const labels[], size_t n)
{
    json_t *have = json_object_get(e->record, "labels");

    for (size_t i = 0; i < n; i++) {
        size_t key_len = strcspn(labels[i], "=");
        char key[LABEL_KEY_MAX + 1];
        json_t *value;

        (void)snprintf(key, sizeof(key), "%.*s", (int)key_len, labels[i]);
        value = json_object_get(have, key);
        if (!json_is_string(value) || (labels[i][key_len] == '=' &&
                                       strcmp(json_string_value(value), labels[i] + key_len + 1)))
            return false;
    }
    return true;
}

static bool filters_match(const struct filters *f, const struct entry *e)
{
    bool any = f->n_names == 0;

    for (size_t i = 0; !any && i < f->n_names; i++)
        any = e->name[0] && regexec(&f->names[i], e->name, 0, NULL, 0) == 0;
    if (!any)
        return false;
    any = f->n_ids == 0;
    for (size_t i = 0; !any && i < f->n_ids; i++)
        any = strncmp(e->run_id, f->ids[i], strlen(f->ids[i])) == 0;
    return any && has_labels(e, f->labels, f->n_labels);
}

/* ---- nsbox ps ----------------------------------------------------------------------------- */

struct ps_context {
    bool json;
    const struct filters *filters;
};

static int print_entry(const struct entry *e, void *userdata)
{
    const struct ps_context *ps = userdata;
    json_t *command = json_object_get(e->record, "command");
    json_t *limits = json_object_get(e->record, "limits");
    long age = (long)(time(NULL) - json_integer_value(json_object_get(e->record, "started")));
    char line[200] = "", shown[4 * sizeof(line)];

    if (!filters_match(ps->filters, e))
        return 0;
    if (ps->json) {
        char *text = json_dump_exact(e->record, JSON_COMPACT);
        if (text)
            (void)printf("%s\n", text);
        free(text);
        return 0;
    }
    /* What runs in the sandbox: the program, or python3 and the --code file. */
    for (size_t i = 0; i < json_array_size(command); i++) {
        size_t n = strlen(line);
        (void)snprintf(line + n, sizeof(line) - n, "%s%s", n ? " " : "",
                       json_string_value(json_array_get(command, i)) ?: "");
    }
    /* The command is the caller's argv: a control sequence or a newline in it must not act on
     * the terminal nor break the table (termsafe.h). */
    (void)termsafe_escape_line(line, strlen(line), shown, sizeof(shown));
    (void)printf("%-32s %7d %6lds %8lldM %5lld %5.2f  %-16s %s\n", e->run_id, e->pid, age,
                 (long long)json_integer_value(json_object_get(limits, "memory")) >> 20,
                 (long long)json_integer_value(json_object_get(limits, "pids")),
                 json_real_value(json_object_get(limits, "cpus")), e->name[0] ? e->name : "-",
                 shown);
    return 0;
}

int registry_ps(bool json, char *const filters[], size_t n_filters)
{
    struct filters f = {0};
    struct ps_context ps = {.json = json, .filters = &f};
    int r;

    if (filters_parse(&f, filters, n_filters) < 0) {
        filters_free(&f);
        return 125;
    }
    if (!json)
        (void)printf("%-32s %7s %7s %9s %5s %5s  %-16s %s\n", "RUN ID", "PID", "AGE", "MEMORY",
                     "PIDS", "CPUS", "NAME", "COMMAND");
    r = for_each_entry(print_entry, &ps);
    filters_free(&f);
    if (r < 0 && dir_problem[0]) {
        log_error("%s", dir_problem);
        return 125;
    }
    if (r < 0) {
        log_error_errno(r, "cannot read the registry of running sandboxes: %m");
        return 125;
    }
    return 0;
}

/* ---- nsbox kill --------------------------------------------------------------------------- */

enum kill_match {
    MATCH_PREFIX, /* a prefix of the run id: must name one run */
    MATCH_NAME,   /* the run's name */
    MATCH_ID,     /* the whole run id */
    MATCH_ALL,    /* --all, or --label: every run that matches */
};

struct kill_context {
    const char *target;
    char *const *labels;
    size_t n_labels;
    enum kill_match how;
    unsigned matched[MATCH_ALL + 1], failed;
    bool dry_run;          /* only count the matches */
    char prefix_match[40]; /* the dry run's run id that the prefix named */
};

static bool kill_matches(const struct kill_context *k, const struct entry *e, enum kill_match how)
{
    switch (how) {
    case MATCH_ID:
        return strcmp(e->run_id, k->target) == 0;
    case MATCH_NAME:
        return e->name[0] && strcmp(e->name, k->target) == 0;
    case MATCH_PREFIX:
        return strncmp(e->run_id, k->target, strlen(k->target)) == 0;
    case MATCH_ALL:
        return has_labels(e, (const char *const *)k->labels, k->n_labels);
    }
    return false;
}

static int kill_entry(const struct entry *e, void *userdata)
{
    struct kill_context *k = userdata;

    if (k->dry_run) {
        for (enum kill_match how = MATCH_PREFIX; how <= MATCH_ALL; how++)
            if ((how == MATCH_ALL) == !k->target && kill_matches(k, e, how)) {
                k->matched[how]++;
                if (how == MATCH_PREFIX)
                    (void)snprintf(k->prefix_match, sizeof(k->prefix_match), "%s", e->run_id);
            }
        return 0;
    }
    if (!kill_matches(k, e, k->how))
        return 0;
    k->matched[k->how]++;
    if (kill(e->pid, SIGUSR1) < 0) {
        log_error("cannot kill sandbox %s (nsbox pid %d): %s", e->run_id, e->pid, strerror(errno));
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

int registry_kill(const char *target, char *const labels[], size_t n_labels)
{
    struct kill_context k = {.target = target,
                             .labels = labels,
                             .n_labels = n_labels,
                             .dry_run = true};
    size_t key_len;
    int r;

    for (size_t i = 0; i < n_labels; i++)
        if (!label_is_valid(labels[i], &key_len)) {
            log_error("invalid label '%s': expected KEY or KEY=VALUE", labels[i]);
            return 125;
        }
    /* As Docker resolves a container: a whole run id, else a name, else a unique prefix. */
    r = for_each_entry(kill_entry, &k);
    if (r >= 0) {
        k.how = !target                 ? MATCH_ALL
                : k.matched[MATCH_ID]   ? MATCH_ID
                : k.matched[MATCH_NAME] ? MATCH_NAME
                                        : MATCH_PREFIX;
        if (k.how == MATCH_PREFIX && k.matched[MATCH_PREFIX] > 1) {
            log_error("'%s' names %u running sandboxes: give more of the run id", target,
                      k.matched[MATCH_PREFIX]);
            return 1;
        }
        /* The kill pass kills the run the prefix named in the dry run, by its whole id: not a
         * run started meanwhile whose id has the same prefix. */
        if (k.how == MATCH_PREFIX && k.matched[MATCH_PREFIX] == 1) {
            k.target = k.prefix_match;
            k.how = MATCH_ID;
        }
        memset(k.matched, 0, sizeof(k.matched));
        k.dry_run = false;
        r = for_each_entry(kill_entry, &k);
    }
    if (r < 0 && dir_problem[0]) {
        log_error("%s", dir_problem);
        return 125;
    }
    if (r < 0) {
        log_error_errno(r, "cannot read the registry of running sandboxes: %m");
        return 125;
    }
    if (k.matched[k.how] == 0) {
        if (target)
            log_error("no running sandbox %s (see 'nsbox ps')", target);
        else if (n_labels)
            log_error("no running sandbox has the label%s %s%s (see 'nsbox ps --json')",
                      n_labels > 1 ? "s" : "", labels[0], n_labels > 1 ? ", ..." : "");
        return target || n_labels ? 1 : 0;
    }
    return k.failed ? 1 : 0;
}
