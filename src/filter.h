/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The seccomp filter of the payload (libseccomp). */
#pragma once

#include <seccomp.h>

/*
 * Build the payload's filter: the built-in deny list (see policy/README.md for each rule and
 * its reason) over a default of SCMP_ACT_ALLOW, for the native architecture only, so that
 * system calls of a foreign ABI (i386 via int 0x80, x32) kill the process.
 * The filter is compiled, not loaded. On success *ret owns it (release with seccomp_release()).
 * Returns 0, -ENOMEM, or the -errno libseccomp reports (-EINVAL, -EDOM for an unknown arch).
 */
int filter_build(scmp_filter_ctx *ret);

/* Load ctx into the calling thread; libseccomp sets no_new_privs first. After this, only
 * execve(2) and the _exit paths of the caller may follow. Returns 0 or a -errno. */
int filter_load(scmp_filter_ctx ctx);

/* Print ctx in libseccomp's pseudo-filter-code form to fd. Returns 0 or a -errno. */
int filter_dump(scmp_filter_ctx ctx, int fd);
