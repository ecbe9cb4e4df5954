/* The stack profile model and its text views (top, collapsed). */
#include "pctl.h"
#include "util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void pctl_profile_free(struct pctl_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->nnames; i++)
		free(p->names[i]);
	free(p->names);
	free(p->hash);
	free(p->frames);
	free(p->stacks);
	free(p);
}

static uint32_t hash_str(const char *s, size_t len)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	for (size_t i = 0; i < len; i++)
		h = (h ^ (uint8_t)s[i]) * 16777619u;
	return h;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t nc = *cap ? *cap : 16;
	while (nc < need)
		nc *= 2;
	void *np = realloc(*arr, nc * elem);
	if (!np)
		return -ENOMEM;
	*arr = np;
	*cap = nc;
	return 0;
}

static int rehash(struct pctl_profile *p)
{
	size_t nc = p->hash_cap ? p->hash_cap * 2 : 256;
	uint32_t *nh = calloc(nc, sizeof(*nh));
	if (!nh)
		return -ENOMEM;
	for (size_t i = 0; i < p->nnames; i++) {
		size_t j = hash_str(p->names[i], strlen(p->names[i])) & (nc - 1);
		while (nh[j])
			j = (j + 1) & (nc - 1);
		nh[j] = (uint32_t)i + 1;
	}
	free(p->hash);
	p->hash = nh;
	p->hash_cap = nc;
	return 0;
}

int64_t pctl_intern(struct pctl_profile *p, const char *s, size_t len)
{
	if ((p->nnames + 1) * 2 > p->hash_cap && rehash(p) < 0)
		return -ENOMEM;
	size_t j = hash_str(s, len) & (p->hash_cap - 1);
	while (p->hash[j]) {
		const char *n = p->names[p->hash[j] - 1];
		if (strncmp(n, s, len) == 0 && n[len] == '\0')
			return p->hash[j] - 1;
		j = (j + 1) & (p->hash_cap - 1);
	}
	if (p->nnames >= UINT32_MAX - 1 ||
	    grow((void **)&p->names, &p->cap_names, p->nnames + 1, sizeof(char *)) < 0)
		return -ENOMEM;
	char *copy = malloc(len + 1);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, s, len);
	copy[len] = '\0';
	p->names[p->nnames] = copy;
	p->hash[j] = (uint32_t)++p->nnames;
	return (int64_t)p->nnames - 1;
}

int pctl_add_stack(struct pctl_profile *p, const uint32_t *frames, uint32_t n, int64_t value)
{
	if (grow((void **)&p->frames, &p->cap_frames, p->nframes + n, sizeof(uint32_t)) < 0 ||
	    grow((void **)&p->stacks, &p->cap_stacks, p->nstacks + 1, sizeof(*p->stacks)) < 0)
		return -ENOMEM;
	if (n)
		memcpy(p->frames + p->nframes, frames, n * sizeof(uint32_t));
	p->stacks[p->nstacks++] = (struct pctl_stack){ .off = p->nframes, .n = n, .value = value };
	p->nframes += n;
	if (value > 0 && p->total <= INT64_MAX - value)
		p->total += value;
	return 0;
}

int pctl_read_fd(int fd, uint8_t **buf, size_t *len)
{
	int r = util_read_all(fd, PCTL_MAX_FILE, buf, len);
	return r == -E2BIG ? -EFBIG : r;
}

static int cmp_row(const void *a, const void *b)
{
	const struct pctl_top_row *x = a, *y = b;
	if (x->flat != y->flat)
		return x->flat < y->flat ? 1 : -1;
	if (x->cum != y->cum)
		return x->cum < y->cum ? 1 : -1;
	return x->name < y->name ? -1 : x->name > y->name;
}

int pctl_top(const struct pctl_profile *p, struct pctl_top_row **rows, size_t *nrows)
{
	struct pctl_top_row *all = calloc(p->nnames ? p->nnames : 1, sizeof(*all));
	size_t *seen = calloc(p->nnames ? p->nnames : 1, sizeof(*seen));
	size_t n = 0;
	if (!all || !seen) {
		free(all);
		free(seen);
		return -ENOMEM;
	}
	for (size_t i = 0; i < p->nstacks; i++) {
		const struct pctl_stack *s = &p->stacks[i];
		/* An empty stack may come with no frame array at all (NULL). */
		if (!s->n)
			continue;
		const uint32_t *f = p->frames + s->off;
		all[f[s->n - 1]].flat += s->value;
		/* A recursive function counts once per stack in cum. */
		for (uint32_t j = 0; j < s->n; j++) {
			if (seen[f[j]] == i + 1)
				continue;
			seen[f[j]] = i + 1;
			all[f[j]].cum += s->value;
		}
	}
	for (size_t i = 0; i < p->nnames; i++) {
		if (all[i].flat == 0 && all[i].cum == 0)
			continue;
		all[n] = all[i];
		all[n++].name = (uint32_t)i;
	}
	free(seen);
	qsort(all, n, sizeof(*all), cmp_row);
	*rows = all;
	*nrows = n;
	return 0;
}

static int cmp_stack(const void *a, const void *b, void *ctx)
{
	const struct pctl_profile *p = ctx;
	const struct pctl_stack *x = &p->stacks[*(const size_t *)a], *y = &p->stacks[*(const size_t *)b];
	for (uint32_t i = 0; i < x->n && i < y->n; i++) {
		int c = strcmp(p->names[p->frames[x->off + i]], p->names[p->frames[y->off + i]]);
		if (c)
			return c;
	}
	return x->n < y->n ? -1 : x->n > y->n;
}

int pctl_collapsed(const struct pctl_profile *p, FILE *out)
{
	/* Sorted and merged, as stackcollapse does: one line per distinct stack. */
	size_t *ix = malloc((p->nstacks ? p->nstacks : 1) * sizeof(*ix)), n = 0;
	if (!ix)
		return -ENOMEM;
	for (size_t i = 0; i < p->nstacks; i++)
		if (p->stacks[i].n && p->stacks[i].value > 0)
			ix[n++] = i;
	qsort_r(ix, n, sizeof(*ix), cmp_stack, (void *)p);
	for (size_t i = 0; i < n;) {
		const struct pctl_stack *s = &p->stacks[ix[i]];
		int64_t v = 0;
		size_t j = i;
		for (; j < n && cmp_stack(&ix[i], &ix[j], (void *)p) == 0; j++)
			if (v <= INT64_MAX - p->stacks[ix[j]].value)
				v += p->stacks[ix[j]].value;
		for (uint32_t k = 0; k < s->n; k++) {
			/* ';' separates frames and the last space the count: keep both out of names. */
			for (const char *c = p->names[p->frames[s->off + k]]; *c; c++)
				fputc(*c == ';' ? ':' : *c == '\n' ? ' ' : *c, out);
			if (k + 1 < s->n)
				fputc(';', out);
		}
		fprintf(out, " %" PRId64 "\n", v);
		i = j;
	}
	free(ix);
	return ferror(out) ? -EIO : 0;
}

void pctl_fmt_value(const struct pctl_profile *p, int64_t v, char *out, size_t n)
{
	double d = (double)v;
	if (v == 0)
		snprintf(out, n, "0");
	else if (!strcmp(p->unit, "nanoseconds")) {
		if (d >= 1e9 || d <= -1e9)
			snprintf(out, n, "%.2fs", d / 1e9);
		else if (d >= 1e6 || d <= -1e6)
			snprintf(out, n, "%.2fms", d / 1e6);
		else
			snprintf(out, n, "%.2fus", d / 1e3);
	} else if (!strcmp(p->unit, "bytes")) {
		if (d >= 1 << 30)
			snprintf(out, n, "%.2fGB", d / (1 << 30));
		else if (d >= 1 << 20)
			snprintf(out, n, "%.2fMB", d / (1 << 20));
		else if (d >= 1 << 10)
			snprintf(out, n, "%.2fkB", d / (1 << 10));
		else
			snprintf(out, n, "%" PRId64 "B", v);
	} else {
		snprintf(out, n, "%" PRId64, v);
	}
}
