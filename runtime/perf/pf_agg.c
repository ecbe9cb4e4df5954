/*
 * Samples are merged as they are unwound: a 16 KiB stack copy per sample
 * cannot be kept for a whole capture, but distinct stacks are few. Memory is
 * bounded by PF_MAX_STACKS entries and PF_MAX_ARENA stored frames.
 */
#include "pf.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct pf_entry {
	uint32_t tid;
	uint32_t hash;
	uint32_t off;       /* into the frame arena */
	uint16_t nframes;
	uint8_t unwinder;
	int8_t probe;       /* method events: the target that fired, -1 none */
	uint32_t args;      /* its argument set, 0 none */
	uint64_t count, cpu_ns;
};

struct pf_agg {
	struct pf_entry *e;
	size_t n, cap;
	uint64_t *arena;
	size_t narena, arena_cap;
	uint32_t *slots;    /* entry index + 1, 0 empty; a power of two */
	size_t nslots;
	size_t last;        /* the entry pf_agg_add last added to */
};

static uint32_t stack_hash(uint32_t tid, unsigned unw, int probe, uint32_t args,
			   const uint64_t *f, size_t n)
{
	uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)tid << 8) ^ unw ^
		     ((uint64_t)(uint8_t)probe << 40) ^ ((uint64_t)args * 0x100000001b3ull);
	for (size_t i = 0; i < n; i++) {
		h ^= f[i];
		h *= 0xff51afd7ed558ccdull;
		h ^= h >> 33;
	}
	return (uint32_t)(h ^ (h >> 32));
}

int pf_agg_new(struct pf_agg **out)
{
	struct pf_agg *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->nslots = 1024;
	a->slots = calloc(a->nslots, sizeof(*a->slots));
	if (!a->slots) {
		free(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

static int rehash(struct pf_agg *a)
{
	size_t ns = a->nslots * 2;
	uint32_t *s = calloc(ns, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < a->n; i++) {
		size_t h = a->e[i].hash & (ns - 1);
		while (s[h])
			h = (h + 1) & (ns - 1);
		s[h] = (uint32_t)i + 1;
	}
	free(a->slots);
	a->slots = s;
	a->nslots = ns;
	return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t max)
{
	if (need <= *cap)
		return 0;
	if (need > max)
		return -ENOSPC;
	size_t nc = *cap ? *cap : 256;
	while (nc < need)
		nc *= 2;
	if (nc > max)
		nc = max;
	void *q = realloc(*p, nc * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = nc;
	return 0;
}

int pf_agg_add(struct pf_agg *a, uint32_t tid, enum pf_unwinder unw, const uint64_t *frames,
	       size_t nframes, uint64_t cpu_ns)
{
	return pf_agg_add_probe(a, tid, -1, 0, unw, frames, nframes, cpu_ns);
}

int pf_agg_add_probe(struct pf_agg *a, uint32_t tid, int probe, uint32_t args,
		     enum pf_unwinder unw, const uint64_t *frames, size_t nframes,
		     uint64_t cpu_ns)
{
	if (nframes > PF_MAX_FRAMES)
		nframes = PF_MAX_FRAMES;
	if (probe < -1 || probe >= PF_MAX_UPROBES)
		return -EINVAL;
	uint32_t hash = stack_hash(tid, unw, probe, args, frames, nframes);
	size_t h = hash & (a->nslots - 1);
	for (; a->slots[h]; h = (h + 1) & (a->nslots - 1)) {
		struct pf_entry *e = &a->e[a->slots[h] - 1];
		if (e->hash == hash && e->tid == tid && e->unwinder == unw && e->probe == probe &&
		    e->args == args &&
		    e->nframes == nframes &&
		    !memcmp(a->arena + e->off, frames, nframes * sizeof(*frames))) {
			e->count++;
			e->cpu_ns += cpu_ns;
			a->last = (size_t)(e - a->e);
			return 0;
		}
	}
	if (a->n >= PF_MAX_STACKS)
		return -ENOSPC;
	int r;
	/* Keep the table at most half full, so a probe always ends. */
	if ((a->n + 1) * 2 > a->nslots) {
		if (rehash(a) < 0)
			return -ENOSPC;
		for (h = hash & (a->nslots - 1); a->slots[h]; h = (h + 1) & (a->nslots - 1))
			;
	}
	if ((r = grow((void **)&a->e, &a->cap, a->n + 1, sizeof(*a->e), PF_MAX_STACKS)) < 0 ||
	    (r = grow((void **)&a->arena, &a->arena_cap, a->narena + nframes, sizeof(*a->arena),
		      PF_MAX_ARENA)) < 0)
		return r == -ENOMEM ? -ENOSPC : r;
	struct pf_entry *e = &a->e[a->n];
	e->tid = tid;
	e->hash = hash;
	e->off = (uint32_t)a->narena;
	e->nframes = (uint16_t)nframes;
	e->unwinder = (uint8_t)unw;
	e->probe = (int8_t)probe;
	e->args = args;
	e->count = 1;
	e->cpu_ns = cpu_ns;
	memcpy(a->arena + a->narena, frames, nframes * sizeof(*frames));
	a->narena += nframes;
	a->last = a->n;
	a->slots[h] = (uint32_t)++a->n;
	return 0;
}

size_t pf_agg_last(const struct pf_agg *a)
{
	return a ? a->last : 0;
}

size_t pf_agg_size(const struct pf_agg *a)
{
	return a->n;
}

void pf_agg_get(const struct pf_agg *a, size_t i, struct pf_stack *out)
{
	const struct pf_entry *e = &a->e[i];
	out->tid = e->tid;
	out->probe = e->probe;
	out->args = e->args;
	out->unwinder = e->unwinder;
	out->frames = a->arena + e->off;
	out->nframes = e->nframes;
	out->count = e->count;
	out->cpu_ns = e->cpu_ns;
}

void pf_agg_free(struct pf_agg *a)
{
	if (!a)
		return;
	free(a->e);
	free(a->arena);
	free(a->slots);
	free(a);
}
