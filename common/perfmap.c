#include "perfmap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pmap_entry {
	uint64_t start, end; /* [start, end) */
	uint32_t name;       /* offset in names */
	uint32_t seq;        /* line order, so the last entry of a start wins */
};

struct pmap {
	struct pmap_entry *e;
	uint32_t n;
	char *names;
	struct pmap_stats st;
};

/* 1..16 hex digits, with an optional 0x. Advances *p past them. */
static bool pmap_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0;

	if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end; s++) {
		int d;
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if (*s >= 'a' && *s <= 'f')
			d = *s - 'a' + 10;
		else if (*s >= 'A' && *s <= 'F')
			d = *s - 'A' + 10;
		else
			break;
		if (++digits > 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	if (!digits)
		return false;
	*p = s;
	*out = v;
	return true;
}

static const char *pmap_blanks(const char *s, const char *end)
{
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	return s;
}

/* One line [s, end) without its newline; appends to m. false: malformed. */
static bool pmap_line(struct pmap *m, const char *s, const char *end, size_t *names_len)
{
	uint64_t start, size;
	const char *p = s;

	if (!pmap_hex(&p, end, &start) || p == end || (*p != ' ' && *p != '\t'))
		return false;
	p = pmap_blanks(p, end);
	if (!pmap_hex(&p, end, &size) || p == end || (*p != ' ' && *p != '\t'))
		return false;
	p = pmap_blanks(p, end);
	/* The name: the rest of the line, without a trailing \r or blanks. */
	const char *ne = end;
	while (ne > p && (ne[-1] == '\r' || ne[-1] == ' ' || ne[-1] == '\t'))
		ne--;
	size_t len = (size_t)(ne - p);
	if (size == 0 || start > UINT64_MAX - size || len == 0 || memchr(p, '\0', len))
		return false;
	if (len > PMAP_MAX_NAME)
		len = PMAP_MAX_NAME;
	struct pmap_entry *e = &m->e[m->n];
	e->start = start;
	e->end = start + size;
	e->name = (uint32_t)*names_len;
	e->seq = m->n;
	memcpy(m->names + *names_len, p, len);
	m->names[*names_len + len] = '\0';
	*names_len += len + 1;
	m->n++;
	return true;
}

static int pmap_cmp(const void *a, const void *b)
{
	const struct pmap_entry *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

int pmap_parse(const char *buf, size_t len, struct pmap **out)
{
	*out = NULL;
	if (len > PMAP_MAX_BYTES)
		return -E2BIG;
	struct pmap *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	/*
	 * Every line is at least "0 1 x\n" (6 bytes) and adds one entry and
	 * at most its own length plus a NUL to the names: both bounded by len.
	 */
	size_t max_lines = len / 6 + 1;
	if (max_lines > PMAP_MAX_ENTRIES)
		max_lines = PMAP_MAX_ENTRIES;
	m->e = malloc(max_lines * sizeof(*m->e));
	m->names = malloc(len + 1);
	if (!m->e || !m->names) {
		pmap_free(m);
		return -ENOMEM;
	}
	size_t names_len = 0;
	const char *p = buf, *end = buf + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		/* A last line without its newline is still being written. */
		if (!nl)
			break;
		if (m->n >= max_lines) {
			m->st.dropped++;
		} else if (!pmap_line(m, p, nl, &names_len)) {
			m->st.bad++;
		}
		p = nl + 1;
	}
	if (m->n > 1) {
		qsort(m->e, m->n, sizeof(*m->e), pmap_cmp);
		/* Fold each run of one start into its last entry. */
		uint32_t w = 0;
		for (uint32_t i = 0; i < m->n; i++) {
			if (w && m->e[w - 1].start == m->e[i].start)
				w--;
			m->e[w++] = m->e[i];
		}
		m->n = w;
	}
	m->st.entries = m->n;
	*out = m;
	return 0;
}

int pmap_load(pid_t pid, uid_t owner, struct pmap **out)
{
	char path[64];
	struct stat st;
	char *buf = NULL;
	size_t len = 0;
	int fd, r;

	*out = NULL;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
	/* No link to follow elsewhere, and a FIFO must not block the reader. */
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EPERM : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_uid != owner) {
		r = -EPERM;
		goto out;
	}
	/* What is there now: a JIT keeps appending, its last line may be partial. */
	size_t want = st.st_size > (off_t)PMAP_MAX_BYTES ? PMAP_MAX_BYTES : (size_t)st.st_size;
	buf = malloc(want ? want : 1);
	if (!buf) {
		r = -ENOMEM;
		goto out;
	}
	while (len < want) {
		ssize_t n = read(fd, buf + len, want - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	r = pmap_parse(buf, len, out);
	if (r == 0 && st.st_size > (off_t)PMAP_MAX_BYTES)
		(*out)->st.truncated = 1;
out:
	free(buf);
	close(fd);
	return r;
}

const char *pmap_lookup(const struct pmap *m, uint64_t addr, uint64_t *start)
{
	if (!m || !m->n)
		return NULL;
	/* The last entry whose start is <= addr. */
	uint32_t lo = 0, hi = m->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (m->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0)
		return NULL;
	const struct pmap_entry *e = &m->e[lo - 1];
	if (addr >= e->end)
		return NULL;
	if (start)
		*start = e->start;
	return m->names + e->name;
}

void pmap_get_stats(const struct pmap *m, struct pmap_stats *st)
{
	if (m)
		*st = m->st;
	else
		memset(st, 0, sizeof(*st));
}

void pmap_free(struct pmap *m)
{
	if (!m)
		return;
	free(m->e);
	free(m->names);
	free(m);
}
