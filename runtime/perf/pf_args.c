/*
 * Native method-event arguments (docs/METHOD_EVENTS.md, "Native
 * arguments"): a recorded hit's argument registers, as its target's
 * "#args=TYPES" asks, and a table of the distinct argument sets seen, so
 * that a stack with other values is another pprof sample. Strings are
 * read from the target's memory with process_vm_readv, as the helper's
 * user (the target's, or root with CAP_SYS_PTRACE for a root or setuid
 * target): one read of at most NARGS_STR_MAX bytes per string argument
 * per hit, never more. The target may change the bytes while they are
 * read: the string is what the read saw, which is the app's own data.
 */
#include "pf.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* DWARF numbers of rdi, rsi, rdx, rcx, r8, r9 (pf.h's register order). */
static const uint8_t arg_reg[NARGS_MAX] = { 5, 4, 1, 2, 8, 9 };

#define PF_ARG_UNREADABLE "<unreadable>"

/*
 * At most NARGS_STR_MAX bytes at addr. Split at the page boundary so that a
 * short string at the end of a mapping, followed by nothing mapped, is
 * still read (a partial transfer stops between iovec elements, never
 * inside one). The bytes read, or -1.
 */
static ssize_t read_str(pid_t pid, int pidfd, uint64_t addr, char *buf)
{
	long pg = sysconf(_SC_PAGESIZE);
	uint64_t page = pg > 0 ? (uint64_t)pg : 4096;
	uint64_t first = page - (addr & (page - 1));
	if (addr == 0 || addr + NARGS_STR_MAX < addr)
		return -1;
	if (first > NARGS_STR_MAX)
		first = NARGS_STR_MAX;
	struct iovec local = { .iov_base = buf, .iov_len = NARGS_STR_MAX };
	struct iovec remote[2] = {
		{ .iov_base = (void *)(uintptr_t)addr, .iov_len = first },
		{ .iov_base = (void *)(uintptr_t)(addr + first), .iov_len = NARGS_STR_MAX - first },
	};
	ssize_t n = process_vm_readv(pid, &local, 1, remote, first < NARGS_STR_MAX ? 2 : 1, 0);
	if (n <= 0)
		return -1;
	/*
	 * The samples of a target that has exited are still drained, and its
	 * pid may belong to another process by then: the read counts only if
	 * the target (its pidfd) was still alive after it, since a live
	 * process keeps its pid. No pidfd (kernels before 5.3): trusted as is.
	 */
	struct pollfd pf = { .fd = pidfd, .events = POLLIN };
	if (pidfd >= 0 && poll(&pf, 1, 0) != 0)
		return -1;
	return n;
}

int pf_args_read(pid_t pid, int pidfd, const char *types, const struct pf_sample *s,
		 struct pf_argset *out)
{
	char raw[NARGS_STR_MAX];
	memset(out, 0, sizeof(*out)); /* the table compares whole sets */
	if (!types || !types[0])
		return 0;
	if (!s->has_regs)
		return -ENODATA;
	for (unsigned i = 0; i < NARGS_MAX && types[i]; i++) {
		if (types[i] == '-')
			continue;
		struct pf_argval *a = &out->a[out->n++];
		uint64_t v = s->regs[arg_reg[i]];
		a->index = (uint8_t)i;
		a->kind = types[i];
		a->v = v;
		if (types[i] != 's')
			continue;
		ssize_t n = read_str(pid, pidfd, v, raw);
		if (n < 0) {
			memcpy(a->s, PF_ARG_UNREADABLE, sizeof(PF_ARG_UNREADABLE));
			a->slen = sizeof(PF_ARG_UNREADABLE) - 1;
			a->unreadable = 1;
		} else {
			a->slen = (uint8_t)nargs_clean_str(raw, (size_t)n, a->s);
		}
		a->v = 0; /* the value is the text; the pointer is not kept */
	}
	return 0;
}

struct pf_argtab {
	struct pf_argset *v;
	size_t n, cap;
	uint32_t *slots;     /* index + 1, 0 empty */
	size_t nslots;
};

static uint32_t set_hash(const struct pf_argset *a)
{
	const uint8_t *p = (const uint8_t *)a;
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < sizeof(*a); i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int pf_argtab_new(struct pf_argtab **out)
{
	struct pf_argtab *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->nslots = 2 * PF_MAX_ARGSETS;
	t->slots = calloc(t->nslots, sizeof(*t->slots));
	if (!t->slots) {
		free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

int pf_argtab_add(struct pf_argtab *t, const struct pf_argset *a, uint32_t *id)
{
	size_t h = set_hash(a) & (t->nslots - 1);
	for (; t->slots[h]; h = (h + 1) & (t->nslots - 1))
		if (!memcmp(&t->v[t->slots[h] - 1], a, sizeof(*a))) {
			*id = t->slots[h];
			return 0;
		}
	if (t->n >= PF_MAX_ARGSETS)
		return -ENOSPC;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		if (nc > PF_MAX_ARGSETS)
			nc = PF_MAX_ARGSETS;
		struct pf_argset *v = realloc(t->v, nc * sizeof(*v));
		if (!v)
			return -ENOSPC;
		t->v = v;
		t->cap = nc;
	}
	t->v[t->n] = *a;
	t->slots[h] = (uint32_t)++t->n;
	*id = (uint32_t)t->n;
	return 0;
}

const struct pf_argset *pf_argtab_get(const struct pf_argtab *t, uint32_t id)
{
	return t && id >= 1 && id <= t->n ? &t->v[id - 1] : NULL;
}

void pf_argtab_free(struct pf_argtab *t)
{
	if (!t)
		return;
	free(t->v);
	free(t->slots);
	free(t);
}
