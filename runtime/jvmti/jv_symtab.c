/*
 * Function names from an ELF file's .symtab (docs/JVMTI.md, "Mixed
 * stacks"): dladdr only knows the dynamic symbols, and HotSpot exports
 * none of the functions a mixed stack goes through (JavaCalls::call_helper,
 * jni_CallStaticLongMethod), nor libjli its JavaMain, nor libc start_thread.
 * OpenJDK's and Temurin's libjvm.so keep a .symtab; this reads it once per
 * profile written, on the agent thread, never in the signal handler.
 *
 * The file is read with pread into bounded buffers (never mmap'd: a file
 * truncated meanwhile must not SIGBUS the VM). The bytes are those of a
 * library the process itself has loaded, but they are checked as if
 * hostile all the same (tests/fuzz/fuzz_jv_symtab.c): every offset and
 * size against the file, every name NUL-terminated inside its string table.
 */
#include "jv.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct jvy_sym {
	uint64_t value, size;
	uint32_t name; /* offset in strtab */
};

struct jvy_table {
	struct jvy_sym *syms;
	uint32_t n;
	char *strtab;
	uint64_t strsize;
};

/* Reads n bytes at off of the image, or fails. */
static int rd(const struct jvy_reader *r, uint64_t off, void *buf, uint64_t n)
{
	if (off > r->size || n > r->size - off)
		return -ENOEXEC;
	return r->read(r->ctx, off, buf, (size_t)n);
}

static int by_value(const void *a, const void *b)
{
	const struct jvy_sym *x = a, *y = b;
	return x->value < y->value ? -1 : x->value > y->value;
}

void jvy_free(struct jvy_table *t)
{
	if (!t)
		return;
	free(t->syms);
	free(t->strtab);
	free(t);
}

int jvy_parse(const struct jvy_reader *r, struct jvy_table **out)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sym, str;
	struct jvy_table *t = NULL;
	int ret;

	*out = NULL;
	if ((ret = rd(r, 0, &eh, sizeof(eh))) < 0)
		return ret;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    !eh.e_shnum)
		return -ENOEXEC;
	/* The first SHT_SYMTAB (an ELF file has at most one). */
	uint32_t i;
	for (i = 0; i < eh.e_shnum; i++) {
		if ((ret = rd(r, eh.e_shoff + (uint64_t)i * sizeof(sym), &sym, sizeof(sym))) < 0)
			return ret;
		if (sym.sh_type == SHT_SYMTAB)
			break;
	}
	if (i == eh.e_shnum)
		return -ENOENT; /* stripped */
	if (sym.sh_entsize != sizeof(Elf64_Sym) || sym.sh_link >= eh.e_shnum ||
	    sym.sh_size / sizeof(Elf64_Sym) > JVY_MAX_SYMS * 4ull)
		return -ENOEXEC;
	if ((ret = rd(r, eh.e_shoff + (uint64_t)sym.sh_link * sizeof(str), &str, sizeof(str))) < 0)
		return ret;
	if (str.sh_type != SHT_STRTAB || !str.sh_size || str.sh_size > JVY_MAX_STRTAB)
		return -ENOEXEC;
	if (!(t = calloc(1, sizeof(*t))) || !(t->strtab = malloc(str.sh_size))) {
		ret = -ENOMEM;
		goto fail;
	}
	t->strsize = str.sh_size;
	if ((ret = rd(r, str.sh_offset, t->strtab, str.sh_size)) < 0)
		goto fail;
	t->strtab[t->strsize - 1] = '\0'; /* every name ends inside the table */

	uint64_t count = sym.sh_size / sizeof(Elf64_Sym), cap = 0;
	Elf64_Sym chunk[256];
	for (uint64_t k = 0; k < count; k += 256) {
		uint64_t m = count - k < 256 ? count - k : 256;
		if ((ret = rd(r, sym.sh_offset + k * sizeof(Elf64_Sym), chunk,
			      m * sizeof(Elf64_Sym))) < 0)
			goto fail;
		for (uint64_t j = 0; j < m; j++) {
			const Elf64_Sym *s = &chunk[j];
			int type = ELF64_ST_TYPE(s->st_info);
			if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s->st_shndx == SHN_UNDEF ||
			    !s->st_value || !s->st_size || s->st_name == 0 ||
			    s->st_name >= t->strsize || s->st_size > UINT64_MAX - s->st_value)
				continue;
			if (t->n == JVY_MAX_SYMS)
				goto full; /* the rest stay unnamed (lib.so+0xoffset) */
			if (t->n == cap) {
				cap = cap ? cap * 2 : 1024;
				if (cap > JVY_MAX_SYMS)
					cap = JVY_MAX_SYMS;
				struct jvy_sym *ns = realloc(t->syms, cap * sizeof(*ns));
				if (!ns) {
					ret = -ENOMEM;
					goto fail;
				}
				t->syms = ns;
			}
			t->syms[t->n++] = (struct jvy_sym){ .value = s->st_value, .size = s->st_size,
							    .name = s->st_name };
		}
	}
full:
	if (!t->n) {
		ret = -ENOENT;
		goto fail;
	}
	qsort(t->syms, t->n, sizeof(*t->syms), by_value);
	*out = t;
	return 0;
fail:
	jvy_free(t);
	return ret;
}

const char *jvy_lookup(const struct jvy_table *t, uint64_t vaddr, uint64_t *start)
{
	if (!t || !t->n)
		return NULL;
	/* The last symbol starting at or below vaddr; aliases share a start. */
	uint32_t lo = 0, hi = t->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (t->syms[mid].value <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Nested or overlapping symbols: look back a little for one that covers. */
	for (uint32_t k = 0; k < 4 && lo > k; k++) {
		const struct jvy_sym *s = &t->syms[lo - 1 - k];
		if (vaddr - s->value < s->size) {
			if (start)
				*start = s->value;
			return t->strtab + s->name;
		}
	}
	return NULL;
}

static int pread_all(void *ctx, uint64_t off, void *buf, size_t n)
{
	int fd = *(int *)ctx;
	size_t got = 0;
	while (got < n) {
		ssize_t k = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -ENOEXEC; /* shorter than it said */
		got += (size_t)k;
	}
	return 0;
}

int jvy_load(const char *path, struct jvy_table **out)
{
	struct stat st;
	int ret;

	*out = NULL;
	if (!path || path[0] != '/')
		return -EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -ENOEXEC;
	}
	struct jvy_reader r = { .read = pread_all, .ctx = &fd, .size = (uint64_t)st.st_size };
	ret = jvy_parse(&r, out);
	close(fd);
	return ret;
}
