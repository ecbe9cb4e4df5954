/*
 * sbx_install_apart (common/sandbox.c): the filter built by libseccomp in a
 * forked child and loaded here must allow what the list allows, kill on
 * anything else, and refuse a list libseccomp cannot build without loading
 * anything. Real kernel: each case runs in a forked process of its own.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox.h"

static const struct sbx_rule allow[] = {
	{ .name = "exit_group", .arg = -1, .op = SBX_ANY },
	{ .name = "exit", .arg = -1, .op = SBX_ANY },
	{ .name = "getpid", .arg = -1, .op = SBX_ANY },
	/* an argument rule, and a refusal: getpriority(PRIO_PROCESS, ...) only */
	{ .name = "getpriority", .arg = 0, .op = SBX_EQ, .value = 0 },
	{ .name = "getuid", .arg = -1, .op = SBX_ANY, .refuse = EPERM },
};

/* Run fn in a child; its wait status. */
static int in_child(int (*fn)(void))
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		/* exit_group itself, not _exit: the sanitizers intercept _exit
		 * and run their leak check, whose calls the filter kills. */
		syscall(SYS_exit_group, fn());
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

/* 0: installed and everything allowed behaved; else a step number. */
static int allowed_calls(void)
{
	if (sbx_install_apart(allow, sizeof(allow) / sizeof(allow[0])) < 0)
		return 10;
	if (syscall(SYS_getpid) <= 0)
		return 12;
	errno = 0;
	if (syscall(SYS_getpriority, 0, 0) < 0 && errno)
		return 13;
	if (syscall(SYS_getuid) != -1 || errno != EPERM)
		return 14;
	return 0;
}

static int forbidden_call(void)
{
	if (sbx_install_apart(allow, sizeof(allow) / sizeof(allow[0])) < 0)
		return 10;
	syscall(SYS_getppid); /* not listed: the process is killed */
	return 20;
}

static int forbidden_arg(void)
{
	if (sbx_install_apart(allow, sizeof(allow) / sizeof(allow[0])) < 0)
		return 10;
	syscall(SYS_getpriority, 1, 0); /* PRIO_PGRP: outside the rule */
	return 20;
}

/* A name libseccomp does not know: -EINVAL, and no filter on this process. */
static int unknown_name(void)
{
	static const struct sbx_rule bad[] = {
		{ .name = "exit_group", .arg = -1, .op = SBX_ANY },
		{ .name = "no_such_syscall", .arg = -1, .op = SBX_ANY },
	};
	int r = sbx_install_apart(bad, 2);
	if (r != -EINVAL)
		return 30;
	if (prctl(PR_GET_SECCOMP) != 0)
		return 31;
	syscall(SYS_getppid);
	return 0;
}

static void test_allowed(void **state)
{
	(void)state;
	int st = in_child(allowed_calls);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static void test_forbidden_killed(void **state)
{
	(void)state;
	int st = in_child(forbidden_call);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
	st = in_child(forbidden_arg);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGSYS);
}

static void test_unknown_name(void **state)
{
	(void)state;
	int st = in_child(unknown_name);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_allowed),
		cmocka_unit_test(test_forbidden_killed),
		cmocka_unit_test(test_unknown_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
