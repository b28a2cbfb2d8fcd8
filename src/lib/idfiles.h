/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * The sandbox's user in /etc/passwd and /etc/group (pure: no OS calls, no output). A run with
 * --user ids the rootfs does not name gets copies of the rootfs's two files with a line added
 * for them, bound over the originals for that run only (mount_identity_files()), so that
 * getpass.getuser(), pwd.getpwuid(os.getuid()), id(1) and ls -l work as for a known user.
 */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Largest /etc/passwd or /etc/group of a rootfs that nsbox copies (bytes). */
#define IDFILES_MAX (1U << 20)

/* The name given to an added entry, or IDFILES_NAME "-" ID when a line already has it. */
#define IDFILES_NAME "sandbox"

/* passwd(5) text (len bytes, need not end in '\n') with a line for uid added when no line has
 * it: "sandbox:x:UID:GID:nsbox sandbox:/tmp:/bin/sh", HOME as nsbox sets it. Returns 1 and a
 * malloc()ed, NUL-terminated *ret when a line was added; 0 and *ret untouched when uid has one;
 * -EEXIST when both names are taken; -ENOMEM. */
int idfiles_passwd(const char *text, size_t len, uid_t uid, gid_t gid, char **ret);

/* The same for group(5) text and gid: "sandbox:x:GID:". */
int idfiles_group(const char *text, size_t len, gid_t gid, char **ret);

struct nsbox_result;
struct sandbox_plan;

/*
 * For --user ids other than the default (nobody, nogroup), sb->passwd and sb->group: the
 * rootfs's (rootfd's) /etc/passwd and /etc/group with a line added by idfiles_passwd() and
 * idfiles_group() where they do not name the ids; a file a -v or --tmpfs covers is left alone.
 * A file that cannot be read (missing, a symlink, over IDFILES_MAX) is left as it is, with a
 * warning in ret. Not pure: it reads the rootfs, in the supervisor (ids-plan.c, called by
 * plan_sandbox() in plan.h after plan_rootfs()).
 */
void plan_identity_files(struct sandbox_plan *sb, int rootfd, struct nsbox_result *ret);
