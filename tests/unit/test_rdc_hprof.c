/*
 * rdc_hprof: crafted HPROF files built in memory. Each fixture is built
 * twice, once as input and once "redacted" (primitive values written as
 * zeros), and the redactor's output must equal the second byte for byte.
 *
 * `test_rdc_hprof --write-corpus DIR` writes fuzz seeds instead of testing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rdc.h"

/* ---- Builder. */

struct b {
	uint8_t *d;
	size_t n, cap;
	unsigned idsz;
	int red; /* build the expected output: primitive values as zeros */
};

enum { T_OBJ = 2, T_BOOL = 4, T_CHAR, T_FLOAT, T_DOUBLE, T_BYTE, T_SHORT, T_INT, T_LONG };

static unsigned tsize(const struct b *b, unsigned t)
{
	static const unsigned sz[] = { [T_BOOL] = 1, [T_CHAR] = 2, [T_FLOAT] = 4, [T_DOUBLE] = 8,
				       [T_BYTE] = 1, [T_SHORT] = 2, [T_INT] = 4, [T_LONG] = 8 };
	return t == T_OBJ ? b->idsz : sz[t];
}

static void put(struct b *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->n + n)
			cap *= 2;
		b->d = realloc(b->d, cap);
		assert_non_null(b->d);
		b->cap = cap;
	}
	if (p)
		memcpy(b->d + b->n, p, n);
	else
		memset(b->d + b->n, 0, n);
	b->n += n;
}

static void be(struct b *b, uint64_t v, unsigned n)
{
	uint8_t x[8];
	for (unsigned i = 0; i < n; i++)
		x[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	put(b, x, n);
}

static void u1(struct b *b, uint64_t v) { be(b, v, 1); }
static void u2(struct b *b, uint64_t v) { be(b, v, 2); }
static void u4(struct b *b, uint64_t v) { be(b, v, 4); }
static void wid(struct b *b, uint64_t v) { be(b, v, b->idsz); }

/* Ids use the high half when they are 8 bytes, to catch truncation. */
static uint64_t ID(const struct b *b, uint64_t x)
{
	return b->idsz == 8 ? 0x7f12340000000000ull | x : x;
}

/* A field, static or constant pool value: kept if a reference, else zeroed. */
static void val(struct b *b, unsigned t, uint64_t v)
{
	if (t == T_OBJ)
		wid(b, v);
	else
		be(b, b->red ? 0 : v, tsize(b, t));
}

static void header(struct b *b, char ver)
{
	char magic[] = "JAVA PROFILE 1.0.2";
	magic[17] = ver;
	put(b, magic, sizeof(magic));
	u4(b, b->idsz);
	be(b, 0x0000018c12345678ull, 8);
}

static size_t rec_begin(struct b *b, unsigned tag)
{
	u1(b, tag);
	u4(b, 0);
	size_t at = b->n;
	u4(b, 0);
	return at;
}

static void rec_end(struct b *b, size_t at)
{
	uint32_t len = (uint32_t)(b->n - at - 4);
	for (int i = 0; i < 4; i++)
		b->d[at + i] = (uint8_t)(len >> (24 - 8 * i));
}

static void utf8(struct b *b, uint64_t id, const char *s)
{
	size_t at = rec_begin(b, 0x01);
	wid(b, id);
	put(b, s, strlen(s));
	rec_end(b, at);
}

static void load_class(struct b *b, uint32_t serial, uint64_t cls, uint64_t name)
{
	size_t at = rec_begin(b, 0x02);
	u4(b, serial);
	wid(b, cls);
	u4(b, 1);
	wid(b, name);
	rec_end(b, at);
}

struct fv {
	uint64_t name; /* constant pool index for the constant pool */
	unsigned type;
	uint64_t v;
};

static void class_dump(struct b *b, uint64_t id, uint64_t super, const struct fv *cp, size_t ncp,
		       const struct fv *st, size_t nst, const struct fv *f, size_t nf)
{
	u1(b, 0x20);
	wid(b, id);
	u4(b, 1);
	wid(b, super);
	wid(b, ID(b, 0x900)); /* loader */
	wid(b, 0);
	wid(b, 0);
	wid(b, 0);
	wid(b, 0);
	u4(b, 16);
	u2(b, ncp);
	for (size_t i = 0; i < ncp; i++) {
		u2(b, cp[i].name);
		u1(b, cp[i].type);
		val(b, cp[i].type, cp[i].v);
	}
	u2(b, nst);
	for (size_t i = 0; i < nst; i++) {
		wid(b, st[i].name);
		u1(b, st[i].type);
		val(b, st[i].type, st[i].v);
	}
	u2(b, nf);
	for (size_t i = 0; i < nf; i++) {
		wid(b, f[i].name);
		u1(b, f[i].type);
	}
}

/*
 * An instance whose field values are v, in dump order (class, then supers).
 * bad adds bytes shaped like a ROOT UNKNOWN to the count: only the layout
 * check can tell them from a following sub-record.
 */
static size_t instance(struct b *b, uint64_t id, uint64_t cls, const struct fv *v, size_t nv,
		       int bad)
{
	uint32_t n = 0;
	for (size_t i = 0; i < nv; i++)
		n += tsize(b, v[i].type);
	u1(b, 0x21);
	wid(b, id);
	u4(b, 1);
	wid(b, cls);
	u4(b, n + (bad ? 1 + b->idsz : 0));
	size_t data = b->n;
	for (size_t i = 0; i < nv; i++)
		val(b, v[i].type, v[i].v);
	if (bad) {
		u1(b, 0xff);
		wid(b, id);
	}
	return data;
}

static size_t prim_array(struct b *b, uint64_t id, unsigned t, uint32_t n)
{
	u1(b, 0x23);
	wid(b, id);
	u4(b, 1);
	u4(b, n);
	u1(b, t);
	size_t data = b->n;
	for (uint32_t i = 0; i < n; i++)
		val(b, t, 0x0102030405060708ull * (i + 1));
	return data;
}

static size_t obj_array(struct b *b, uint64_t id, uint64_t cls, const uint64_t *e, uint32_t n)
{
	u1(b, 0x22);
	wid(b, id);
	u4(b, 1);
	u4(b, n);
	wid(b, cls);
	size_t data = b->n;
	for (uint32_t i = 0; i < n; i++)
		wid(b, e[i]);
	return data;
}

static void roots(struct b *b, uint64_t obj)
{
	u1(b, 0xff); wid(b, obj);
	u1(b, 0x01); wid(b, obj); wid(b, ID(b, 0x77));
	u1(b, 0x02); wid(b, obj); u4(b, 1); u4(b, 0);
	u1(b, 0x03); wid(b, obj); u4(b, 1); u4(b, 2);
	u1(b, 0x04); wid(b, obj); u4(b, 1);
	u1(b, 0x05); wid(b, ID(b, 0x100));
	u1(b, 0x06); wid(b, obj); u4(b, 1);
	u1(b, 0x07); wid(b, obj);
	u1(b, 0x08); wid(b, ID(b, 0x700)); u4(b, 1); u4(b, 1);
}

/* ---- The main fixture: Object <- Base <- Derived, arrays, roots. */

enum { F_SEGMENTED = 1, F_UNKNOWN_TOP = 2, F_BAD_LEN = 4, F_UNKNOWN_CLASS = 8, F_UNKNOWN_SUB = 16,
       F_ART = 32 };

struct marks {
	size_t inst;    /* Derived instance field data */
	size_t chars;   /* char[] elements */
	size_t refs;    /* Object[] elements */
	size_t cls_int; /* Derived's int static value */
	size_t cls_ref; /* Derived's Object static value */
};

static void fixture(struct b *b, unsigned idsz, char ver, int flags, int red, struct marks *m)
{
	struct marks dummy;
	if (!m)
		m = &dummy;
	*b = (struct b){ .idsz = idsz, .red = red };
	const uint64_t OBJ = ID(b, 0x100), BASE = ID(b, 0x200), DER = ID(b, 0x300),
		       CHARS = ID(b, 0x110), OBJS = ID(b, 0x120), I1 = ID(b, 0x400),
		       I2 = ID(b, 0x410), A1 = ID(b, 0x500), A2 = ID(b, 0x600);

	header(b, ver);
	const char *names[] = { "java/lang/Object", "Base", "Derived", "[C", "[Ljava/lang/Object;",
				"a", "ref", "l", "f", "o2", "d", "c", "s", "by", "fl", "counter",
				"sref", "big", "flag", "main", "()V", "Derived.java", "main-thread" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		utf8(b, ID(b, i + 1), names[i]);
	/* A symbol no record names, as HotSpot writes for string literals. */
	if (!red)
		utf8(b, ID(b, 0x4242), "hunter2");
	if (flags & F_ART) /* named only by HEAP DUMP INFO */
		utf8(b, ID(b, 0x4343), "app");
	load_class(b, 1, OBJ, ID(b, 1));
	load_class(b, 2, BASE, ID(b, 2));
	load_class(b, 3, DER, ID(b, 3));
	load_class(b, 4, CHARS, ID(b, 4));
	load_class(b, 5, OBJS, ID(b, 5));

	size_t at = rec_begin(b, 0x04); /* STACK FRAME */
	wid(b, ID(b, 0x50)); wid(b, ID(b, 20)); wid(b, ID(b, 21)); wid(b, ID(b, 22));
	u4(b, 3); u4(b, 42);
	rec_end(b, at);
	at = rec_begin(b, 0x05); /* STACK TRACE */
	u4(b, 1); u4(b, 1); u4(b, 1); wid(b, ID(b, 0x50));
	rec_end(b, at);
	at = rec_begin(b, 0x0a); /* START THREAD */
	u4(b, 1); wid(b, ID(b, 0x700)); u4(b, 1); wid(b, ID(b, 23)); wid(b, 0); wid(b, 0);
	rec_end(b, at);
	if ((flags & F_UNKNOWN_TOP) && !red) {
		at = rec_begin(b, 0x42);
		put(b, "secret", 6);
		rec_end(b, at);
	}

	/* Segment 1 holds instances before their classes: needs pass 1. */
	at = rec_begin(b, (flags & F_SEGMENTED) ? 0x1c : 0x0c);
	roots(b, I1);
	const struct fv dv[] = {
		/* Derived */
		{ 9, T_BOOL, 1 }, { 10, T_OBJ, A2 }, { 11, T_DOUBLE, 0x400921fb54442d18ull },
		{ 12, T_CHAR, 'x' }, { 13, T_SHORT, 0x1234 }, { 14, T_BYTE, 0x7f },
		{ 15, T_FLOAT, 0x40490fdb },
		/* Base */
		{ 6, T_INT, 0xdeadbeef }, { 7, T_OBJ, A1 }, { 8, T_LONG, 0x1122334455667788ull },
	};
	m->inst = instance(b, I1, (flags & F_UNKNOWN_CLASS) ? ID(b, 0x999) : DER, dv, 10,
			   flags & F_BAD_LEN);
	const struct fv bv[] = { { 6, T_INT, 7 }, { 7, T_OBJ, 0 }, { 8, T_LONG, 9 } };
	instance(b, I2, BASE, bv, 3, 0);
	instance(b, ID(b, 0x420), OBJ, NULL, 0, 0);
	m->chars = prim_array(b, A1, T_CHAR, 5);
	const uint64_t elems[] = { I1, 0, A1, I2 };
	m->refs = obj_array(b, A2, OBJS, elems, 4);
	if (flags & F_UNKNOWN_SUB) {
		u1(b, 0x42);
		wid(b, I1);
	}
	if (flags & F_ART) {
		u1(b, 0xfe); u4(b, 1); wid(b, ID(b, 0x4343));
		u1(b, 0x89); wid(b, I1);
		u1(b, 0x8e); wid(b, I1); u4(b, 1); u4(b, 0);
		u1(b, 0xc3); wid(b, ID(b, 0x510)); u4(b, 1); u4(b, 100); u1(b, T_INT);
	}
	if (flags & F_SEGMENTED) {
		rec_end(b, at);
		at = rec_begin(b, 0x1c);
	}

	class_dump(b, OBJ, 0, NULL, 0, NULL, 0, NULL, 0);
	const struct fv bf[] = { { ID(b, 6), T_INT, 0 }, { ID(b, 7), T_OBJ, 0 },
				 { ID(b, 8), T_LONG, 0 } };
	class_dump(b, BASE, OBJ, NULL, 0, NULL, 0, bf, 3);
	const struct fv dcp[] = { { 1, T_INT, 7 }, { 2, T_OBJ, A1 }, { 3, T_DOUBLE, 99 } };
	const struct fv dst[] = { { ID(b, 16), T_INT, 0x11223344 }, { ID(b, 17), T_OBJ, A1 },
				  { ID(b, 18), T_LONG, 0x0102030405060708ull },
				  { ID(b, 19), T_BOOL, 1 } };
	const struct fv df[] = { { ID(b, 9), T_BOOL, 0 }, { ID(b, 10), T_OBJ, 0 },
				 { ID(b, 11), T_DOUBLE, 0 }, { ID(b, 12), T_CHAR, 0 },
				 { ID(b, 13), T_SHORT, 0 }, { ID(b, 14), T_BYTE, 0 },
				 { ID(b, 15), T_FLOAT, 0 } };
	size_t before = b->n;
	class_dump(b, DER, BASE, dcp, 3, dst, 4, df, 7);
	/* tag, 7 ids + 8, cp (2 + 3 entries), u2, name id + type */
	m->cls_int = before + 1 + 7 * idsz + 8 + 2 + (3 + 4) + (3 + idsz) + (3 + 8) + 2 + idsz + 1;
	m->cls_ref = m->cls_int + 4 + idsz + 1;
	class_dump(b, CHARS, OBJ, NULL, 0, NULL, 0, NULL, 0);
	class_dump(b, OBJS, OBJ, NULL, 0, NULL, 0, NULL, 0);
	/* Every primitive type, and an empty array. */
	for (unsigned t = T_BOOL; t <= T_LONG; t++)
		prim_array(b, ID(b, 0x800 + t), t, t);
	prim_array(b, ID(b, 0x8ff), T_BYTE, 0);
	rec_end(b, at);
	if (flags & F_SEGMENTED) {
		at = rec_begin(b, 0x2c);
		rec_end(b, at);
	}
}

/* ---- Running the redactor on memfds. */

static int memfd_with(const uint8_t *d, size_t n)
{
	int fd = memfd_create("hprof-in", MFD_CLOEXEC);
	assert_true(fd >= 0);
	for (size_t done = 0; done < n;) {
		ssize_t w = write(fd, d + done, n - done);
		assert_true(w > 0);
		done += (size_t)w;
	}
	return fd;
}

static uint8_t *slurp(int fd, size_t *n)
{
	off_t end = lseek(fd, 0, SEEK_END);
	assert_true(end >= 0);
	uint8_t *d = malloc((size_t)end + 1);
	assert_non_null(d);
	assert_int_equal(pread(fd, d, (size_t)end, 0), end);
	*n = (size_t)end;
	return d;
}

static int run(const uint8_t *in, size_t n, uint8_t **out, size_t *outn, struct rdc_stats *st)
{
	static const int32_t pid = 1234;
	const struct rdc_policy pol = { .pids = &pid, .npids = 1 };
	struct rdc_stats dummy;
	int ifd = memfd_with(in, n);
	int ofd = memfd_create("hprof-out", MFD_CLOEXEC);
	assert_true(ofd >= 0);
	int rc = rdc_hprof(ifd, ofd, &pol, st ? st : &dummy);
	size_t on;
	uint8_t *o = slurp(ofd, &on);
	if (out) {
		*out = o;
		*outn = on;
	} else {
		free(o);
	}
	close(ifd);
	close(ofd);
	return rc;
}

static uint64_t rd_be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Redact fixture(flags) and compare with its redacted build. */
static void check_fixture(unsigned idsz, char ver, int flags)
{
	struct b in, want;
	struct marks mi, m;
	struct rdc_stats st;
	uint8_t *out;
	size_t on;

	fixture(&in, idsz, ver, flags, 0, &mi);
	fixture(&want, idsz, ver, flags, 1, &m); /* offsets in the output */
	assert_int_equal(run(in.d, in.n, &out, &on, &st), 0);
	assert_int_equal(on, want.n);
	assert_memory_equal(out, want.d, want.n);

	/* The same facts, spelled out. Derived: bool, ref, double, char,
	 * short, byte, float; then Base: int, ref, long. */
	const uint8_t *i = out + m.inst;
	assert_true(all_zero(i, 1));
	assert_true(rd_be(i + 1, idsz) == ID(&in, 0x600));
	assert_true(all_zero(i + 1 + idsz, 8 + 2 + 2 + 1 + 4 + 4));
	assert_true(rd_be(i + 1 + idsz + 21, idsz) == ID(&in, 0x500));
	assert_true(all_zero(i + 1 + 2 * idsz + 21, 8));
	assert_true(all_zero(out + m.chars, 10));
	assert_int_equal(rd_be(out + m.chars - 5, 4), 5); /* count kept */
	assert_int_equal(out[m.chars - 1], T_CHAR);
	assert_true(rd_be(out + m.refs, idsz) == ID(&in, 0x400));
	assert_true(rd_be(out + m.refs + 2 * idsz, idsz) == ID(&in, 0x500));
	assert_true(rd_be(in.d + mi.cls_int, 4) == 0x11223344);
	assert_true(all_zero(out + m.cls_int, 4));
	assert_true(rd_be(out + m.cls_ref, idsz) == ID(&in, 0x500));

	/* 23 UTF8, 5 LOAD CLASS, frame, trace, thread, then the dump. */
	uint64_t records = 23 + 5 + 3 + ((flags & F_SEGMENTED) ? 3 : 1) + ((flags & F_ART) ? 1 : 0);
	assert_int_equal(st.kept, records);
	assert_int_equal(st.dropped, 1 + ((flags & F_UNKNOWN_TOP) ? 1 : 0));
	assert_null(memmem(out, on, "hunter2", 7));
	assert_non_null(memmem(out, on, "Derived.java", 12));
	assert_int_equal(st.anonymised, 3 + 1 + 9); /* instances, char[], 9 more arrays */
	assert_int_equal(st.in_bytes, in.n);
	assert_int_equal(st.out_bytes, want.n);
	free(out);
	free(in.d);
	free(want.d);
}

static void test_fixture_id4(void **state) { check_fixture(4, '2', F_SEGMENTED); }
static void test_fixture_id8(void **state) { check_fixture(8, '2', F_SEGMENTED); }
static void test_heap_dump_record_id4(void **state) { check_fixture(4, '2', 0); }
static void test_heap_dump_record_id8(void **state) { check_fixture(8, '2', 0); }
static void test_version_101(void **state) { check_fixture(4, '1', F_SEGMENTED); }
static void test_unknown_top_dropped(void **state)
{
	check_fixture(4, '2', F_SEGMENTED | F_UNKNOWN_TOP);
	check_fixture(8, '2', F_UNKNOWN_TOP);
}

static void test_art_subrecords(void **state)
{
	check_fixture(4, '3', F_SEGMENTED | F_ART);
	/* ART's tags mean nothing in a HotSpot dump. */
	struct b in;
	fixture(&in, 4, '2', F_SEGMENTED | F_ART, 0, NULL);
	assert_int_equal(run(in.d, in.n, NULL, NULL, NULL), -EBADMSG);
	free(in.d);
}

static void expect_bad(unsigned idsz, int flags, int rc)
{
	struct b in;
	fixture(&in, idsz, '2', flags, 0, NULL);
	assert_int_equal(run(in.d, in.n, NULL, NULL, NULL), rc);
	free(in.d);
}

static void test_unknown_subrecord(void **state)
{
	expect_bad(4, F_SEGMENTED | F_UNKNOWN_SUB, -EBADMSG);
	expect_bad(8, F_UNKNOWN_SUB, -EBADMSG);
}

static void test_wrong_instance_length(void **state)
{
	expect_bad(4, F_SEGMENTED | F_BAD_LEN, -EBADMSG);
	expect_bad(8, F_BAD_LEN, -EBADMSG);
}

static void test_unknown_instance_class(void **state)
{
	expect_bad(4, F_SEGMENTED | F_UNKNOWN_CLASS, -EBADMSG);
}

/* Every proper prefix of a valid file is refused, and refused before
 * anything is written (the structure is checked in pass 1). */
static void truncations(unsigned idsz, int flags)
{
	struct b in;
	fixture(&in, idsz, '2', flags, 0, NULL);
	for (size_t n = 0; n < in.n; n++) {
		uint8_t *out;
		size_t on;
		int rc = run(in.d, n, &out, &on, NULL);
		if (rc != -EBADMSG)
			fail_msg("prefix of %zu/%zu bytes: rc %d", n, in.n, rc);
		assert_int_equal(on, 0);
		free(out);
	}
	free(in.d);
}

static void test_truncated_id4(void **state) { truncations(4, F_SEGMENTED); }
static void test_truncated_id8(void **state) { truncations(8, F_SEGMENTED); }
static void test_truncated_heap_dump(void **state) { truncations(4, 0); }

static void small_file(struct b *b, unsigned idsz)
{
	*b = (struct b){ .idsz = idsz };
	header(b, '2');
	utf8(b, 1, "java/lang/Object");
	load_class(b, 1, 0x100, 1);
}

static void test_no_heap_dump(void **state)
{
	struct b b;
	small_file(&b, 4);
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	/* An empty segment and its END are still no heap dump. */
	rec_end(&b, rec_begin(&b, 0x1c));
	rec_end(&b, rec_begin(&b, 0x2c));
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	free(b.d);
	assert_int_equal(run((const uint8_t *)"", 0, NULL, NULL, NULL), -EBADMSG);
}

static void test_bad_header(void **state)
{
	struct b b;
	small_file(&b, 4);
	size_t at = rec_begin(&b, 0x1c);
	u1(&b, 0xff);
	wid(&b, 0x100);
	rec_end(&b, at);
	rec_end(&b, rec_begin(&b, 0x2c));
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), 0);
	for (uint8_t idsz = 0; idsz <= 16; idsz++) {
		if (idsz == 4 || idsz == 8)
			continue;
		b.d[22] = idsz;
		assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	}
	b.d[22] = 4;
	b.d[17] = '9';
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	b.d[17] = '2';
	b.d[18] = ' ';
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	b.d[18] = 0;
	b.d[0] = 'j';
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	free(b.d);
}

/* A sub-record that runs past its segment's end, though not the file's. */
static void test_subrecord_crosses_segment(void **state)
{
	struct b b;
	small_file(&b, 4);
	size_t at = rec_begin(&b, 0x1c);
	u1(&b, 0x05);
	wid(&b, 0x100);
	u1(&b, 0x01); /* JNI GLOBAL: 8 bytes, only 4 in the segment */
	wid(&b, 0x100);
	rec_end(&b, at);
	wid(&b, 0x200); /* the rest, disguised as the next record */
	rec_end(&b, rec_begin(&b, 0x2c));
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	free(b.d);
}

static void test_record_past_eof(void **state)
{
	struct b b;
	small_file(&b, 4);
	size_t at = rec_begin(&b, 0x0c);
	u1(&b, 0x05);
	wid(&b, 0x100);
	rec_end(&b, at);
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), 0);
	b.d[at + 3]++; /* one byte longer than the file */
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -EBADMSG);
	free(b.d);
}

/* Malformed records that are whole: each must be refused. */
static void test_bad_records(void **state)
{
	for (int c = 0; c < 12; c++) {
		struct b b;
		small_file(&b, 4);
		size_t at;
		switch (c) {
		case 0: /* LOAD CLASS one byte short */
			at = rec_begin(&b, 0x02);
			put(&b, NULL, 15);
			rec_end(&b, at);
			break;
		case 1: /* STACK TRACE with a count that disagrees */
			at = rec_begin(&b, 0x05);
			u4(&b, 1); u4(&b, 1); u4(&b, 2); wid(&b, 0x50);
			rec_end(&b, at);
			break;
		case 2: /* UTF8 shorter than its id */
			at = rec_begin(&b, 0x01);
			u2(&b, 1);
			rec_end(&b, at);
			break;
		case 3: /* HEAP DUMP END with a body */
			at = rec_begin(&b, 0x2c);
			u1(&b, 0);
			rec_end(&b, at);
			break;
		}
		at = rec_begin(&b, 0x1c);
		switch (c) {
		case 4: /* primitive array of references */
			prim_array(&b, 0x500, T_OBJ, 1);
			break;
		case 5: /* primitive array of an unknown type */
			prim_array(&b, 0x500, 3, 0);
			break;
		case 6: { /* field of an unknown type */
			const struct fv f[] = { { 1, 12, 0 } };
			class_dump(&b, 0x100, 0, NULL, 0, NULL, 0, f, 1);
			break;
		}
		case 7: /* the same class twice */
			class_dump(&b, 0x100, 0, NULL, 0, NULL, 0, NULL, 0);
			class_dump(&b, 0x100, 0, NULL, 0, NULL, 0, NULL, 0);
			break;
		case 8: /* superclass cycle */
			class_dump(&b, 0x100, 0x200, NULL, 0, NULL, 0, NULL, 0);
			class_dump(&b, 0x200, 0x100, NULL, 0, NULL, 0, NULL, 0);
			break;
		case 9: /* superclass that is not in the dump */
			class_dump(&b, 0x100, 0x300, NULL, 0, NULL, 0, NULL, 0);
			break;
		case 10: { /* static of an unknown type */
			const struct fv s[] = { { 1, 1, 0 } };
			class_dump(&b, 0x100, 0, NULL, 0, s, 1, NULL, 0);
			break;
		}
		case 11: /* its own superclass */
			class_dump(&b, 0x100, 0x100, NULL, 0, NULL, 0, NULL, 0);
			break;
		default:
			u1(&b, 0x05);
			wid(&b, 0x100);
		}
		rec_end(&b, at);
		rec_end(&b, rec_begin(&b, 0x2c));
		if (run(b.d, b.n, NULL, NULL, NULL) != -EBADMSG)
			fail_msg("case %d accepted", c);
		free(b.d);
	}
}

/* Values bigger than the 1 MiB I/O buffers: arrays and an instance. */
static void test_large(void **state)
{
	for (unsigned idsz = 4; idsz <= 8; idsz += 4) {
		struct b in, want;
		for (int red = 0; red < 2; red++) {
			struct b *b = red ? &want : &in;
			*b = (struct b){ .idsz = idsz, .red = red };
			header(b, '2');
			size_t at = rec_begin(b, 0x1c);
			prim_array(b, 0x500, T_BYTE, 3000001);
			prim_array(b, 0x510, T_LONG, 300000);
			uint64_t *e = malloc(400000 * sizeof(*e));
			assert_non_null(e);
			for (uint32_t i = 0; i < 400000; i++)
				e[i] = ID(b, i * 8 + 1);
			obj_array(b, 0x520, 0x120, e, 400000);
			free(e);
			/* Five levels of 65535 fields each, mixed kinds: 1.2 MB of fields. */
			static struct fv f[65535], v[5 * 65535];
			size_t nv = 0;
			for (int lvl = 4; lvl >= 0; lvl--) {
				for (size_t i = 0; i < 65535; i++) {
					unsigned t = (i % 5 == 0) ? T_OBJ : T_BOOL + (unsigned)(i + lvl) % 8;
					f[i] = (struct fv){ i + 1, t, 0 };
				}
				class_dump(b, 0x1000 + lvl, lvl ? 0x1000 + lvl - 1 : 0, NULL, 0, NULL,
					   0, f, 65535);
			}
			for (int lvl = 4; lvl >= 0; lvl--)
				for (size_t i = 0; i < 65535; i++) {
					unsigned t = (i % 5 == 0) ? T_OBJ : T_BOOL + (unsigned)(i + lvl) % 8;
					v[nv++] = (struct fv){ 0, t, ID(b, 0x7000000 + i) };
				}
			instance(b, 0x600, 0x1004, v, nv, 0);
			rec_end(b, at);
			rec_end(b, rec_begin(b, 0x2c));
		}
		uint8_t *out;
		size_t on;
		struct rdc_stats st;
		assert_int_equal(run(in.d, in.n, &out, &on, &st), 0);
		assert_int_equal(on, want.n);
		assert_memory_equal(out, want.d, want.n);
		assert_int_equal(st.anonymised, 3);
		free(out);
		free(in.d);
		free(want.d);
	}
}

/* Many small instances: input refills and output flushes mid-stream. */
static void test_many_instances(void **state)
{
	struct b in, want;
	for (int red = 0; red < 2; red++) {
		struct b *b = red ? &want : &in;
		*b = (struct b){ .idsz = 8, .red = red };
		header(b, '2');
		size_t at = rec_begin(b, 0x1c);
		const struct fv f[] = { { 1, T_OBJ, 0 }, { 2, T_INT, 0 }, { 3, T_BYTE, 0 },
					{ 4, T_OBJ, 0 }, { 5, T_LONG, 0 } };
		class_dump(b, 0x100, 0, NULL, 0, NULL, 0, f, 5);
		for (uint32_t i = 0; i < 120000; i++) {
			const struct fv v[] = { { 0, T_OBJ, 0x7000 + i }, { 0, T_INT, i | 1 },
						{ 0, T_BYTE, 0x55 }, { 0, T_OBJ, ~(uint64_t)i },
						{ 0, T_LONG, 0x0102030405060708ull + i } };
			instance(b, 0x10000 + i, 0x100, v, 5, 0);
			if (i % 1000 == 0) /* and the odd sub-record between */
				prim_array(b, 0x90000000ull + i, T_SHORT, i % 7);
		}
		rec_end(b, at);
		rec_end(b, rec_begin(b, 0x2c));
	}
	uint8_t *out;
	size_t on;
	struct rdc_stats st;
	assert_int_equal(run(in.d, in.n, &out, &on, &st), 0);
	assert_true(in.n > 4 * (1u << 20));
	assert_int_equal(on, want.n);
	assert_memory_equal(out, want.d, want.n);
	assert_int_equal(st.anonymised, 120000 + 120);
	free(out);
	free(in.d);
	free(want.d);
}

/* One class more than the cap. */
static void test_class_cap(void **state)
{
	struct b b = { .idsz = 4 };
	header(&b, '2');
	size_t at = rec_begin(&b, 0x1c);
	for (uint32_t i = 0; i <= (1u << 20); i++)
		class_dump(&b, 0x10 + i, 0, NULL, 0, NULL, 0, NULL, 0);
	rec_end(&b, at);
	rec_end(&b, rec_begin(&b, 0x2c));
	assert_int_equal(run(b.d, b.n, NULL, NULL, NULL), -E2BIG);
	free(b.d);
}

/* A long superclass chain is resolved without recursion. */
static void test_deep_hierarchy(void **state)
{
	struct b b = { .idsz = 8 };
	header(&b, '2');
	size_t at = rec_begin(&b, 0x1c);
	const struct fv f[] = { { 1, T_INT, 0 } };
	for (uint32_t i = 0; i < 200000; i++)
		class_dump(&b, 0x10 + i, i ? 0x10 + i - 1 : 0, NULL, 0, NULL, 0,
			   (i % 1000) ? NULL : f, (i % 1000) ? 0 : 1);
	static struct fv v[200];
	for (size_t i = 0; i < 200; i++)
		v[i] = (struct fv){ 0, T_INT, 0x01010101 };
	instance(&b, 0x5, 0x10 + 199999, v, 200, 0);
	rec_end(&b, at);
	rec_end(&b, rec_begin(&b, 0x2c));
	uint8_t *out;
	size_t on;
	assert_int_equal(run(b.d, b.n, &out, &on, NULL), 0);
	assert_int_equal(on, b.n);
	assert_true(all_zero(out + b.n - 9 - 800, 800));
	free(out);
	free(b.d);
}

static void test_not_seekable(void **state)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	int ofd = memfd_create("hprof-out", MFD_CLOEXEC);
	assert_int_equal(rdc_hprof(pfd[0], ofd, NULL, NULL), -ESPIPE);
	close(pfd[0]);
	close(pfd[1]);
	close(ofd);
}

/* ---- Seeds for tests/fuzz/corpus/hprof. */

static int write_seed(const char *dir, const char *name, const struct b *b)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || fwrite(b->d, 1, b->n, f) != b->n || fclose(f) != 0) {
		perror(path);
		return 1;
	}
	return 0;
}

static int write_corpus(const char *dir)
{
	struct b b;
	int rc = 0;
	fixture(&b, 4, '2', F_SEGMENTED | F_UNKNOWN_TOP, 0, NULL);
	rc |= write_seed(dir, "segmented-id4.hprof", &b);
	free(b.d);
	fixture(&b, 8, '2', 0, 0, NULL);
	rc |= write_seed(dir, "heapdump-id8.hprof", &b);
	free(b.d);
	fixture(&b, 4, '3', F_SEGMENTED | F_ART, 0, NULL);
	rc |= write_seed(dir, "art-id4.hprof", &b);
	free(b.d);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0)
		return write_corpus(argv[2]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fixture_id4),
		cmocka_unit_test(test_fixture_id8),
		cmocka_unit_test(test_heap_dump_record_id4),
		cmocka_unit_test(test_heap_dump_record_id8),
		cmocka_unit_test(test_version_101),
		cmocka_unit_test(test_unknown_top_dropped),
		cmocka_unit_test(test_art_subrecords),
		cmocka_unit_test(test_unknown_subrecord),
		cmocka_unit_test(test_wrong_instance_length),
		cmocka_unit_test(test_unknown_instance_class),
		cmocka_unit_test(test_truncated_id4),
		cmocka_unit_test(test_truncated_id8),
		cmocka_unit_test(test_truncated_heap_dump),
		cmocka_unit_test(test_no_heap_dump),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_subrecord_crosses_segment),
		cmocka_unit_test(test_record_past_eof),
		cmocka_unit_test(test_bad_records),
		cmocka_unit_test(test_large),
		cmocka_unit_test(test_many_instances),
		cmocka_unit_test(test_class_cap),
		cmocka_unit_test(test_deep_hierarchy),
		cmocka_unit_test(test_not_seekable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
