/*
 * uprobe_cost [HITS] [ROUNDS]: what a native method event's uprobe costs
 * the probed thread, part by part (docs/METHOD_EVENTS.md, "Cost per hit").
 * One process: the main thread calls bench_fn HITS times under each
 * variant of the perf event profilingd-perf opens, and its own CPU clock
 * (CLOCK_THREAD_CPUTIME_ID: the trap runs in its context) is taken around
 * the calls; a second thread empties the ring as fast as it can, so the
 * kernel writes every sample (a full ring skips the copy and would look
 * cheap). Variants, alternated round by round, medians printed:
 *   counting only (no ring) at the entry, and after a leading endbr64;
 *   then, at the chosen place, samples with identity/tid/time/period,
 *   + the kernel's callchain, + user registers, + the user stack
 *   (16 KiB as the helper asks, and 4 KiB).
 * Needs root (the uprobe PMU). Not a test: it asserts nothing.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <asm/perf_regs.h>
#endif

static volatile long sink;

long bench_fn(long x);
__attribute__((noinline)) long bench_fn(long x)
{
	__asm__ volatile("" ::: "memory");
	return x * 3 + 1;
}

/*
 * The same body behind the first instructions compilers emit: the
 * kernel emulates some (push, nops: one trap) and single-steps the rest
 * out of line (two traps). Written in assembly so the bytes are known.
 */
long fn_push(long x);
long fn_endbr(long x);
long fn_nop5(long x);
__asm__(".text\n"
	".globl fn_push\n.type fn_push,@function\nfn_push:\n"
	"\tpush %rbp\n\tmov %rsp,%rbp\n\tlea 1(%rdi,%rdi,2),%rax\n\tpop %rbp\n\tret\n"
	".size fn_push,.-fn_push\n"
	".globl fn_endbr\n.type fn_endbr,@function\nfn_endbr:\n"
	"\t.byte 0xf3,0x0f,0x1e,0xfa\n\tlea 1(%rdi,%rdi,2),%rax\n\tret\n"
	".size fn_endbr,.-fn_endbr\n"
	".globl fn_nop5\n.type fn_nop5,@function\nfn_nop5:\n"
	"\t.byte 0x0f,0x1f,0x44,0x00,0x00\n\tlea 1(%rdi,%rdi,2),%rax\n\tret\n"
	".size fn_nop5,.-fn_nop5\n");

static long (*volatile call_fn)(long) = bench_fn;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* fn's offset in our executable file, from /proc/self/maps. */
static int fn_offset(long (*fn)(long), uint64_t *off, char *path, size_t n)
{
	uint64_t a = (uint64_t)(uintptr_t)fn;
	char line[4096];
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return -errno;
	int r = -ENOENT;
	while (r && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, o;
		int at = 0;
		if (sscanf(line, "%lx-%lx %*s %lx %*s %*u %n", &lo, &hi, &o, &at) < 3 || !at)
			continue;
		if (a >= lo && a < hi) {
			*off = a - lo + o;
			line[strcspn(line, "\n")] = '\0';
			snprintf(path, n, "%s", line + at);
			r = 0;
		}
	}
	fclose(f);
	return r;
}

static struct perf_event_mmap_page *ring;
static atomic_int stop_drain;

static void *drainer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop_drain)) {
		struct perf_event_mmap_page *m = ring;
		if (m) {
			uint64_t head = __atomic_load_n(&m->data_head, __ATOMIC_ACQUIRE);
			__atomic_store_n(&m->data_tail, head, __ATOMIC_RELEASE);
		}
		sched_yield();
	}
	return NULL;
}

struct variant {
	const char *name;
	long (*fn)(long);     /* the probed function (its entry) */
	uint64_t sample_type; /* 0: counting only */
	uint32_t stack;
};

#define RING_PAGES 512 /* 2 MiB */

/* The thread CPU ns of hits calls under v (v NULL: no probe), or 0. */
static uint64_t run(const struct variant *v, uint32_t type, const char *path, uint64_t off,
		    long hits, uint64_t *got)
{
	int fd = -1;
	void *map = MAP_FAILED;
	long page = sysconf(_SC_PAGESIZE);
	*got = 0;
	if (v) {
		struct perf_event_attr a;
		memset(&a, 0, sizeof(a));
		a.size = sizeof(a);
		a.type = type;
		a.config1 = (uint64_t)(uintptr_t)path;
		a.config2 = off;
		a.disabled = 1;
		a.exclude_kernel = 1;
		a.exclude_callchain_kernel = 1;
		if (v->sample_type) {
			a.sample_period = 1;
			a.sample_type = v->sample_type;
#if defined(__x86_64__)
			a.sample_regs_user = (1ull << PERF_REG_X86_64_MAX) - 1;
			a.sample_regs_user &= ~((1ull << PERF_REG_X86_DS) | (1ull << PERF_REG_X86_ES) |
						(1ull << PERF_REG_X86_FS) | (1ull << PERF_REG_X86_GS) |
						(1ull << PERF_REG_X86_CS) | (1ull << PERF_REG_X86_SS) |
						(1ull << PERF_REG_X86_FLAGS));
#endif
			a.sample_stack_user = v->stack;
			a.watermark = 1;
			a.wakeup_watermark = (uint32_t)(RING_PAGES * page / 4);
		}
		fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "perf_event_open (%s): %s\n", v->name, strerror(errno));
			exit(77);
		}
		if (v->sample_type) {
			map = mmap(NULL, (RING_PAGES + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED,
				   fd, 0);
			if (map == MAP_FAILED) {
				fprintf(stderr, "mmap: %s\n", strerror(errno));
				exit(1);
			}
			ring = map;
		}
		ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	}
	uint64_t t0 = thread_cpu_ns();
	for (long i = 0; i < hits; i++)
		sink += call_fn(i);
	uint64_t t1 = thread_cpu_ns();
	if (fd >= 0) {
		ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
		if (read(fd, got, sizeof(*got)) != (ssize_t)sizeof(*got))
			*got = 0;
		ring = NULL;
		if (map != MAP_FAILED) {
			usleep(1000); /* the drainer may still hold the old pointer */
			munmap(map, (RING_PAGES + 1) * page);
		}
		close(fd);
	}
	return t1 - t0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long hits = argc > 1 ? atol(argv[1]) : 20000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	char path[4096];
	uint64_t off = 0;
	FILE *tf = fopen("/sys/bus/event_source/devices/uprobe/type", "re");
	unsigned type = 0;
	if (!tf || fscanf(tf, "%u", &type) != 1) {
		fprintf(stderr, "skipped: no uprobe PMU\n");
		return 77;
	}
	fclose(tf);
	if (hits < 1 || rounds < 1 || rounds > 99 || fn_offset(bench_fn, &off, path, sizeof(path)) < 0) {
		fprintf(stderr, "usage: uprobe_cost [HITS] [ROUNDS<100]\n");
		return 2;
	}
	const uint8_t *code = (const uint8_t *)(uintptr_t)&bench_fn;
	int endbr = code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa;
	printf("bench_fn starts %02x %02x %02x %02x %02x (%s)\n", code[0], code[1], code[2], code[3],
	       code[4], endbr ? "endbr64" : "no endbr64");

	uint64_t base = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD;
	uint64_t full = base | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	const struct variant vs[] = {
		{ "lea first: count only", bench_fn, 0, 0 },
		{ "lea first: sample id/tid/time/period", bench_fn, base, 0 },
		{ "lea first:  + callchain", bench_fn, base | PERF_SAMPLE_CALLCHAIN, 0 },
		{ "lea first:  + callchain + regs", bench_fn,
		  base | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER, 0 },
		{ "lea first:  + callchain + regs + stack 16 KiB", bench_fn, full, 16384 },
		{ "lea first:  + callchain + regs + stack 4 KiB", bench_fn, full, 4096 },
		{ "endbr64 first: full, 16 KiB", fn_endbr, full, 16384 },
		{ "push %rbp first: full, 16 KiB", fn_push, full, 16384 },
	};
	/* Counting only, by first instruction. */
	static const struct { const char *name; long (*fn)(long); } firsts[] = {
		{ "first insn push %rbp (emulated?)", fn_push },
		{ "first insn endbr64", fn_endbr },
		{ "first insn 5-byte nop", fn_nop5 },
		{ "first insn lea (single-stepped)", bench_fn },
	};
	enum { NF = sizeof(firsts) / sizeof(firsts[0]) };
	uint64_t tf_[NF][100];
	enum { NV = sizeof(vs) / sizeof(vs[0]) };
	uint64_t t[NV + 1][100], got;
	pthread_t th;
	pthread_create(&th, NULL, drainer, NULL);
	run(NULL, type, path, off, hits, &got); /* warm-up */
	for (int r = 0; r < rounds; r++) {
		call_fn = bench_fn;
		t[NV][r] = run(NULL, type, path, off, hits, &got);
		for (int k = 0; k < NV; k++) {
			uint64_t o = 0;
			char vp[4096];
			fn_offset(vs[k].fn, &o, vp, sizeof(vp));
			call_fn = vs[k].fn;
			t[k][r] = run(&vs[k], type, vp, o, hits, &got);
			if ((long)got != hits)
				fprintf(stderr, "%s: counted %llu of %ld\n", vs[k].name,
					(unsigned long long)got, hits);
		}
	}
	static const struct variant count = { "count", 0, 0, 0 };
	for (int r = 0; r < rounds; r++)
		for (int k = 0; k < NF; k++) {
			uint64_t fo = 0;
			char fp[4096];
			fn_offset(firsts[k].fn, &fo, fp, sizeof(fp));
			call_fn = firsts[k].fn;
			tf_[k][r] = run(&count, type, fp, fo, hits, &got);
			if ((long)got != hits)
				fprintf(stderr, "%s: counted %llu of %ld\n", firsts[k].name,
					(unsigned long long)got, hits);
		}
	call_fn = bench_fn;
	atomic_store(&stop_drain, 1);
	pthread_join(th, NULL);
	qsort(t[NV], (size_t)rounds, sizeof(uint64_t), cmp_u64);
	uint64_t plain = t[NV][rounds / 2];
	printf("uprobe cost per hit, thread CPU time, median of %d rounds of %ld calls "
	       "(plain call %.1f ns):\n", rounds, hits, (double)plain / (double)hits);
	for (int k = 0; k < NV; k++) {
		qsort(t[k], (size_t)rounds, sizeof(uint64_t), cmp_u64);
		double us = ((double)t[k][rounds / 2] - (double)plain) / (double)hits / 1000.0;
		printf("  %-46s %7.2f us\n", vs[k].name, us);
		const char *sum = getenv("PD_BENCH_SUMMARY");
		FILE *sf = sum ? fopen(sum, "ae") : NULL;
		if (sf) {
			fprintf(sf, "uprobe cost per hit: %s|%.2f us|-|-|< 10 us\n", vs[k].name, us);
			fclose(sf);
		}
	}
	for (int k = 0; k < NF; k++) {
		qsort(tf_[k], (size_t)rounds, sizeof(uint64_t), cmp_u64);
		printf("  count only, %-34s %7.2f us\n", firsts[k].name,
		       ((double)tf_[k][rounds / 2] - (double)plain) / (double)hits / 1000.0);
	}
	return 0;
}
