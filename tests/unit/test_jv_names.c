/* Unit tests for the agent's pure helpers: JVM type signatures to the
 * names pprof shows. (The JVMTI paths are tested against real JVMs in
 * tests/integration/jvm_*.sh.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "jv.h"

/* jv_agent.c is not linked here: its globals, unused by these helpers. */
jvmtiEnv *jv_jvmti;
struct jv_caps jv_caps;

static void expect_name(const char *sig, const char *want)
{
	char out[128];
	jvm_class_name(sig, out, sizeof(out));
	assert_string_equal(out, want);
}

static void test_classes(void **state)
{
	expect_name("Ljava/lang/String;", "java.lang.String");
	expect_name("LHotCold;", "HotCold");
	expect_name("Ljava/util/Map$Entry;", "java.util.Map$Entry");
}

static void test_arrays_and_primitives(void **state)
{
	expect_name("[B", "byte[]");
	expect_name("[[I", "int[][]");
	expect_name("[Ljava/lang/Object;", "java.lang.Object[]");
	expect_name("J", "long");
	expect_name("Z", "boolean");
}

static void test_bounds(void **state)
{
	char out[8];
	memset(out, 'x', sizeof(out));
	jvm_class_name("Ljava/lang/String;", out, sizeof(out));
	assert_int_equal(strlen(out), 7); /* cut, always terminated */
	assert_string_equal(out, "java.la");
	jvm_class_name(NULL, out, sizeof(out));
	assert_string_equal(out, "");
	jvm_class_name("", out, sizeof(out));
	assert_string_equal(out, "");
	jvm_class_name("Lunterminated", out, sizeof(out));
	assert_string_equal(out, "untermi");
	jvm_class_name("[[[[[[[[[[B", out, sizeof(out)); /* brackets never overflow */
	assert_true(strlen(out) < sizeof(out));
	char one[1] = { 'x' };
	jvm_class_name("[B", one, sizeof(one));
	assert_int_equal(one[0], '\0');
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_classes),
		cmocka_unit_test(test_arrays_and_primitives),
		cmocka_unit_test(test_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
