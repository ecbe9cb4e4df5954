/*
 * Unit tests of common/nargs.c: the native "#args=TYPES" suffix as the
 * daemon and profilingd-perf parse it, and the text of a string argument
 * (cut at the NUL or 64 bytes, invalid UTF-8 bytes as '?').
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nargs.h"

static void test_split(void **state)
{
	char ty[NARGS_MAX + 1], why[160];
	size_t sl;
	(void)state;

	assert_int_equal(nargs_split("/usr/bin/a:f", &sl, ty, why, sizeof(why)), 0);
	assert_int_equal(sl, strlen("/usr/bin/a:f"));
	assert_string_equal(ty, "");
	assert_int_equal(nargs_split("/usr/bin/a:f#args=is-", &sl, ty, why, sizeof(why)), 0);
	assert_int_equal(sl, strlen("/usr/bin/a:f"));
	assert_string_equal(ty, "is-");
	assert_int_equal(nargs_split("buildid:ab:+0x10#args=upsi-p", &sl, ty, why, sizeof(why)), 0);
	assert_int_equal(sl, strlen("buildid:ab:+0x10"));
	assert_string_equal(ty, "upsi-p");
	/* A '#' that is not the suffix belongs to the path. */
	assert_int_equal(nargs_split("/a#1/b:f", &sl, ty, why, sizeof(why)), 0);
	assert_int_equal(sl, strlen("/a#1/b:f"));
	assert_int_equal(nargs_split("/a#1/b:f#args=s", &sl, ty, why, sizeof(why)), 0);
	assert_int_equal(sl, strlen("/a#1/b:f"));
	assert_string_equal(ty, "s");

	static const struct { const char *t, *why; } bad[] = {
		{ "/a:f#args", "need #args=TYPES" },
		{ "/a:f#argsx", "need #args=TYPES" },
		{ "/a:f#args=", "1..6 letters" },
		{ "/a:f#args=iiiiiii", "1..6 letters" },
		{ "/a:f#args=ix", "'x' is not one of" },
		{ "/a:f#args=I", "'I' is not one of" },
		{ "/a:f#args=i s", "' ' is not one of" },
		{ "/a:f#args=------", "every argument skipped" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = '\0';
		assert_int_equal(nargs_split(bad[i].t, &sl, ty, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, bad[i].why));
	}
}

static void test_clean_str(void **state)
{
	char out[NARGS_STR_MAX + 1], in[100];
	(void)state;

	assert_int_equal(nargs_clean_str("hello\0world", 11, out), 5);
	assert_string_equal(out, "hello");
	/* Valid multi-byte UTF-8 stays; each invalid byte becomes '?'. */
	assert_int_equal(nargs_clean_str("caf\xc3\xa9 \xe2\x82\xac", 9, out), 9);
	assert_string_equal(out, "caf\xc3\xa9 \xe2\x82\xac");
	nargs_clean_str("a\xffz", 3, out);
	assert_string_equal(out, "a?z");
	nargs_clean_str("\xc0\xaf", 2, out);               /* overlong '/' */
	assert_string_equal(out, "??");
	nargs_clean_str("\xed\xa0\x80", 3, out);           /* a surrogate */
	assert_string_equal(out, "???");
	nargs_clean_str("\xf4\x90\x80\x80", 4, out);       /* past U+10FFFF */
	assert_string_equal(out, "????");
	nargs_clean_str("ab\xe2\x82", 4, out);             /* cut sequence */
	assert_string_equal(out, "ab??");
	/* At most 64 bytes, with no NUL among them. */
	memset(in, 'x', sizeof(in));
	assert_int_equal(nargs_clean_str(in, sizeof(in), out), NARGS_STR_MAX);
	assert_int_equal(strlen(out), NARGS_STR_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_clean_str),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
