/*
 * The pprof redactor as it was before the streaming rewrite (unpack the
 * whole Profile with protobuf-c, rebuild it with common/pprof.c). Kept
 * only as the reference of test_rdc_pprof_diff: the streaming redactor in
 * redact/rdc_pprof.c must keep and drop exactly what this one does.
 * Not linked into any binary.
 */
#include "rdc.h"
#include "rdc_pprof_ref.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "pprof.h"
#include "profile.pb-c.h"

#define RDC_PPROF_MAX_IN  (256u << 20)
#define RDC_PPROF_MAX_RAW (1024u << 20)
#define RDC_KERNEL_START  0xffff800000000000ull

typedef Perftools__Profiles__Profile Profile;

static int read_all(int fd, uint8_t **out, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap >= RDC_PPROF_MAX_IN) {
				free(buf);
				return -E2BIG;
			}
			uint8_t *g = realloc(buf, cap * 2);
			if (!g) {
				free(buf);
				return -ENOMEM;
			}
			buf = g;
			cap *= 2;
		}
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			free(buf);
			return -errno;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* gunzip (or take as is, when the input is not gzip'd) into a new buffer. */
static int inflate_all(const uint8_t *in, size_t len, uint8_t **out, size_t *olen)
{
	if (len < 2 || in[0] != 0x1f || in[1] != 0x8b) {
		uint8_t *c = malloc(len ? len : 1);
		if (!c)
			return -ENOMEM;
		memcpy(c, in, len);
		*out = c;
		*olen = len;
		return 0;
	}
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 15 + 16) != Z_OK)
		return -ENOMEM;
	size_t cap = len * 4 + 1024, n = 0;
	uint8_t *buf = malloc(cap);
	int r = -ENOMEM, zr = Z_OK;
	if (!buf)
		goto out;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	while (zr != Z_STREAM_END) {
		if (n == cap) {
			if (cap >= RDC_PPROF_MAX_RAW) {
				r = -E2BIG;
				goto out;
			}
			size_t ncap = cap * 2 > RDC_PPROF_MAX_RAW ? RDC_PPROF_MAX_RAW : cap * 2;
			uint8_t *g = realloc(buf, ncap);
			if (!g)
				goto out;
			buf = g;
			cap = ncap;
		}
		z.next_out = buf + n;
		z.avail_out = (uInt)(cap - n);
		zr = inflate(&z, Z_NO_FLUSH);
		n = cap - z.avail_out;
		if (zr != Z_OK && zr != Z_STREAM_END) {
			r = -EBADMSG; /* corrupt or truncated gzip */
			goto out;
		}
		if (zr == Z_OK && z.avail_in == 0 && z.avail_out != 0) {
			r = -EBADMSG; /* input ended before the stream did */
			goto out;
		}
	}
	*out = buf;
	*olen = n;
	buf = NULL;
	r = 0;
out:
	free(buf);
	inflateEnd(&z);
	return r;
}

static const char *str_at(const Profile *pr, int64_t i)
{
	return i >= 0 && (size_t)i < pr->n_string_table ? pr->string_table[i] : NULL;
}

/*
 * A numeric label that names another process or thread (say "peer_pid").
 * The sample's own pid/tid/thread_id are the app's once the sample is kept.
 */
static bool foreign_id_label(const struct rdc_policy *p, const char *key, int64_t num)
{
	if (!strcmp(key, "pid") || !strcmp(key, "tid") || !strcmp(key, "thread_id"))
		return false;
	if (!strstr(key, "pid") && !strstr(key, "tid"))
		return false;
	return !rdc_is_app_pid(p, (int32_t)num) && !rdc_is_app_tid(p, (int32_t)num);
}

/* The sample's pid label, or -1. */
static int64_t sample_pid(const Profile *pr, const Perftools__Profiles__Sample *s)
{
	for (size_t i = 0; i < s->n_label; i++) {
		const char *k = str_at(pr, s->label[i]->key);
		if (k && strcmp(k, "pid") == 0 && s->label[i]->str == 0)
			return s->label[i]->num;
	}
	return -1;
}

struct maps {
	/* old id -> new id, indexed by position in the input arrays */
	uint64_t *mapping, *function, *location;
};

static const Perftools__Profiles__Location *find_loc(const Profile *pr, uint64_t id, size_t *idx)
{
	/* Ids are usually 1..n in order; fall back to a scan. */
	if (id >= 1 && id <= pr->n_location && pr->location[id - 1]->id == id) {
		*idx = id - 1;
		return pr->location[id - 1];
	}
	for (size_t i = 0; i < pr->n_location; i++)
		if (pr->location[i]->id == id) {
			*idx = i;
			return pr->location[i];
		}
	return NULL;
}

static ssize_t find_by_id_mapping(const Profile *pr, uint64_t id)
{
	if (id >= 1 && id <= pr->n_mapping && pr->mapping[id - 1]->id == id)
		return (ssize_t)(id - 1);
	for (size_t i = 0; i < pr->n_mapping; i++)
		if (pr->mapping[i]->id == id)
			return (ssize_t)i;
	return -1;
}

static ssize_t find_by_id_function(const Profile *pr, uint64_t id)
{
	if (id >= 1 && id <= pr->n_function && pr->function[id - 1]->id == id)
		return (ssize_t)(id - 1);
	for (size_t i = 0; i < pr->n_function; i++)
		if (pr->function[i]->id == id)
			return (ssize_t)i;
	return -1;
}

/* New location id for old location idx (0 when it is a kernel frame). */
static int map_location(struct pp_builder *b, const Profile *pr, struct maps *m, size_t idx,
			uint64_t *out)
{
	const Perftools__Profiles__Location *l = pr->location[idx];
	int r;

	if (m->location[idx]) {
		*out = m->location[idx];
		return 0;
	}
	*out = 0;
	if (l->address >= RDC_KERNEL_START)
		return 0;
	uint64_t mid = 0;
	if (l->mapping_id) {
		ssize_t mi = find_by_id_mapping(pr, l->mapping_id);
		if (mi < 0)
			return -EBADMSG;
		const Perftools__Profiles__Mapping *mp = pr->mapping[mi];
		if (mp->memory_start >= RDC_KERNEL_START)
			return 0;
		if (!m->mapping[mi]) {
			const char *bid = str_at(pr, mp->build_id);
			if ((r = pp_add_mapping(b, mp->memory_start, mp->memory_limit, mp->file_offset,
						str_at(pr, mp->filename), bid && *bid ? bid : NULL,
						mp->has_functions, mp->has_line_numbers,
						&m->mapping[mi])) < 0)
				return r;
		}
		mid = m->mapping[mi];
	}
	uint64_t fid = 0;
	int64_t line = 0;
	if (l->n_line) {
		/* The outermost (last) line is the real function; inlined callees
		 * (earlier lines) are folded into it. */
		const Perftools__Profiles__Line *ln = l->line[l->n_line - 1];
		ssize_t fi = find_by_id_function(pr, ln->function_id);
		if (fi < 0)
			return -EBADMSG;
		const Perftools__Profiles__Function *f = pr->function[fi];
		if (!m->function[fi] &&
		    (r = pp_add_function(b, str_at(pr, f->name), str_at(pr, f->system_name),
					 str_at(pr, f->filename), f->start_line,
					 &m->function[fi])) < 0)
			return r;
		fid = m->function[fi];
		line = ln->line;
	}
	if ((r = pp_add_location(b, mid, l->address, fid, line, &m->location[idx])) < 0)
		return r;
	*out = m->location[idx];
	return 0;
}

static int rebuild(const Profile *pr, const struct rdc_policy *p, struct rdc_stats *st, int out_fd)
{
	struct pp_builder *b = NULL;
	struct maps m = { 0 };
	uint64_t *locs = NULL;
	int r;

	if (pr->n_sample_type == 0 || pr->n_sample_type > PP_MAX_VALUES)
		return -EBADMSG;
	m.mapping = calloc(pr->n_mapping + 1, sizeof(uint64_t));
	m.function = calloc(pr->n_function + 1, sizeof(uint64_t));
	m.location = calloc(pr->n_location + 1, sizeof(uint64_t));
	if (!m.mapping || !m.function || !m.location || (r = pp_new(&b)) < 0) {
		r = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < pr->n_sample_type; i++)
		if ((r = pp_add_sample_type(b, str_at(pr, pr->sample_type[i]->type),
					    str_at(pr, pr->sample_type[i]->unit))) < 0)
			goto out;
	if (pr->period_type &&
	    (r = pp_set_period(b, str_at(pr, pr->period_type->type),
			       str_at(pr, pr->period_type->unit), pr->period)) < 0)
		goto out;
	if (pr->default_sample_type && (r = pp_set_default_sample_type(
						 b, str_at(pr, pr->default_sample_type))) < 0)
		goto out;
	pp_set_time(b, pr->time_nanos, pr->duration_nanos);
	for (size_t i = 0; i < pr->n_comment; i++) {
		const char *c = str_at(pr, pr->comment[i]);
		char clean[512];
		int changed = 0;
		if (!c)
			continue;
		if (p->dlp && rdc_dlp_scrub(p->dlp, c, clean, sizeof(clean), &changed) == 0) {
			pp_add_comment(b, clean);
			st->scrubbed += (uint64_t)changed;
		} else {
			pp_add_comment(b, c);
		}
	}

	for (size_t si = 0; si < pr->n_sample; si++) {
		const Perftools__Profiles__Sample *s = pr->sample[si];
		int64_t pid = sample_pid(pr, s);
		if (s->n_value != pr->n_sample_type) {
			r = -EBADMSG;
			goto out;
		}
		if (pid < 0 || !rdc_is_app_pid(p, (int32_t)pid)) {
			st->dropped++;
			continue;
		}
		uint64_t *g = realloc(locs, (s->n_location_id + 1) * sizeof(*locs));
		if (!g) {
			r = -ENOMEM;
			goto out;
		}
		locs = g;
		size_t nl = 0;
		for (size_t k = 0; k < s->n_location_id; k++) {
			size_t idx;
			if (!find_loc(pr, s->location_id[k], &idx)) {
				r = -EBADMSG;
				goto out;
			}
			uint64_t nid;
			if ((r = map_location(b, pr, &m, idx, &nid)) < 0)
				goto out;
			if (nid)
				locs[nl++] = nid;
			else
				st->anonymised++; /* a kernel frame removed */
		}
		struct pp_label labels[PP_MAX_LABELS];
		size_t nlab = 0;
		for (size_t k = 0; k < s->n_label && nlab < PP_MAX_LABELS; k++) {
			const Perftools__Profiles__Label *lb = s->label[k];
			const char *key = str_at(pr, lb->key);
			/*
			 * A string index past the table is malformed, not "no
			 * string": read as a numeric label it would slip a foreign
			 * pid past foreign_id_label.
			 */
			if (!key || (lb->str && !str_at(pr, lb->str)) ||
			    (lb->num_unit && !str_at(pr, lb->num_unit))) {
				r = -EBADMSG;
				goto out;
			}
			if (!lb->str && foreign_id_label(p, key, lb->num)) {
				st->anonymised++;
				continue;
			}
			labels[nlab].key = key;
			labels[nlab].str = lb->str ? str_at(pr, lb->str) : NULL;
			labels[nlab].num = lb->num;
			labels[nlab].num_unit = lb->num_unit ? str_at(pr, lb->num_unit) : NULL;
			nlab++;
		}
		if ((r = pp_add_sample(b, locs, nl, s->value, s->n_value, labels, nlab)) < 0)
			goto out;
		st->kept++;
	}
	/* An idle capture (no sample at all) is an empty profile. */
	if (st->kept == 0 && pr->n_sample > 0) {
		r = -ENODATA;
		goto out;
	}
	r = pp_write_gz(b, out_fd, &st->out_bytes);
out:
	pp_free(b);
	free(m.mapping);
	free(m.function);
	free(m.location);
	free(locs);
	return r;
}

int rdc_pprof_ref(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st)
{
	uint8_t *in = NULL, *raw = NULL;
	size_t len = 0, rlen = 0;
	Profile *pr = NULL;
	struct rdc_stats dummy;
	int r;

	if (!st)
		st = &dummy;
	memset(st, 0, sizeof(*st));
	if (!p)
		return -EINVAL;
	if ((r = read_all(in_fd, &in, &len)) < 0)
		return r;
	st->in_bytes = len;
	if ((r = inflate_all(in, len, &raw, &rlen)) < 0)
		goto out;
	pr = perftools__profiles__profile__unpack(NULL, rlen, raw);
	if (!pr) {
		r = -EBADMSG;
		goto out;
	}
	/* pprof requires string_table[0] == "". */
	if (pr->n_string_table == 0 || pr->string_table[0][0] != '\0') {
		r = -EBADMSG;
		goto out;
	}
	r = rebuild(pr, p, st, out_fd);
out:
	if (pr)
		perftools__profiles__profile__free_unpacked(pr, NULL);
	free(in);
	free(raw);
	return r;
}
