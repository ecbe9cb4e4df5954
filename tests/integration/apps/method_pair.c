/*
 * method_pair MODE GO [ARGS...]: native targets for method events with two
 * functions (docs/METHOD_EVENTS.md), used by method_events.sh:
 *
 *   method_pair two GO GO2 N   waits for GO, calls fn_a N times (2 ms
 *                              apart), waits for GO2, calls fn_b N times
 *                              (2 ms apart), prints "done", lingers 60 s:
 *                              a probe closed alone (its budget) while the
 *                              other runs on.
 *   method_pair thread GO N    waits for GO, starts a thread that calls
 *                              fn_a N times (2 ms apart), joins it: a
 *                              probe opened by a rescan, under seccomp.
 *   method_pair cet GO N       waits for GO, calls fn_cet N times in one
 *                              burst: exported and built with
 *                              -fcf-protection, it starts endbr64; push
 *                              %rbp, and the probe goes on the push.
 *   method_pair args GO N      waits for GO, calls args_fn(7, "hello, args",
 *                              -5) N times (2 ms apart), then once
 *                              args_fn(8, an unmapped pointer, 3), prints
 *                              "done", lingers 60 s: argument capture.
 *
 * Pacing keeps a loaded machine's helper from losing stacks to a full
 * ring, which these tests do not measure; the lingering lets a capture end
 * before the process does.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile long sink;

static __attribute__((noinline)) int fn_a(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 1;
}

static __attribute__((noinline)) int fn_b(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 2;
}

/* Three integer-register arguments: rdi, rsi, rdx. */
static __attribute__((noinline)) long args_fn(int n, const char *s, long l)
{
	__asm__ volatile("" ::: "memory");
	return n + l + (s ? 1 : 0);
}

static __attribute__((noinline)) int cet_leaf(int x)
{
	__asm__ volatile("" ::: "memory");
	return x + 3;
}

/* Exported and not a leaf: endbr64, then a frame (push %rbp). */
int fn_cet(int x);
__attribute__((noinline)) int fn_cet(int x)
{
	int r = cet_leaf(x);
	__asm__ volatile("" ::: "memory");
	return r + 1;
}

static void *thread_main(void *arg)
{
	long n = *(long *)arg;
	for (long i = 0; i < n; i++) {
		sink += fn_a((int)i);
		usleep(2000);
	}
	return NULL;
}

static void wait_for(const char *path)
{
	for (int i = 0; access(path, F_OK) != 0 && i < 6000; i++)
		usleep(10000);
}

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "two")) {
		long n = atol(argv[4]);
		wait_for(argv[2]);
		for (long i = 0; i < n; i++) {
			sink += fn_a((int)i);
			usleep(2000);
		}
		wait_for(argv[3]);
		for (long i = 0; i < n; i++) {
			sink += fn_b((int)i);
			usleep(2000);
		}
	} else if (argc >= 4 && !strcmp(argv[1], "cet")) {
		long n = atol(argv[3]);
		wait_for(argv[2]);
		for (long i = 0; i < n; i++)
			sink += fn_cet((int)i);
	} else if (argc >= 4 && !strcmp(argv[1], "thread")) {
		long n = atol(argv[3]);
		pthread_t th;
		wait_for(argv[2]);
		if (pthread_create(&th, NULL, thread_main, &n) != 0)
			return 1;
		pthread_join(th, NULL);
	} else if (argc >= 4 && !strcmp(argv[1], "args")) {
		long n = atol(argv[3]);
		/* A page mapped, then unmapped: a pointer nothing maps. */
		char *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (gone == MAP_FAILED || munmap(gone, 4096) < 0)
			return 1;
		wait_for(argv[2]);
		for (long i = 0; i < n; i++) {
			sink += args_fn(7, "hello, args", -5);
			usleep(2000);
		}
		sink += args_fn(8, gone, 3);
	} else {
		fprintf(stderr, "usage: method_pair two GO GO2 N | cet GO N | thread GO N | args GO N\n");
		return 2;
	}
	printf("done\n");
	fflush(stdout);
	sleep(60);
	return 0;
}
