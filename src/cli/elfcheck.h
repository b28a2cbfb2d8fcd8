/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elfcheck: does every ELF file of a root filesystem find its shared libraries there?
 *
 * elf_parse() reads the headers of one ELF file from memory (pure, bounds-checked: a tree is
 * untrusted input, and nothing in it is ever executed or handed to ldd). elfcheck_tree() walks a
 * tree through descriptors and resolves each DT_NEEDED name the way ld.so(8) would inside it:
 * DT_RPATH (without DT_RUNPATH), DT_RUNPATH ($ORIGIN expanded), the directories of the tree's
 * /etc/ld.so.conf(.d) when the tree has a linker cache, then the default directories.
 */
#pragma once

#include <stddef.h>
#include <stdint.h>

#define ELF_MAX_NEEDED 128

struct elf_info {
    unsigned char elf_class; /* ELFCLASS32 or ELFCLASS64 */
    uint16_t machine;        /* e_machine */
    uint16_t type;           /* e_type */
    /* The strings point into the parsed buffer, each checked to end inside the string table. */
    const char *interp;  /* PT_INTERP, or NULL */
    const char *rpath;   /* DT_RPATH, or NULL */
    const char *runpath; /* DT_RUNPATH, or NULL */
    size_t n_needed;
    const char *needed[ELF_MAX_NEEDED];
};

/*
 * Parse the ELF file in buf[0..len): its class, machine, type, interpreter and dynamic section.
 * Returns 1 for an ELF file of this host's byte order (ret filled), 0 for anything that is not
 * one (no magic, other byte order), -EBADMSG for a malformed file (a header, table or string
 * outside the buffer, a string table without its end), -E2BIG past ELF_MAX_NEEDED entries.
 */
int elf_parse(const uint8_t *buf, size_t len, struct elf_info *ret);

/* Called for each library an ELF file cannot resolve: file and lib are paths/names inside the
 * tree (file absolute, as seen inside); lib is NULL for a file that is not well-formed (a header,
 * table or string outside it). Return < 0 to stop the walk with that value. */
typedef int (*elfcheck_missing_fn)(const char *file, const char *lib, void *userdata);

/*
 * Walk the tree below root_fd (an O_DIRECTORY descriptor; no symlink is followed out of it,
 * openat2(2) RESOLVE_IN_ROOT), check every ELF file of the host's machine, and call missing()
 * for each unresolved DT_NEEDED or PT_INTERP. *ret_files counts the ELF files checked,
 * *ret_missing the unresolved names and malformed files. Separate debug files (below
 * /usr/lib/debug, whose segments hold no data) are not checked. Returns 0, or -errno of the
 * walk (a malformed ELF file is reported, not an error).
 */
int elfcheck_tree(int root_fd, elfcheck_missing_fn missing, void *userdata, unsigned *ret_files,
                  unsigned *ret_missing);
