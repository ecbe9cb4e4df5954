/*
 * The logger's peer hygiene (common/log.h): escaping of control characters
 * and bytes that are not UTF-8, and the per-uid line budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"

static void escapes(void **state)
{
	char out[256];
	log_escape(out, sizeof(out), "a\nb\r\tc\x1b[31m\x7f");
	assert_string_equal(out, "a\\nb\\r\\tc\\e[31m\\x7f");
	log_escape(out, sizeof(out), "\x01\x1f ok");
	assert_string_equal(out, "\\x01\\x1f ok");
	/* Valid UTF-8 passes; broken, overlong, surrogate and C1 do not. */
	log_escape(out, sizeof(out), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	assert_string_equal(out, "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
	log_escape(out, sizeof(out), "\xff\xfe\xc3");
	assert_string_equal(out, "\\xff\\xfe\\xc3");
	log_escape(out, sizeof(out), "\xc0\xaf\xed\xa0\x80\xc2\x9b");
	assert_string_equal(out, "\\xc0\\xaf\\xed\\xa0\\x80\\xc2\\x9b");
	/* A sequence that does not fit is left out whole. */
	assert_int_equal(log_escape(out, 4, "ab\n"), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(log_escape(out, sizeof(out), NULL), 0);
	assert_int_equal(log_escape(NULL, 0, "x"), 0);
}

/* Run fn with stderr in a file; return how many lines held needle. */
static int lines_with(FILE *f, const char *needle)
{
	char line[2048];
	int n = 0;
	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	return n;
}

/* Lines that begin with prefix (a forged journal priority would). */
static int lines_starting(FILE *f, const char *prefix)
{
	char line[2048];
	int n = 0;
	rewind(f);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, prefix, strlen(prefix)))
			n++;
	return n;
}

static void budget(void **state)
{
	FILE *f = tmpfile();
	assert_non_null(f);
	int saved = dup(STDERR_FILENO);
	dup2(fileno(f), STDERR_FILENO);
	log_init(LOG_SINK_STDERR, LOG_DEBUG, "test");

	for (int i = 0; i < 100; i++)
		LOG_PEER(1000, LOG_INFO, "flood %d from uid 1000", i);
	for (int i = 0; i < 30; i++)
		LOG_PEER(0, LOG_INFO, "root line %d", i);
	LOG_PEER(1001, LOG_INFO, "friend line");
	/* More uids than buckets: each new uid starts with a full bucket, the
	 * evicted one's count is written first. */
	for (unsigned u = 2000; u < 2000 + LOG_PEER_UIDS + 10; u++)
		LOG_PEER(u, LOG_INFO, "many uids %u", u);
	fflush(stderr);
	/* The burst, and a token or two more if this thread was held up past
	 * LOG_PEER_REFILL_MS while it logged (a loaded machine). */
	int allowed = lines_with(f, "from uid 1000");
	assert_in_range(allowed, LOG_PEER_BURST, LOG_PEER_BURST + 2);
	assert_int_equal(lines_with(f, "root line"), 30);
	assert_int_equal(lines_with(f, "friend line"), 1);
	assert_int_equal(lines_with(f, "many uids"), LOG_PEER_UIDS + 10);
	char want[64];
	snprintf(want, sizeof(want), "uid 1000: %d lines suppressed", 100 - allowed);
	assert_int_equal(lines_with(f, want), 1);

	/* Two refill periods later two tokens are back: the summary, then the line. */
	for (int i = 0; i < 5; i++)
		LOG_PEER(3000, LOG_INFO, "u3000 burst");
	for (int i = 0; i < LOG_PEER_BURST; i++)
		LOG_PEER(3000, LOG_INFO, "u3000 burst");
	usleep((2 * LOG_PEER_REFILL_MS + 100) * 1000);
	LOG_PEER(3000, LOG_INFO, "u3000 after");
	fflush(stderr);
	allowed = lines_with(f, "u3000 burst");
	assert_in_range(allowed, LOG_PEER_BURST, LOG_PEER_BURST + 2);
	snprintf(want, sizeof(want), "uid 3000: %d lines suppressed", 5 + LOG_PEER_BURST - allowed);
	assert_int_equal(lines_with(f, want), 1);
	assert_int_equal(lines_with(f, "u3000 after"), 1);

	/* A peer string cannot start a line of its own. */
	LOG_PEER(4000, LOG_INFO, "name %s", "x\n<0>FAKE");
	LOG_I("plain %s", "y\r\n<3>FAKE");
	fflush(stderr);
	assert_int_equal(lines_starting(f, "<"), 0);
	assert_int_equal(lines_with(f, "name x\\n<0>FAKE"), 1);
	assert_int_equal(lines_with(f, "plain y\\r\\n<3>FAKE"), 1);

	dup2(saved, STDERR_FILENO);
	close(saved);
	fclose(f);
	log_init(LOG_SINK_NONE, LOG_INFO, "");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(escapes),
		cmocka_unit_test(budget),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
