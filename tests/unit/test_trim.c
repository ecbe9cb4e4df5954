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

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/swap.h>
#include <sys/wait.h>
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

/* Rss, Anonymous and Swap KiB of the mapping that starts at p, from smaps. */
static void rss_swap_of(const void *p, long *rss, long *anon, long *swap)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	*rss = *anon = *swap = -1;
	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		if (line[0] >= 'A' && line[0] <= 'Z') {
			if (in && !strncmp(line, "Rss:", 4))
				*rss = atol(line + 4);
			else if (in && !strncmp(line, "Anonymous:", 10))
				*anon = atol(line + 10);
			else if (in && !strncmp(line, "Swap:", 5))
				*swap = atol(line + 5);
		} else if (sscanf(line, "%lx-%lx", &a, &b) == 2) {
			in = a == (uintptr_t)p;
		}
	}
	fclose(f);
}

static void rss_of(const void *p, long *rss, long *anon)
{
	long swap;
	rss_swap_of(p, rss, anon, &swap);
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
	long kib;
	assert_int_equal(svc_trim_text(&kib), 0);
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
	long kib;
	assert_int_equal(svc_trim_text(&kib), 0);
	assert_int_equal(p[3 * 4096 + 17], 'Z');
	assert_file_contents(p, 3);
	long rss, anon;
	rss_of(p, &rss, &anon);
	assert_int_equal(rss, LEN / 1024);
	munmap(p, LEN);
}

/*
 * The RELRO-like page again, swapped out: smaps then counts it as Swap,
 * not Anonymous, and a trim that looked at Anonymous alone read the
 * file's byte back. Needs a swap area: a 32 MiB swap file of the test's
 * own on a file system that takes one, on for the test only (the test
 * runs alone, RUN_SERIAL: other tests' memory limits must not meet swap).
 * The work runs in a child so that the swap area goes whatever it does.
 */
static void test_swapped_relro_stays(void **state)
{
	(void)state;
	char dir[] = "/var/tmp/pd-trim-swap.XXXXXX", swapf[64], cmd[320];
	if (geteuid() != 0 || !mkdtemp(dir)) {
		print_message("skipped: a swap file needs root and /var/tmp\n");
		skip();
	}
	snprintf(swapf, sizeof(swapf), "%s/swap", dir);
	snprintf(cmd, sizeof(cmd),
		 "dd if=/dev/zero of=%s bs=1M count=32 status=none && chmod 600 %s && "
		 "mkswap %s > /dev/null 2>&1", swapf, swapf, swapf);
	int ok = system(cmd) == 0 && swapon(swapf, 0) == 0;
	if (!ok) {
		unlink(swapf);
		rmdir(dir);
		print_message("skipped: no swap area here (%s)\n", strerror(errno));
		skip();
	}
	pid_t pid = fork();
	if (pid == 0) {
		unsigned char *p = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		if (p == MAP_FAILED)
			_exit(3);
		touch(p);
		p[3 * 4096 + 17] = 'Z';
		long rss, anon, swap, kib;
		if (mprotect(p, LEN, PROT_READ) || madvise(p + 3 * 4096, 4096, MADV_PAGEOUT))
			_exit(3);
		rss_swap_of(p, &rss, &anon, &swap);
		if (swap <= 0 || anon != 0)
			_exit(2); /* the page did not go to swap: nothing to test */
		if (svc_trim_text(&kib))
			_exit(3);
		_exit(p[3 * 4096 + 17] == 'Z' ? 0 : 1);
	}
	int st = -1;
	waitpid(pid, &st, 0);
	swapoff(swapf);
	unlink(swapf);
	rmdir(dir);
	assert_true(WIFEXITED(st));
	if (WEXITSTATUS(st) == 2) {
		print_message("skipped: MADV_PAGEOUT left the page in memory\n");
		skip();
	}
	assert_int_equal(WEXITSTATUS(st), 0);
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
	long kib;
	assert_int_equal(svc_trim_text(&kib), 0);
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

/*
 * A burst between a trim and the next check: trimmed once more, then
 * the floor is learned (without the second trim the burst's level was
 * taken for the floor, and nothing was trimmed after).
 */
static void test_burst_right_after_trim(void **state)
{
	(void)state;
	struct svc_trim_state s;
	svc_trim_start(&s, 2000);
	assert_false(svc_trim_step(&s, 3200));
	assert_true(svc_trim_step(&s, 3200));
	svc_trim_trimmed(&s, 1500);
	assert_false(svc_trim_step(&s, 3600)); /* a second burst at once */
	assert_true(svc_trim_step(&s, 3600));  /* quiet: once more */
	svc_trim_trimmed(&s, 1500);
	assert_false(svc_trim_step(&s, 1900));
	assert_false(svc_trim_step(&s, 1900));
	assert_int_equal(s.floor_kib, 1900);
	/* A loop whose own paths are more than the slack: two trims per
	 * burst, then quiet for good. */
	assert_false(svc_trim_step(&s, 3000));
	assert_true(svc_trim_step(&s, 3000));
	svc_trim_trimmed(&s, 1000);
	assert_false(svc_trim_step(&s, 1900));
	assert_true(svc_trim_step(&s, 1900));
	svc_trim_trimmed(&s, 1000);
	assert_false(svc_trim_step(&s, 1900));
	for (int i = 0; i < 50; i++)
		assert_false(svc_trim_step(&s, 1900));
	assert_int_equal(s.floor_kib, 1900);
}

/* A level that creeps by a page or two between checks is quiet. */
static void test_drift_is_quiet(void **state)
{
	(void)state;
	struct svc_trim_state s;
	svc_trim_start(&s, 1000);
	assert_false(svc_trim_step(&s, 2000));
	assert_true(svc_trim_step(&s, 2008));
	svc_trim_trimmed(&s, 1000);
	assert_false(svc_trim_step(&s, 1100));
	assert_false(svc_trim_step(&s, 1096)); /* went down: quiet, the floor */
	assert_int_equal(s.floor_kib, 1096);
}

/* The level after a trim could not be read: the next one stands in. */
static void test_unread_level(void **state)
{
	(void)state;
	struct svc_trim_state s;
	svc_trim_start(&s, -5);
	assert_false(svc_trim_step(&s, 1500));
	assert_false(svc_trim_step(&s, 1500));
	assert_int_equal(s.floor_kib, 1500);
	assert_false(svc_trim_step(&s, 1500));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean_text_goes),
		cmocka_unit_test(test_relro_like_stays),
		cmocka_unit_test(test_swapped_relro_stays),
		cmocka_unit_test(test_writable_and_shared_stay),
		cmocka_unit_test(test_steady_loop_not_trimmed),
		cmocka_unit_test(test_burst_then_quiet),
		cmocka_unit_test(test_not_while_busy),
		cmocka_unit_test(test_burst_right_after_trim),
		cmocka_unit_test(test_drift_is_quiet),
		cmocka_unit_test(test_unread_level),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
