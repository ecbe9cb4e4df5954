/*
 * trg_proc: the proc connector's socket filter, on a real netlink socket
 * and real child processes. Exits reach ops->exit only for the pids handed
 * to trg_proc_exits (every exit when none were handed, or past the cap);
 * every process's exec passes. Events of one socket arrive in the order
 * they happened, so "B's exit is not seen" is checked by B exiting, and
 * being reaped, before A, whose exit is seen. Skipped (77) where the
 * connector or its filter is unavailable (no CAP_NET_ADMIN, a /proc scan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trg.h"

static struct event_base *base;
static pid_t want;               /* loop until this pid's exit (or exec) */
static pid_t execs[64], exits[64];
static size_t nexecs, nexits;

static void on_exec(pid_t pid)
{
	if (nexecs < 64)
		execs[nexecs++] = pid;
	if (pid == want)
		event_base_loopbreak(base);
}

static void on_exit_ev(pid_t pid, int wstatus)
{
	(void)wstatus;
	if (nexits < 64)
		exits[nexits++] = pid;
	if (pid == want)
		event_base_loopbreak(base);
}

static const struct trg_ops ops = { .exec = on_exec, .exit = on_exit_ev };

static bool seen(const pid_t *v, size_t n, pid_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

/* A child that exits when told (a byte on its pipe), or execs /bin/true. */
static pid_t kid(int *tell, bool exec_true)
{
	int p[2];
	if (pipe(p) < 0)
		return -1;
	pid_t k = fork();
	if (k == 0) {
		char c;
		close(p[1]);
		if (read(p[0], &c, 1) < 0)
			_exit(1);
		if (exec_true)
			execl("/bin/true", "true", (char *)NULL);
		_exit(0);
	}
	close(p[0]);
	*tell = p[1];
	return k;
}

static void go(int tell, pid_t k)
{
	if (write(tell, "x", 1) != 1)
		fail_msg("cannot tell pid %d", (int)k);
	close(tell);
	waitpid(k, NULL, 0);
}

/* Run the loop until want's event; a generous bound only a broken filter
 * (or a lost event) reaches. */
static void wait_for(pid_t pid)
{
	struct timeval bound = { 30, 0 };
	want = pid;
	event_base_loopexit(base, &bound);
	event_base_dispatch(base);
}

static int setup(void **state)
{
	(void)state;
	nexecs = nexits = 0;
	base = event_base_new();
	if (!base || trg_proc_init(base, &ops) < 0)
		return -1;
	if (strcmp(trg_proc_status(), "netlink proc connector")) {
		printf("skipped: %s\n", trg_proc_status());
		exit(77);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	trg_proc_fini();
	event_base_free(base);
	base = NULL;
	return 0;
}

static void only_listed_exits_pass(void **state)
{
	(void)state;
	int ta, tb;
	pid_t a = kid(&ta, false), b = kid(&tb, false);
	assert_true(a > 0 && b > 0);
	trg_proc_exits(&a, 1);
	go(tb, b);
	go(ta, a);
	wait_for(a);
	assert_true(seen(exits, nexits, a));
	assert_false(seen(exits, nexits, b));
}

static void every_exit_past_the_cap(void **state)
{
	(void)state;
	int tb;
	pid_t b = kid(&tb, false);
	assert_true(b > 0);
	/* More pids than the filter holds (none of them b): all exits pass. */
	size_t n = 4096;
	pid_t *many = calloc(n, sizeof(*many));
	assert_non_null(many);
	for (size_t i = 0; i < n; i++)
		many[i] = (pid_t)(1 << 22) + (pid_t)i;
	trg_proc_exits(many, n);
	free(many);
	go(tb, b);
	wait_for(b);
	assert_true(seen(exits, nexits, b));
}

static void execs_pass_unlisted(void **state)
{
	(void)state;
	int tc;
	pid_t c = kid(&tc, true);
	assert_true(c > 0);
	trg_proc_exits(NULL, 0);
	go(tc, c);
	wait_for(c);
	assert_true(seen(execs, nexecs, c));
	assert_false(seen(exits, nexits, c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(only_listed_exits_pass, setup, teardown),
		cmocka_unit_test_setup_teardown(every_exit_past_the_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(execs_pass_unlisted, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
