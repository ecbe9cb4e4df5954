/*
 * pprof result reader: gunzip (capped), protobuf-c decode of
 * proto/profile.proto, then every id and string index is checked before
 * use; a sample naming a location that does not exist is an error, not a
 * guess. Fuzzed by tests/fuzz/fuzz_pprof_read.c.
 */
#include "pctl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "profile.pb-c.h"

static int gunzip(const uint8_t *in, size_t len, uint8_t **out, size_t *olen)
{
	z_stream z;
	size_t cap = len * 4 < (1u << 16) ? (1u << 16) : len * 4, n = 0;
	uint8_t *b;
	int r;

	if (cap > PCTL_MAX_RAW)
		cap = PCTL_MAX_RAW;
	if (!(b = malloc(cap)))
		return -ENOMEM;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
		free(b);
		return -ENOMEM;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	for (;;) {
		if (n == cap) {
			if (cap >= PCTL_MAX_RAW) {
				r = -EFBIG;
				goto fail;
			}
			size_t nc = cap * 2 > PCTL_MAX_RAW ? PCTL_MAX_RAW : cap * 2;
			uint8_t *nb = realloc(b, nc);
			if (!nb) {
				r = -ENOMEM;
				goto fail;
			}
			b = nb;
			cap = nc;
		}
		z.next_out = b + n;
		z.avail_out = (uInt)(cap - n);
		int zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
		if (zr == Z_STREAM_END)
			break;
		if (zr != Z_OK && !(zr == Z_BUF_ERROR && z.avail_out == 0)) {
			r = -EBADMSG;
			goto fail;
		}
	}
	inflateEnd(&z);
	*out = b;
	*olen = n;
	return 0;
fail:
	inflateEnd(&z);
	free(b);
	return r;
}

struct id_idx {
	uint64_t id;
	size_t idx;
};

static int cmp_id(const void *a, const void *b)
{
	uint64_t x = ((const struct id_idx *)a)->id, y = ((const struct id_idx *)b)->id;
	return x < y ? -1 : x > y;
}

static struct id_idx *index_ids(size_t n, uint64_t (*get)(const void *arr, size_t i),
				const void *arr)
{
	struct id_idx *v = malloc((n ? n : 1) * sizeof(*v));
	if (!v)
		return NULL;
	for (size_t i = 0; i < n; i++)
		v[i] = (struct id_idx){ get(arr, i), i };
	qsort(v, n, sizeof(*v), cmp_id);
	return v;
}

static long find_id(const struct id_idx *v, size_t n, uint64_t id)
{
	struct id_idx key = { id, 0 };
	const struct id_idx *f = bsearch(&key, v, n, sizeof(*v), cmp_id);
	return f ? (long)f->idx : -1;
}

static uint64_t loc_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Location *const *)arr)[i]->id;
}

static uint64_t fn_id(const void *arr, size_t i)
{
	return ((Perftools__Profiles__Function *const *)arr)[i]->id;
}

static const char *pstr(const Perftools__Profiles__Profile *pr, int64_t i)
{
	return i >= 0 && (uint64_t)i < pr->n_string_table ? pr->string_table[i] : NULL;
}

int pctl_pprof_read(const uint8_t *buf, size_t len, struct pctl_profile **out, char *err,
		    size_t errn)
{
	uint8_t *raw = NULL;
	size_t rawlen = len;
	const uint8_t *pb = buf;
	Perftools__Profiles__Profile *pr = NULL;
	struct pctl_profile *p = NULL;
	struct id_idx *locs = NULL, *fns = NULL;
	uint32_t *frames = NULL;
	int r;

	*out = NULL;
	if (len > PCTL_MAX_FILE) {
		snprintf(err, errn, "file over %u MiB", PCTL_MAX_FILE >> 20);
		return -EFBIG;
	}
	if (len >= 2 && buf[0] == 0x1f && buf[1] == 0x8b) {
		if ((r = gunzip(buf, len, &raw, &rawlen)) < 0) {
			snprintf(err, errn, "%s", r == -EFBIG ? "decompressed size over the cap"
				 : r == -ENOMEM ? "out of memory" : "corrupt gzip data");
			return r;
		}
		pb = raw;
	}
	pr = perftools__profiles__profile__unpack(NULL, rawlen, pb);
	if (!pr) {
		snprintf(err, errn, "not a pprof profile (protobuf decoding failed)");
		r = -EBADMSG;
		goto out;
	}
	if (pr->n_sample_type == 0) {
		snprintf(err, errn, "the profile has no sample types");
		r = -EBADMSG;
		goto out;
	}
	/* go tool pprof's choice: the default sample type, else the last one. */
	size_t vi = pr->n_sample_type - 1;
	for (size_t i = 0; pr->default_sample_type && i < pr->n_sample_type; i++)
		if (pr->sample_type[i]->type == pr->default_sample_type)
			vi = i;
	if (!(p = calloc(1, sizeof(*p)))) {
		r = -ENOMEM;
		goto nomem;
	}
	const char *t = pstr(pr, pr->sample_type[vi]->type), *u = pstr(pr, pr->sample_type[vi]->unit);
	snprintf(p->sample_type, sizeof(p->sample_type), "%s", t && *t ? t : "value");
	snprintf(p->unit, sizeof(p->unit), "%s", u ? u : "");
	if (!(locs = index_ids(pr->n_location, loc_id, pr->location)) ||
	    !(fns = index_ids(pr->n_function, fn_id, pr->function)) ||
	    !(frames = malloc(PCTL_MAX_DEPTH * sizeof(*frames)))) {
		r = -ENOMEM;
		goto nomem;
	}
	for (size_t si = 0; si < pr->n_sample; si++) {
		const Perftools__Profiles__Sample *s = pr->sample[si];
		uint32_t n = 0;
		bool cut = false;
		if (s->n_value <= vi)
			continue;
		/* Leaf first in the file; collected leaf first, reversed below. */
		for (size_t li = 0; li < s->n_location_id && !cut; li++) {
			long l = find_id(locs, pr->n_location, s->location_id[li]);
			if (l < 0) {
				snprintf(err, errn, "sample %zu names location %" PRIu64
					 ", which does not exist", si, s->location_id[li]);
				r = -EBADMSG;
				goto out;
			}
			const Perftools__Profiles__Location *loc = pr->location[l];
			char addr[32];
			const char *name = NULL;
			int64_t id;
			if (loc->n_line == 0) {
				snprintf(addr, sizeof(addr), "0x%" PRIx64, loc->address);
				if ((id = pctl_intern(p, addr, strlen(addr))) < 0)
					goto nomem;
				if (n == PCTL_MAX_DEPTH) {
					cut = true;
					break;
				}
				frames[n++] = (uint32_t)id;
				continue;
			}
			/* line[0] is the innermost inlined function. */
			for (size_t k = 0; k < loc->n_line; k++) {
				long f = find_id(fns, pr->n_function, loc->line[k]->function_id);
				name = f >= 0 ? pstr(pr, pr->function[f]->name) : NULL;
				if (!name || !*name) {
					snprintf(addr, sizeof(addr), "0x%" PRIx64, loc->address);
					name = addr;
				}
				if ((id = pctl_intern(p, name, strlen(name))) < 0)
					goto nomem;
				if (n == PCTL_MAX_DEPTH) {
					cut = true;
					break;
				}
				frames[n++] = (uint32_t)id;
			}
		}
		if (cut)
			p->truncated++;
		for (uint32_t i = 0; i < n / 2; i++) {
			uint32_t x = frames[i];
			frames[i] = frames[n - 1 - i];
			frames[n - 1 - i] = x;
		}
		if (pctl_add_stack(p, frames, n, s->value[vi]) < 0)
			goto nomem;
	}
	*out = p;
	p = NULL;
	r = 0;
	goto out;
nomem:
	snprintf(err, errn, "out of memory");
	r = -ENOMEM;
out:
	free(frames);
	free(locs);
	free(fns);
	pctl_profile_free(p);
	if (pr)
		perftools__profiles__profile__free_unpacked(pr, NULL);
	free(raw);
	return r;
}
