/*
 * gzip'd pprof heap profile -> Perfetto ProfilePacket (issue #20,
 * docs/PERFETTO.md "Heap formats"), in the shape heapprofd writes: one
 * ProcessHeapSamples for the app's pid with the sampling interval, a
 * HeapSample per kept pprof sample (self_allocated and alloc_count from
 * alloc_space/alloc_objects, self_freed and free_count as alloc minus
 * in-use), and the ProfilePacket's own interning tables (strings,
 * mappings with build ids, frames, callstacks), which the trace processor
 * reads before InternedData.
 *
 * What is kept follows the pprof redactor (rdc_pprof.c): a sample is the
 * app's when its first numeric "pid" label is one of the app's pids; one
 * without is dropped. Kernel frames (addresses or mappings in the upper
 * half) are dropped. Only strings the kept frames and mappings use are
 * written: no label, comment or other process's name gets through.
 *
 * Memory: the input is read whole (HP_MAX_GZ), inflated whole
 * (HP_MAX_RAW) and unpacked by protobuf-c, so it is a few times the
 * inflated profile; heap profiles are tables of call sites, not streams.
 */
#include "rdc.h"
#include "rdc_pbw.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "util.h"

#define HP_MAX_GZ (256u << 20)
#define HP_MAX_RAW (1u << 30)
#define HP_MAX_OUT (512u << 20)
#define HP_KERNEL 0xffff800000000000ull

typedef Perftools__Profiles__Profile Profile;
typedef Perftools__Profiles__Location Location;
typedef Perftools__Profiles__Mapping Mapping;
typedef Perftools__Profiles__Function Function;

struct hpc {
	const Profile *pr;
	const struct rdc_policy *pol;
	int64_t pid_key;            /* string index of "pid", or -1 */
	int vi[4];                  /* alloc_objects, alloc_space, inuse_objects, inuse_space */
	uint64_t *str_iid;          /* per pprof string: output iid, 0 = not yet */
	uint64_t next_str;
	uint64_t *map_iid;          /* per pprof mapping (index) */
	uint64_t next_map;
	uint64_t **loc_frames;      /* per location: its frames' iids, innermost first */
	uint32_t *loc_nframes;
	uint64_t next_frame;
	const Location **locs;      /* sorted by id */
	const Mapping **maps;       /* sorted by id */
	const Function **funcs;     /* sorted by id */
	struct rdc_pbw strings, mappings, frames, stacks, samples, m;
};

static int gunzip(const uint8_t *in, size_t n, uint8_t **out, size_t *outn)
{
	z_stream z;
	size_t cap = n * 4 + 4096, len = 0;
	int r, e = 0;
	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -ENOMEM;
	uint8_t *b = cap <= HP_MAX_RAW ? malloc(cap) : NULL;
	if (!b) {
		inflateEnd(&z);
		return cap <= HP_MAX_RAW ? -ENOMEM : -E2BIG;
	}
	z.next_in = (uint8_t *)in;
	z.avail_in = (uInt)n;
	do {
		if (len == cap) {
			uint8_t *nb = cap >= HP_MAX_RAW ? NULL : realloc(b, cap * 2);
			if (!nb) {
				e = cap >= HP_MAX_RAW ? -E2BIG : -ENOMEM;
				break;
			}
			b = nb;
			cap *= 2;
		}
		size_t room = cap - len;
		z.next_out = b + len;
		z.avail_out = room > (1u << 30) ? (1u << 30) : (uInt)room;
		uInt before = z.avail_out;
		r = inflate(&z, Z_NO_FLUSH);
		len += before - z.avail_out;
		if (r != Z_OK && r != Z_STREAM_END) {
			e = -EBADMSG;
			break;
		}
		if (r == Z_OK && !z.avail_in && z.avail_out) {
			e = -EBADMSG; /* truncated */
			break;
		}
	} while (r != Z_STREAM_END);
	inflateEnd(&z);
	if (e) {
		free(b);
		return e;
	}
	*out = b;
	*outn = len;
	return 0;
}

static int cmp_loc(const void *a, const void *b)
{
	uint64_t x = (*(const Location *const *)a)->id, y = (*(const Location *const *)b)->id;
	return x < y ? -1 : x > y;
}

static int cmp_map(const void *a, const void *b)
{
	uint64_t x = (*(const Mapping *const *)a)->id, y = (*(const Mapping *const *)b)->id;
	return x < y ? -1 : x > y;
}

static int cmp_func(const void *a, const void *b)
{
	uint64_t x = (*(const Function *const *)a)->id, y = (*(const Function *const *)b)->id;
	return x < y ? -1 : x > y;
}

/* Index of id in sorted arr of n, or -1. get: the element's id. */
#define FIND(arr, n, want)                                                        \
	({                                                                        \
		long lo_ = 0, hi_ = (long)(n) - 1, at_ = -1;                      \
		while (lo_ <= hi_) {                                              \
			long mid_ = lo_ + (hi_ - lo_) / 2;                        \
			if ((arr)[mid_]->id == (want)) {                          \
				at_ = mid_;                                       \
				break;                                            \
			}                                                         \
			if ((arr)[mid_]->id < (want))                             \
				lo_ = mid_ + 1;                                   \
			else                                                      \
				hi_ = mid_ - 1;                                   \
		}                                                                 \
		at_;                                                              \
	})

static const char *pstr(const Profile *pr, int64_t i)
{
	return i >= 0 && (size_t)i < pr->n_string_table ? pr->string_table[i] : NULL;
}

/* The output iid of pprof string i, written on first use. */
static uint64_t str_iid(struct hpc *c, int64_t i)
{
	const char *s = pstr(c->pr, i);
	if (!s || !*s)
		return 0;
	if (!c->str_iid[i]) {
		c->str_iid[i] = ++c->next_str;
		rdc_pbw_reset(&c->m);
		rdc_pbw_u64(&c->m, RDC_PF_ISTR_IID, c->str_iid[i]);
		rdc_pbw_bytes(&c->m, RDC_PF_ISTR_STR, s, strlen(s));
		rdc_pbw_msg(&c->strings, RDC_PF_PP_STRINGS, &c->m);
	}
	return c->str_iid[i];
}

static uint64_t map_iid(struct hpc *c, uint64_t id)
{
	long k = id ? FIND(c->maps, c->pr->n_mapping, id) : -1;
	if (k < 0)
		return 0;
	if (!c->map_iid[k]) {
		const Mapping *m = c->maps[k];
		uint64_t path = str_iid(c, m->filename), bid = str_iid(c, m->build_id);
		c->map_iid[k] = ++c->next_map;
		rdc_pbw_reset(&c->m);
		rdc_pbw_u64(&c->m, RDC_PF_MAP_IID, c->map_iid[k]);
		if (bid)
			rdc_pbw_u64(&c->m, RDC_PF_MAP_BUILD_ID, bid);
		rdc_pbw_u64(&c->m, RDC_PF_MAP_START_OFFSET, m->file_offset);
		rdc_pbw_u64(&c->m, RDC_PF_MAP_START, m->memory_start);
		rdc_pbw_u64(&c->m, RDC_PF_MAP_END, m->memory_limit);
		if (path)
			rdc_pbw_packed(&c->m, RDC_PF_MAP_PATH_STRING_IDS, &path, 1);
		rdc_pbw_msg(&c->mappings, RDC_PF_PP_MAPPINGS, &c->m);
	}
	return c->map_iid[k];
}

static void put_frame(struct hpc *c, uint64_t iid, uint64_t fn, uint64_t map, uint64_t rel)
{
	rdc_pbw_reset(&c->m);
	rdc_pbw_u64(&c->m, RDC_PF_FRAME_IID, iid);
	if (fn)
		rdc_pbw_u64(&c->m, RDC_PF_FRAME_FUNCTION_NAME_ID, fn);
	if (map)
		rdc_pbw_u64(&c->m, RDC_PF_FRAME_MAPPING_ID, map);
	rdc_pbw_u64(&c->m, RDC_PF_FRAME_REL_PC, rel);
	rdc_pbw_msg(&c->frames, RDC_PF_PP_FRAMES, &c->m);
}

/* The frames of location index k, written on first use (one per line, so
 * inlined functions stay; innermost first, as pprof lists them). 0 or
 * -ENOMEM; a kernel location has none. */
static int loc_frames(struct hpc *c, long k)
{
	const Location *l = c->locs[k];
	if (c->loc_frames[k] || c->loc_nframes[k] == UINT32_MAX)
		return 0;
	long mk = l->mapping_id ? FIND(c->maps, c->pr->n_mapping, l->mapping_id) : -1;
	const Mapping *m = mk >= 0 ? c->maps[mk] : NULL;
	if (l->address >= HP_KERNEL || (m && m->memory_start >= HP_KERNEL)) {
		c->loc_nframes[k] = UINT32_MAX; /* dropped */
		return 0;
	}
	uint64_t map = m ? map_iid(c, m->id) : 0;
	uint64_t rel = m && l->address >= m->memory_start
		? l->address - m->memory_start + m->file_offset : l->address;
	size_t n = l->n_line ? l->n_line : 1;
	c->loc_frames[k] = calloc(n, sizeof(uint64_t));
	if (!c->loc_frames[k])
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		uint64_t fn = 0;
		if (l->n_line) {
			long fk = FIND(c->funcs, c->pr->n_function, l->line[i]->function_id);
			if (fk >= 0)
				fn = str_iid(c, c->funcs[fk]->name);
		}
		c->loc_frames[k][i] = ++c->next_frame;
		put_frame(c, c->loc_frames[k][i], fn, map, rel);
	}
	c->loc_nframes[k] = (uint32_t)n;
	return 0;
}

static bool sample_is_app(const struct hpc *c, const Perftools__Profiles__Sample *s)
{
	for (size_t i = 0; i < s->n_label; i++)
		if (c->pid_key >= 0 && s->label[i]->key == c->pid_key && !s->label[i]->str)
			return s->label[i]->num >= 0 && s->label[i]->num <= INT32_MAX &&
			       rdc_is_app_pid(c->pol, (int32_t)s->label[i]->num);
	return false;
}

static uint64_t value(const struct hpc *c, const Perftools__Profiles__Sample *s, int which)
{
	int i = c->vi[which];
	return i >= 0 && (size_t)i < s->n_value && s->value[i] > 0 ? (uint64_t)s->value[i] : 0;
}

static int convert(struct hpc *c, int out_fd, struct rdc_stats *st)
{
	const Profile *pr = c->pr;
	uint64_t *ids = NULL;
	size_t capids = 0, kept = 0, dropped = 0;
	int r = 0;

	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		if (!sample_is_app(c, s)) {
			dropped++;
			continue;
		}
		size_t n = 0;
		for (size_t j = 0; j < s->n_location_id; j++) {
			long k = FIND(c->locs, pr->n_location, s->location_id[j]);
			if (k < 0)
				return free(ids), -EBADMSG;
			if ((r = loc_frames(c, k)) < 0)
				return free(ids), r;
			if (c->loc_nframes[k] == UINT32_MAX)
				continue;
			if (n + c->loc_nframes[k] > capids) {
				capids = (n + c->loc_nframes[k]) * 2;
				uint64_t *p = realloc(ids, capids * sizeof(*ids));
				if (!p)
					return free(ids), -ENOMEM;
				ids = p;
			}
			for (uint32_t f = 0; f < c->loc_nframes[k]; f++)
				ids[n++] = c->loc_frames[k][f];
		}
		/* pprof lists the leaf first; Perfetto's callstack is root first. */
		for (size_t a = 0, b = n ? n - 1 : 0; a < b; a++, b--) {
			uint64_t t = ids[a];
			ids[a] = ids[b];
			ids[b] = t;
		}
		uint64_t cs = ++kept;
		rdc_pbw_reset(&c->m);
		rdc_pbw_u64(&c->m, RDC_PF_CS_IID, cs);
		rdc_pbw_packed(&c->m, RDC_PF_CS_FRAME_IDS, ids, n);
		rdc_pbw_msg(&c->stacks, RDC_PF_PP_CALLSTACKS, &c->m);

		uint64_t ao = value(c, s, 0), as = value(c, s, 1);
		uint64_t io = value(c, s, 2), is = value(c, s, 3);
		if (c->vi[1] < 0) { /* an in-use-only profile: nothing freed */
			ao = io;
			as = is;
		}
		rdc_pbw_reset(&c->m);
		rdc_pbw_u64(&c->m, RDC_PF_HS_CALLSTACK_ID, cs);
		rdc_pbw_u64(&c->m, RDC_PF_HS_SELF_ALLOCATED, as);
		rdc_pbw_u64(&c->m, RDC_PF_HS_SELF_FREED, as > is ? as - is : 0);
		rdc_pbw_u64(&c->m, RDC_PF_HS_ALLOC_COUNT, ao);
		rdc_pbw_u64(&c->m, RDC_PF_HS_FREE_COUNT, ao > io ? ao - io : 0);
		rdc_pbw_msg(&c->samples, RDC_PF_PHS_SAMPLES, &c->m);
	}
	free(ids);
	if (!kept)
		return -ENODATA;

	struct rdc_pbw dump, pp, pkt, trace;
	rdc_pbw_init(&dump, HP_MAX_OUT);
	rdc_pbw_init(&pp, HP_MAX_OUT);
	rdc_pbw_init(&pkt, HP_MAX_OUT);
	rdc_pbw_init(&trace, HP_MAX_OUT);
	uint64_t ts = pr->time_nanos > 0 ? (uint64_t)pr->time_nanos : 0;
	rdc_pbw_u64(&dump, RDC_PF_PHS_PID, (uint64_t)c->pol->pids[0]);
	rdc_pbw_u64(&dump, RDC_PF_PHS_TIMESTAMP, ts);
	rdc_pbw_bytes(&dump, RDC_PF_PHS_HEAP_NAME, "libc.malloc", 11);
	if (pr->period > 0)
		rdc_pbw_u64(&dump, RDC_PF_PHS_SAMPLING_INTERVAL, (uint64_t)pr->period);
	rdc_pbw_raw(&dump, c->samples.b, c->samples.n);
	rdc_pbw_raw(&pp, c->strings.b, c->strings.n);
	rdc_pbw_raw(&pp, c->mappings.b, c->mappings.n);
	rdc_pbw_raw(&pp, c->frames.b, c->frames.n);
	rdc_pbw_raw(&pp, c->stacks.b, c->stacks.n);
	rdc_pbw_msg(&pp, RDC_PF_PP_PROCESS_DUMPS, &dump);
	rdc_pbw_u64(&pp, RDC_PF_PP_INDEX, 0);
	/* The process first (issue #20): pid, cmdline and uid as the daemon
	 * read them, in the ProcessTree traced_probes writes beside heapprofd. */
	rdc_pbw_reset(&c->m);
	rdc_pbw_process(&c->m, c->pol->pids[0], c->pol->proc);
	rdc_pbw_msg(&pkt, RDC_PF_PT_PROCESSES, &c->m);
	rdc_pbw_reset(&c->m);
	rdc_pbw_u64(&c->m, RDC_PF_PACKET_TIMESTAMP, ts);
	rdc_pbw_u64(&c->m, RDC_PF_PACKET_SEQ_ID, 1);
	rdc_pbw_msg(&c->m, RDC_PF_PACKET_PROCESS_TREE, &pkt);
	rdc_pbw_msg(&trace, RDC_PF_TRACE_PACKET, &c->m);
	rdc_pbw_reset(&pkt);
	rdc_pbw_u64(&pkt, RDC_PF_PACKET_TIMESTAMP, ts);
	rdc_pbw_u64(&pkt, RDC_PF_PACKET_SEQ_ID, 1);
	rdc_pbw_msg(&pkt, RDC_PF_PACKET_PROFILE_PACKET, &pp);
	rdc_pbw_msg(&trace, RDC_PF_TRACE_PACKET, &pkt);
	int errs[] = { c->strings.err, c->mappings.err, c->frames.err, c->stacks.err,
		       c->samples.err, c->m.err };
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++)
		if (errs[i] && !trace.err)
			trace.err = errs[i];
	uint64_t out = 0;
	r = rdc_pbw_flush(&trace, out_fd, &out);
	if (st) {
		st->out_bytes = out;
		st->kept = kept;
		st->dropped = dropped;
	}
	rdc_pbw_free(&dump);
	rdc_pbw_free(&pp);
	rdc_pbw_free(&pkt);
	rdc_pbw_free(&trace);
	return r;
}

static int index_profile(struct hpc *c)
{
	const Profile *pr = c->pr;
	static const char *const names[4] = { "alloc_objects", "alloc_space", "inuse_objects",
					      "inuse_space" };
	c->pid_key = -1;
	for (size_t i = 0; i < pr->n_string_table; i++)
		if (pr->string_table[i] && !strcmp(pr->string_table[i], "pid")) {
			c->pid_key = (int64_t)i;
			break;
		}
	for (int w = 0; w < 4; w++) {
		c->vi[w] = -1;
		for (size_t i = 0; i < pr->n_sample_type; i++) {
			const char *t = pstr(pr, pr->sample_type[i]->type);
			if (t && !strcmp(t, names[w]))
				c->vi[w] = (int)i;
		}
	}
	if (c->vi[3] < 0)
		return -EBADMSG; /* no in-use bytes: not a heap profile */
	c->str_iid = calloc(pr->n_string_table + 1, sizeof(uint64_t));
	c->map_iid = calloc(pr->n_mapping + 1, sizeof(uint64_t));
	c->loc_frames = calloc(pr->n_location + 1, sizeof(uint64_t *));
	c->loc_nframes = calloc(pr->n_location + 1, sizeof(uint32_t));
	c->locs = malloc((pr->n_location + 1) * sizeof(*c->locs));
	c->maps = malloc((pr->n_mapping + 1) * sizeof(*c->maps));
	c->funcs = malloc((pr->n_function + 1) * sizeof(*c->funcs));
	if (!c->str_iid || !c->map_iid || !c->loc_frames || !c->loc_nframes || !c->locs ||
	    !c->maps || !c->funcs)
		return -ENOMEM;
	memcpy(c->locs, pr->location, pr->n_location * sizeof(*c->locs));
	memcpy(c->maps, pr->mapping, pr->n_mapping * sizeof(*c->maps));
	memcpy(c->funcs, pr->function, pr->n_function * sizeof(*c->funcs));
	qsort(c->locs, pr->n_location, sizeof(*c->locs), cmp_loc);
	qsort(c->maps, pr->n_mapping, sizeof(*c->maps), cmp_map);
	qsort(c->funcs, pr->n_function, sizeof(*c->funcs), cmp_func);
	return 0;
}

int rdc_heapprofile(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st)
{
	uint8_t *gz = NULL, *raw = NULL;
	size_t ngz = 0, nraw = 0;
	struct hpc c;
	int r;

	if (!p || !p->npids)
		return -EINVAL;
	memset(&c, 0, sizeof(c));
	c.pol = p;
	if ((r = util_read_all(in_fd, HP_MAX_GZ, &gz, &ngz)) < 0)
		return r;
	if (st)
		st->in_bytes = ngz;
	r = gunzip(gz, ngz, &raw, &nraw);
	free(gz);
	if (r < 0)
		return r;
	Profile *pr = perftools__profiles__profile__unpack(NULL, nraw, raw);
	free(raw);
	if (!pr)
		return -EBADMSG;
	c.pr = pr;
	rdc_pbw_init(&c.strings, HP_MAX_OUT);
	rdc_pbw_init(&c.mappings, HP_MAX_OUT);
	rdc_pbw_init(&c.frames, HP_MAX_OUT);
	rdc_pbw_init(&c.stacks, HP_MAX_OUT);
	rdc_pbw_init(&c.samples, HP_MAX_OUT);
	rdc_pbw_init(&c.m, HP_MAX_OUT);
	if ((r = index_profile(&c)) == 0)
		r = convert(&c, out_fd, st);
	for (size_t i = 0; c.loc_frames && i < pr->n_location; i++)
		free(c.loc_frames[i]);
	free(c.loc_frames);
	free(c.loc_nframes);
	free(c.str_iid);
	free(c.map_iid);
	free(c.locs);
	free(c.maps);
	free(c.funcs);
	rdc_pbw_free(&c.strings);
	rdc_pbw_free(&c.mappings);
	rdc_pbw_free(&c.frames);
	rdc_pbw_free(&c.stacks);
	rdc_pbw_free(&c.samples);
	rdc_pbw_free(&c.m);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	return r;
}
