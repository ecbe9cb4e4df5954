/*
 * hostile_runtime: the runtime.sock flood (docs/SECURITY.md, "no monopoly").
 *
 *   hostile_runtime flood RUNTIME_SOCK N HOLD_MS
 *     Opens up to N connections to runtime.sock and never says hello;
 *     prints "connected C pid P". On SIGUSR1 (sent once the daemon has surely
 *     accepted them all) prints "held H of N", the connections still open,
 *     then, HOLD_MS later, "open_after K", those open then.
 *   hostile_runtime self
 *     A friendly app: libprofiling with its agent asks for stack samples of
 *     itself and prints "pid P error E"; exit 0 only when E is 0.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "util.h"

/* Connect without blocking for long: a full backlog is retried briefly. */
static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	uint64_t end = util_mono_ms() + 5000;
	for (;;) {
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return s;
		if (errno != EAGAIN || util_mono_ms() >= end)
			break;
		poll(NULL, 0, 5);
	}
	int r = -errno;
	close(s);
	return r;
}

/* The daemon closed s (EOF or a reset). */
static int closed(int s)
{
	char b;
	ssize_t n = recv(s, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n == 0 || (n < 0 && errno != EAGAIN);
}

static int count_open(const int *s, int n)
{
	int k = 0;
	for (int i = 0; i < n; i++)
		if (s[i] >= 0 && !closed(s[i]))
			k++;
	return k;
}

static void on_usr1(int sig)
{
}

static int flood(const char *path, int n, int hold_ms)
{
	sigset_t usr1, old;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, &old);
	signal(SIGUSR1, on_usr1);
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	int *s = calloc((size_t)n, sizeof(int));
	if (!s)
		return 1;
	int made = 0;
	for (int i = 0; i < n; i++) {
		s[i] = connect_to(path);
		if (s[i] >= 0)
			made++;
	}
	printf("connected %d pid %d\n", made, (int)getpid());
	fflush(stdout);
	sigsuspend(&old);
	printf("held %d of %d\n", count_open(s, n), n);
	fflush(stdout);
	usleep((useconds_t)hold_ms * 1000);
	printf("open_after %d\n", count_open(s, n));
	fflush(stdout);
	return 0;
}

static int done, error;

static void on_result(const struct prof_result *r, void *ud)
{
	done = 1;
	error = r->error;
	fprintf(stderr, "hostile_runtime: result error %d: %s\n", r->error, r->error_message);
}

static volatile unsigned long sink;

static int self(void)
{
	int err;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		printf("pid %d error connect %d\n", (int)getpid(), err);
		return 1;
	}
	/* Wall clock: a loaded machine may give a spinning thread too little
	 * CPU time for a sample; blocked threads are sampled too. */
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 500, .frequency_hz = 100, .clock = 1);
	uint64_t id;
	int r = prof_request(c, PROF_STACK_SAMPLING, &p, "self", on_result, NULL, &id);
	if (r < 0) {
		printf("pid %d error %d\n", (int)getpid(), -r);
		return 1;
	}
	uint64_t end = util_mono_ms() + 20000;
	while (!done && util_mono_ms() < end) {
		for (unsigned long i = 0; i < 1000000; i++)
			sink += i;
		prof_dispatch(c, 10);
	}
	printf("pid %d error %d\n", (int)getpid(), done ? error : -1);
	prof_close(c);
	return done && error == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "flood"))
		return flood(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 2 && !strcmp(argv[1], "self"))
		return self();
	fprintf(stderr, "usage: hostile_runtime flood RUNTIME_SOCK N HOLD_MS | self\n");
	return 2;
}
