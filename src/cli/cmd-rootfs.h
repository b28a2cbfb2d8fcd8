/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* nsbox rootfs build|verify: build a root filesystem with mmdebstrap, and check one. */
#pragma once

/* One verdict line: verdict is "ok", "warn", "FAIL", "fix" or "info". */
typedef void (*rootfs_line_fn)(void *userdata, const char *verdict, const char *text);

/*
 * Check the tree at dir as `nsbox rootfs verify` and `nsbox doctor` do, beyond its files being
 * there: every ELF file finds its shared libraries in the tree (elfcheck.h), the tree has a
 * linker cache, and inside a real sandbox on it the C.UTF-8 locale, time zones, find_library,
 * localhost, getservbyname and the imports its profile lists (/usr/share/nsbox/profile) work.
 * Reports each through line(). Returns the number of FAIL lines.
 */
unsigned rootfs_check_tree(const char *dir, rootfs_line_fn line, void *userdata);

/* `nsbox rootfs ...` (argv[0] is "rootfs"). Returns the exit status. */
int rootfs_main(int argc, char **argv);
