/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox selftest's parts, shared by its three files:
 *   cmd-selftest.c    the command: options, its temporary directory, the table of verdicts
 *   selftest-table.c  attacks[]: what each attack tries, its protection and opt-out, its setup
 *                     on the host, and how it is judged (enum judge)
 *   selftest-trial.c  one trial: `nsbox run` (or the bare attack) started and watched, the
 *                     judgement, the clean-up
 * The attack programs themselves are Python (selftest-attacks.py), embedded at build time. */
#pragma once

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define SELFTEST_FLOOD_MIB 16 /* what output-flood prints */

enum mode { MODE_SANDBOX, MODE_ABLATED, MODE_CONTROL };

/* SIGINT, SIGTERM or SIGHUP to the self-test: the running trial is ended (its nsbox run gets
 * SIGTERM and tears its sandbox down), then everything the self-test made is removed. */
extern volatile sig_atomic_t selftest_interrupted;

struct ctx {
    char exe[PATH_MAX];
    const char *rootfs; /* --rootfs, or NULL for nsbox's default */
    char dir[128];      /* this self-test's temporary directory, owned by the caller */
    int dir_fd;
    char python[PATH_MAX];
    uid_t host_uid; /* the host ids a sandbox of this caller runs as */
    gid_t host_gid;
    bool root;
    /* Root: the self-test holds host_uid's slot of nsbox's pool for its whole life (uidpool.h)
     * and gives it to every run with --host-user, so that it knows the id beforehand (its
     * victim, the directories the sandbox may write) and no other run shares it. */
    int host_ids_lock;
    char host_user[32]; /* "UID:GID" for --host-user, or "" */
    char limits_by[32]; /* what enforced the limits in the sandbox runs */
    char limits_note[1024];
};

#define MAX_ARGS 4
#define MAX_OPTS 8
struct trial {
    enum mode mode;
    char dir[256]; /* a directory of this trial's own, owned by the caller, mode 0755 */
    int dir_fd;
    int sub_fd;           /* a subdirectory of the attack's (persistence, fill-tmp, setuid) */
    bool sub_is_host_uid; /* sub_fd belongs to the sandbox's host uid */
    /* A file of sub_fd removed as soon as the attack has run (the setuid copy): it lives no
     * longer than the run that needs it. */
    const char *remove_after_run;
    const char *args[MAX_ARGS];
    size_t n_args;
    const char *opts[MAX_OPTS]; /* extra `nsbox run` options (sandbox and ablated runs) */
    size_t n_opts;
    char buf[4][512]; /* storage for args and opts */
    char ablate[96];  /* the attack's opt_out, split into opts in the ablated run */
    char secret[80];  /* a canary or nonce only the attack could bring back */
    char skip[256];   /* not tried, and why */
    int pass_fd;      /* left open for the run (not close-on-exec), or -1 */
    int fd;           /* a listener, or the pty's master, or -1 */
    pid_t victim;
    int shmid;
    char shm_record[48]; /* "shm-ID-KEY" in the self-test's directory while the segment lives */
    int top_fd;          /* the self-test's directory, for shm_record */
    bool as_caller;      /* control: run as the caller itself, not as the sandbox's host ids */
    bool env_token;      /* NSBOX_SELFTEST_TOKEN=secret in nsbox's environment, not passed on */
    bool secret_to_env;  /* NSBOX_SELFTEST_SECRET=secret given to the attack (-e) */
};

/* An argument of the attack program, an option of its `nsbox run` (beyond MAX_*: dropped). */
static inline void add_arg(struct trial *t, const char *arg)
{
    if (t->n_args < MAX_ARGS)
        t->args[t->n_args++] = arg;
}

static inline void add_opt(struct trial *t, const char *opt)
{
    if (t->n_opts < MAX_OPTS)
        t->opts[t->n_opts++] = opt;
}

/* How the self-test tells that an attack got through: from outside where the host can see it,
 * else from the attack's own report. */
enum judge {
    /* "SUCCEEDED <report>" in the attack's output (nothing outside can tell). */
    JUDGE_REPORT,
    /* The trial's canary, planted on the host (a file, a segment, the environment, a
     * descriptor), in the attack's output: only the attack can have brought it back. */
    JUDGE_CANARY,
    /* The trial's listener (t->fd) got a connection that sent the nonce. */
    JUDGE_LISTENER,
    /* "persisted.txt" in the trial's subdirectory: a regular file of the sandbox's host uid
     * holding the nonce. */
    JUDGE_FILE_LEFT,
    /* The victim process (t->victim) died of SIGKILL. */
    JUDGE_VICTIM_KILLED,
    /* Input arrived in the pseudo-terminal whose master (t->fd) only the self-test holds. */
    JUDGE_TERMINAL_INPUT,
    /* All SELFTEST_FLOOD_MIB MiB of the flood reached the caller. */
    JUDGE_FLOOD_DELIVERED,
    /* A process of the sandbox's host uid with the trial's tag outlived the run (it is killed
     * then). */
    JUDGE_PROCESS_LEFT,
};

struct attack {
    const char *name;
    const char *tried;
    const char *protection;
    const char *opt_out;    /* what --ablate removes, as `nsbox run` options */
    const char *no_opt_out; /* when opt_out is NULL: why no opt-out can remove it */
    /* How a blocked attack may end without saying DONE: statuses separated by '|' ("oom (signal
     * 9)|timeout"), or NULL: it must finish. */
    const char *enders;
    /* Makes what the attack needs on the host (its trial directory, canary, listener, victim)
     * and its arguments and options for this mode. Returns 0 (t->skip set: not tried here) or
     * -errno. */
    int (*setup)(const struct ctx *c, struct trial *t);
    enum judge judge;
    const char *report; /* JUDGE_REPORT: what follows "SUCCEEDED " */
    /* Two runs, judged by the later: first the attack program with "plant" (and the trial's
     * nonce, if any, in its environment), which must finish; then with "find", without it.
     * For what must not outlive a run. */
    bool two_runs;
};

extern const struct attack selftest_attacks_table[];
extern const size_t selftest_n_attacks;

struct verdict {
    const char *word; /* blocked, not blocked, succeeded, still blocked, skipped, error */
    char detail[512];
    bool good; /* what the self-test wants from this mode */
};

/* Run attack a once in mode (below c->dir) and judge it into *v. */
void selftest_run_trial(struct ctx *c, const struct attack *a, enum mode mode, struct verdict *v);

/* Create name below dirfd (never following a symlink, never an existing file), write text,
 * and set mode (past the umask). Returns 0 or -errno (-EIO for a short write). */
int selftest_write_new_file(int dirfd, const char *name, const char *text, mode_t mode);

/* bytes random bytes (at most 32) as lowercase hex digits into buf (2 * bytes + 1 bytes). */
void selftest_random_hex(char *buf, size_t bytes);
