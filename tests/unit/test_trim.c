/*
 * svc_trim (issue #18): the text trim must give back only pages that are
 * still the file's, and its check must trim after a burst but not over
 * and over in a steady loop. Real mappings of a real file, real
 * /proc/self/smaps.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "svc_trim.h"

#define LEN (256 * 4096)

static char path[] = "/tmp/pd-trim.XXXXXX";
static int fd = -1;

static int setup(void **state)
{
	(void)state;
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	unlink(path);
	static unsigned char page[4096];
	for (int i = 0; i < LEN / 4096; i++) {
		memset(page, 'a' + i % 26, sizeof(page));
		if (write(fd, page, sizeof(page)) != (ssize_t)sizeof(page))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	close(fd);
	return 0;
}

/* Rss and Anonymous KiB of the mapping that starts at p, from smaps. */
static void rss_of(const void *p, long *rss, long *anon)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	*rss = *anon = -1;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		if (line[0] >= 'A' && line[0] <= 'Z') {
			if (in && !strncmp(line, "Rss:", 4))
				*rss = atol(line + 4);
			else if (in && !strncmp(line, "Anonymous:", 10))
				*anon = atol(line + 10);
		} else if (sscanf(line, "%lx-%lx", &a, &b) == 2) {
			in = a == (uintptr_t)p;
		}
	}
	fclose(f);
}

static void touch(const volatile unsigned char *p)
{
	for (size_t i = 0; i < LEN; i += 4096)
		(void)p[i];
}

/* Every page still equals the file: letter i % 26 on page i. */
static void assert_file_contents(const unsigned char *p, size_t skip_page)
{
	for (size_t i = 0; i < LEN / 4096; i++)
		if (i != skip_page)
			assert_int_equal(p[i * 4096 + 17], 'a' + i % 26);
}

/* Read-only text of a file: unmapped, and reads the same after. */
static void test_clean_text_goes(void **state)
{
	(void)state;
	unsigned char *p = mmap(NULL, LEN, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	touch(p);
	long rss, anon;
	rss_of(p, &rss, &anon);
	assert_int_equal(rss, LEN / 1024);
	assert_int_equal(anon, 0);
	long kib = svc_trim_text();
	assert_true(kib >= LEN / 1024);
	rss_of(p, &rss, &anon);
	assert_int_equal(rss, 0);
	assert_file_contents(p, (size_t)-1);
	munmap(p, LEN);
}

/*
 * A page written while the mapping was writable, then made read-only:
 * what ld.so leaves of a library's RELRO segment. Its copy is the only
 * one of the relocated data; unmapping it would read the file's bytes
 * back (a trim without the Anonymous check does exactly that).
 */
static void test_relro_like_stays(void **state)
{
	(void)state;
	unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	assert_true(p != MAP_FAILED);
	touch(p);
	p[3 * 4096 + 17] = 'Z';
	assert_int_equal(mprotect(p, LEN, PROT_READ), 0);
	assert_true(svc_trim_text() >= 0);
	assert_int_equal(p[3 * 4096 + 17], 'Z');
	assert_file_contents(p, 3);
	long rss, anon;
	rss_of(p, &rss, &anon);
	assert_int_equal(rss, LEN / 1024);
	munmap(p, LEN);
}

/* Writable, and shared mappings: not the trim's business. */
static void test_writable_and_shared_stay(void **state)
{
	(void)state;
	unsigned char *w = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	unsigned char *s = mmap(NULL, LEN, PROT_READ, MAP_SHARED, fd, 0);
	assert_true(w != MAP_FAILED && s != MAP_FAILED);
	touch(w);
	touch(s);
	w[5 * 4096 + 17] = 'Q';
	assert_true(svc_trim_text() >= 0);
	assert_int_equal(w[5 * 4096 + 17], 'Q');
	long rss, anon;
	rss_of(w, &rss, &anon);
	assert_int_equal(rss, LEN / 1024);
	rss_of(s, &rss, &anon);
	assert_int_equal(rss, LEN / 1024);
	munmap(w, LEN);
	munmap(s, LEN);
}

/* A steady loop after the start-up trim: its level is learned, never trimmed. */
static void test_steady_loop_not_trimmed(void **state)
{
	(void)state;
	struct svc_trim_state s;
	svc_trim_start(&s, 2000);
	assert_false(svc_trim_step(&s, 2300)); /* its own paths come back */
	assert_false(svc_trim_step(&s, 2300)); /* quiet, within the slack: the floor */
	assert_int_equal(s.floor_kib, 2300);
	for (int i = 0; i < 100; i++)
		assert_false(svc_trim_step(&s, 2300 + (i % 2) * 8));
}

/* A burst after start-up, before any quiet check: trimmed once quiet. */
static void test_burst_then_quiet(void **state)
{
	(void)state;
	struct svc_trim_state s;
	svc_trim_start(&s, 2000);
	assert_false(svc_trim_step(&s, 3200)); /* the burst maps SQLite's code */
	assert_true(svc_trim_step(&s, 3200));  /* quiet: trim */
	svc_trim_trimmed(&s, 1500);
	assert_false(svc_trim_step(&s, 1900)); /* the loop's paths come back */
	assert_false(svc_trim_step(&s, 1900)); /* quiet: that is the floor */
	assert_int_equal(s.floor_kib, 1900);
	assert_false(svc_trim_step(&s, 1900));
	/* Only a level past floor + slack is trimmed again, once quiet. */
	assert_false(svc_trim_step(&s, 1900 + SVC_TRIM_SLACK_KIB));
	assert_false(svc_trim_step(&s, 1900 + SVC_TRIM_SLACK_KIB));
	assert_false(svc_trim_step(&s, 2600));
	assert_true(svc_trim_step(&s, 2600));
}

/* Never while the level still moves, however high. */
static void test_not_while_busy(void **state)
{
	(void)state;
	struct svc_trim_state s;
	svc_trim_start(&s, 1000);
	for (long l = 2000; l < 12000; l += 100)
		assert_false(svc_trim_step(&s, l));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_text_goes),
		cmocka_unit_test(test_relro_like_stays),
		cmocka_unit_test(test_writable_and_shared_stay),
		cmocka_unit_test(test_steady_loop_not_trimmed),
		cmocka_unit_test(test_burst_then_quiet),
		cmocka_unit_test(test_not_while_busy),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
