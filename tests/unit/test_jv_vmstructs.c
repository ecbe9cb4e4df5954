/* Unit tests for the agent's reader of HotSpot's VMStructs tables
 * (runtime/jvmti/jv_vmstructs.c): synthetic tables laid out as HotSpot's
 * rows, with a field missing, out of its type or of the wrong kind, and
 * the real tables of each JDK under /usr/lib/jvm. */
#include <dlfcn.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "jv.h"

/* HotSpot's rows (vmStructs.hpp: VMStructEntry, VMTypeEntry). */
struct srow {
	const char *type, *field, *ftype;
	int32_t is_static;
	uint64_t offset;
	void *address;
};

struct trow {
	const char *type, *super;
	int32_t is_oop, is_int, is_unsigned;
	uint64_t size;
};

static uintptr_t stub_ret_var = 0x1234;

static struct srow good[] = {
	{ "Thread", "_osthread", "OSThread*", 0, 8, NULL },
	{ "JavaThread", "_stack_base", "address", 0, 1048, NULL },
	{ "JavaThread", "_stack_size", "size_t", 0, 1056, NULL },
	{ "JavaThread", "_anchor", "JavaFrameAnchor", 0, 1152, NULL },
	{ "JavaFrameAnchor", "_last_Java_sp", "intptr_t*", 0, 0, NULL },
	{ "JavaFrameAnchor", "_last_Java_pc", "address", 0, 8, NULL },
	{ "JavaCallWrapper", "_anchor", "JavaFrameAnchor", 0, 32, NULL },
	{ "StubRoutines", "_call_stub_return_address", "address", 1, 0, &stub_ret_var },
	{ NULL, NULL, NULL, 0, 0, NULL },
};

static struct trow types[] = {
	{ "address", NULL, 0, 0, 0, 8 },
	{ "JavaThread", "Thread", 0, 0, 0, 2216 },
	{ "JavaFrameAnchor", NULL, 0, 0, 0, 24 },
	{ "JavaCallWrapper", NULL, 0, 0, 0, 64 },
	{ NULL, NULL, 0, 0, 0, 0 },
};

static struct jvv_tables tables(struct srow *s)
{
	struct jvv_tables t = {
		.structs = (const char *)s,
		.types = (const char *)types,
		.type_name_off_s = offsetof(struct srow, type),
		.field_name_off = offsetof(struct srow, field),
		.is_static_off = offsetof(struct srow, is_static),
		.offset_off = offsetof(struct srow, offset),
		.address_off = offsetof(struct srow, address),
		.struct_stride = sizeof(struct srow),
		.type_name_off = offsetof(struct trow, type),
		.type_size_off = offsetof(struct trow, size),
		.type_stride = sizeof(struct trow),
	};
	return t;
}

static void test_good(void **state)
{
	struct jvv_tables t = tables(good);
	struct jvv_layout l;
	assert_int_equal(jvv_parse(&t, &l), 0);
	assert_true(l.ok);
	assert_int_equal(l.stack_base, 1048);
	assert_int_equal(l.stack_size, 1056);
	assert_int_equal(l.thread_anchor, 1152);
	assert_int_equal(l.last_sp, 0);
	assert_int_equal(l.last_pc, 8);
	assert_int_equal(l.wrapper_anchor, 32);
	assert_int_equal(l.thread_size, 2216);
	assert_int_equal(l.wrapper_size, 64);
	assert_ptr_equal(l.call_stub_ret, &stub_ret_var);
}

/* Each row of good left out in turn (the terminator moved up over it). */
static void test_each_missing(void **state)
{
	size_t n = sizeof(good) / sizeof(good[0]) - 1;
	for (size_t skip = 1; skip < n; skip++) { /* row 0 is not needed */
		struct srow s[sizeof(good) / sizeof(good[0])];
		size_t k = 0;
		for (size_t i = 0; i <= n; i++)
			if (i != skip)
				s[k++] = good[i];
		struct jvv_tables t = tables(s);
		struct jvv_layout l;
		assert_int_equal(jvv_parse(&t, &l), -ENOENT);
		assert_false(l.ok);
		assert_non_null(strstr(l.missing, good[skip].field));
	}
}

static void test_out_of_type(void **state)
{
	struct srow s[sizeof(good) / sizeof(good[0])];
	struct jvv_tables t;
	struct jvv_layout l;

	/* The anchor (24 bytes) would end past JavaThread's 2216. */
	memcpy(s, good, sizeof(s));
	s[3].offset = 2200;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ERANGE);
	assert_non_null(strstr(l.missing, "JavaThread::_anchor"));
	/* A huge offset must not wrap around the check. */
	memcpy(s, good, sizeof(s));
	s[1].offset = UINT64_MAX - 4;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ERANGE);
	/* A pointer field not 8-aligned. */
	memcpy(s, good, sizeof(s));
	s[4].offset = 4;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ERANGE);
	/* JavaCallWrapper::_anchor past the wrapper. */
	memcpy(s, good, sizeof(s));
	s[6].offset = 48;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ERANGE);
	assert_false(l.ok);
}

static void test_wrong_kind(void **state)
{
	struct srow s[sizeof(good) / sizeof(good[0])];
	struct jvv_tables t;
	struct jvv_layout l;

	/* A static _anchor, or a non-static stub address, is not the field. */
	memcpy(s, good, sizeof(s));
	s[3].is_static = 1;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ENOENT);
	memcpy(s, good, sizeof(s));
	s[7].is_static = 0;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ENOENT);
	memcpy(s, good, sizeof(s));
	s[7].address = NULL;
	t = tables(s);
	assert_int_equal(jvv_parse(&t, &l), -ENOENT);
	/* No tables at all, or types without the sizes. */
	assert_int_equal(jvv_parse(NULL, &l), -ENOENT);
	assert_false(l.ok);
	t = tables(good);
	struct trow none[] = { { NULL, NULL, 0, 0, 0, 0 } };
	t.types = (const char *)none;
	assert_int_equal(jvv_parse(&t, &l), -ENOENT);
}

/* The real tables: each JDK's libjvm.so, dlopen'ed (they are static data). */
static void test_real_jdks(void **state)
{
	static const char *const jdks[] = {
		"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so",
		"/usr/lib/jvm/temurin-25-jdk-amd64/lib/server/libjvm.so",
	};
	int found = 0;
	for (size_t i = 0; i < sizeof(jdks) / sizeof(jdks[0]); i++) {
		if (access(jdks[i], R_OK) != 0) {
			printf("note: %s is not installed\n", jdks[i]);
			continue;
		}
		void *h = dlopen(jdks[i], RTLD_NOW | RTLD_LOCAL);
		assert_non_null(h);
		struct jvv_layout l;
		int r = jvv_read_from(h, &l);
		if (r < 0)
			printf("%s: %s\n", jdks[i], l.missing);
		assert_int_equal(r, 0);
		assert_true(l.ok);
		/* JavaFrameAnchor's sp first, pc second, as HotSpot has them. */
		assert_int_equal(l.last_sp, 0);
		assert_int_equal(l.last_pc, 8);
		assert_true(l.thread_anchor + 24 <= l.thread_size);
		assert_non_null(l.call_stub_ret);
		found++;
		/* libjvm.so is not unloaded cleanly; keep it. */
	}
	if (!found)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_each_missing),
		cmocka_unit_test(test_out_of_type),
		cmocka_unit_test(test_wrong_kind),
		cmocka_unit_test(test_real_jdks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
