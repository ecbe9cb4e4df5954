/*
 * common/util.h helpers that have no other home in the unit tests:
 * util_str_hash against FNV-1a's published 32-bit values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util.h"

static void str_hash_is_fnv1a(void **state)
{
	(void)state;
	/* The offset basis, and two vectors of the FNV reference. */
	assert_int_equal(util_str_hash(""), 0x811c9dc5u);
	assert_int_equal(util_str_hash("a"), 0xe40c292cu);
	assert_int_equal(util_str_hash("foobar"), 0xbf9cf968u);
	/* Bytes above 0x7f are taken unsigned, wherever char is signed. */
	assert_int_equal(util_str_hash("\xff\x80"), 0xee1eea4au);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(str_hash_is_fnv1a),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
