/* pprof redaction (redact/rdc_pprof.c) on crafted profiles. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "pprof.h"
#include "profile.pb-c.h"
#include "rdc.h"

#define APP 100
#define OTHER 200
#define KADDR 0xffffffff81000000ull

static int memfd(void)
{
	int fd = memfd_create("t", MFD_CLOEXEC);
	assert_true(fd >= 0);
	return fd;
}

/* A profile with app and foreign samples, a kernel frame and a peer
 * label, gzip'd at a zlib level. */
static int make_profile_at(bool with_app, int level)
{
	struct pp_builder *b;
	uint64_t m, mk, f_app, f_other, f_k, l_app, l_other, l_k, l_main, f_main;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pp_add_mapping(b, 0x400000, 0x500000, 0, "/usr/bin/app", "abcd", true, false, &m), 0);
	assert_int_equal(pp_add_mapping(b, KADDR, KADDR + 0x100000, 0, "[kernel.kallsyms]", NULL, true, false, &mk), 0);
	assert_int_equal(pp_add_function(b, "app_hot", NULL, "app.c", 1, &f_app), 0);
	assert_int_equal(pp_add_function(b, "main", NULL, "app.c", 1, &f_main), 0);
	assert_int_equal(pp_add_function(b, "foreign_secret_fn", NULL, "/home/other/secret.c", 1, &f_other), 0);
	assert_int_equal(pp_add_function(b, "do_syscall_64", NULL, NULL, 0, &f_k), 0);
	assert_int_equal(pp_add_location(b, m, 0x401000, f_app, 10, &l_app), 0);
	assert_int_equal(pp_add_location(b, m, 0x402000, f_main, 20, &l_main), 0);
	assert_int_equal(pp_add_location(b, m, 0x403000, f_other, 30, &l_other), 0);
	assert_int_equal(pp_add_location(b, mk, KADDR + 0x10, f_k, 0, &l_k), 0);
	int64_t v[2] = { 3, 30000000 };
	uint64_t stack_app[3] = { l_k, l_app, l_main };
	uint64_t stack_other[2] = { l_other, l_main };
	struct pp_label la[3] = { { .key = "pid", .num = APP }, { .key = "thread_id", .num = APP + 1 },
				  { .key = "peer_pid", .num = OTHER } };
	struct pp_label lo[2] = { { .key = "pid", .num = OTHER }, { .key = "thread_name", .str = "secret-thread" } };
	if (with_app)
		assert_int_equal(pp_add_sample(b, stack_app, 3, v, 2, la, 3), 0);
	assert_int_equal(pp_add_sample(b, stack_other, 2, v, 2, lo, 2), 0);
	/* No pid label at all: not attributable, so dropped. */
	assert_int_equal(pp_add_sample(b, stack_other, 2, v, 2, NULL, 0), 0);
	int fd = memfd();
	assert_int_equal(pp_write_gz_level(b, fd, level, NULL), 0);
	pp_free(b);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int make_profile(bool with_app)
{
	return make_profile_at(with_app, -1);
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

static Perftools__Profiles__Profile *decode(int fd, uint8_t **raw_out, size_t *rawn)
{
	size_t n;
	uint8_t *gz = slurp(fd, &n);
	size_t cap = 1 << 20;
	uint8_t *raw = malloc(cap);
	z_stream z = { 0 };
	assert_int_equal(inflateInit2(&z, 15 + 32), Z_OK);
	z.next_in = gz;
	z.avail_in = (uInt)n;
	z.next_out = raw;
	z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	*rawn = cap - z.avail_out;
	inflateEnd(&z);
	free(gz);
	*raw_out = raw;
	Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, *rawn, raw);
	assert_non_null(p);
	return p;
}

static void test_keeps_only_app(void **state)
{
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	struct rdc_stats st;
	int in = make_profile(true), out = memfd();

	assert_int_equal(rdc_pprof(in, out, &pol, &st), 0);
	assert_int_equal(st.kept, 1);
	assert_int_equal(st.dropped, 2);
	uint8_t *raw;
	size_t rawn;
	Perftools__Profiles__Profile *p = decode(out, &raw, &rawn);
	assert_int_equal(p->n_sample, 1);
	/* The kernel frame is gone: app_hot is now the leaf, main the root. */
	assert_int_equal(p->sample[0]->n_location_id, 2);
	for (size_t i = 0; i < p->n_location; i++)
		assert_true(p->location[i]->address < KADDR);
	for (size_t i = 0; i < p->n_mapping; i++)
		assert_true(p->mapping[i]->memory_start < KADDR);
	/* pid and thread_id stay; the foreign peer_pid label is dropped. */
	assert_int_equal(p->sample[0]->n_label, 2);
	/* No string of a dropped sample or frame survives, in the decoded view... */
	for (size_t i = 0; i < p->n_string_table; i++) {
		assert_null(strstr(p->string_table[i], "secret"));
		assert_null(strstr(p->string_table[i], "do_syscall"));
		assert_null(strstr(p->string_table[i], "kallsyms"));
	}
	/* ...nor in the raw bytes. */
	assert_null(memmem(raw, rawn, "secret", 6));
	assert_null(memmem(raw, rawn, "do_syscall_64", 13));
	assert_non_null(memmem(raw, rawn, "app_hot", 7));
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	close(in);
	close(out);
}

/* The runtimes' stored gzip (PP_GZ_HOP) redacts to the very bytes the
 * same profile at zlib's default level does. */
static void test_hop_input(void **state)
{
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	struct rdc_stats st6, st0;
	int in6 = make_profile(true), in0 = make_profile_at(true, PP_GZ_HOP);
	int out6 = memfd(), out0 = memfd();
	size_t n6, n0;
	struct stat z6, z0;

	(void)state;
	assert_int_equal(rdc_pprof(in6, out6, &pol, &st6), 0);
	assert_int_equal(rdc_pprof(in0, out0, &pol, &st0), 0);
	uint8_t *a = slurp(out6, &n6), *b = slurp(out0, &n0);
	assert_int_equal(fstat(in6, &z6), 0);
	assert_int_equal(fstat(in0, &z0), 0);
	assert_true(z0.st_size > z6.st_size); /* the stored input really is another file */
	assert_int_equal(n6, n0);
	assert_memory_equal(a, b, n6);
	assert_int_equal(st0.kept, st6.kept);
	assert_int_equal(st0.dropped, st6.dropped);
	assert_int_equal(st0.in_bytes, z0.st_size);
	free(a);
	free(b);
	close(in6);
	close(in0);
	close(out6);
	close(out0);
}

static void test_no_app_samples(void **state)
{
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	int in = make_profile(false), out = memfd();
	assert_int_equal(rdc_pprof(in, out, &pol, NULL), -ENODATA);
	close(in);
	close(out);
}

/* An idle process's capture: no samples at all is an empty profile, kept. */
static void test_no_samples_at_all(void **state)
{
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	struct pp_builder *b;
	uint64_t m;
	(void)state;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pp_set_period(b, "cpu", "nanoseconds", 10000000), 0);
	/* A mapping no sample refers to does not reach the output. */
	assert_int_equal(pp_add_mapping(b, 0x400000, 0x500000, 0, "/home/other/secret", NULL, true,
					false, &m), 0);
	pp_set_time(b, 1000, 2000);
	int in = memfd(), out = memfd();
	assert_int_equal(pp_write_gz(b, in, NULL), 0);
	pp_free(b);
	lseek(in, 0, SEEK_SET);
	struct rdc_stats st;
	assert_int_equal(rdc_pprof(in, out, &pol, &st), 0);
	assert_int_equal(st.kept, 0);
	uint8_t *raw;
	size_t rawn;
	Perftools__Profiles__Profile *p = decode(out, &raw, &rawn);
	assert_int_equal(p->n_sample, 0);
	assert_int_equal(p->n_sample_type, 2);
	assert_int_equal(p->n_mapping, 0);
	assert_int_equal(p->time_nanos, 1000);
	assert_int_equal(p->duration_nanos, 2000);
	assert_null(memmem(raw, rawn, "secret", 6));
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	close(in);
	close(out);
}

static void test_malformed(void **state)
{
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	int good = make_profile(true);
	size_t n;
	uint8_t *buf = slurp(good, &n);
	/* Every truncation of a valid file is refused, never passed through. */
	for (size_t cut = 0; cut < n; cut++) {
		int in = memfd(), out = memfd();
		assert_int_equal(write(in, buf, cut), (ssize_t)cut);
		lseek(in, 0, SEEK_SET);
		int r = rdc_pprof(in, out, &pol, NULL);
		assert_true(r == -EBADMSG || r == -ENODATA);
		close(in);
		close(out);
	}
	/* Corrupt bytes inside the deflate stream. */
	for (size_t pos = 10; pos < n; pos += 7) {
		int in = memfd(), out = memfd();
		uint8_t save = buf[pos];
		buf[pos] ^= 0x5a;
		assert_int_equal(write(in, buf, n), (ssize_t)n);
		lseek(in, 0, SEEK_SET);
		int r = rdc_pprof(in, out, &pol, NULL);
		assert_true(r == 0 || r == -EBADMSG || r == -ENODATA);
		buf[pos] = save;
		close(in);
		close(out);
	}
	/* Not gzip and not a profile. */
	int in = memfd(), out = memfd();
	assert_int_equal(write(in, "\xff\xff\xff\xff", 4), 4);
	lseek(in, 0, SEEK_SET);
	assert_int_equal(rdc_pprof(in, out, &pol, NULL), -EBADMSG);
	free(buf);
	close(in);
	close(out);
	close(good);
}

/*
 * A packed location_id field is only counted, not decoded, for a sample
 * that is dropped (rdc_pprof.c: packed_count): it must refuse what
 * decoding refused. The valid profile, inflated, with one more sample (no
 * pid label: dropped) whose packed ids are ids, one at the limit of ten
 * bytes, or a varint that runs over ten bytes or past the field, put at
 * offsets that straddle the 8-byte words packed_count reads.
 */
static void test_packed_ids(void **state)
{
	static const struct {
		const char *what;
		uint8_t ids[24];
		size_t n;
		int want;
	} cases[] = {
		{ "short ids", { 1, 2, 3, 0x81, 0x01 }, 5, 0 },
		{ "a 10-byte id", { 1, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, 11, 0 },
		{ "11 bytes", { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 }, 11,
		  -EBADMSG },
		{ "11 bytes across words", { 1, 2, 3, 4, 5, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					    0xff, 0xff, 0x01 }, 17, -EBADMSG },
		{ "11 bytes, the run ends inside a word", { 1, 2, 3, 4, 5, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
							    0xff, 0xff, 0xff, 0xff, 0x01 }, 16, -EBADMSG },
		{ "10 bytes across words", { 1, 2, 3, 4, 5, 6, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
					    0xff, 0xff, 0x01 }, 16, 0 },
		{ "cut short", { 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x85 }, 10, -EBADMSG },
		{ "cut short in a word", { 1, 2, 3, 4, 5, 6, 7, 0x85 }, 8, -EBADMSG },
	};
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	int good = make_profile(true);
	uint8_t *raw;
	size_t rawn;
	Perftools__Profiles__Profile *pb = decode(good, &raw, &rawn);
	(void)state;
	perftools__profiles__profile__free_unpacked(pb, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t smp[64], *q = smp;
		*q++ = 0x0a; /* location_id, packed */
		*q++ = (uint8_t)cases[i].n;
		memcpy(q, cases[i].ids, cases[i].n);
		q += cases[i].n;
		*q++ = 0x12; /* value, packed: the profile's two types */
		*q++ = 2;
		*q++ = 1;
		*q++ = 1;
		int in = memfd(), out = memfd();
		uint8_t hdr[2] = { 0x12, (uint8_t)(q - smp) }; /* Profile.sample */
		assert_int_equal(write(in, raw, rawn), (ssize_t)rawn);
		assert_int_equal(write(in, hdr, 2), 2);
		assert_int_equal(write(in, smp, (size_t)(q - smp)), q - smp);
		lseek(in, 0, SEEK_SET);
		int r = rdc_pprof(in, out, &pol, NULL);
		if (r != cases[i].want)
			fail_msg("%s: %d, want %d", cases[i].what, r, cases[i].want);
		close(in);
		close(out);
	}
	free(raw);
	close(good);
}

static uint8_t *put_var(uint8_t *q, uint64_t v)
{
	while (v >= 0x80) {
		*q++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*q++ = (uint8_t)v;
	return q;
}

/*
 * The same for a sample that is kept (its pid label the app's): its
 * frames are decoded without being counted first (rdc_pprof.c, sample()),
 * so the decoding must refuse what packed_count refuses, at the field's
 * end too. Ids 1, 2 and 4 are the locations the profile's app sample
 * made already (the fast path), 9 is none; past 2^16 frames is -E2BIG.
 */
static void test_packed_ids_kept(void **state)
{
	static const struct {
		const char *what;
		uint8_t ids[24];
		size_t n;
		int want;
	} cases[] = {
		{ "short ids", { 1, 2, 4, 2, 1 }, 5, 0 },
		{ "an id in two bytes", { 1, 0x82, 0x00, 4 }, 4, 0 },
		{ "an id in two bytes, last", { 1, 4, 0x82, 0x00 }, 4, 0 },
		{ "a 10-byte id", { 1, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 11, 0 },
		{ "11 bytes", { 1, 0x81, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 }, 12,
		  -EBADMSG },
		{ "cut short", { 1, 2, 4, 0x81 }, 4, -EBADMSG },
		{ "cut short in its second byte", { 1, 2, 0x81, 0x80 }, 4, -EBADMSG },
		{ "no such location", { 1, 9 }, 2, -EBADMSG },
		{ "65536 frames", { 0 }, 65536, 0 },
		{ "65537 frames", { 0 }, 65537, -E2BIG },
	};
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	int good = make_profile(true);
	uint8_t *raw, *smp = malloc(70000 + 64), *hdr = malloc(8);
	size_t rawn, pid_key = 0;
	Perftools__Profiles__Profile *pb = decode(good, &raw, &rawn);
	(void)state;
	assert_non_null(smp);
	assert_non_null(hdr);
	for (size_t i = 1; i < pb->n_string_table; i++)
		if (!strcmp(pb->string_table[i], "pid"))
			pid_key = i;
	assert_true(pid_key > 0 && pid_key < 0x80);
	perftools__profiles__profile__free_unpacked(pb, NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t *q = smp;
		*q++ = 0x0a; /* location_id, packed */
		q = put_var(q, cases[i].n);
		if (cases[i].n > sizeof(cases[i].ids))
			memset(q, 1, cases[i].n); /* that many frames of location 1 */
		else
			memcpy(q, cases[i].ids, cases[i].n);
		q += cases[i].n;
		*q++ = 0x12; /* value, packed: the profile's two types */
		*q++ = 2;
		*q++ = 1;
		*q++ = 1;
		*q++ = 0x1a; /* label { key "pid", num APP } */
		*q++ = 4;
		*q++ = 0x08;
		*q++ = (uint8_t)pid_key;
		*q++ = 0x18;
		*q++ = APP;
		uint8_t *h = hdr;
		*h++ = 0x12; /* Profile.sample */
		h = put_var(h, (uint64_t)(q - smp));
		int in = memfd(), out = memfd();
		struct rdc_stats st = { 0 };
		assert_int_equal(write(in, raw, rawn), (ssize_t)rawn);
		assert_int_equal(write(in, hdr, (size_t)(h - hdr)), h - hdr);
		assert_int_equal(write(in, smp, (size_t)(q - smp)), q - smp);
		lseek(in, 0, SEEK_SET);
		int r = rdc_pprof(in, out, &pol, &st);
		if (r != cases[i].want)
			fail_msg("%s: %d, want %d", cases[i].what, r, cases[i].want);
		/* Kept: the app's sample and this one. */
		if (!r && st.kept != 2)
			fail_msg("%s: %llu kept, want 2", cases[i].what, (unsigned long long)st.kept);
		close(in);
		close(out);
	}
	free(raw);
	free(smp);
	free(hdr);
	close(good);
}

/*
 * The deflate job's write fails (/dev/full: ENOSPC), on the gzip worker
 * or on the parser helping it: the error comes back from rdc_pprof, whether the output fails at its end (a small
 * profile) or mid-stream while the parser still fills buffers (a large
 * one: many 64 KiB buffers of kept samples), and nothing hangs.
 */
static void test_output_fails(void **state)
{
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1 };
	int full = open("/dev/full", O_WRONLY | O_CLOEXEC);
	(void)state;
	if (full < 0)
		skip();
	int in = make_profile(true);
	assert_int_equal(rdc_pprof(in, full, &pol, NULL), -ENOSPC);
	close(in);

	struct pp_builder *b;
	uint64_t m, f, loc[4096], stack[32];
	int64_t v[2] = { 1, 10000000 };
	struct pp_label la[1] = { { .key = "pid", .num = APP } };
	uint32_t seed = 1;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "samples", "count"), 0);
	assert_int_equal(pp_add_sample_type(b, "cpu", "nanoseconds"), 0);
	assert_int_equal(pp_add_mapping(b, 0x400000, 0x900000, 0, "/usr/bin/app", NULL, true, false, &m), 0);
	assert_int_equal(pp_add_function(b, "f", NULL, "f.c", 1, &f), 0);
	for (size_t i = 0; i < 4096; i++)
		assert_int_equal(pp_add_location(b, m, 0x400000 + i * 16, f, (int64_t)i, &loc[i]), 0);
	/* Frames at random: deflate cannot make the kept samples small. */
	for (int s = 0; s < 40000; s++) {
		for (size_t i = 0; i < 32; i++) {
			seed = seed * 1103515245u + 12345u;
			stack[i] = loc[(seed >> 16) % 4096];
		}
		assert_int_equal(pp_add_sample(b, stack, 32, v, 2, la, 1), 0);
	}
	in = memfd();
	assert_int_equal(pp_write_gz(b, in, NULL), 0);
	pp_free(b);
	lseek(in, 0, SEEK_SET);
	struct rdc_stats st;
	assert_int_equal(rdc_pprof(in, full, &pol, &st), -ENOSPC);
	/* Not at the end: the parser was still going when it heard. */
	assert_true(st.kept < 40000);
	/* The same profile to a real file: all kept. */
	int out = memfd();
	lseek(in, 0, SEEK_SET);
	assert_int_equal(rdc_pprof(in, out, &pol, &st), 0);
	assert_int_equal(st.kept, 40000);
	close(out);
	close(in);
	close(full);
}

/* Method events' recorded arguments (docs/METHOD_EVENTS.md, "Arguments"):
 * the string of an "arg<N>" label gets the DLP rules; numbers, other
 * labels' strings and keys that only look alike ("argx", "arg") do not. */
static void test_dlp_args(void **state)
{
	struct pp_builder *b;
	uint64_t m, f, l;
	assert_int_equal(pp_new(&b), 0);
	assert_int_equal(pp_add_sample_type(b, "hits", "count"), 0);
	assert_int_equal(pp_add_mapping(b, 0x400000, 0x500000, 0, "/usr/bin/app", NULL, true, false, &m), 0);
	assert_int_equal(pp_add_function(b, "Target.register", NULL, "Target.java", 1, &f), 0);
	assert_int_equal(pp_add_location(b, m, 0x401000, f, 10, &l), 0);
	int64_t v[1] = { 1 };
	struct pp_label la[6] = { { .key = "pid", .num = APP }, { .key = "arg0", .num = 7 },
				  { .key = "arg1", .str = "alice@example.com" },
				  { .key = "arg12", .str = "x 10.1.2.3 y" },
				  { .key = "argx", .str = "carol@example.com" },
				  { .key = "arg", .str = "dave@example.com" } };
	struct pp_label lb[2] = { { .key = "pid", .num = APP }, { .key = "arg1", .str = "plain" } };
	assert_int_equal(pp_add_sample(b, &l, 1, v, 1, la, 6), 0);
	assert_int_equal(pp_add_sample(b, &l, 1, v, 1, lb, 2), 0);
	int in = memfd();
	assert_int_equal(pp_write_gz(b, in, NULL), 0);
	pp_free(b);

	struct rdc_dlp *d;
	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &d), 0);
	int32_t pids[] = { APP };
	struct rdc_policy pol = { .pids = pids, .npids = 1, .dlp = d };
	struct rdc_stats st;
	int out = memfd();
	lseek(in, 0, SEEK_SET);
	assert_int_equal(rdc_pprof(in, out, &pol, &st), 0);
	assert_int_equal(st.kept, 2);
	uint8_t *raw;
	size_t rawn;
	Perftools__Profiles__Profile *p = decode(out, &raw, &rawn);
	assert_int_equal(p->n_sample, 2);
	int seen = 0;
	for (size_t k = 0; k < p->n_sample; k++)
		for (size_t i = 0; i < p->sample[k]->n_label; i++) {
			const Perftools__Profiles__Label *lab = p->sample[k]->label[i];
			const char *key = p->string_table[lab->key];
			const char *str = lab->str ? p->string_table[lab->str] : NULL;
			if (!strcmp(key, "arg0")) {
				assert_int_equal(lab->num, 7);
				seen |= 1;
			} else if (!strcmp(key, "arg1") && k == 0) {
				assert_string_equal(str, RDC_DLP_REPLACEMENT);
				seen |= 2;
			} else if (!strcmp(key, "arg1")) {
				assert_string_equal(str, "plain");
				seen |= 4;
			} else if (!strcmp(key, "arg12")) {
				assert_string_equal(str, "x " RDC_DLP_REPLACEMENT " y");
				seen |= 8;
			} else if (!strcmp(key, "argx")) {
				assert_string_equal(str, "carol@example.com");
				seen |= 16;
			} else if (!strcmp(key, "arg")) {
				assert_string_equal(str, "dave@example.com");
				seen |= 32;
			}
		}
	assert_int_equal(seen, 63);
	/* No unscrubbed copy of an argument is left in the string table. */
	for (size_t i = 0; i < p->n_string_table; i++) {
		assert_null(strstr(p->string_table[i], "alice@"));
		assert_null(strstr(p->string_table[i], "10.1.2.3"));
	}
	assert_true(st.scrubbed >= 2);
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	rdc_dlp_free(d);
	close(in);
	close(out);
}

static void test_dlp(void **state)
{
	struct rdc_dlp *d;
	char out[128];
	int changed;
	assert_int_equal(rdc_dlp_compile(rdc_dlp_builtin, rdc_dlp_builtin_count, &d), 0);
	assert_int_equal(rdc_dlp_scrub(d, "mail bob@example.com from 10.1.2.3 tok "
				       "0123456789abcdef0123456789abcdef!", out, sizeof(out), &changed), 0);
	assert_int_equal(changed, 1);
	assert_string_equal(out, "mail [redacted] from [redacted] tok [redacted]!");
	assert_int_equal(rdc_dlp_scrub(d, "plain name", out, sizeof(out), &changed), 0);
	assert_int_equal(changed, 0);
	assert_string_equal(out, "plain name");
	/* Truncation is safe. */
	assert_int_equal(rdc_dlp_scrub(d, "a@b.cc and more text", out, 8, NULL), 0);
	assert_int_equal(strlen(out), 7);
	rdc_dlp_free(d);
	const char *bad[] = { "(" };
	assert_int_equal(rdc_dlp_compile(bad, 1, &d), -EINVAL);
	rdc_dlp_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_keeps_only_app),
		cmocka_unit_test(test_hop_input),
		cmocka_unit_test(test_no_app_samples),
		cmocka_unit_test(test_no_samples_at_all),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_packed_ids),
		cmocka_unit_test(test_packed_ids_kept),
		cmocka_unit_test(test_output_fails),
		cmocka_unit_test(test_dlp),
		cmocka_unit_test(test_dlp_args),
	};
	return cmocka_run_group_tests_name("rdc_pprof", tests, NULL, NULL);
}
