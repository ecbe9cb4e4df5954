/*
 * The streaming pprof redactor (redact/rdc_pprof.c) against the one it
 * replaced (tests/unit/rdc_pprof_ref.c): on the fuzz corpus and on
 * generated profiles both must keep, drop and strip the same things. The
 * outputs are compared by meaning, not bytes (ids and string indices may
 * be numbered differently): every sample is written out as its values,
 * its frames (mapping, address, function, line, all by content) and its
 * labels, beside the header, and the two texts must be equal, as must
 * the return codes and the counts.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "profile.pb-c.h"
#include "rdc.h"
#include "rdc_pprof_ref.h"

#define KADDR 0xffffffff81000000ull

typedef Perftools__Profiles__Profile Profile;

static int memfd_with(const void *data, size_t n)
{
	int fd = memfd_create("t", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, n), (ssize_t)n);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	return fd;
}

static uint8_t *slurp(int fd, size_t *n)
{
	off_t end = lseek(fd, 0, SEEK_END);
	uint8_t *buf = malloc((size_t)end + 1);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, (size_t)end, 0), end);
	*n = (size_t)end;
	return buf;
}

static uint8_t *gunzip(const uint8_t *in, size_t n, size_t *outn)
{
	size_t cap = 1 << 16, len = 0;
	uint8_t *out = malloc(cap);
	z_stream z = { 0 };
	int zr = Z_OK;
	assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	while (zr != Z_STREAM_END) {
		if (len == cap)
			out = realloc(out, cap *= 2);
		z.next_out = out + len;
		z.avail_out = (uInt)(cap - len);
		zr = inflate(&z, Z_NO_FLUSH);
		assert_true(zr == Z_OK || zr == Z_STREAM_END);
		len = cap - z.avail_out;
	}
	inflateEnd(&z);
	*outn = len;
	return out;
}

/* ---- the meaning of a profile, as text */

static const char *S(const Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "<bad>";
}

static const Perftools__Profiles__Location *loc_by_id(const Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++)
		if (p->location[i]->id == id)
			return p->location[i];
	fail_msg("location %llu missing", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Mapping *map_by_id(const Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_mapping; i++)
		if (p->mapping[i]->id == id)
			return p->mapping[i];
	fail_msg("mapping %llu missing", (unsigned long long)id);
	return NULL;
}

static const Perftools__Profiles__Function *fn_by_id(const Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_function; i++)
		if (p->function[i]->id == id)
			return p->function[i];
	fail_msg("function %llu missing", (unsigned long long)id);
	return NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every used string, every sample in order; and the strings the table has
 * that nothing uses (there must be none). */
static char *meaning(const uint8_t *gz, size_t n)
{
	size_t rawn, len;
	uint8_t *raw = gunzip(gz, n, &rawn);
	Profile *p = perftools__profiles__profile__unpack(NULL, rawn, raw);
	char *text;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(p);
	assert_true(p->n_string_table >= 1);
	assert_string_equal(p->string_table[0], "");
	for (size_t i = 0; i < p->n_sample_type; i++)
		fprintf(f, "type %s/%s\n", S(p, p->sample_type[i]->type), S(p, p->sample_type[i]->unit));
	if (p->period_type)
		fprintf(f, "period %s/%s %lld\n", S(p, p->period_type->type),
			S(p, p->period_type->unit), (long long)p->period);
	fprintf(f, "default %s time %lld dur %lld\n", S(p, p->default_sample_type),
		(long long)p->time_nanos, (long long)p->duration_nanos);
	for (size_t i = 0; i < p->n_comment; i++)
		fprintf(f, "comment %s\n", S(p, p->comment[i]));
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		fprintf(f, "sample");
		for (size_t k = 0; k < s->n_value; k++)
			fprintf(f, " %lld", (long long)s->value[k]);
		fprintf(f, "\n");
		for (size_t k = 0; k < s->n_location_id; k++) {
			const Perftools__Profiles__Location *l = loc_by_id(p, s->location_id[k]);
			fprintf(f, "  at %llx", (unsigned long long)l->address);
			if (l->mapping_id) {
				const Perftools__Profiles__Mapping *m = map_by_id(p, l->mapping_id);
				fprintf(f, " map %llx-%llx+%llx %s [%s] %d%d%d",
					(unsigned long long)m->memory_start,
					(unsigned long long)m->memory_limit,
					(unsigned long long)m->file_offset, S(p, m->filename),
					S(p, m->build_id), m->has_functions, m->has_filenames,
					m->has_line_numbers);
			}
			for (size_t j = 0; j < l->n_line; j++) {
				const Perftools__Profiles__Function *fn = fn_by_id(p, l->line[j]->function_id);
				fprintf(f, " fn %s (%s) %s:%lld line %lld", S(p, fn->name),
					S(p, fn->system_name), S(p, fn->filename),
					(long long)fn->start_line, (long long)l->line[j]->line);
			}
			fprintf(f, "\n");
		}
		for (size_t k = 0; k < s->n_label; k++) {
			const Perftools__Profiles__Label *lb = s->label[k];
			fprintf(f, "  label %s str %s num %lld unit %s\n", S(p, lb->key),
				lb->str ? S(p, lb->str) : "-", (long long)lb->num,
				lb->num_unit ? S(p, lb->num_unit) : "-");
		}
	}
	/* The string table as a set: what one has, the other must have. */
	char **sorted = calloc(p->n_string_table, sizeof(*sorted));
	for (size_t i = 0; i < p->n_string_table; i++)
		sorted[i] = p->string_table[i];
	qsort(sorted, p->n_string_table, sizeof(*sorted), cmp_str);
	for (size_t i = 0; i < p->n_string_table; i++)
		if (!i || strcmp(sorted[i], sorted[i - 1]))
			fprintf(f, "string %s\n", sorted[i]);
	free(sorted);
	fclose(f);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	return text;
}

/* Both redactors on the same bytes: the same verdict, counts and meaning. */
static int same(const uint8_t *in, size_t n, const struct rdc_policy *pol, const char *what)
{
	int fin = memfd_with(in, n), fout = memfd_with(NULL, 0);
	int rin = memfd_with(in, n), rout = memfd_with(NULL, 0);
	struct rdc_stats st, rst;
	int r = rdc_pprof(fin, fout, pol, &st);
	int rr = rdc_pprof_ref(rin, rout, pol, &rst);

	/* The old one said -EINVAL where a name was missing; now -EBADMSG. */
	if (rr == -EINVAL)
		rr = -EBADMSG;
	if (r != rr)
		fail_msg("%s: streaming %d, reference %d", what, r, rr);
	if (r == 0) {
		size_t a, b;
		uint8_t *ga = slurp(fout, &a), *gb = slurp(rout, &b);
		char *ma = meaning(ga, a), *mb = meaning(gb, b);
		if (strcmp(ma, mb)) {
			fprintf(stderr, "%s: outputs differ\n--- streaming\n%s--- reference\n%s", what,
				ma, mb);
			fail();
		}
		assert_int_equal(st.kept, rst.kept);
		assert_int_equal(st.dropped, rst.dropped);
		assert_int_equal(st.anonymised, rst.anonymised);
		assert_int_equal(st.scrubbed, rst.scrubbed);
		assert_int_equal(st.in_bytes, rst.in_bytes);
		assert_int_equal(st.out_bytes, a);
		free(ga);
		free(gb);
		free(ma);
		free(mb);
	}
	close(fin);
	close(fout);
	close(rin);
	close(rout);
	return r;
}

static uint8_t *gzip_buf(const uint8_t *in, size_t n, size_t *outn)
{
	uLong cap = compressBound(n) + 64;
	uint8_t *out = malloc(cap);
	z_stream z = { 0 };
	assert_int_equal(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*outn = cap - z.avail_out;
	deflateEnd(&z);
	return out;
}

/* ---- generated profiles */

static uint64_t rng;

static uint32_t rnd(uint32_t n)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return (uint32_t)(((rng * 0x2545f4914f6cdd1dull) >> 32) % n);
}

#define NSTR_FIXED 16
static const char *const fixed_str[NSTR_FIXED] = {
	"", "pid", "tid", "thread_id", "peer_pid", "thread_name", "samples", "count",
	"cpu", "nanoseconds", "bytes", "secret-thread", "/usr/lib/libapp.so",
	"[kernel.kallsyms]", "contact bob@example.com at 10.0.0.1", "deadbeef",
};
enum { STR_PID = 1, STR_TID, STR_THREAD_ID, STR_PEER_PID, STR_THREAD_NAME, STR_SAMPLES, STR_COUNT,
       STR_CPU, STR_NS, STR_BYTES, STR_SECRET, STR_LIB, STR_KSYMS, STR_COMMENT, STR_BUILDID };

struct gen {
	Profile p;
	char *strs[256];
	Perftools__Profiles__ValueType vt[3], *vtp[3], period;
	Perftools__Profiles__Mapping m[4], *mp[4];
	Perftools__Profiles__Function fn[24], *fnp[24];
	Perftools__Profiles__Location loc[48], *locp[48];
	Perftools__Profiles__Line line[48][3], *linep[48][3];
	Perftools__Profiles__Sample s[160], *sp[160];
	uint64_t sloc[160][12];
	int64_t sval[160][3];
	Perftools__Profiles__Label lab[160][10], *labp[160][10];
	int64_t comments[2];
};

/* A profile of pids 100, 101 (the app's, by policy) and 200, with every
 * kind of frame and label the rules look at. sparse_ids: ids not 1..n. */
static void gen_profile(struct gen *g, bool sparse_ids)
{
	Profile *p = &g->p;
	size_t ns = 0;

	memset(g, 0, sizeof(*g));
	perftools__profiles__profile__init(p);
	for (size_t i = 0; i < NSTR_FIXED; i++)
		g->strs[ns++] = strdup(fixed_str[i]);
	size_t fn_names = ns;
	for (int i = 0; i < 20; i++) {
		char b[64];
		snprintf(b, sizeof(b), "ns::fn%d", i);
		g->strs[ns++] = strdup(b);
	}
	size_t files = ns;
	for (int i = 0; i < 6; i++) {
		char b[64];
		snprintf(b, sizeof(b), "src/file%d.c", i);
		g->strs[ns++] = strdup(b);
	}
	p->string_table = g->strs;
	p->n_string_table = ns;

	size_t nt = 1 + rnd(3);
	const int64_t types[3][2] = { { STR_SAMPLES, STR_COUNT }, { STR_CPU, STR_NS }, { STR_BYTES, 0 } };
	for (size_t i = 0; i < nt; i++) {
		perftools__profiles__value_type__init(&g->vt[i]);
		g->vt[i].type = types[i][0];
		g->vt[i].unit = types[i][1];
		g->vtp[i] = &g->vt[i];
	}
	p->sample_type = g->vtp;
	p->n_sample_type = nt;
	if (rnd(2)) {
		perftools__profiles__value_type__init(&g->period);
		g->period.type = STR_CPU;
		g->period.unit = STR_NS;
		p->period_type = &g->period;
		p->period = 10000000;
	}
	p->default_sample_type = rnd(2) ? STR_CPU : 0;
	p->time_nanos = 1700000000000000000ll;
	p->duration_nanos = 1000000000ll;
	g->comments[0] = STR_COMMENT;
	g->comments[1] = STR_SECRET;
	p->comment = g->comments;
	p->n_comment = rnd(3);

	/* mappings: two of the app's, one of the kernel's, one never used */
	const uint64_t mstart[4] = { 0x400000, 0x7f0000000000ull, KADDR, 0x900000 };
	for (size_t i = 0; i < 4; i++) {
		Perftools__Profiles__Mapping *m = &g->m[i];
		perftools__profiles__mapping__init(m);
		m->id = sparse_ids ? 1000 + 7 * (4 - i) : i + 1;
		m->memory_start = mstart[i];
		m->memory_limit = mstart[i] + 0x100000;
		m->file_offset = i * 0x1000;
		m->filename = i == 2 ? STR_KSYMS : STR_LIB;
		m->build_id = i == 0 ? STR_BUILDID : 0;
		m->has_functions = true;
		m->has_line_numbers = i != 2;
		g->mp[i] = m;
	}
	p->mapping = g->mp;
	p->n_mapping = 4;

	for (size_t i = 0; i < 24; i++) {
		Perftools__Profiles__Function *f = &g->fn[i];
		perftools__profiles__function__init(f);
		f->id = sparse_ids ? 5000 + 3 * i : i + 1;
		/* 20 and 21 share (name, file) with 0: merged into it. */
		f->name = (int64_t)(fn_names + (i < 20 ? i : 0));
		f->system_name = rnd(3) == 0 ? 0 : f->name;
		f->filename = (int64_t)(files + (i < 20 ? i % 6 : 0));
		f->start_line = (int64_t)(i * 10);
		g->fnp[i] = f;
	}
	p->function = g->fnp;
	p->n_function = 24;

	for (size_t i = 0; i < 48; i++) {
		Perftools__Profiles__Location *l = &g->loc[i];
		perftools__profiles__location__init(l);
		l->id = sparse_ids ? 90000 - 11 * i : i + 1;
		uint32_t mi = rnd(5); /* 4: no mapping */
		l->mapping_id = mi < 4 ? g->m[mi].id : 0;
		switch (rnd(6)) {
		case 0: l->address = KADDR + 0x40 * rnd(64); break; /* a kernel address */
		case 1: l->address = 0; break;                       /* interpreted */
		case 2: l->address = 0x400100 + 8 * rnd(4); break;   /* maybe a twin */
		default: l->address = (mi < 4 ? mstart[mi] : 0x500000) + 0x10 * i; break;
		}
		size_t nl = rnd(4);
		for (size_t k = 0; k < nl; k++) {
			perftools__profiles__line__init(&g->line[i][k]);
			g->line[i][k].function_id = g->fn[rnd(24)].id;
			g->line[i][k].line = rnd(50);
			g->linep[i][k] = &g->line[i][k];
		}
		l->line = g->linep[i];
		l->n_line = nl;
		g->locp[i] = l;
	}
	p->location = g->locp;
	p->n_location = 48;

	size_t nsamp = 20 + rnd(140);
	for (size_t i = 0; i < nsamp; i++) {
		Perftools__Profiles__Sample *s = &g->s[i];
		perftools__profiles__sample__init(s);
		size_t nl = rnd(12);
		for (size_t k = 0; k < nl; k++)
			g->sloc[i][k] = g->loc[rnd(48)].id;
		s->location_id = g->sloc[i];
		s->n_location_id = nl;
		for (size_t k = 0; k < nt; k++)
			g->sval[i][k] = (int64_t)rnd(1000) - (rnd(10) == 0 ? 5000 : 0);
		s->value = g->sval[i];
		s->n_value = nt;
		size_t nlab = 0;
		const int64_t who[5] = { 100, 101, 200, 100, 300 };
		uint32_t shape = rnd(6);
		for (size_t k = 0; k < (shape == 5 ? 10u : 1 + rnd(5)); k++) {
			Perftools__Profiles__Label *lb = &g->lab[i][nlab];
			perftools__profiles__label__init(lb);
			switch (k == 0 ? (shape == 4 ? 9 : 0) : rnd(7)) {
			case 0: lb->key = STR_PID; lb->num = who[rnd(5)]; break;
			case 1: lb->key = STR_TID; lb->num = 100 + rnd(300); break;
			case 2: lb->key = STR_THREAD_ID; lb->num = 150; break;
			case 3: lb->key = STR_PEER_PID; lb->num = who[rnd(5)]; break;
			case 4: lb->key = STR_THREAD_NAME; lb->str = STR_SECRET; break;
			case 5: lb->key = STR_BYTES; lb->num = rnd(4096); lb->num_unit = STR_BYTES; break;
			case 6: lb->key = STR_PID; lb->str = STR_SECRET; break; /* not numeric */
			default: lb->key = STR_THREAD_NAME; lb->str = STR_SECRET; break;
			}
			g->labp[i][nlab++] = lb;
		}
		s->label = g->labp[i];
		s->n_label = nlab;
		g->sp[i] = s;
	}
	p->sample = g->sp;
	p->n_sample = nsamp;
}

static void gen_free(struct gen *g)
{
	for (size_t i = 0; i < g->p.n_string_table; i++)
		free(g->strs[i]);
}

/* Packed, and with the string table first: two messages back to back
 * merge, so strings-only then the rest is one profile, strings first. */
/*
 * Field orders, all legal: 0 protobuf-c's (strings after the samples), 1
 * strings first, 2 samples last (common/pprof.c's: rdc_pprof judges them
 * in its first pass), 3 samples last but the last third of the strings
 * after them (samples that use those wait for a second pass).
 */
enum { ORD_PACKED, ORD_STRINGS_FIRST, ORD_SAMPLES_LAST, ORD_LATE_STRINGS };

static size_t pack_into(const Profile *p, uint8_t *out)
{
	size_t n = perftools__profiles__profile__get_packed_size(p);
	if (out)
		perftools__profiles__profile__pack(p, out);
	return n;
}

static uint8_t *pack(Profile *p, int order, size_t *n)
{
	Profile head = *p, mid, tail;
	perftools__profiles__profile__init(&mid);
	perftools__profiles__profile__init(&tail);
	if (order == ORD_PACKED) {
		*n = pack_into(p, NULL);
		uint8_t *out = malloc(*n + 1);
		pack_into(p, out);
		return out;
	}
	if (order == ORD_STRINGS_FIRST) {
		perftools__profiles__profile__init(&head);
		head.string_table = p->string_table;
		head.n_string_table = p->n_string_table;
		mid = *p;
		mid.n_string_table = 0;
	} else {
		size_t k = order == ORD_LATE_STRINGS ? p->n_string_table * 2 / 3 : p->n_string_table;
		head.n_sample = 0;
		head.n_string_table = k;
		mid.sample = p->sample;
		mid.n_sample = p->n_sample;
		tail.string_table = p->string_table + k;
		tail.n_string_table = p->n_string_table - k;
	}
	size_t a = pack_into(&head, NULL), b = pack_into(&mid, NULL), c = pack_into(&tail, NULL);
	uint8_t *out = malloc(a + b + c + 1);
	pack_into(&head, out);
	pack_into(&mid, out + a);
	pack_into(&tail, out + a + b);
	*n = a + b + c;
	return out;
}

static void test_generated(void **state)
{
	static const int32_t pids1[] = { 100 }, pids2[] = { 100, 101 }, tids[] = { 150, 151 };
	struct rdc_dlp *dlp;
	size_t ok = 0;

	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &dlp), 0);
	for (unsigned seed = 1; seed <= 120; seed++) {
		struct gen *g = malloc(sizeof(*g));
		char what[64];
		rng = 0x9e3779b97f4a7c15ull * seed;
		gen_profile(g, seed % 3 == 0);
		struct rdc_policy pol = {
			.pids = seed % 2 ? pids1 : pids2, .npids = seed % 2 ? 1 : 2,
			.tids = tids, .ntids = seed % 4 < 2 ? 2 : 0, .dlp = seed % 5 ? dlp : NULL,
		};
		size_t n, gzn;
		uint8_t *raw = pack(&g->p, (int)(seed % 4), &n);
		uint8_t *gz = gzip_buf(raw, n, &gzn);
		snprintf(what, sizeof(what), "seed %u gzip", seed);
		ok += same(gz, gzn, &pol, what) == 0;
		snprintf(what, sizeof(what), "seed %u raw", seed);
		same(raw, n, &pol, what);
		free(raw);
		free(gz);
		gen_free(g);
		free(g);
	}
	/* Most of them hold something of the app's; the comparison was real. */
	assert_true(ok > 60);
	rdc_dlp_free(dlp);
}

/* A malformed variant of a good profile: both refuse it. */
static void test_generated_faults(void **state)
{
	static const int32_t pids[] = { 100 };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	for (int order = ORD_PACKED; order <= ORD_LATE_STRINGS; order++) {
	struct gen *g = malloc(sizeof(*g));
	size_t n;
	uint8_t *raw;

	rng = 42;
	gen_profile(g, false);
	/* A location id no location has. */
	g->sloc[0][0] = 7777;
	g->s[0].n_location_id = 1;
	g->lab[0][0].key = STR_PID;
	g->lab[0][0].num = 100;
	g->lab[0][0].str = 0;
	raw = pack(&g->p, order, &n);
	assert_int_equal(same(raw, n, &pol, "missing location"), -EBADMSG);
	free(raw);
	g->sloc[0][0] = g->loc[0].id;
	/* A label key past the string table. */
	g->s[0].n_label = 2;
	g->lab[0][1].key = 99999;
	raw = pack(&g->p, order, &n);
	assert_int_equal(same(raw, n, &pol, "label key"), -EBADMSG);
	free(raw);
	g->lab[0][1].key = STR_TID;
	/* A value count unlike the sample types'. */
	g->s[1].n_value = g->p.n_sample_type + 1;
	raw = pack(&g->p, order, &n);
	assert_int_equal(same(raw, n, &pol, "values"), -EBADMSG);
	free(raw);
	g->s[1].n_value = g->p.n_sample_type;
	/* A string table that does not start with "". */
	free(g->strs[0]);
	g->strs[0] = strdup("x");
	raw = pack(&g->p, order, &n);
	assert_int_equal(same(raw, n, &pol, "string 0"), -EBADMSG);
	free(raw);
	gen_free(g);
	free(g);
	}
}

/* A pipe is read whole, then the same two passes: the same result as a file. */
static void test_pipe(void **state)
{
	static const int32_t pids[] = { 100 };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	struct gen *g = malloc(sizeof(*g));
	size_t n, gzn, a, b;
	int fds[2];

	rng = 7;
	gen_profile(g, false);
	uint8_t *raw = pack(&g->p, ORD_STRINGS_FIRST, &n);
	uint8_t *gz = gzip_buf(raw, n, &gzn);
	assert_true(gzn < 65536); /* fits the pipe: written before the read */
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(write(fds[1], gz, gzn), (ssize_t)gzn);
	close(fds[1]);
	int fin = memfd_with(gz, gzn), fout = memfd_with(NULL, 0), pout = memfd_with(NULL, 0);
	struct rdc_stats st, pst;
	assert_int_equal(rdc_pprof(fin, fout, &pol, &st), 0);
	assert_int_equal(rdc_pprof(fds[0], pout, &pol, &pst), 0);
	assert_int_equal(pst.in_bytes, gzn);
	assert_int_equal(pst.kept, st.kept);
	uint8_t *oa = slurp(fout, &a), *ob = slurp(pout, &b);
	char *ma = meaning(oa, a), *mb = meaning(ob, b);
	assert_string_equal(ma, mb);
	free(ma);
	free(mb);
	free(oa);
	free(ob);
	free(raw);
	free(gz);
	close(fds[0]);
	close(fin);
	close(fout);
	close(pout);
	gen_free(g);
	free(g);
}

/* The caps of one sample (redact/rdc_pprof.c): past them -E2BIG, where the
 * old redactor had none. */
static void test_sample_caps(void **state)
{
	static const int32_t pids[] = { 100 };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	struct gen *g = malloc(sizeof(*g));
	uint64_t *many = calloc(70000, sizeof(*many));
	size_t n;

	rng = 9;
	gen_profile(g, false);
	for (size_t i = 0; i < 70000; i++)
		many[i] = g->loc[i % 48].id;
	g->s[0].location_id = many;
	g->s[0].n_location_id = 70000;
	uint8_t *raw = pack(&g->p, ORD_PACKED, &n);
	int in = memfd_with(raw, n), out = memfd_with(NULL, 0);
	assert_int_equal(rdc_pprof(in, out, &pol, NULL), -E2BIG);
	close(in);
	close(out);
	free(raw);
	/* 65,536 frames are still taken. */
	g->s[0].n_location_id = 65536;
	raw = pack(&g->p, false, &n);
	in = memfd_with(raw, n);
	out = memfd_with(NULL, 0);
	int r = rdc_pprof(in, out, &pol, NULL);
	assert_true(r == 0 || r == -ENODATA);
	close(in);
	close(out);
	free(raw);
	free(many);
	gen_free(g);
	free(g);
}

/* The seed corpus of fuzz_pprof, for each pid its samples name. */
/*
 * Profiles of many samples (each generated one's samples repeated), in
 * every field order, gzip'd: megabytes inflated, so the inflate job
 * hands over many 256 KiB buffers and fields straddle them (the window is
 * lent a buffer, then copies what straddles; rdc_pprof.c, src_lend).
 */
static void test_large(void **state)
{
	static const int32_t pids[] = { 100 };
	size_t ok = 0;

	(void)state;
	for (unsigned seed = 1; seed <= 8; seed++) {
		struct gen *g = malloc(sizeof(*g));
		char what[64];
		rng = 0x9e3779b97f4a7c15ull * (seed + 1000);
		gen_profile(g, false);
		struct rdc_policy pol = { .pids = pids, .npids = 1 };
		Perftools__Profiles__Sample **orig = g->p.sample;
		size_t norig = g->p.n_sample, reps = 40000 / (norig ? norig : 1);
		Perftools__Profiles__Sample **many = malloc(norig * reps * sizeof(*many) + 1);
		assert_non_null(many);
		for (size_t i = 0; i < norig * reps; i++)
			many[i] = orig[i % norig];
		g->p.sample = many;
		g->p.n_sample = norig * reps;
		size_t n, gzn;
		uint8_t *raw = pack(&g->p, (int)(seed % 4), &n);
		uint8_t *gz = gzip_buf(raw, n, &gzn);
		snprintf(what, sizeof(what), "large seed %u (%zu bytes)", seed, n);
		/* Over 1 MiB: four buffers of the inflater's at least. */
		ok += same(gz, gzn, &pol, what) == 0 && n > (1u << 20);
		free(raw);
		free(gz);
		g->p.sample = orig;
		g->p.n_sample = norig;
		free(many);
		gen_free(g);
		free(g);
	}
	/* Most hold the app's samples and span buffers: the test was real. */
	assert_true(ok >= 4);
}

static void test_corpus(void **state)
{
	DIR *d = opendir(PD_PPROF_CORPUS);
	struct dirent *e;
	size_t files = 0;

	assert_non_null(d);
	while ((e = readdir(d))) {
		char path[512];
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", PD_PPROF_CORPUS, e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		assert_true(fd >= 0);
		size_t n, rawn;
		uint8_t *in = slurp(fd, &n);
		close(fd);
		uint8_t *raw = gunzip(in, n, &rawn);
		Profile *p = perftools__profiles__profile__unpack(NULL, rawn, raw);
		int32_t pids[16];
		size_t np = 0;
		pids[np++] = 1; /* nobody's */
		for (size_t i = 0; p && i < p->n_sample; i++)
			for (size_t k = 0; k < p->sample[i]->n_label; k++) {
				const Perftools__Profiles__Label *lb = p->sample[i]->label[k];
				if (lb->key >= 0 && (size_t)lb->key < p->n_string_table &&
				    !strcmp(p->string_table[lb->key], "pid") && np < 16) {
					bool seen = false;
					for (size_t j = 0; j < np; j++)
						seen |= pids[j] == (int32_t)lb->num;
					if (!seen)
						pids[np++] = (int32_t)lb->num;
				}
			}
		for (size_t i = 0; i < np; i++) {
			struct rdc_policy pol = { .pids = &pids[i], .npids = 1 };
			same(in, n, &pol, e->d_name);
		}
		if (p)
			perftools__profiles__profile__free_unpacked(p, NULL);
		free(raw);
		free(in);
		files++;
	}
	closedir(d);
	assert_true(files >= 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_generated),
		cmocka_unit_test(test_generated_faults),
		cmocka_unit_test(test_corpus),
		cmocka_unit_test(test_pipe),
		cmocka_unit_test(test_sample_caps),
		cmocka_unit_test(test_large),
	};
	return cmocka_run_group_tests_name("rdc_pprof_diff", tests, NULL, NULL);
}
