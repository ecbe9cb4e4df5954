/* JIT symbol maps (common/perfmap.c): parsing, caps, lookups, loading. */
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
#include <sys/stat.h>
#include <unistd.h>

#include "perfmap.h"

static struct pmap *parse(const char *s)
{
	struct pmap *m;
	assert_int_equal(pmap_parse(s, strlen(s), &m), 0);
	return m;
}

static void test_lookup(void **state)
{
	(void)state;
	/* Node's --perf-basic-prof lines, one with 0x, names with spaces. */
	struct pmap *m = parse("3a8e0c040 40 LazyCompile:~hot /app/x.js:3\n"
			       "0x3a8e0c100 0x20 Builtin:ArgumentsAdaptorTrampoline\n"
			       "1000 10 first\n");
	struct pmap_stats st;
	uint64_t start = 0;
	pmap_get_stats(m, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.bad, 0);
	assert_string_equal(pmap_lookup(m, 0x3a8e0c040, &start), "LazyCompile:~hot /app/x.js:3");
	assert_int_equal(start, 0x3a8e0c040);
	assert_string_equal(pmap_lookup(m, 0x3a8e0c07f, NULL), "LazyCompile:~hot /app/x.js:3");
	assert_null(pmap_lookup(m, 0x3a8e0c080, NULL)); /* the gap between entries */
	assert_string_equal(pmap_lookup(m, 0x3a8e0c11f, NULL), "Builtin:ArgumentsAdaptorTrampoline");
	assert_null(pmap_lookup(m, 0x3a8e0c120, NULL));
	assert_string_equal(pmap_lookup(m, 0x1000, NULL), "first");
	assert_null(pmap_lookup(m, 0xfff, NULL));
	assert_null(pmap_lookup(m, 0, NULL));
	assert_null(pmap_lookup(NULL, 0x1000, NULL));
	pmap_free(m);
	pmap_free(NULL);
}

static void test_malformed_and_dups(void **state)
{
	(void)state;
	struct pmap *m = parse("zz 10 notheX\n"          /* bad start */
			       "100 0 empty\n"           /* size 0 */
			       "100 10\n"                /* no name */
			       "ffffffffffffffff 2 wrap\n" /* end past 2^64 */
			       "11111111111111111 1 long\n" /* 17 digits */
			       "\n"
			       "200 10 old\r\n"
			       "200 10 new\r\n"          /* re-emitted code: the last wins */
			       "300 10 partial");        /* no newline: still being written */
	struct pmap_stats st;
	pmap_get_stats(m, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bad, 6);
	assert_string_equal(pmap_lookup(m, 0x205, NULL), "new");
	assert_null(pmap_lookup(m, 0x300, NULL));
	pmap_free(m);
	/* A NUL inside a name is malformed, not a shorter name. */
	struct pmap *n;
	assert_int_equal(pmap_parse("10 10 a\0b\n", 10, &n), 0);
	pmap_get_stats(n, &st);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bad, 1);
	pmap_free(n);
}

static void test_caps(void **state)
{
	(void)state;
	struct pmap *m;
	/* Over the byte cap: refused before anything is allocated for it. */
	assert_int_equal(pmap_parse("", (size_t)PMAP_MAX_BYTES + 1, &m), -E2BIG);
	assert_null(m);
	/* A long name is cut to PMAP_MAX_NAME. */
	size_t n = PMAP_MAX_NAME + 100;
	char *buf = malloc(n + 16);
	assert_non_null(buf);
	int off = snprintf(buf, 16, "10 10 ");
	memset(buf + off, 'x', n);
	buf[off + n] = '\n';
	assert_int_equal(pmap_parse(buf, (size_t)off + n + 1, &m), 0);
	assert_int_equal(strlen(pmap_lookup(m, 0x10, NULL)), PMAP_MAX_NAME);
	pmap_free(m);
	free(buf);
	/* PMAP_MAX_ENTRIES entries are kept, the lines after them counted. */
	size_t lines = PMAP_MAX_ENTRIES + 5, cap = lines * 16;
	buf = malloc(cap);
	assert_non_null(buf);
	size_t len = 0;
	for (size_t i = 0; i < lines; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%zx 1 f\n", i * 2);
	assert_int_equal(pmap_parse(buf, len, &m), 0);
	struct pmap_stats st;
	pmap_get_stats(m, &st);
	assert_int_equal(st.entries, PMAP_MAX_ENTRIES);
	assert_int_equal(st.dropped, 5);
	assert_string_equal(pmap_lookup(m, (PMAP_MAX_ENTRIES - 1) * 2, NULL), "f");
	assert_null(pmap_lookup(m, PMAP_MAX_ENTRIES * 2, NULL));
	pmap_free(m);
	free(buf);
}

/* pmap_load takes /tmp/perf-<pid>.map only as a regular file of its owner. */
static void test_load(void **state)
{
	(void)state;
	/* A pid that is not ours nor anyone's likely: the file is ours for the test. */
	pid_t pid = 0x7ffffff0 - (getpid() & 0xff);
	char path[64];
	struct pmap *m;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
	unlink(path);
	assert_int_equal(pmap_load(pid, getuid(), &m), -ENOENT);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs("1000 100 jitted\n", f);
	fclose(f);
	assert_int_equal(pmap_load(pid, getuid(), &m), 0);
	assert_string_equal(pmap_lookup(m, 0x1050, NULL), "jitted");
	pmap_free(m);
	/* Someone else's file names nothing. */
	assert_int_equal(pmap_load(pid, getuid() + 1, &m), -EPERM);
	assert_null(m);
	unlink(path);
	/* A link is not followed; a FIFO is not a map and does not block. */
	assert_int_equal(symlink("/etc/passwd", path), 0);
	assert_int_equal(pmap_load(pid, getuid(), &m), -EPERM);
	unlink(path);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(pmap_load(pid, getuid(), &m), -EPERM);
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lookup),
		cmocka_unit_test(test_malformed_and_dups),
		cmocka_unit_test(test_caps),
		cmocka_unit_test(test_load),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
