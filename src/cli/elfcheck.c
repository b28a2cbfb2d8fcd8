/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * elfcheck: does every ELF file of a root filesystem find its shared libraries there?
 *
 * The tree may come from anywhere, so its files are only read, never run (ldd runs the
 * program's interpreter, ld.so(8): "ldd ... may lead to the execution of arbitrary code"), and
 * every offset an ELF file states is checked against the file's size before it is used (elf(5)
 * describes the headers read here).
 */
#include <elf.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "elfcheck.h"
#include "macro.h"
#include "syscalls.h"

#if __BYTE_ORDER == __LITTLE_ENDIAN
#define HOST_DATA ELFDATA2LSB
#else
#define HOST_DATA ELFDATA2MSB
#endif
#define HOST_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)

/* This host's e_machine, and Debian's multiarch directory of its libraries (ld.so's default
 * directories there are /lib/TRIPLET, /usr/lib/TRIPLET, /lib and /usr/lib). */
#if defined(__x86_64__)
#define HOST_MACHINE EM_X86_64
#define HOST_TRIPLET "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define HOST_MACHINE EM_AARCH64
#define HOST_TRIPLET "aarch64-linux-gnu"
#elif defined(__i386__)
#define HOST_MACHINE EM_386
#define HOST_TRIPLET "i386-linux-gnu"
#elif defined(__arm__)
#define HOST_MACHINE EM_ARM
#define HOST_TRIPLET "arm-linux-gnueabihf"
#elif defined(__riscv) && __riscv_xlen == 64
#define HOST_MACHINE EM_RISCV
#define HOST_TRIPLET "riscv64-linux-gnu"
#elif defined(__powerpc64__) && __BYTE_ORDER == __LITTLE_ENDIAN
#define HOST_MACHINE EM_PPC64
#define HOST_TRIPLET "powerpc64le-linux-gnu"
#elif defined(__s390x__)
#define HOST_MACHINE EM_S390
#define HOST_TRIPLET "s390x-linux-gnu"
#else
#error "elfcheck.c: add this architecture's e_machine and multiarch triplet"
#endif

/* [off, off + size) lies inside a buffer of len bytes (no overflow on the way). */
static bool in_bounds(size_t len, uint64_t off, uint64_t size)
{
    return off <= len && size <= len - off;
}

/* One program header or dynamic entry, widened to 64 bits whatever the file's class. */
struct phdr {
    uint32_t type;
    uint64_t offset, vaddr, filesz;
};

static void read_phdr(const uint8_t *p, bool is64, struct phdr *ret)
{
    if (is64) {
        Elf64_Phdr h;
        memcpy(&h, p, sizeof(h)); /* memcpy: the file's offsets need not be aligned */
        *ret = (struct phdr){h.p_type, h.p_offset, h.p_vaddr, h.p_filesz};
    } else {
        Elf32_Phdr h;
        memcpy(&h, p, sizeof(h));
        *ret = (struct phdr){h.p_type, h.p_offset, h.p_vaddr, h.p_filesz};
    }
}

static void read_dyn(const uint8_t *p, bool is64, int64_t *ret_tag, uint64_t *ret_val)
{
    if (is64) {
        Elf64_Dyn d;
        memcpy(&d, p, sizeof(d));
        *ret_tag = d.d_tag;
        *ret_val = d.d_un.d_val;
    } else {
        Elf32_Dyn d;
        memcpy(&d, p, sizeof(d));
        *ret_tag = d.d_tag;
        *ret_val = d.d_un.d_val;
    }
}

#define MAX_LOADS 64

int elf_parse(const uint8_t *buf, size_t len, struct elf_info *ret)
{
    struct elf_info info = {0};
    struct phdr loads[MAX_LOADS], dyn = {0}, interp = {0};
    size_t n_loads = 0, phsize, dynsize;
    uint64_t phoff, phnum, phentsize, strtab_vaddr = 0, strsz = 0, strtab_off = 0;
    uint64_t needed[ELF_MAX_NEEDED], rpath = 0, runpath = 0;
    bool is64, have_dyn = false, have_interp = false, have_strtab = false;
    bool have_rpath = false, have_runpath = false;

    if (len < EI_NIDENT || memcmp(buf, ELFMAG, SELFMAG) != 0 || buf[EI_DATA] != HOST_DATA)
        return 0;
    if (buf[EI_CLASS] != ELFCLASS32 && buf[EI_CLASS] != ELFCLASS64)
        return -EBADMSG;
    is64 = buf[EI_CLASS] == ELFCLASS64;
    info.elf_class = buf[EI_CLASS];
    if (is64) {
        Elf64_Ehdr eh;
        if (len < sizeof(eh))
            return -EBADMSG;
        memcpy(&eh, buf, sizeof(eh));
        info.type = eh.e_type;
        info.machine = eh.e_machine;
        phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
        phsize = sizeof(Elf64_Phdr), dynsize = sizeof(Elf64_Dyn);
    } else {
        Elf32_Ehdr eh;
        if (len < sizeof(eh))
            return -EBADMSG;
        memcpy(&eh, buf, sizeof(eh));
        info.type = eh.e_type;
        info.machine = eh.e_machine;
        phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
        phsize = sizeof(Elf32_Phdr), dynsize = sizeof(Elf32_Dyn);
    }
    /* PN_XNUM (more headers than e_phnum holds) never occurs in a loadable file. */
    if (phnum == PN_XNUM || (phnum > 0 && phentsize < phsize) ||
        !in_bounds(len, phoff, phnum * phentsize))
        return -EBADMSG;

    for (uint64_t i = 0; i < phnum; i++) {
        struct phdr p;
        read_phdr(buf + phoff + i * phentsize, is64, &p);
        if (p.type == PT_LOAD) {
            if (n_loads == MAX_LOADS)
                return -EBADMSG;
            loads[n_loads++] = p;
        } else if (p.type == PT_DYNAMIC && !have_dyn) {
            dyn = p, have_dyn = true;
        } else if (p.type == PT_INTERP && !have_interp) {
            interp = p, have_interp = true;
        }
    }

    if (have_interp) {
        if (!in_bounds(len, interp.offset, interp.filesz) || interp.filesz == 0 ||
            !memchr(buf + interp.offset, '\0', interp.filesz))
            return -EBADMSG;
        info.interp = (const char *)buf + interp.offset;
    }

    if (have_dyn) {
        if (!in_bounds(len, dyn.offset, dyn.filesz))
            return -EBADMSG;
        for (uint64_t o = 0; o + dynsize <= dyn.filesz; o += dynsize) {
            int64_t tag;
            uint64_t val;
            read_dyn(buf + dyn.offset + o, is64, &tag, &val);
            if (tag == DT_NULL)
                break;
            switch (tag) {
            case DT_NEEDED:
                if (info.n_needed == ELF_MAX_NEEDED)
                    return -E2BIG;
                needed[info.n_needed++] = val;
                break;
            case DT_STRTAB:
                strtab_vaddr = val, have_strtab = true;
                break;
            case DT_STRSZ:
                strsz = val;
                break;
            case DT_RPATH:
                rpath = val, have_rpath = true;
                break;
            case DT_RUNPATH:
                runpath = val, have_runpath = true;
                break;
            default:
                break;
            }
        }
    }

    if (info.n_needed > 0 || have_rpath || have_runpath) {
        bool mapped = false;
        if (!have_strtab || strsz == 0)
            return -EBADMSG;
        /* DT_STRTAB is an address: the PT_LOAD segment holding it gives its file offset. */
        for (size_t i = 0; i < n_loads && !mapped; i++)
            if (strtab_vaddr >= loads[i].vaddr && strtab_vaddr - loads[i].vaddr < loads[i].filesz) {
                uint64_t into = strtab_vaddr - loads[i].vaddr;
                if (strsz > loads[i].filesz - into || loads[i].offset > UINT64_MAX - into)
                    return -EBADMSG;
                strtab_off = loads[i].offset + into;
                mapped = true;
            }
        if (!mapped || !in_bounds(len, strtab_off, strsz))
            return -EBADMSG;
#define STRING_AT(o)                                                                               \
    ((o) < strsz && memchr(buf + strtab_off + (o), '\0', strsz - (o))                              \
         ? (const char *)buf + strtab_off + (o)                                                    \
         : NULL)
        for (size_t i = 0; i < info.n_needed; i++)
            if (!(info.needed[i] = STRING_AT(needed[i])))
                return -EBADMSG;
        if (have_rpath && !(info.rpath = STRING_AT(rpath)))
            return -EBADMSG;
        if (have_runpath && !(info.runpath = STRING_AT(runpath)))
            return -EBADMSG;
#undef STRING_AT
    }
    *ret = info;
    return 1;
}

/* The tree being checked and where its libraries are searched. */
#define MAX_DIRS 64
struct tree {
    int root_fd;
    dev_t dev;
    size_t n_dirs;
    char dirs[MAX_DIRS][256];
    elfcheck_missing_fn missing;
    void *userdata;
    unsigned files, n_missing;
};

/* Open path inside the tree: symlinks resolve inside it, as if it were the root (openat2(2)
 * RESOLVE_IN_ROOT), so a link cannot lead the check to a host file. */
static int open_in_tree(const struct tree *t, const char *path, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)flags | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    int fd = sys_openat2(t->root_fd, path, &how);
    return fd < 0 ? negative_errno() : fd;
}

static void add_dir(struct tree *t, const char *dir, size_t len)
{
    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (len == 0 || dir[0] != '/' || len >= sizeof(t->dirs[0]) || t->n_dirs == MAX_DIRS)
        return;
    for (size_t i = 0; i < t->n_dirs; i++)
        if (strlen(t->dirs[i]) == len && memcmp(t->dirs[i], dir, len) == 0)
            return;
    memcpy(t->dirs[t->n_dirs], dir, len);
    t->dirs[t->n_dirs++][len] = '\0';
}

static void read_ld_conf(struct tree *t, const char *path, int depth);

/* "include DIR/ *SUFFIX" (Debian's /etc/ld.so.conf reads "include /etc/ld.so.conf.d/ *.conf",
 * without the blanks):
 * the files of DIR ending in SUFFIX, in name order as glob(3) gives them. Other patterns are
 * not expanded. */
static void read_ld_conf_glob(struct tree *t, const char *pattern, int depth)
{
    const char *star = strchr(pattern, '*'), *slash = strrchr(pattern, '/');
    char dir[256], names[64][256], path[sizeof(dir) + sizeof(names[0]) + 1];
    _cleanup_closedir_ DIR *d = NULL;
    struct dirent *de;
    size_t n = 0;
    int fd;

    if (!star || !slash || slash + 1 != star || strchr(star + 1, '*') ||
        (size_t)(slash - pattern) >= sizeof(dir))
        return;
    memcpy(dir, pattern, (size_t)(slash - pattern));
    dir[slash - pattern] = '\0';
    fd = open_in_tree(t, dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY);
    if (fd < 0 || !(d = fdopendir(fd))) {
        if (fd >= 0)
            (void)close(fd);
        return;
    }
    while ((de = readdir(d)) && n < ELEMENTSOF(names)) {
        size_t l = strlen(de->d_name), sl = strlen(star + 1);
        if (de->d_name[0] != '.' && l >= sl && l < sizeof(names[0]) &&
            strcmp(de->d_name + l - sl, star + 1) == 0)
            memcpy(names[n++], de->d_name, l + 1);
    }
    qsort(names, n, sizeof(names[0]), (int (*)(const void *, const void *))strcmp);
    for (size_t i = 0; i < n; i++) {
        const char *name = names[i];
        if (snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path))
            read_ld_conf(t, path, depth + 1);
    }
}

/* ld.so.conf(5) as ldconfig(8) reads it: directories separated by white space, ':' or ',';
 * '#' comments; "include PATTERN". */
static void read_ld_conf(struct tree *t, const char *path, int depth)
{
    _cleanup_fclose_ FILE *f = NULL;
    char line[1024];
    int fd;

    if (depth > 4 || (fd = open_in_tree(t, path, O_RDONLY | O_NONBLOCK)) < 0)
        return;
    if (!(f = fdopen(fd, "r"))) {
        (void)close(fd);
        return;
    }
    while (fgets(line, sizeof(line), f)) {
        char *p = line;
        line[strcspn(line, "#\n")] = '\0';
        p += strspn(p, " \t");
        if (strncmp(p, "include", 7) == 0 && (p[7] == ' ' || p[7] == '\t')) {
            p += 7 + strspn(p + 7, " \t");
            p[strcspn(p, " \t")] = '\0';
            read_ld_conf_glob(t, p, depth);
            continue;
        }
        while (*p) {
            size_t n = strcspn(p, " \t:,");
            add_dir(t, p, n);
            p += n;
            p += strspn(p, " \t:,");
        }
    }
}

/* Is path inside the tree a library ld.so could load for a file of this class and machine? */
static bool library_at(const struct tree *t, const char *path, const struct elf_info *for_file)
{
    unsigned char h[sizeof(Elf64_Ehdr)];
    _cleanup_close_ int fd = open_in_tree(t, path, O_RDONLY | O_NONBLOCK);
    struct stat st;
    uint16_t machine;

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return false;
    if (RETRY_EINTR(pread(fd, h, sizeof(h), 0)) < (ssize_t)sizeof(Elf32_Ehdr) ||
        memcmp(h, ELFMAG, SELFMAG) != 0)
        return false;
    /* ld.so skips a library of another class or machine and searches on. */
    memcpy(&machine, h + offsetof(Elf64_Ehdr, e_machine), sizeof(machine));
    return h[EI_CLASS] == for_file->elf_class && machine == for_file->machine;
}

/* Look name up in the directories of a DT_RPATH/DT_RUNPATH list (':'-separated; $ORIGIN and
 * ${ORIGIN} are the directory of the file, origin). Entries with other tokens ($LIB,
 * $PLATFORM) are skipped. */
static bool in_path_list(const struct tree *t, const char *list, const char *origin,
                         const char *name, const struct elf_info *info)
{
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ":");
        char dir[PATH_MAX], path[PATH_MAX + 256];
        size_t o = 0;
        bool ok = true;

        for (size_t i = 0; i < n && ok; i++) {
            const char *rest = p + i;
            size_t skip = 0;
            if (strncmp(rest, "$ORIGIN", 7) == 0 &&
                (i + 7 == n ||
                 !(rest[7] == '_' || (rest[7] >= 'A' && rest[7] <= 'Z') ||
                   (rest[7] >= 'a' && rest[7] <= 'z') || (rest[7] >= '0' && rest[7] <= '9'))))
                skip = 7;
            else if (strncmp(rest, "${ORIGIN}", 9) == 0)
                skip = 9;
            if (skip) {
                size_t ol = strlen(origin);
                if (o + ol >= sizeof(dir))
                    ok = false;
                else
                    memcpy(dir + o, origin, ol), o += ol;
                i += skip - 1;
            } else if (*rest == '$' || o + 1 >= sizeof(dir))
                ok = false;
            else
                dir[o++] = *rest;
        }
        dir[o] = '\0';
        if (ok && o > 0 && snprintf(path, sizeof(path), "%s/%s", dir, name) < (int)sizeof(path) &&
            library_at(t, path, info))
            return true;
        p += n;
        if (*p == ':')
            p++;
    }
    return false;
}

/* Resolve one DT_NEEDED name for the file whose directory inside the tree is origin, in
 * ld.so(8)'s order. */
static bool resolve(const struct tree *t, const struct elf_info *info, const char *origin,
                    const char *name)
{
    char path[PATH_MAX];

    if (strchr(name, '/'))
        return name[0] != '/' || library_at(t, name, info);
    if (info->rpath && !info->runpath && in_path_list(t, info->rpath, origin, name, info))
        return true;
    if (info->runpath && in_path_list(t, info->runpath, origin, name, info))
        return true;
    for (size_t i = 0; i < t->n_dirs; i++)
        if (snprintf(path, sizeof(path), "%s/%s", t->dirs[i], name) < (int)sizeof(path) &&
            library_at(t, path, info))
            return true;
    return false;
}

static int report(struct tree *t, const char *file, const char *lib)
{
    t->n_missing++;
    return t->missing ? t->missing(file, lib, t->userdata) : 0;
}

/* Check one regular file (fd, at path inside the tree). Files of another machine or class are
 * not this tree's programs (firmware, cross tools' data) and are skipped. */
static int check_file(struct tree *t, int fd, const char *path, off_t size)
{
    struct elf_info info;
    char origin[PATH_MAX];
    uint8_t magic[SELFMAG];
    void *map;
    int r = 0, p;

    if (size < (off_t)sizeof(Elf32_Ehdr) ||
        RETRY_EINTR(pread(fd, magic, sizeof(magic), 0)) != (ssize_t)sizeof(magic) ||
        memcmp(magic, ELFMAG, SELFMAG) != 0)
        return 0;
    if ((uint64_t)size > (1ULL << 31))
        return 0; /* not a library or program: no loadable ELF file is 2 GiB */
    /* A file truncated while mapped would raise SIGBUS: the tree is the caller's own, which
     * nothing else should be changing while it is checked. */
    map = mmap(NULL, (size_t)size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED)
        return negative_errno();
    p = elf_parse(map, (size_t)size, &info);
    if (p < 0)
        r = report(t, path, NULL);
    else if (p > 0 && info.machine == HOST_MACHINE && info.elf_class == HOST_CLASS &&
             (info.type == ET_EXEC || info.type == ET_DYN)) {
        const char *slash = strrchr(path, '/');
        size_t ol = slash && slash != path ? (size_t)(slash - path) : 1;
        memcpy(origin, path, ol);
        origin[ol] = '\0';
        t->files++;
        if (info.interp && !library_at(t, info.interp, &info))
            r = report(t, path, info.interp);
        for (size_t i = 0; i < info.n_needed && r >= 0; i++)
            if (!resolve(t, &info, origin, info.needed[i]))
                r = report(t, path, info.needed[i]);
    }
    (void)munmap(map, (size_t)size);
    return r;
}

/* Walk the directory dfd (at path inside the tree), never following a symlink and staying on
 * the tree's file system: symlinks are checked where they point, as the files they name. */
static int walk(struct tree *t, int dfd, char *path, size_t path_len, int depth)
{
    _cleanup_closedir_ DIR *d = fdopendir(dfd);
    struct dirent *de;
    int r = 0;

    if (!d) {
        r = negative_errno();
        (void)close(dfd);
        return r;
    }
    if (depth > 64)
        return -ELOOP;
    while (r >= 0 && (errno = 0, de = readdir(d))) {
        size_t nl = strlen(de->d_name);
        struct stat st;
        int fd;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (path_len + 1 + nl >= PATH_MAX)
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != t->dev)
            continue;
        path[path_len] = '/';
        memcpy(path + path_len + 1, de->d_name, nl + 1);
        if (S_ISDIR(st.st_mode)) {
            /* Not /usr/lib/debug: separate debug files' headers describe segments they do not
             * hold, and nothing loads them. */
            if (strcmp(path, "/usr/lib/debug") == 0) {
                path[path_len] = '\0';
                continue;
            }
            fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0)
                r = walk(t, fd, path, path_len + 1 + nl, depth + 1);
        } else if (S_ISREG(st.st_mode) && st.st_size >= (off_t)sizeof(Elf32_Ehdr)) {
            _cleanup_close_ int ffd = openat(dirfd(d), de->d_name,
                                             O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (ffd >= 0)
                r = check_file(t, ffd, path, st.st_size);
        }
        path[path_len] = '\0';
    }
    if (r >= 0 && errno != 0)
        r = negative_errno();
    return r;
}

int elfcheck_tree(int root_fd, elfcheck_missing_fn missing, void *userdata, unsigned *ret_files,
                  unsigned *ret_missing)
{
    static const char *const defaults[] = {"/lib/" HOST_TRIPLET,
                                           "/usr/lib/" HOST_TRIPLET,
                                           "/lib",
                                           "/usr/lib",
                                           "/lib64",
                                           "/usr/lib64"};
    struct tree *t = calloc(1, sizeof(*t));
    _cleanup_close_ int cache_fd = -EBADF;
    char path[PATH_MAX] = "";
    struct stat st;
    int fd, r;

    if (!t)
        return -ENOMEM;
    t->root_fd = root_fd;
    t->missing = missing;
    t->userdata = userdata;
    if (fstat(root_fd, &st) < 0) {
        r = negative_errno();
        free(t);
        return r;
    }
    t->dev = st.st_dev;
    /* ld.so finds libraries of the ld.so.conf directories only through the cache ldconfig
     * makes from them (ld.so(8)): without /etc/ld.so.cache only the defaults count. */
    cache_fd = open_in_tree(t, "/etc/ld.so.cache", O_RDONLY | O_NONBLOCK);
    if (cache_fd >= 0)
        read_ld_conf(t, "/etc/ld.so.conf", 0);
    for (size_t i = 0; i < ELEMENTSOF(defaults); i++)
        add_dir(t, defaults[i], strlen(defaults[i]));
    fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    r = fd < 0 ? negative_errno() : walk(t, fd, path, 0, 0);
    if (r >= 0) {
        if (ret_files)
            *ret_files = t->files;
        if (ret_missing)
            *ret_missing = t->n_missing;
    }
    free(t);
    return r < 0 ? r : 0;
}
