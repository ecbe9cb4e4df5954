#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "pprof.h"
#include "profile.pb-c.h"

#define PERIOD_NS 10000000
#define TIME_NS 1700000000123456789ll
#define DURATION_NS 5000000000ll

/* Ids handed out while building the fixture, checked against the output. */
struct ids {
	uint64_t m_app, m_libc;
	uint64_t f_main, f_work, f_main_other;
	uint64_t l_main, l_work, l_libc, l_libc_same_addr, l_interp_main, l_interp_work;
};

static void build_fixture(struct pp_builder **out, struct ids *id)
{
	struct pp_builder *b;
	uint64_t x;

	assert_int_equal(pp_new(&b), 0);
	assert_non_null(b);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pp_set_period(b, "cpu", "nanoseconds", PERIOD_NS), 0);
	assert_int_equal(pp_set_default_sample_type(b, "cpu"), 0);
	pp_set_time(b, TIME_NS, DURATION_NS);
	assert_int_equal(pp_add_comment(b, "captured by test_pprof"), 0);

	assert_int_equal(pp_add_mapping(b, 0x400000, 0x500000, 0x1000, "/usr/bin/app",
					"deadbeef00112233", true, true, &id->m_app), 0);
	assert_int_equal(pp_add_mapping(b, 0x7f0000000000, 0x7f0000200000, 0,
					"/lib/libc.so.6", NULL, false, false, &id->m_libc), 0);
	assert_int_equal(id->m_app, 1);
	assert_int_equal(id->m_libc, 2);

	assert_int_equal(pp_add_function(b, "main", NULL, "app.c", 10, &id->f_main), 0);
	assert_int_equal(pp_add_function(b, "work", "_Z4workv", "app.c", 20, &id->f_work), 0);
	assert_int_equal(id->f_main, 1);
	assert_int_equal(id->f_work, 2);
	/* Same (name, file): same id, and the first call's fields stay. */
	assert_int_equal(pp_add_function(b, "main", "other_sys", "app.c", 99, &x), 0);
	assert_int_equal(x, id->f_main);
	assert_int_equal(pp_add_function(b, "work", NULL, "app.c", 1, &x), 0);
	assert_int_equal(x, id->f_work);
	/* Same name, other file: a different function. */
	assert_int_equal(pp_add_function(b, "main", NULL, "other.c", 5, &id->f_main_other), 0);
	assert_int_equal(id->f_main_other, 3);

	assert_int_equal(pp_add_location(b, id->m_app, 0x401000, id->f_main, 12, &id->l_main), 0);
	assert_int_equal(pp_add_location(b, id->m_app, 0x401100, id->f_work, 25, &id->l_work), 0);
	assert_int_equal(id->l_main, 1);
	assert_int_equal(id->l_work, 2);
	/* Same (mapping, address): the first call decides function and line. */
	assert_int_equal(pp_add_location(b, id->m_app, 0x401000, id->f_work, 99, &x), 0);
	assert_int_equal(x, id->l_main);
	assert_int_equal(pp_add_location(b, id->m_libc, 0x7f0000001234, 0, 0, &id->l_libc), 0);
	assert_int_equal(id->l_libc, 3);
	/* Same address in another mapping is another location. */
	assert_int_equal(pp_add_location(b, id->m_libc, 0x401000, 0, 0, &id->l_libc_same_addr), 0);
	assert_int_equal(id->l_libc_same_addr, 4);
	/* Address 0 frames are told apart by function and line. */
	assert_int_equal(pp_add_location(b, 0, 0, id->f_main, 12, &id->l_interp_main), 0);
	assert_int_equal(pp_add_location(b, 0, 0, id->f_work, 25, &id->l_interp_work), 0);
	assert_int_equal(id->l_interp_main, 5);
	assert_int_equal(id->l_interp_work, 6);
	assert_int_equal(pp_add_location(b, 0, 0, id->f_main, 12, &x), 0);
	assert_int_equal(x, id->l_interp_main);

	{
		uint64_t locs[] = { id->l_work, id->l_main };
		int64_t vals[] = { 3, 3 * PERIOD_NS };
		struct pp_label labels[] = {
			{ .key = "thread_id", .num = 1234 },
			{ .key = "alloc", .num = 4096, .num_unit = "bytes" },
			{ .key = "thread_name", .str = "worker" },
		};

		assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, labels, 3), 0);
	}
	{
		uint64_t locs[] = { id->l_libc, id->l_work, id->l_main };
		int64_t vals[] = { 1, PERIOD_NS };

		assert_int_equal(pp_add_sample(b, locs, 3, vals, 2, NULL, 0), 0);
	}
	{
		int64_t vals[] = { 7, -1 };
		struct pp_label labels[] = { { .key = "mode", .str = "idle", .num = 42 } };

		assert_int_equal(pp_add_sample(b, NULL, 0, vals, 2, labels, 1), 0);
	}
	*out = b;
}

static const char *str_at(const Perftools__Profiles__Profile *p, int64_t i)
{
	assert_true(i >= 0);
	assert_true((size_t)i < p->n_string_table);
	return p->string_table[i];
}

#define assert_str_at(p, i, s) assert_string_equal(str_at(p, i), s)

static void check_value_type(const Perftools__Profiles__Profile *p,
			     const Perftools__Profiles__ValueType *vt,
			     const char *type, const char *unit)
{
	assert_non_null(vt);
	assert_str_at(p, vt->type, type);
	assert_str_at(p, vt->unit, unit);
}

static void check_fixture(const Perftools__Profiles__Profile *p, const struct ids *id)
{
	const Perftools__Profiles__Sample *s;
	const Perftools__Profiles__Mapping *m;
	const Perftools__Profiles__Location *l;
	const Perftools__Profiles__Function *f;

	/* String table: "" first, and every string exactly once. */
	assert_true(p->n_string_table > 1);
	assert_string_equal(p->string_table[0], "");
	for (size_t i = 0; i < p->n_string_table; i++)
		for (size_t j = i + 1; j < p->n_string_table; j++)
			assert_string_not_equal(p->string_table[i], p->string_table[j]);

	assert_int_equal(p->n_sample_type, 2);
	check_value_type(p, p->sample_type[0], "samples", "count");
	check_value_type(p, p->sample_type[1], "cpu", "nanoseconds");
	check_value_type(p, p->period_type, "cpu", "nanoseconds");
	assert_int_equal(p->period, PERIOD_NS);
	assert_str_at(p, p->default_sample_type, "cpu");
	assert_int_equal(p->time_nanos, TIME_NS);
	assert_int_equal(p->duration_nanos, DURATION_NS);
	assert_int_equal(p->drop_frames, 0);
	assert_int_equal(p->keep_frames, 0);
	assert_int_equal(p->n_comment, 1);
	assert_str_at(p, p->comment[0], "captured by test_pprof");

	assert_int_equal(p->n_mapping, 2);
	m = p->mapping[0];
	assert_int_equal(m->id, id->m_app);
	assert_int_equal(m->memory_start, 0x400000);
	assert_int_equal(m->memory_limit, 0x500000);
	assert_int_equal(m->file_offset, 0x1000);
	assert_str_at(p, m->filename, "/usr/bin/app");
	assert_str_at(p, m->build_id, "deadbeef00112233");
	assert_true(m->has_functions);
	assert_true(m->has_filenames);
	assert_true(m->has_line_numbers);
	assert_false(m->has_inline_frames);
	m = p->mapping[1];
	assert_int_equal(m->id, id->m_libc);
	assert_int_equal(m->memory_start, 0x7f0000000000);
	assert_int_equal(m->memory_limit, 0x7f0000200000);
	assert_int_equal(m->file_offset, 0);
	assert_str_at(p, m->filename, "/lib/libc.so.6");
	assert_int_equal(m->build_id, 0);
	assert_false(m->has_functions);
	assert_false(m->has_filenames);
	assert_false(m->has_line_numbers);

	assert_int_equal(p->n_function, 3);
	f = p->function[0];
	assert_int_equal(f->id, id->f_main);
	assert_str_at(p, f->name, "main");
	assert_int_equal(f->system_name, f->name);
	assert_str_at(p, f->filename, "app.c");
	assert_int_equal(f->start_line, 10);
	f = p->function[1];
	assert_int_equal(f->id, id->f_work);
	assert_str_at(p, f->name, "work");
	assert_str_at(p, f->system_name, "_Z4workv");
	assert_str_at(p, f->filename, "app.c");
	assert_int_equal(f->start_line, 20);
	f = p->function[2];
	assert_int_equal(f->id, id->f_main_other);
	assert_int_equal(f->name, p->function[0]->name);
	assert_str_at(p, f->filename, "other.c");
	assert_int_equal(f->start_line, 5);

	assert_int_equal(p->n_location, 6);
	for (size_t i = 0; i < p->n_location; i++) {
		assert_int_equal(p->location[i]->id, i + 1);
		assert_false(p->location[i]->is_folded);
	}
	l = p->location[id->l_main - 1];
	assert_int_equal(l->mapping_id, id->m_app);
	assert_int_equal(l->address, 0x401000);
	assert_int_equal(l->n_line, 1);
	assert_int_equal(l->line[0]->function_id, id->f_main);
	assert_int_equal(l->line[0]->line, 12);
	l = p->location[id->l_work - 1];
	assert_int_equal(l->mapping_id, id->m_app);
	assert_int_equal(l->address, 0x401100);
	assert_int_equal(l->n_line, 1);
	assert_int_equal(l->line[0]->function_id, id->f_work);
	assert_int_equal(l->line[0]->line, 25);
	l = p->location[id->l_libc - 1];
	assert_int_equal(l->mapping_id, id->m_libc);
	assert_int_equal(l->address, 0x7f0000001234);
	assert_int_equal(l->n_line, 0);
	l = p->location[id->l_libc_same_addr - 1];
	assert_int_equal(l->mapping_id, id->m_libc);
	assert_int_equal(l->address, 0x401000);
	assert_int_equal(l->n_line, 0);
	l = p->location[id->l_interp_main - 1];
	assert_int_equal(l->mapping_id, 0);
	assert_int_equal(l->address, 0);
	assert_int_equal(l->n_line, 1);
	assert_int_equal(l->line[0]->function_id, id->f_main);
	assert_int_equal(l->line[0]->line, 12);
	l = p->location[id->l_interp_work - 1];
	assert_int_equal(l->n_line, 1);
	assert_int_equal(l->line[0]->function_id, id->f_work);
	assert_int_equal(l->line[0]->line, 25);

	assert_int_equal(p->n_sample, 3);
	s = p->sample[0];
	assert_int_equal(s->n_location_id, 2);
	assert_int_equal(s->location_id[0], id->l_work);
	assert_int_equal(s->location_id[1], id->l_main);
	assert_int_equal(s->n_value, 2);
	assert_int_equal(s->value[0], 3);
	assert_int_equal(s->value[1], 3 * PERIOD_NS);
	assert_int_equal(s->n_label, 3);
	assert_str_at(p, s->label[0]->key, "thread_id");
	assert_int_equal(s->label[0]->str, 0);
	assert_int_equal(s->label[0]->num, 1234);
	assert_int_equal(s->label[0]->num_unit, 0);
	assert_str_at(p, s->label[1]->key, "alloc");
	assert_int_equal(s->label[1]->str, 0);
	assert_int_equal(s->label[1]->num, 4096);
	assert_str_at(p, s->label[1]->num_unit, "bytes");
	assert_str_at(p, s->label[2]->key, "thread_name");
	assert_str_at(p, s->label[2]->str, "worker");
	assert_int_equal(s->label[2]->num, 0);
	assert_int_equal(s->label[2]->num_unit, 0);
	s = p->sample[1];
	assert_int_equal(s->n_location_id, 3);
	assert_int_equal(s->location_id[0], id->l_libc);
	assert_int_equal(s->location_id[1], id->l_work);
	assert_int_equal(s->location_id[2], id->l_main);
	assert_int_equal(s->n_value, 2);
	assert_int_equal(s->value[0], 1);
	assert_int_equal(s->value[1], PERIOD_NS);
	assert_int_equal(s->n_label, 0);
	s = p->sample[2];
	assert_int_equal(s->n_location_id, 0);
	assert_int_equal(s->n_value, 2);
	assert_int_equal(s->value[0], 7);
	assert_int_equal(s->value[1], -1);
	assert_int_equal(s->n_label, 1);
	assert_str_at(p, s->label[0]->key, "mode");
	assert_str_at(p, s->label[0]->str, "idle");
	/* A string label carries no number, whatever the caller left in num. */
	assert_int_equal(s->label[0]->num, 0);
}

static Perftools__Profiles__Profile *unpack(const uint8_t *buf, size_t len)
{
	Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, buf);

	assert_non_null(p);
	return p;
}

static uint8_t *gunzip(const uint8_t *in, size_t inlen, size_t *outlen)
{
	size_t cap = 4096, n = 0;
	uint8_t *out = malloc(cap);
	z_stream zs;
	int zr;

	assert_non_null(out);
	memset(&zs, 0, sizeof(zs));
	/* 15 + 32 also accepts zlib streams: roundtrip_gz checks the magic. */
	assert_int_equal(inflateInit2(&zs, 15 + 32), Z_OK);
	zs.next_in = (Bytef *)in;
	zs.avail_in = (uInt)inlen;
	for (;;) {
		if (n == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		zs.next_out = out + n;
		zs.avail_out = (uInt)(cap - n);
		zr = inflate(&zs, Z_NO_FLUSH);
		n = cap - zs.avail_out;
		if (zr == Z_STREAM_END)
			break;
		assert_int_equal(zr, Z_OK);
	}
	assert_int_equal(zs.avail_in, 0);
	inflateEnd(&zs);
	*outlen = n;
	return out;
}

static uint8_t *read_fd(int fd, size_t *len)
{
	struct stat st;
	uint8_t *buf;
	size_t off = 0;

	assert_int_equal(fstat(fd, &st), 0);
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	assert_non_null(buf);
	while (off < (size_t)st.st_size) {
		ssize_t n = pread(fd, buf + off, (size_t)st.st_size - off, (off_t)off);

		assert_true(n > 0);
		off += (size_t)n;
	}
	*len = off;
	return buf;
}

/*
 * Write b gzip'd to a memfd (pp_write_gz, or pp_write_gz_level at level
 * when level >= -1), check it is gzip and equals pp_serialize. *size (may
 * be NULL) gets the gzip'd bytes.
 */
static Perftools__Profiles__Profile *roundtrip_at(struct pp_builder *b, int level, size_t *size)
{
	Perftools__Profiles__Profile *p;
	uint8_t *gz, *raw, *ref;
	size_t gzlen, rawlen, reflen;
	uint64_t written = 0;
	int fd;

	fd = memfd_create("test_pprof", MFD_CLOEXEC);
	assert_true(fd >= 0);
	if (level >= -1)
		assert_int_equal(pp_write_gz_level(b, fd, level, &written), 0);
	else
		assert_int_equal(pp_write_gz(b, fd, &written), 0);
	gz = read_fd(fd, &gzlen);
	if (size)
		*size = gzlen;
	close(fd);
	assert_int_equal(written, gzlen);
	assert_true(gzlen > 18);
	assert_int_equal(gz[0], 0x1f);
	assert_int_equal(gz[1], 0x8b);

	raw = gunzip(gz, gzlen, &rawlen);
	assert_int_equal(pp_serialize(b, &ref, &reflen), 0);
	assert_int_equal(rawlen, reflen);
	assert_memory_equal(raw, ref, reflen);
	p = unpack(raw, rawlen);
	free(gz);
	free(raw);
	free(ref);
	return p;
}

static Perftools__Profiles__Profile *roundtrip_gz(struct pp_builder *b)
{
	return roundtrip_at(b, -2, NULL);
}

static void test_strings(void **state)
{
	struct pp_builder *b;

	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_str(b, NULL), 0);
	assert_int_equal(pp_str(b, ""), 0);
	assert_int_equal(pp_str(b, "a"), 1);
	assert_int_equal(pp_str(b, "b"), 2);
	assert_int_equal(pp_str(b, "a"), 1);
	assert_int_equal(pp_str(b, "ab"), 3);
	assert_int_equal(pp_str(b, "b"), 2);
	pp_free(b);
}

static void test_serialize(void **state)
{
	Perftools__Profiles__Profile *p;
	struct pp_builder *b;
	struct ids id;
	uint8_t *buf;
	size_t len;

	build_fixture(&b, &id);
	assert_int_equal(pp_serialize(b, &buf, &len), 0);
	p = unpack(buf, len);
	check_fixture(p, &id);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);

	/* Serialising does not consume the builder. */
	assert_int_equal(pp_serialize(b, &buf, &len), 0);
	p = unpack(buf, len);
	check_fixture(p, &id);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
	pp_free(b);
}

static void test_write_gz(void **state)
{
	Perftools__Profiles__Profile *p;
	struct pp_builder *b;
	struct ids id;

	build_fixture(&b, &id);
	p = roundtrip_gz(b);
	check_fixture(p, &id);
	perftools__profiles__profile__free_unpacked(p, NULL);
	pp_free(b);
}

static void test_empty(void **state)
{
	Perftools__Profiles__Profile *p;
	struct pp_builder *b;

	assert_int_equal(pp_new(&b), 0);
	p = roundtrip_gz(b);
	assert_int_equal(p->n_string_table, 1);
	assert_string_equal(p->string_table[0], "");
	assert_int_equal(p->n_sample_type, 0);
	assert_int_equal(p->n_sample, 0);
	assert_int_equal(p->n_mapping, 0);
	assert_int_equal(p->n_location, 0);
	assert_int_equal(p->n_function, 0);
	assert_null(p->period_type);
	assert_int_equal(p->period, 0);
	perftools__profiles__profile__free_unpacked(p, NULL);
	pp_free(b);
}

/* Big and poorly compressible: crosses the writer's chunk size both ways. */
static void test_large_gz(void **state)
{
	enum { N = 20000 };
	Perftools__Profiles__Profile *p;
	struct pp_builder *b;
	uint64_t seed = 12345, map, prev = 0;
	char name[64];

	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "alloc_space", "bytes"), 0);
	assert_int_equal(pp_add_mapping(b, 0x1000, 0x10000000, 0, "/bin/big", NULL,
					true, false, &map), 0);
	for (int i = 0; i < N; i++) {
		uint64_t fn, loc, locs[2];
		int64_t v = i;

		seed = seed * 6364136223846793005ull + 1442695040888963407ull;
		snprintf(name, sizeof(name), "fn_%016llx", (unsigned long long)seed);
		assert_int_equal(pp_add_function(b, name, NULL, NULL, 0, &fn), 0);
		assert_int_equal(fn, (uint64_t)i + 1);
		assert_int_equal(pp_add_location(b, map, 0x1000 + 16 * (uint64_t)i, fn, 0, &loc), 0);
		locs[0] = loc;
		locs[1] = prev ? prev : loc;
		assert_int_equal(pp_add_sample(b, locs, 2, &v, 1, NULL, 0), 0);
		prev = loc;
	}
	p = roundtrip_gz(b);
	assert_int_equal(p->n_function, N);
	assert_int_equal(p->n_location, N);
	assert_int_equal(p->n_sample, N);
	/* "", alloc_space, bytes, /bin/big and the names. */
	assert_int_equal(p->n_string_table, N + 4);
	assert_int_equal(p->sample[N - 1]->value[0], N - 1);
	assert_int_equal(p->sample[N - 1]->location_id[0], N);
	assert_int_equal(p->sample[N - 1]->location_id[1], N - 1);
	assert_str_at(p, p->function[N - 1]->name, name);
	perftools__profiles__profile__free_unpacked(p, NULL);
	pp_free(b);
}

/*
 * The runtimes' level on their way to the daemon (PP_GZ_HOP): stored
 * blocks, so the file is the profile's size plus a few bytes, and still a
 * gzip of the same profile as the default level's.
 */
static void test_hop_level(void **state)
{
	Perftools__Profiles__Profile *p;
	struct pp_builder *b;
	uint64_t map, fn, loc, w = 1;
	size_t hop, dflt, rawlen;
	uint8_t *raw;
	char name[64];

	(void)state;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_mapping(b, 0x1000, 0x100000, 0, "/bin/x", NULL, true, false, &map), 0);
	for (int i = 0; i < 4000; i++) {
		int64_t v = i % 7;

		snprintf(name, sizeof(name), "function_number_%d", i % 50);
		assert_int_equal(pp_add_function(b, name, NULL, "x.c", 0, &fn), 0);
		assert_int_equal(pp_add_location(b, map, 0x1000 + 4 * (uint64_t)i, fn, 0, &loc), 0);
		assert_int_equal(pp_add_sample(b, &loc, 1, &v, 1, NULL, 0), 0);
	}
	assert_int_equal(pp_serialize(b, &raw, &rawlen), 0);
	p = roundtrip_at(b, PP_GZ_HOP, &hop);
	assert_int_equal(p->n_sample, 4000);
	perftools__profiles__profile__free_unpacked(p, NULL);
	p = roundtrip_at(b, -1, &dflt);
	assert_int_equal(p->n_sample, 4000);
	perftools__profiles__profile__free_unpacked(p, NULL);
	/* Stored: a 5-byte header a block (at most 64 KiB) and gzip's 18. */
	assert_true(hop >= rawlen + 18);
	assert_true(hop <= rawlen + 18 + 5 * (rawlen / 16384 + 1));
	assert_true(dflt < rawlen / 2);
	/* Levels outside zlib's: refused before anything is written. */
	assert_int_equal(pp_write_gz_level(b, 1, -2, &w), -EINVAL);
	assert_int_equal(w, 0);
	assert_int_equal(pp_write_gz_level(b, 1, 10, NULL), -EINVAL);
	assert_int_equal(pp_write_gz_level(NULL, 1, PP_GZ_HOP, NULL), -EINVAL);
	free(raw);
	pp_free(b);
}

static void test_null_args(void **state)
{
	int64_t v = 1;
	uint64_t id = 77, w = 77;
	uint8_t *buf;
	size_t len;

	pp_free(NULL);
	pp_set_time(NULL, 1, 2);
	assert_int_equal(pp_new(NULL), -EINVAL);
	assert_int_equal(pp_str(NULL, "x"), -EINVAL);
	assert_int_equal(pp_add_sample_type(NULL, "a", "b"), -EINVAL);
	assert_int_equal(pp_set_period(NULL, "a", "b", 1), -EINVAL);
	assert_int_equal(pp_set_default_sample_type(NULL, "a"), -EINVAL);
	assert_int_equal(pp_add_comment(NULL, "a"), -EINVAL);
	assert_int_equal(pp_add_mapping(NULL, 0, 1, 0, "f", NULL, false, false, &id), -EINVAL);
	assert_int_equal(pp_add_function(NULL, "f", NULL, NULL, 0, &id), -EINVAL);
	assert_int_equal(pp_add_location(NULL, 0, 1, 0, 0, &id), -EINVAL);
	assert_int_equal(pp_add_sample(NULL, NULL, 0, &v, 1, NULL, 0), -EINVAL);
	assert_int_equal(pp_serialize(NULL, &buf, &len), -EINVAL);
	assert_int_equal(pp_write_gz(NULL, 1, &w), -EINVAL);
	assert_int_equal(w, 0);
	assert_int_equal(id, 77);
}

static void test_errors(void **state)
{
	Perftools__Profiles__Profile *p;
	struct pp_builder *b;
	uint64_t map, fn, loc, id, w, locs[2];
	int64_t vals[3] = { 1, 2, 3 };
	struct pp_label labels[PP_MAX_LABELS + 1];
	uint8_t *buf;
	size_t len;
	int fds[2];

	memset(labels, 0, sizeof(labels));
	for (int i = 0; i <= PP_MAX_LABELS; i++)
		labels[i].key = "k";

	assert_int_equal(pp_new(&b), 0);
	/* No sample types yet: no sample can match. */
	assert_int_equal(pp_add_sample(b, NULL, 0, vals, 0, NULL, 0), -EINVAL);
	assert_int_equal(pp_add_sample_type(b, NULL, "count"), -EINVAL);
	assert_int_equal(pp_set_period(b, NULL, "count", 1), -EINVAL);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_sample_type(b, "cpu", NULL), 0);

	assert_int_equal(pp_add_comment(b, NULL), -EINVAL);
	assert_int_equal(pp_add_mapping(b, 0x2000, 0x1000, 0, "f", NULL, false, false, &id), -EINVAL);
	assert_int_equal(pp_add_mapping(b, 0x1000, 0x2000, 0, NULL, NULL, false, false, &map), 0);
	assert_int_equal(pp_add_function(b, NULL, NULL, "f.c", 0, &id), -EINVAL);
	assert_int_equal(pp_add_function(b, "f", NULL, NULL, 0, &fn), 0);
	assert_int_equal(pp_add_location(b, map + 1, 0x1100, fn, 0, &id), -EINVAL);
	assert_int_equal(pp_add_location(b, map, 0x1100, fn + 1, 0, &id), -EINVAL);
	assert_int_equal(pp_add_location(b, map, 0x1100, fn, 3, &loc), 0);

	locs[0] = loc;
	locs[1] = loc;
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 1, NULL, 0), -EINVAL);
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 3, NULL, 0), -EINVAL);
	assert_int_equal(pp_add_sample(b, locs, 2, NULL, 2, NULL, 0), -EINVAL);
	assert_int_equal(pp_add_sample(b, NULL, 2, vals, 2, NULL, 0), -EINVAL);
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, NULL, 1), -EINVAL);
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, labels, PP_MAX_LABELS + 1), -EINVAL);
	locs[1] = 0;
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, NULL, 0), -EINVAL);
	locs[1] = loc + 1;
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, NULL, 0), -EINVAL);
	locs[1] = loc;
	labels[1].key = NULL;
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, labels, 2), -EINVAL);
	labels[1].key = "k";

	assert_int_equal(pp_serialize(b, NULL, &len), -EINVAL);
	assert_int_equal(pp_serialize(b, &buf, NULL), -EINVAL);
	assert_int_equal(pp_write_gz(b, -1, &w), -EBADF);
	assert_int_equal(pipe(fds), 0);
	assert_int_equal(pp_write_gz(b, fds[0], &w), -EBADF);
	assert_int_equal(w, 0);
	close(fds[0]);
	close(fds[1]);

	/* The builder survives all of that. */
	assert_int_equal(pp_add_sample(b, locs, 2, vals, 2, labels, PP_MAX_LABELS), 0);
	/* Values are fixed per sample type now. */
	assert_int_equal(pp_add_sample_type(b, "late", "count"), -EINVAL);
	assert_int_equal(pp_serialize(b, &buf, &len), 0);
	p = unpack(buf, len);
	assert_int_equal(p->n_sample_type, 2);
	assert_int_equal(p->sample_type[1]->unit, 0);
	assert_int_equal(p->n_sample, 1);
	assert_int_equal(p->sample[0]->n_label, PP_MAX_LABELS);
	assert_int_equal(p->sample[0]->n_value, 2);
	assert_int_equal(p->n_location, 1);
	assert_int_equal(p->location[0]->line[0]->line, 3);
	assert_int_equal(p->n_function, 1);
	assert_int_equal(p->n_mapping, 1);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(buf);
	pp_free(b);
}

static void test_sample_type_cap(void **state)
{
	struct pp_builder *b;
	char name[16];

	assert_int_equal(pp_new(&b), 0);
	for (int i = 0; i < PP_MAX_VALUES; i++) {
		snprintf(name, sizeof(name), "t%d", i);
		assert_int_equal(pp_add_sample_type(b, name, "count"), 0);
	}
	assert_int_equal(pp_add_sample_type(b, "one_too_many", "count"), -ENOSPC);
	pp_free(b);
}

static void test_mapping_cap(void **state)
{
	struct pp_builder *b;
	uint64_t id = 0;

	assert_int_equal(pp_new(&b), 0);
	for (uint32_t i = 0; i < PP_MAX_ENTRIES; i++)
		assert_int_equal(pp_add_mapping(b, i, i + 1, 0, NULL, NULL, false, false, &id), 0);
	assert_int_equal(id, PP_MAX_ENTRIES);
	assert_int_equal(pp_add_mapping(b, 0, 1, 0, NULL, NULL, false, false, &id), -ENOSPC);
	assert_int_equal(id, PP_MAX_ENTRIES);
	/* Full mappings do not stop the rest of the builder. */
	assert_int_equal(pp_add_function(b, "f", NULL, NULL, 0, &id), 0);
	assert_int_equal(pp_add_location(b, PP_MAX_ENTRIES, 5, id, 0, &id), 0);
	assert_int_equal(id, 1);
	pp_free(b);
}

static void test_string_cap(void **state)
{
	struct pp_builder *b;
	char s[32];
	uint64_t id;

	assert_int_equal(pp_new(&b), 0);
	/* "" already takes index 0. */
	for (uint32_t i = 1; i < PP_MAX_ENTRIES; i++) {
		snprintf(s, sizeof(s), "s%u", i);
		assert_int_equal(pp_str(b, s), i);
	}
	assert_int_equal(pp_str(b, "new"), -ENOSPC);
	assert_int_equal(pp_str(b, "s1"), 1);
	assert_int_equal(pp_str(b, "s1048575"), PP_MAX_ENTRIES - 1);
	assert_int_equal(pp_str(b, ""), 0);
	/* Calls needing a new string fail; ones reusing strings still work. */
	assert_int_equal(pp_add_function(b, "new", NULL, NULL, 0, &id), -ENOSPC);
	assert_int_equal(pp_add_function(b, "s1", NULL, "s2", 0, &id), 0);
	assert_int_equal(id, 1);
	assert_int_equal(pp_add_sample_type(b, "s3", "s4"), 0);
	assert_int_equal(pp_add_location(b, 0, 0x10, id, 1, &id), 0);
	{
		int64_t v = 1;
		struct pp_label bad = { .key = "new", .num = 1 };
		struct pp_label good = { .key = "s5", .str = "s6" };

		assert_int_equal(pp_add_sample(b, &id, 1, &v, 1, &bad, 1), -ENOSPC);
		assert_int_equal(pp_add_sample(b, &id, 1, &v, 1, &good, 1), 0);
	}
	pp_free(b);
}

/* Functions, locations and samples, cheaply: few strings, no stacks. */
static void test_entry_caps(void **state)
{
	struct pp_builder *b;
	char name[16], file[16];
	uint64_t id = 0, fn = 0;
	int64_t v = 1;

	assert_int_equal(pp_new(&b), 0);
	/* 1024 names x 1024 files: a million functions from 2048 strings. */
	for (uint32_t i = 0; i < PP_MAX_ENTRIES; i++) {
		snprintf(name, sizeof(name), "n%u", i >> 10);
		snprintf(file, sizeof(file), "f%u", i & 1023);
		assert_int_equal(pp_add_function(b, name, NULL, file, 0, &fn), 0);
	}
	assert_int_equal(fn, PP_MAX_ENTRIES);
	assert_int_equal(pp_add_function(b, "n0", NULL, "f1024", 0, &id), -ENOSPC);
	assert_int_equal(pp_add_function(b, "n0", NULL, "f5", 0, &id), 0);
	assert_int_equal(id, 6);

	for (uint32_t i = 0; i < PP_MAX_ENTRIES; i++)
		assert_int_equal(pp_add_location(b, 0, 0x1000 + i, 0, 0, &id), 0);
	assert_int_equal(id, PP_MAX_ENTRIES);
	assert_int_equal(pp_add_location(b, 0, 0x10, 0, 0, &id), -ENOSPC);
	assert_int_equal(pp_add_location(b, 0, 0x1000, fn, 1, &id), 0);
	assert_int_equal(id, 1);

	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	for (uint32_t i = 0; i < PP_MAX_ENTRIES; i++)
		assert_int_equal(pp_add_sample(b, NULL, 0, &v, 1, NULL, 0), 0);
	assert_int_equal(pp_add_sample(b, &id, 1, &v, 1, NULL, 0), -ENOSPC);
	pp_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_serialize),
		cmocka_unit_test(test_write_gz),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_large_gz),
		cmocka_unit_test(test_hop_level),
		cmocka_unit_test(test_null_args),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_sample_type_cap),
		cmocka_unit_test(test_mapping_cap),
		cmocka_unit_test(test_string_cap),
		cmocka_unit_test(test_entry_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
