/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* elf_parse(): an ELF file's interpreter and dynamic section, from untrusted bytes. */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "elfcheck.h"

/* A small ELF64 shared object of this host's byte order: the headers, PT_LOAD over the whole
 * file at vaddr 0x1000, PT_INTERP, PT_DYNAMIC, then the string table. */
#define INTERP "/lib64/ld-linux-x86-64.so.2"
static const char strtab[] = "\0libfoo.so.1\0libc.so.6\0$ORIGIN/../lib";
#define STR_FOO 1
#define STR_LIBC 13
#define STR_RUNPATH 23

struct image {
    Elf64_Ehdr eh;
    Elf64_Phdr ph[3];
    Elf64_Dyn dyn[6];
    char interp[sizeof(INTERP)];
    char strtab[sizeof(strtab)];
};

static struct image img;

static void build(void)
{
    const uint64_t base = 0x1000;
    memset(&img, 0, sizeof(img));
    memcpy(img.eh.e_ident, ELFMAG, SELFMAG);
    img.eh.e_ident[EI_CLASS] = ELFCLASS64;
    img.eh.e_ident[EI_DATA] = __BYTE_ORDER == __LITTLE_ENDIAN ? ELFDATA2LSB : ELFDATA2MSB;
    img.eh.e_ident[EI_VERSION] = EV_CURRENT;
    img.eh.e_type = ET_DYN;
    img.eh.e_machine = EM_X86_64;
    img.eh.e_phoff = offsetof(struct image, ph);
    img.eh.e_phentsize = sizeof(Elf64_Phdr);
    img.eh.e_phnum = 3;
    img.ph[0] = (Elf64_Phdr){.p_type = PT_LOAD,
                             .p_offset = 0,
                             .p_vaddr = base,
                             .p_filesz = sizeof(img),
                             .p_memsz = sizeof(img)};
    img.ph[1] = (Elf64_Phdr){.p_type = PT_INTERP,
                             .p_offset = offsetof(struct image, interp),
                             .p_filesz = sizeof(INTERP)};
    img.ph[2] = (Elf64_Phdr){.p_type = PT_DYNAMIC,
                             .p_offset = offsetof(struct image, dyn),
                             .p_filesz = sizeof(img.dyn)};
    img.dyn[0] = (Elf64_Dyn){.d_tag = DT_NEEDED, .d_un.d_val = STR_FOO};
    img.dyn[1] = (Elf64_Dyn){.d_tag = DT_NEEDED, .d_un.d_val = STR_LIBC};
    img.dyn[2] = (Elf64_Dyn){.d_tag = DT_RUNPATH, .d_un.d_val = STR_RUNPATH};
    img.dyn[3] = (Elf64_Dyn){.d_tag = DT_STRTAB,
                             .d_un.d_val = base + offsetof(struct image, strtab)};
    img.dyn[4] = (Elf64_Dyn){.d_tag = DT_STRSZ, .d_un.d_val = sizeof(strtab)};
    img.dyn[5] = (Elf64_Dyn){.d_tag = DT_NULL};
    memcpy(img.interp, INTERP, sizeof(INTERP));
    memcpy(img.strtab, strtab, sizeof(strtab));
}

TestSuite(elf_parse, .init = build);

Test(elf_parse, reads_needed_runpath_interp)
{
    struct elf_info info;
    cr_assert_eq(elf_parse((const uint8_t *)&img, sizeof(img), &info), 1);
    cr_assert_eq(info.elf_class, ELFCLASS64);
    cr_assert_eq(info.type, ET_DYN);
    cr_assert_eq(info.n_needed, 2);
    cr_assert_str_eq(info.needed[0], "libfoo.so.1");
    cr_assert_str_eq(info.needed[1], "libc.so.6");
    cr_assert_str_eq(info.runpath, "$ORIGIN/../lib");
    cr_assert_null(info.rpath);
    cr_assert_str_eq(info.interp, INTERP);
}

Test(elf_parse, not_elf_is_zero)
{
    struct elf_info info;
    static const uint8_t text[] = "#!/bin/sh\necho this is not an ELF file\n";
    cr_assert_eq(elf_parse(text, sizeof(text), &info), 0);
    cr_assert_eq(elf_parse((const uint8_t *)&img, 3, &info), 0);
    img.eh.e_ident[EI_DATA] = img.eh.e_ident[EI_DATA] == ELFDATA2LSB ? ELFDATA2MSB : ELFDATA2LSB;
    cr_assert_eq(elf_parse((const uint8_t *)&img, sizeof(img), &info), 0);
}

/* Every way of pointing outside the file is -EBADMSG, never a read out of bounds (the
 * sanitizer build of scripts/test would see one). */
static const char *const malformed[] = {
    "bad class",
    "program headers past the end",
    "huge phoff",
    "short phentsize",
    "dynamic past the end",
    "interp past the end",
    "interp without NUL",
    "strtab outside every PT_LOAD",
    "strsz past the segment",
    "needed offset past strsz",
    "last string without NUL",
    "no strtab",
    "load offset overflow",
};

static void make_malformed(size_t i)
{
    switch (i) {
    case 0:
        img.eh.e_ident[EI_CLASS] = 7;
        break;
    case 1:
        img.eh.e_phoff = sizeof(img) - 8;
        break;
    case 2:
        img.eh.e_phoff = UINT64_MAX - 16;
        break;
    case 3:
        img.eh.e_phentsize = 8;
        break;
    case 4:
        img.ph[2].p_offset = sizeof(img) - 4;
        break;
    case 5:
        img.ph[1].p_filesz = 4096;
        break;
    case 6:
        img.interp[sizeof(INTERP) - 1] = 'x';
        break;
    case 7:
        img.dyn[3].d_un.d_val = 0x10;
        break;
    case 8:
        img.dyn[4].d_un.d_val = 1 << 20;
        break;
    case 9:
        img.dyn[0].d_un.d_val = 4000;
        break;
    case 10:
        img.strtab[sizeof(strtab) - 1] = 'b';
        break;
    case 11:
        img.dyn[3].d_tag = DT_DEBUG;
        break;
    case 12:
        img.ph[0].p_offset = UINT64_MAX - 8;
        break;
    default:
        cr_assert_fail("no case %zu", i);
    }
}

Test(elf_parse, malformed)
{
    struct elf_info info;
    for (size_t i = 0; i < sizeof(malformed) / sizeof(malformed[0]); i++) {
        build();
        make_malformed(i);
        cr_expect_eq(elf_parse((const uint8_t *)&img, sizeof(img), &info), -EBADMSG, "%s",
                     malformed[i]);
    }
}

/* Every prefix of the file, in a buffer of exactly that size: an error or a result, never a
 * read past the end. */
Test(elf_parse, truncations)
{
    struct elf_info info;
    for (size_t n = 0; n < sizeof(img); n++) {
        uint8_t *copy = malloc(n ? n : 1);
        cr_assert_not_null(copy);
        memcpy(copy, &img, n);
        int r = elf_parse(copy, n, &info);
        if (n >= offsetof(struct image, strtab) + sizeof(strtab))
            cr_expect_eq(r, 1, "prefix of %zu bytes (only padding cut): %d", n, r);
        else
            cr_expect(r == 0 || r == -EBADMSG, "prefix of %zu bytes: %d", n, r);
        free(copy);
    }
}

/* Random bytes flipped anywhere: no crash, and any success names strings inside the buffer. */
Test(elf_parse, flipped_bytes)
{
    struct elf_info info;
    srand(15);
    for (int i = 0; i < 20000; i++) {
        build();
        for (int k = 0; k < 4; k++)
            ((uint8_t *)&img)[rand() % sizeof(img)] = (uint8_t)rand();
        uint8_t *copy = malloc(sizeof(img));
        cr_assert_not_null(copy);
        memcpy(copy, &img, sizeof(img));
        if (elf_parse(copy, sizeof(img), &info) == 1)
            for (size_t j = 0; j < info.n_needed; j++)
                cr_assert((const uint8_t *)info.needed[j] >= copy &&
                          (const uint8_t *)info.needed[j] + strlen(info.needed[j]) <
                              copy + sizeof(img));
        free(copy);
    }
}
