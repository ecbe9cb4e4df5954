/*
 * svc_ident (identity bound to a process) against real child processes:
 * a peer bound at accept, then gone (exited and reaped), or with changed
 * ids (setresuid in the child); "replaced" by faking the start time, since
 * a pid's reuse cannot be forced here (the hostile test ht_pid_reuse does).
 * Needs root for the id changes; skips those otherwise.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "svc_ident.h"
#include "util.h"

/* A child connected to us over a socketpair made in the child (so that its
 * SO_PEERCRED is the child's); ctl is a pipe to tell it what to do. */
struct kid {
	pid_t pid;
	int sock;   /* our end */
	int ctl;    /* write a command byte */
	int ack;    /* read one byte once done */
};

static void kid_loop(int ctl, int ack)
{
	char cmd;
	while (read(ctl, &cmd, 1) == 1) {
		int ok = 1;
		switch (cmd) {
		case 'e': /* a setuid-like change: effective uid only */
			ok = setresuid((uid_t)-1, 65534, (uid_t)-1) == 0;
			break;
		case 'u': /* every uid to nobody */
			ok = setresgid(65534, 65534, 65534) == 0 && setresuid(65534, 65534, 65534) == 0;
			break;
		case 'q':
			_exit(0);
		}
		char a = ok ? 'y' : 'n';
		if (write(ack, &a, 1) != 1)
			_exit(1);
	}
	_exit(0);
}

/* The child connects to a listening socket of ours: accept gives its peer. */
static struct kid kid_start(void)
{
	struct kid k;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int ctl[2], ack[2];
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/tmp/pd-ident-%d.sock", (int)getpid());
	unlink(sa.sun_path);
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	assert_true(l >= 0);
	assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(l, 4), 0);
	assert_int_equal(pipe(ctl), 0);
	assert_int_equal(pipe(ack), 0);
	k.pid = fork();
	assert_true(k.pid >= 0);
	if (k.pid == 0) {
		close(ctl[1]);
		close(ack[0]);
		int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
			_exit(1);
		kid_loop(ctl[0], ack[1]);
	}
	close(ctl[0]);
	close(ack[1]);
	k.ctl = ctl[1];
	k.ack = ack[0];
	k.sock = accept4(l, NULL, NULL, SOCK_CLOEXEC);
	assert_true(k.sock >= 0);
	close(l);
	unlink(sa.sun_path);
	return k;
}

static int kid_do(struct kid *k, char cmd)
{
	char a = 0;
	assert_int_equal(write(k->ctl, &cmd, 1), 1);
	assert_int_equal(read(k->ack, &a, 1), 1);
	return a == 'y' ? 0 : -1;
}

static void kid_reap(struct kid *k)
{
	char q = 'q';
	if (write(k->ctl, &q, 1) != 1)
		kill(k->pid, SIGKILL);
	waitpid(k->pid, NULL, 0);
	close(k->ctl);
	close(k->ack);
	close(k->sock);
}

static void test_bind_same_process(void **state)
{
	struct kid k = kid_start();
	struct svc_ident id;
	uint64_t start;
	assert_int_equal(svc_ident_bind(&id, k.sock), 0);
	assert_int_equal(id.pid, k.pid);
	assert_int_equal(util_proc_start_time(k.pid, &start), 0);
	assert_true(id.start == start);
	assert_int_equal(id.uid[1], geteuid());
	assert_int_equal(id.gid[1], getegid());
	assert_int_equal(svc_ident_check(&id), 0);
	assert_true(svc_ident_capturable(&id, geteuid()));
	/* Supplementary groups: as many as the parent's (the child inherited them). */
	int n = getgroups(0, NULL);
	assert_true(n >= 0);
	assert_int_equal(id.ngroups, (uint32_t)n);
	svc_ident_fini(&id);
	kid_reap(&k);
}

static void test_gone(void **state)
{
	struct kid k = kid_start();
	struct svc_ident id;
	assert_int_equal(svc_ident_bind(&id, k.sock), 0);
	kid_reap(&k);
	assert_int_equal(svc_ident_check(&id), -ESRCH);
	/* Without the pidfd: the pid and its start time say the same. */
	if (id.pidfd >= 0) {
		close(id.pidfd);
		id.pidfd = -1;
	}
	assert_int_equal(svc_ident_check(&id), -ESRCH);
	svc_ident_fini(&id);
}

/* A peer that exited (and was reaped) before the accept is nobody to bind. */
static void test_gone_before_bind(void **state)
{
	struct kid k = kid_start();
	char q = 'q';
	assert_int_equal(write(k.ctl, &q, 1), 1);
	waitpid(k.pid, NULL, 0);
	struct svc_ident id;
	assert_int_equal(svc_ident_bind(&id, k.sock), -ESRCH);
	assert_int_equal(id.pidfd, -1);
	svc_ident_fini(&id);
	close(k.ctl);
	close(k.ack);
	close(k.sock);
}

static void test_changed_ids(void **state)
{
	if (geteuid() != 0)
		skip();
	struct kid k = kid_start();
	struct svc_ident id, slow;
	assert_int_equal(svc_ident_bind(&id, k.sock), 0);
	assert_int_equal(svc_ident_dup(&slow, &id), 0);
	assert_int_equal(kid_do(&k, 'e'), 0);
	/* The pidfd's own check (PIDFD_GET_INFO where the kernel has it) ... */
	assert_int_equal(svc_ident_check(&id), -EPERM);
	/* ... and the /proc one. */
	close(slow.pidfd);
	slow.pidfd = -1;
	assert_int_equal(svc_ident_check(&slow), -EPERM);
	svc_ident_fini(&slow);
	svc_ident_fini(&id);
	kid_reap(&k);

	/* Mixed ids when bound: not capturable but by root. */
	k = kid_start();
	assert_int_equal(kid_do(&k, 'e'), 0);
	assert_int_equal(svc_ident_of_pid(&id, k.pid, 0), 0);
	assert_true(svc_ident_mixed(&id));
	assert_false(svc_ident_capturable(&id, 65534));
	assert_false(svc_ident_capturable(&id, 1000));
	assert_true(svc_ident_capturable(&id, 0));
	/* Connected as root, now euid 65534: its peer creds no longer hold. */
	assert_int_equal(svc_ident_bind(&slow, k.sock), -EPERM);
	svc_ident_fini(&id);
	kid_reap(&k);

	/* All ids moved to one other uid: capturable by that uid alone. */
	k = kid_start();
	assert_int_equal(kid_do(&k, 'u'), 0);
	assert_int_equal(svc_ident_of_pid(&id, k.pid, 0), 0);
	assert_false(svc_ident_mixed(&id));
	assert_true(svc_ident_capturable(&id, 65534));
	assert_false(svc_ident_capturable(&id, 1000));
	svc_ident_fini(&id);
	kid_reap(&k);
}

/* A pid's reuse cannot be forced here: a wrong start time stands for it. */
static void test_replaced(void **state)
{
	struct svc_ident id;
	assert_int_equal(svc_ident_of_pid(&id, getpid(), 0), 0);
	assert_int_equal(svc_ident_check(&id), 0);
	close(id.pidfd);
	id.pidfd = -1;
	assert_int_equal(svc_ident_check(&id), 0);
	id.start++;
	assert_int_equal(svc_ident_check(&id), -ESRCH);
	svc_ident_fini(&id);

	uint64_t start;
	assert_int_equal(util_proc_start_time(getpid(), &start), 0);
	assert_int_equal(svc_ident_of_pid(&id, getpid(), start), 0);
	svc_ident_fini(&id);
	assert_int_equal(svc_ident_of_pid(&id, getpid(), start + 1), -ESRCH);
	assert_int_equal(id.pidfd, -1);
	assert_int_equal(svc_ident_of_pid(&id, 0, 0), -ESRCH);
	assert_int_equal(svc_ident_check(&id), -ESRCH);
}

static void test_fini_and_dup(void **state)
{
	struct svc_ident a, b;
	svc_ident_fini(NULL);
	svc_ident_init(&a);
	svc_ident_fini(&a);
	svc_ident_fini(&a);
	assert_int_equal(svc_ident_of_pid(&a, getpid(), 0), 0);
	assert_int_equal(svc_ident_dup(&b, &a), 0);
	if (a.pidfd >= 0)
		assert_true(b.pidfd >= 0 && b.pidfd != a.pidfd);
	svc_ident_fini(&a);
	assert_int_equal(svc_ident_check(&b), 0);
	printf("check path on this kernel: %s\n", svc_ident_method(&b));
	svc_ident_fini(&b);
	assert_int_equal(b.pidfd, -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bind_same_process),
		cmocka_unit_test(test_gone),
		cmocka_unit_test(test_gone_before_bind),
		cmocka_unit_test(test_changed_ids),
		cmocka_unit_test(test_replaced),
		cmocka_unit_test(test_fini_and_dup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
