/*
 * The heap profiler (client/heap.c): Poisson statistics, large allocations,
 * free and realloc matching, the aligned family, calloc overflow, the OOM
 * hook, the recursion guard, the caps and the pprof it writes.
 *
 * Built normally, heap.c interposes malloc for this whole test process and
 * the tests call the real names. Built with HEAP_NO_INTERPOSE (sanitizer
 * builds), they call heap.c's entry points, which forward to the
 * sanitizer's allocator, so the profiler's logic still runs under ASan.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

#include "heap.h"
#include "profile.pb-c.h"

#ifdef HEAP_NO_INTERPOSE
#define F(name) heap_##name
const char *__asan_default_options(void);
/* Huge requests must fail with NULL, as glibc's do, not abort the test. */
const char *__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#else
#define F(name) name
#endif

/* Through volatile pointers: the compiler may not fold an allocation away. */
static void *(*volatile t_malloc)(size_t) = F(malloc);
static void (*volatile t_free)(void *) = F(free);
static void *(*volatile t_calloc)(size_t, size_t) = F(calloc);
static void *(*volatile t_realloc)(void *, size_t) = F(realloc);
static void *(*volatile t_reallocarray)(void *, size_t, size_t) = F(reallocarray);
static int (*volatile t_posix_memalign)(void **, size_t, size_t) = F(posix_memalign);
static void *(*volatile t_aligned_alloc)(size_t, size_t) = F(aligned_alloc);
static void *(*volatile t_memalign)(size_t, size_t) = F(memalign);
static void *(*volatile t_valloc)(size_t) = F(valloc);
static void *(*volatile t_pvalloc)(size_t) = F(pvalloc);

#define HUGE_SIZE (SIZE_MAX / 4)

static struct heap_totals totals(void)
{
	struct heap_totals t;
	heap_get_totals(&t);
	return t;
}

static void assert_near(double got, double want, double rel)
{
	if (got < want * (1 - rel) || got > want * (1 + rel))
		fail_msg("%.0f is not within %.1f%% of %.0f", got, rel * 100, want);
}

static int teardown(void **state)
{
	heap_discard();
	heap_set_limits(0, 0);
	heap_set_oom_hook(NULL);
	return 0;
}

/* 1e6 x 100 B: the attributed bytes and objects are unbiased estimates. */
static void test_poisson_small(void **state)
{
	const int n = 1000000;

	assert_int_equal(heap_start(0), 0);
	assert_true(heap_active());
	for (int i = 0; i < n; i++) {
		void *p = t_malloc(100);
		if (!p)
			fail();
		t_free(p);
	}
	struct heap_totals t = totals();
	/* About 24414 samples: 3 % is over 4 standard deviations. */
	assert_near((double)t.alloc_space, 100.0 * n, 0.03);
	assert_near((double)t.alloc_objects, n, 0.03);
	assert_near((double)t.samples, 100.0 * n / HEAP_DEFAULT_INTERVAL, 0.03);
	assert_int_equal(t.inuse_space, 0);
	assert_int_equal(t.inuse_objects, 0);
	assert_int_equal(t.live, 0);
	assert_int_equal(t.dropped, 0);
}

/* Sizes on both sides of the interval, some kept: estimates hold for both views. */
static void test_poisson_mixed(void **state)
{
	enum { N = 200000, KEEP = 1024 };
	static void *kept[KEEP];
	static size_t kept_size[KEEP];
	uint64_t x = 88172645463325252ull, total = 0, live = 0;

	assert_int_equal(heap_start(1024), 0);
	for (int i = 0; i < N; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		size_t sz = 1 + x % 3000;
		void *p = t_malloc(sz);
		if (!p)
			fail();
		total += sz;
		int k = (int)((x >> 32) % KEEP);
		if (kept[k]) {
			live -= kept_size[k];
			t_free(kept[k]);
		}
		kept[k] = p;
		kept_size[k] = sz;
		live += sz;
	}
	struct heap_totals t = totals();
	assert_near((double)t.alloc_space, (double)total, 0.03);
	/* About 1.5 MB live, a third of it from ~500 small samples: a wider band. */
	assert_near((double)t.inuse_space, (double)live, 0.10);
	for (int k = 0; k < KEEP; k++) {
		t_free(kept[k]);
		kept[k] = NULL;
	}
	t = totals();
	assert_int_equal(t.inuse_space, 0);
	assert_int_equal(t.live, 0);
}

/* At least the interval: always taken, at the true size. */
static void test_large_exact(void **state)
{
	void *p[10];
	uint64_t sum = 0;

	assert_int_equal(heap_start(4096), 0);
	for (int i = 0; i < 10; i++) {
		p[i] = t_malloc(10000 + (size_t)i);
		assert_non_null(p[i]);
		sum += 10000 + (uint64_t)i;
	}
	struct heap_totals t = totals();
	assert_int_equal(t.samples, 10);
	assert_int_equal(t.alloc_space, sum);
	assert_int_equal(t.inuse_space, sum);
	assert_int_equal(t.alloc_objects, 10);
	assert_int_equal(t.inuse_objects, 10);
	for (int i = 0; i < 10; i++)
		t_free(p[i]);
	t = totals();
	assert_int_equal(t.inuse_space, 0);
	assert_int_equal(t.inuse_objects, 0);
	assert_int_equal(t.alloc_space, sum);
}

/* Every sampled block freed: in-use goes back to exactly zero. */
static void test_free_matching(void **state)
{
	enum { N = 10000 };
	static void *p[N];

	assert_int_equal(heap_start(512), 0);
	for (int i = 0; i < N; i++)
		assert_non_null(p[i] = t_malloc(1000));
	assert_near((double)totals().inuse_space, 1000.0 * N, 0.05);
	for (int i = 0; i < N; i += 2)
		t_free(p[i]);
	assert_near((double)totals().inuse_space, 500.0 * N, 0.08);
	for (int i = 1; i < N; i += 2)
		t_free(p[i]);
	struct heap_totals t = totals();
	assert_int_equal(t.inuse_space, 0);
	assert_int_equal(t.live, 0);
	assert_near((double)t.alloc_space, 1000.0 * N, 0.05);
}

struct xfer {
	pthread_barrier_t go;
	void *p[256];
};

static void *free_all(void *arg)
{
	struct xfer *x = arg;
	pthread_barrier_wait(&x->go);
	for (int i = 0; i < 256; i++)
		t_free(x->p[i]);
	return NULL;
}

/* A block sampled on one thread and freed on another is matched. */
static void test_free_other_thread(void **state)
{
	static struct xfer x;
	pthread_t th;

	assert_int_equal(heap_start(1), 0);
	for (int i = 0; i < 256; i++)
		assert_non_null(x.p[i] = t_malloc(64));
	assert_int_equal(totals().inuse_space, 256 * 64);
	pthread_barrier_init(&x.go, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, free_all, &x), 0);
	/* pthread_create allocates for the thread (sampled too, and kept). */
	uint64_t before = totals().inuse_space;
	pthread_barrier_wait(&x.go);
	pthread_join(th, NULL);
	assert_int_equal(before - totals().inuse_space, 256 * 64);
	pthread_barrier_destroy(&x.go);
}

/* realloc is a free of the old block and an allocation of the new one. */
static void test_realloc_matching(void **state)
{
	struct heap_totals t;

	assert_int_equal(heap_start(1), 0);
	char *p = t_malloc(100);
	assert_non_null(p);
	memset(p, 'x', 100);
	p = t_realloc(p, 5000);
	assert_non_null(p);
	assert_int_equal(p[99], 'x');
	t = totals();
	assert_int_equal(t.alloc_objects, 2);
	assert_int_equal(t.alloc_space, 5100);
	assert_int_equal(t.inuse_objects, 1);
	assert_int_equal(t.inuse_space, 5000);

	/* Failure: the old block stays valid, and so does its entry. */
	errno = 0;
	assert_null(t_realloc(p, HUGE_SIZE));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(totals().inuse_space, 5000);
	errno = 0;
	assert_null(t_reallocarray(p, SIZE_MAX / 2, 3));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(totals().inuse_space, 5000);

	p = t_reallocarray(p, 10, 30);
	assert_non_null(p);
	t = totals();
	assert_int_equal(t.inuse_space, 300);
	assert_int_equal(t.alloc_space, 5400);

	/* realloc(NULL, n) allocates. */
	void *q = t_realloc(NULL, 700);
	assert_non_null(q);
	assert_int_equal(totals().inuse_space, 1000);
	t_free(q);
	/* glibc's realloc(p, 0) frees p. */
	if (t_realloc(p, 0) == NULL)
		assert_int_equal(totals().inuse_space, 0);
	else
		fail_msg("realloc(p, 0) kept a block");
	assert_int_equal(totals().live, 0);
}

static void test_aligned(void **state)
{
	void *p = NULL, *q = NULL;

	assert_int_equal(heap_start(1), 0);
	assert_int_equal(t_posix_memalign(&p, 64, 1000), 0);
	assert_non_null(p);
	assert_int_equal((uintptr_t)p % 64, 0);
	assert_int_equal(t_posix_memalign(&q, 3, 10), EINVAL);
	assert_int_equal(t_posix_memalign(&q, 24, 10), EINVAL);
	assert_int_equal(t_posix_memalign(&q, 0, 10), EINVAL);
	assert_null(q);
	void *a = t_aligned_alloc(128, 256);
	void *m = t_memalign(4096, 100);
	void *v = t_valloc(10);
	void *pv = t_pvalloc(10);
	long page = sysconf(_SC_PAGESIZE);
	assert_non_null(a);
	assert_non_null(m);
	assert_non_null(v);
	assert_non_null(pv);
	assert_int_equal((uintptr_t)a % 128, 0);
	assert_int_equal((uintptr_t)m % 4096, 0);
	assert_int_equal((uintptr_t)v % (uintptr_t)page, 0);
	assert_int_equal((uintptr_t)pv % (uintptr_t)page, 0);
	struct heap_totals t = totals();
	assert_int_equal(t.inuse_objects, 5);
	assert_int_equal(t.inuse_space, 1000 + 256 + 100 + 10 + 10);
	t_free(p);
	t_free(a);
	t_free(m);
	t_free(v);
	t_free(pv);
	assert_int_equal(totals().inuse_space, 0);
}

static atomic_int oom_calls;
static atomic_size_t oom_size;

static void oom_hook(size_t size)
{
	atomic_fetch_add(&oom_calls, 1);
	atomic_store(&oom_size, size);
	/* A hook that itself fails to allocate is not called again, nested. */
	void *p = t_malloc(HUGE_SIZE);
	/* And it may allocate normally. */
	void *q = t_malloc(32);
	t_free(p);
	t_free(q);
}

static void test_calloc_overflow(void **state)
{
	assert_int_equal(heap_start(1), 0);
	heap_set_oom_hook(oom_hook);
	errno = 0;
	assert_null(t_calloc(SIZE_MAX / 2 + 2, 2));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(t_calloc(2, SIZE_MAX / 2 + 2));
	assert_int_equal(errno, ENOMEM);
	/* An overflow is refused before the allocator: no OOM. */
	assert_int_equal(atomic_load(&oom_calls), 0);
	unsigned char *p = t_calloc(100, 10);
	assert_non_null(p);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(p[i], 0);
	assert_int_equal(totals().inuse_space, 1000);
	t_free(p);
	assert_int_equal(totals().inuse_space, 0);
}

static void test_oom_hook(void **state)
{
	void *p;

	atomic_store(&oom_calls, 0);
	heap_set_oom_hook(oom_hook);
	/* The hook works with or without a capture. */
	errno = 0;
	assert_null(t_malloc(HUGE_SIZE));
	assert_int_equal(errno, ENOMEM);
	assert_int_equal(atomic_load(&oom_calls), 1);
	assert_int_equal(atomic_load(&oom_size), HUGE_SIZE);

	assert_int_equal(heap_start(1), 0);
	assert_int_equal(t_posix_memalign(&p, 64, HUGE_SIZE), ENOMEM);
	assert_int_equal(atomic_load(&oom_calls), 2);
	assert_null(t_calloc(HUGE_SIZE, 1));
	assert_int_equal(atomic_load(&oom_calls), 3);
	assert_null(t_aligned_alloc(64, HUGE_SIZE));
	assert_int_equal(atomic_load(&oom_calls), 4);
	/* Nothing that failed is in the tables. */
	assert_int_equal(totals().live, 0);
	heap_set_oom_hook(NULL);
	assert_null(t_malloc(HUGE_SIZE));
	assert_int_equal(atomic_load(&oom_calls), 4);
}

/*
 * Interval 1 samples every allocation, so any allocation the profiler made
 * for itself (libunwind, the tables) would show as an extra sample, and a
 * recursion into the sampler would hang.
 */
static void test_recursion_guard(void **state)
{
	enum { N = 2000 };
	static void *p[N];

	assert_int_equal(heap_start(1), 0);
	for (int i = 0; i < N; i++)
		assert_non_null(p[i] = t_malloc(16));
	struct heap_totals t = totals();
	assert_int_equal(t.samples, N);
	assert_int_equal(t.alloc_objects, N);
	assert_int_equal(t.inuse_space, 16 * N);
	for (int i = 0; i < N; i++)
		t_free(p[i]);
	assert_int_equal(totals().inuse_space, 0);
}

static atomic_int stress_stop;
static atomic_ulong stress_rounds;

static void *stress(void *arg)
{
	uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
	void *keep[64] = { 0 };

	while (!atomic_load(&stress_stop)) {
		for (int i = 0; i < 1000; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			int k = (int)(x % 64);
			t_free(keep[k]);
			keep[k] = (x >> 20) % 4 ? t_malloc(1 + (x >> 32) % 2048)
						: t_realloc(NULL, 1 + (x >> 40) % 20000);
		}
		atomic_fetch_add(&stress_rounds, 1);
	}
	for (int k = 0; k < 64; k++)
		t_free(keep[k]);
	return NULL;
}

/* Captures written and restarted while threads allocate: no deadlock, no crash. */
static void test_concurrent_write(void **state)
{
	pthread_t th[4];
	uint64_t bytes;
	struct heap_stats st;

	alarm(120); /* a deadlock fails the test instead of hanging it */
	atomic_store(&stress_stop, 0);
	assert_int_equal(heap_start(64), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, stress, (void *)(uintptr_t)(i + 1)), 0);
	for (int round = 0; round < 5; round++) {
		/* Wait for allocations (not for time: a loaded machine may give the
		 * threads no CPU for a while), at most 20 s. */
		unsigned long seen = atomic_load(&stress_rounds);
		for (int w = 0; w < 200 && atomic_load(&stress_rounds) < seen + 4; w++)
			usleep(100000);
		int fd = memfd_create("heap", MFD_CLOEXEC);
		assert_true(fd >= 0);
		bytes = 0;
		assert_int_equal(heap_write_pprof(fd, 0, 0, &st, &bytes), 0);
		assert_true(bytes > 0);
		assert_true(st.samples > 0);
		assert_int_equal(st.interval, 64);
		close(fd);
		assert_int_equal(heap_start(64), 0);
	}
	atomic_store(&stress_stop, 1);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(totals().live, 0);
	alarm(0);
}

/* Past HEAP_MAX_LIVE (lowered): counted in alloc_* and dropped, not in inuse_*. */
static void test_cap_live(void **state)
{
	static void *p[200];

	heap_set_limits(0, 100);
	assert_int_equal(heap_start(1), 0);
	for (int i = 0; i < 200; i++)
		assert_non_null(p[i] = t_malloc(64));
	struct heap_totals t = totals();
	assert_int_equal(t.samples, 200);
	assert_int_equal(t.live, 100);
	assert_int_equal(t.dropped, 100);
	assert_int_equal(t.alloc_objects, 200);
	assert_int_equal(t.inuse_objects, 100);
	for (int i = 0; i < 200; i++)
		t_free(p[i]);
	assert_int_equal(totals().inuse_space, 0);
}

static volatile int sink;

/* A different depth is a different stack. */
__attribute__((noinline)) static void *deep(int d)
{
	void *p = d > 0 ? deep(d - 1) : t_malloc(32);
	__asm__ volatile("" ::: "memory"); /* no tail call, no loop */
	sink += d;
	return p;
}

/* Past HEAP_MAX_STACKS (lowered): the sample is lost and counted. */
static void test_cap_stacks(void **state)
{
	void *p[10];

	heap_set_limits(4, 0);
	assert_int_equal(heap_start(1), 0);
	for (int d = 0; d < 10; d++)
		assert_non_null(p[d] = deep(d));
	struct heap_totals t = totals();
	assert_int_equal(t.samples, 10);
	assert_int_equal(t.stacks, 4);
	assert_int_equal(t.dropped, 6);
	assert_int_equal(t.inuse_objects, 4);
	for (int d = 0; d < 10; d++)
		t_free(p[d]);
	assert_int_equal(totals().inuse_space, 0);
	/* The same stack again is no new stack. */
	t_free(deep(0));
	assert_int_equal(totals().stacks, 4);
}

static void test_start_stop(void **state)
{
	assert_int_equal(heap_start(1), 0);
	assert_int_equal(heap_start(1), -EBUSY);
	assert_int_equal(heap_start(2u << 30), -EINVAL);
	void *p = t_malloc(500);
	heap_stop();
	assert_false(heap_active());
	/* Not sampled after stop, but frees are still matched. */
	void *q = t_malloc(700);
	struct heap_totals t = totals();
	assert_int_equal(t.alloc_space, 500);
	assert_int_equal(t.inuse_space, 500);
	t_free(p);
	t_free(q);
	assert_int_equal(totals().inuse_space, 0);
	/* A new start resets the tables. */
	p = t_malloc(300);
	assert_int_equal(heap_start(1), 0);
	assert_int_equal(totals().alloc_space, 0);
	t_free(p);
	heap_discard();
	t = totals();
	assert_int_equal(t.alloc_space, 0);
	assert_int_equal(t.samples, 0);
	assert_int_equal(heap_write_pprof(-1, 0, 0, NULL, NULL), -EINVAL);
}

static void test_supported(void **state)
{
#ifdef HEAP_NO_INTERPOSE
	assert_int_equal(heap_supported(), 0);
#else
	assert_int_equal(heap_supported(), 1);
#endif
}

/* ---- the written profile */

static uint8_t *read_gunzip(int fd, size_t *outlen)
{
	off_t len = lseek(fd, 0, SEEK_END);
	assert_true(len > 0);
	uint8_t *gz = malloc((size_t)len);
	assert_non_null(gz);
	assert_int_equal(pread(fd, gz, (size_t)len, 0), len);
	size_t cap = 1 << 20;
	uint8_t *out = malloc(cap);
	assert_non_null(out);
	z_stream z;
	memset(&z, 0, sizeof(z));
	assert_int_equal(inflateInit2(&z, 15 + 32), Z_OK);
	z.next_in = gz;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
	*outlen = z.total_out;
	inflateEnd(&z);
	free(gz);
	return out;
}

static const char *str_of(const Perftools__Profiles__Profile *pr, int64_t i)
{
	return i >= 0 && (size_t)i < pr->n_string_table ? pr->string_table[i] : "?";
}

static const char *func_of_location(const Perftools__Profiles__Profile *pr, uint64_t id)
{
	for (size_t i = 0; i < pr->n_location; i++) {
		const Perftools__Profiles__Location *l = pr->location[i];
		if (l->id != id || l->n_line == 0)
			continue;
		for (size_t j = 0; j < pr->n_function; j++)
			if (pr->function[j]->id == l->line[0]->function_id)
				return str_of(pr, pr->function[j]->name);
	}
	return "";
}

static void *site_blocks[3];

__attribute__((noinline)) static void test_alloc_site(void)
{
	for (int i = 0; i < 3; i++)
		site_blocks[i] = t_malloc(1000);
	__asm__ volatile("" ::: "memory");
}

static void test_pprof_output(void **state)
{
	struct heap_stats st;
	uint64_t bytes = 0;
	size_t rawlen;

	assert_int_equal(heap_start(1), 0);
	test_alloc_site();
	t_free(site_blocks[2]);
	int fd = memfd_create("heap", MFD_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(heap_write_pprof(fd, 1700000000000000000ll, 1500000000ll, &st, &bytes), 0);
	assert_false(heap_active());
	assert_true(st.samples >= 3);
	assert_true(st.live >= 2);
	assert_int_equal(st.interval, 1);
	assert_int_equal(st.dropped, 0);
	assert_int_equal(lseek(fd, 0, SEEK_END), (off_t)bytes);
	/* Released: a second write has nothing to write. */
	assert_int_equal(heap_write_pprof(fd, 0, 0, NULL, NULL), -EINVAL);

	uint8_t *raw = read_gunzip(fd, &rawlen);
	close(fd);
	Perftools__Profiles__Profile *pr = perftools__profiles__profile__unpack(NULL, rawlen, raw);
	assert_non_null(pr);
	static const char *const types[4][2] = {
		{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
		{ "inuse_objects", "count" }, { "inuse_space", "bytes" },
	};
	assert_int_equal(pr->n_sample_type, 4);
	for (int i = 0; i < 4; i++) {
		assert_string_equal(str_of(pr, pr->sample_type[i]->type), types[i][0]);
		assert_string_equal(str_of(pr, pr->sample_type[i]->unit), types[i][1]);
	}
	assert_string_equal(str_of(pr, pr->default_sample_type), "inuse_space");
	assert_int_equal(pr->time_nanos, 1700000000000000000ll);
	assert_int_equal(pr->duration_nanos, 1500000000ll);
	assert_int_equal(pr->period, 1);

	int found = 0;
	for (size_t i = 0; i < pr->n_sample; i++) {
		const Perftools__Profiles__Sample *s = pr->sample[i];
		int pid_ok = 0;
		for (size_t j = 0; j < s->n_label; j++)
			if (!strcmp(str_of(pr, s->label[j]->key), "pid") && s->label[j]->num == getpid())
				pid_ok = 1;
		assert_true(pid_ok);
		assert_int_equal(s->n_value, 4);
		assert_true(s->n_location_id > 0);
		/* The leaf is the caller of malloc: our wrappers are cut off. */
		if (strcmp(func_of_location(pr, s->location_id[0]), "test_alloc_site"))
			continue;
		found = 1;
		assert_int_equal(s->value[0], 3);
		assert_int_equal(s->value[1], 3000);
		assert_int_equal(s->value[2], 2);
		assert_int_equal(s->value[3], 2000);
		assert_true(s->n_location_id >= 2);
		assert_string_equal(func_of_location(pr, s->location_id[1]), "test_pprof_output");
	}
	assert_true(found);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	free(raw);
	t_free(site_blocks[0]);
	t_free(site_blocks[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_supported, teardown),
		cmocka_unit_test_teardown(test_poisson_small, teardown),
		cmocka_unit_test_teardown(test_poisson_mixed, teardown),
		cmocka_unit_test_teardown(test_large_exact, teardown),
		cmocka_unit_test_teardown(test_free_matching, teardown),
		cmocka_unit_test_teardown(test_free_other_thread, teardown),
		cmocka_unit_test_teardown(test_realloc_matching, teardown),
		cmocka_unit_test_teardown(test_aligned, teardown),
		cmocka_unit_test_teardown(test_calloc_overflow, teardown),
		cmocka_unit_test_teardown(test_oom_hook, teardown),
		cmocka_unit_test_teardown(test_recursion_guard, teardown),
		cmocka_unit_test_teardown(test_concurrent_write, teardown),
		cmocka_unit_test_teardown(test_cap_live, teardown),
		cmocka_unit_test_teardown(test_cap_stacks, teardown),
		cmocka_unit_test_teardown(test_start_stop, teardown),
		cmocka_unit_test_teardown(test_pprof_output, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
