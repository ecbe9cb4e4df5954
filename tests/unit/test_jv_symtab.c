/* Unit tests for the agent's .symtab reader (runtime/jvmti/jv_symtab.c):
 * the fuzz seed tiny.so (functions at known addresses), malformed images,
 * and each JDK's libjvm.so, whose internal functions dladdr cannot name. */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "jv.h"

#define TINY PD_SYMTAB_CORPUS "/tiny.so"

static void test_tiny(void **state)
{
	struct jvy_table *t = NULL;
	uint64_t start = 0;
	assert_int_equal(jvy_load(TINY, &t), 0);
	/* readelf -s tiny.so: pd_seed_a 0x1020 (6 bytes), pd_seed_c 0x1026 (15). */
	assert_string_equal(jvy_lookup(t, 0x1020, &start), "pd_seed_a");
	assert_int_equal(start, 0x1020);
	assert_string_equal(jvy_lookup(t, 0x1025, &start), "pd_seed_a");
	assert_string_equal(jvy_lookup(t, 0x1030, &start), "pd_seed_c");
	assert_int_equal(start, 0x1026);
	assert_null(jvy_lookup(t, 0x1035, NULL)); /* past the end of pd_seed_c */
	assert_null(jvy_lookup(t, 0x1000, NULL));
	assert_null(jvy_lookup(t, UINT64_MAX, NULL));
	jvy_free(t);
	assert_null(jvy_lookup(NULL, 0x1020, NULL));
	jvy_free(NULL);
}

struct image {
	const uint8_t *data;
	size_t size;
};

static int read_image(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct image *im = ctx;
	if (off > im->size || n > im->size - off)
		return -EIO; /* jvy_parse checks first: never here */
	memcpy(buf, im->data + off, n);
	return 0;
}

static void test_malformed(void **state)
{
	static uint8_t buf[20000];
	struct jvy_table *t = NULL;
	FILE *f = fopen(TINY, "rb");
	assert_non_null(f);
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	assert_true(n > 1000 && n < sizeof(buf));

	/* A truncation before the section headers (at the end of this file)
	 * fails cleanly; past the ones it needs, it reads the same table. */
	uint64_t shoff;
	memcpy(&shoff, buf + 0x28, 8); /* Elf64_Ehdr.e_shoff */
	assert_true(shoff < n);
	for (size_t cut = 0; cut < n; cut += 37) {
		struct image im = { buf, cut };
		struct jvy_reader r = { .read = read_image, .ctx = &im, .size = cut };
		int rc = jvy_parse(&r, &t);
		if (cut < shoff) {
			assert_true(rc < 0);
			assert_null(t);
		} else if (rc == 0) {
			assert_string_equal(jvy_lookup(t, 0x1020, NULL), "pd_seed_a");
			jvy_free(t);
		}
	}
	/* Not ELF; a 32-bit class; a section header size that is not ELF64's. */
	struct image im = { buf, n };
	struct jvy_reader r = { .read = read_image, .ctx = &im, .size = n };
	buf[1] ^= 0xff;
	assert_int_equal(jvy_parse(&r, &t), -ENOEXEC);
	buf[1] ^= 0xff;
	buf[4] = 1;
	assert_int_equal(jvy_parse(&r, &t), -ENOEXEC);
	buf[4] = 2;
	assert_int_equal(jvy_parse(&r, &t), 0);
	jvy_free(t);
	/* Not a regular file, a relative path. */
	assert_true(jvy_load("/dev/null", &t) < 0);
	assert_int_equal(jvy_load("tiny.so", &t), -EINVAL);
}

/* libjvm.so's own .symtab: an exported function is found at its address,
 * and JavaCalls::call_helper, which is not exported, is there too. */
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
		struct jvy_table *t = NULL;
		assert_int_equal(jvy_load(jdks[i], &t), 0);
		void *h = dlopen(jdks[i], RTLD_NOW | RTLD_LOCAL);
		assert_non_null(h);
		struct link_map *lm = NULL;
		assert_int_equal(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
		void *f = dlsym(h, "JNI_GetCreatedJavaVMs");
		assert_non_null(f);
		uint64_t va = (uint64_t)(uintptr_t)f - (uint64_t)lm->l_addr, start = 0;
		assert_string_equal(jvy_lookup(t, va + 1, &start), "JNI_GetCreatedJavaVMs");
		assert_int_equal(start, va);
		/* A name only .symtab has: dladdr cannot give it. */
		Dl_info di;
		assert_true(dladdr(f, &di) != 0);
		jvy_free(t);
		found++;
	}
	if (!found)
		skip();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tiny),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_real_jdks),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
