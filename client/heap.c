#define UNW_LOCAL_ONLY
#include "heap.h"

#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pprof.h"
#include "symbolize.h"

#define likely(x)   __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#ifdef HEAP_NO_INTERPOSE
#define HEAP_API(name) heap_##name
#define REAL(name) name
#else
#define HEAP_API(name) name
#define REAL(name) __libc_##name
/* glibc's own entry points: no dlsym(RTLD_NEXT) bootstrapping, no recursion. */
extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void *__libc_memalign(size_t align, size_t n);
extern void *__libc_valloc(size_t n);
extern void *__libc_pvalloc(size_t n);
#endif

/* Frames above the app's call site (our wrappers) that the unwinder sees. */
#define HEAP_SKIP_MAX 6
/*
 * The free() filter: 2^21 bits, one per 16-byte granule of a 32 MiB window
 * (addr >> 4, unhashed: neighbouring blocks share cache lines, and a heap
 * smaller than the window cannot alias at all). 256 KiB, so it stays in cache.
 */
#define HEAP_FILTER_BITS 21
#define HEAP_LIVE_MIN_BITS 12
/* The frame pool holds this many frames per stack on average. */
#define HEAP_POOL_FRAMES 32
/* Object counts are estimates: kept in 1/65536 of an object. */
#define HEAP_FX 16

struct heap_tls {
	uint64_t ctl;   /* heap_ctl the countdown was drawn for */
	int64_t left;   /* bytes to the next sample point */
	uint64_t rng;   /* xorshift64* state, 0 until seeded */
	int inside;     /* >0 while the profiler runs on this thread */
	int in_oom;
};

/* initial-exec: a TLS access must never call __tls_get_addr, which may malloc. */
static __thread struct heap_tls heap_tls __attribute__((tls_model("initial-exec")));

struct heap_live {
	uintptr_t addr;  /* 0: empty slot */
	uint64_t bytes;  /* attributed */
	uint64_t objs;   /* estimated objects << HEAP_FX */
	uint32_t stack;
	uint32_t pad;
};

struct heap_stack {
	uint64_t hash;
	uint64_t alloc_objs, alloc_space, inuse_objs, inuse_space;
	uint32_t frames;   /* offset into the pool */
	uint32_t nframes;
};

/* All mmap'd: the tables never use the allocator they watch. */
struct heap_tables {
	bool ready;
	uint32_t id, interval, max_stacks, max_live;
	struct heap_live *live;
	uint32_t live_bits, nlive;
	struct heap_stack *stacks;
	uint32_t nstacks;
	uint32_t *index;   /* stack index + 1; 0: empty */
	uint32_t index_bits;
	uint64_t *pool;
	uint32_t pool_used, pool_cap;
	uint64_t samples, dropped;
};

typedef _Atomic uint64_t heap_word;
typedef void (*heap_oom_cb)(size_t size);

/* gen << 32 | interval; 0 when not sampling. The one load of the hot path. */
static _Atomic uint64_t heap_ctl;
/*
 * "Maybe sampled" bits, read by free() without the lock; a bit is set while
 * its counter (how many live entries share it, under heap_lock) is not 0.
 * Mapped once and never unmapped, so a racing reader is always safe;
 * heap_filter_on is NULL while there are no tables to match against.
 */
static heap_word *heap_bits;
static uint8_t *heap_counts;
static _Atomic(heap_word *) heap_filter_on;
static _Atomic(heap_oom_cb) heap_oom_fn;

static pthread_mutex_t heap_lock = PTHREAD_MUTEX_INITIALIZER;     /* heap_tab */
static pthread_mutex_t heap_api_lock = PTHREAD_MUTEX_INITIALIZER; /* start/write/discard */
static pthread_once_t heap_once = PTHREAD_ONCE_INIT;
static struct heap_tables heap_tab;
static uint32_t heap_gen;
static uint32_t heap_lim_stacks, heap_lim_live;

/* ---- hashing */

static inline uint64_t heap_mix(uintptr_t a)
{
	return (uint64_t)(a >> 4) * 0x9e3779b97f4a7c15ull;
}

static inline uint32_t heap_slot(uintptr_t a, uint32_t bits)
{
	return (uint32_t)(heap_mix(a) >> (64 - bits));
}

static uint64_t heap_stack_hash(const uint64_t *ips, uint32_t n)
{
	uint64_t h = 0xcbf29ce484222325ull ^ n;
	for (uint32_t i = 0; i < n; i++) {
		h ^= ips[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 32;
	return h;
}

/* ---- the filter: writes under heap_lock, reads anywhere */

static inline uint32_t heap_fslot(uintptr_t a)
{
	return (uint32_t)(a >> 4) & ((1u << HEAP_FILTER_BITS) - 1);
}

/* One writer (under heap_lock): a load and a store, no read-modify-write needed. */
static void heap_bit_set(uint32_t s, bool on)
{
	heap_word *w = &heap_bits[s >> 6];
	uint64_t v = atomic_load_explicit(w, memory_order_relaxed);
	uint64_t m = 1ull << (s & 63);
	atomic_store_explicit(w, on ? v | m : v & ~m, memory_order_relaxed);
}

static void heap_filter_inc(uintptr_t a)
{
	uint32_t s = heap_fslot(a);
	if (heap_counts[s] == 0)
		heap_bit_set(s, true);
	/* A saturated counter sticks: frees there just take the slow path. */
	if (heap_counts[s] < UINT8_MAX)
		heap_counts[s]++;
}

static void heap_filter_dec(uintptr_t a)
{
	uint32_t s = heap_fslot(a);
	if (heap_counts[s] == 0 || heap_counts[s] == UINT8_MAX)
		return;
	if (--heap_counts[s] == 0)
		heap_bit_set(s, false);
}

static void heap_filter_clear(void)
{
	/* Racing readers see old bits or zeroes; either is safe. */
	if (heap_bits) {
		madvise((void *)heap_bits, (size_t)1 << (HEAP_FILTER_BITS - 3), MADV_DONTNEED);
		madvise(heap_counts, (size_t)1 << HEAP_FILTER_BITS, MADV_DONTNEED);
	}
}

static inline int heap_maybe_live(const void *p)
{
	heap_word *f = atomic_load_explicit(&heap_filter_on, memory_order_relaxed);
	if (likely(f == NULL))
		return 0;
	uint32_t s = heap_fslot((uintptr_t)p);
	return (atomic_load_explicit(&f[s >> 6], memory_order_relaxed) >> (s & 63)) & 1;
}

/* ---- tables */

static void *heap_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void heap_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

static uint32_t heap_log2_ceil(uint64_t v)
{
	uint32_t b = 0;
	while (((uint64_t)1 << b) < v)
		b++;
	return b;
}

static void heap_tables_free(struct heap_tables *t)
{
	heap_unmap(t->live, sizeof(*t->live) << t->live_bits);
	heap_unmap(t->stacks, sizeof(*t->stacks) * t->max_stacks);
	heap_unmap(t->index, sizeof(*t->index) << t->index_bits);
	heap_unmap(t->pool, sizeof(*t->pool) * t->pool_cap);
	memset(t, 0, sizeof(*t));
}

static int heap_tables_new(struct heap_tables *t, uint32_t interval, uint32_t id)
{
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->interval = interval;
	t->max_stacks = heap_lim_stacks ? heap_lim_stacks : HEAP_MAX_STACKS;
	t->max_live = heap_lim_live ? heap_lim_live : HEAP_MAX_LIVE;
	t->live_bits = HEAP_LIVE_MIN_BITS;
	t->index_bits = heap_log2_ceil(2 * (uint64_t)t->max_stacks);
	t->pool_cap = t->max_stacks * HEAP_POOL_FRAMES;
	/* MAP_NORESERVE: only the pages the capture touches get committed. */
	t->live = heap_map(sizeof(*t->live) << t->live_bits);
	t->stacks = heap_map(sizeof(*t->stacks) * t->max_stacks);
	t->index = heap_map(sizeof(*t->index) << t->index_bits);
	t->pool = heap_map(sizeof(*t->pool) * t->pool_cap);
	if (!t->live || !t->stacks || !t->index || !t->pool) {
		heap_tables_free(t);
		return -ENOMEM;
	}
	t->ready = true;
	return 0;
}

static int heap_stack_get(struct heap_tables *t, uint64_t h, const uint64_t *ips, uint32_t n,
			  uint32_t *out)
{
	uint32_t mask = (1u << t->index_bits) - 1;

	/* The index is at least twice max_stacks: probing always ends. */
	for (uint32_t i = (uint32_t)(h >> (64 - t->index_bits));; i = (i + 1) & mask) {
		uint32_t v = t->index[i];
		if (!v) {
			if (t->nstacks >= t->max_stacks || t->pool_cap - t->pool_used < n)
				return -ENOSPC;
			struct heap_stack *s = &t->stacks[t->nstacks];
			s->hash = h;
			s->frames = t->pool_used;
			s->nframes = n;
			memcpy(&t->pool[t->pool_used], ips, n * sizeof(*ips));
			t->pool_used += n;
			t->index[i] = ++t->nstacks;
			*out = t->nstacks - 1;
			return 0;
		}
		const struct heap_stack *s = &t->stacks[v - 1];
		if (s->hash == h && s->nframes == n &&
		    memcmp(&t->pool[s->frames], ips, n * sizeof(*ips)) == 0) {
			*out = v - 1;
			return 0;
		}
	}
}

static struct heap_live *heap_live_find(struct heap_tables *t, uintptr_t a)
{
	uint32_t mask = (1u << t->live_bits) - 1;

	for (uint32_t i = heap_slot(a, t->live_bits);; i = (i + 1) & mask) {
		struct heap_live *e = &t->live[i];
		if (e->addr == a)
			return e;
		if (!e->addr)
			return NULL;
	}
}

static void heap_live_put(struct heap_tables *t, const struct heap_live *e)
{
	uint32_t mask = (1u << t->live_bits) - 1;
	uint32_t i = heap_slot(e->addr, t->live_bits);

	while (t->live[i].addr)
		i = (i + 1) & mask;
	t->live[i] = *e;
	t->nlive++;
}

/* Linear probing without tombstones: shift later entries back into the hole. */
static void heap_live_remove(struct heap_tables *t, struct heap_live *e)
{
	uint32_t mask = (1u << t->live_bits) - 1;
	uint32_t i = (uint32_t)(e - t->live), j = i;

	for (;;) {
		j = (j + 1) & mask;
		if (!t->live[j].addr)
			break;
		uint32_t k = heap_slot(t->live[j].addr, t->live_bits);
		/* Entry j may stay if its home slot k lies cyclically in (i, j]. */
		if (i <= j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->live[i] = t->live[j];
		i = j;
	}
	memset(&t->live[i], 0, sizeof(t->live[i]));
	t->nlive--;
}

/* Room for one more live entry, doubling the table past half full. */
static int heap_live_room(struct heap_tables *t)
{
	if (t->nlive >= t->max_live)
		return -ENOSPC;
	if ((uint64_t)(t->nlive + 1) * 2 <= (1ull << t->live_bits))
		return 0;
	struct heap_tables g = *t;
	g.live_bits = t->live_bits + 1;
	g.live = heap_map(sizeof(*g.live) << g.live_bits);
	if (!g.live)
		return -ENOMEM;
	g.nlive = 0;
	for (uint32_t i = 0; i < (1u << t->live_bits); i++)
		if (t->live[i].addr)
			heap_live_put(&g, &t->live[i]);
	heap_unmap(t->live, sizeof(*t->live) << t->live_bits);
	t->live = g.live;
	t->live_bits = g.live_bits;
	return 0;
}

static void heap_untrack_entry(struct heap_tables *t, struct heap_live *e)
{
	struct heap_stack *s = &t->stacks[e->stack];
	s->inuse_objs -= e->objs;
	s->inuse_space -= e->bytes;
	heap_filter_dec(e->addr);
	heap_live_remove(t, e);
}

static void heap_track_entry(struct heap_tables *t, const struct heap_live *e)
{
	struct heap_stack *s = &t->stacks[e->stack];
	s->inuse_objs += e->objs;
	s->inuse_space += e->bytes;
	heap_filter_inc(e->addr);
	heap_live_put(t, e);
}

/* ---- sampling */

static void heap_seed(struct heap_tls *t)
{
	struct timespec ts;

	if (t->rng)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t x = (uint64_t)syscall(SYS_gettid) * 0x9e3779b97f4a7c15ull ^
		     (uint64_t)(uintptr_t)t ^ ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec;
	/* splitmix64 finaliser: neighbouring tids get unrelated streams. */
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	t->rng = x ? x : 1;
}

/* Bytes to the next sample point: exponential with mean interval. */
static int64_t heap_draw(struct heap_tls *t, uint32_t interval)
{
	uint64_t x = t->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	t->rng = x;
	double u = (double)(((x * 0x2545f4914f6cdd1dull) >> 11) + 1) * 0x1p-53; /* (0, 1] */
	/* +1: never zero, as heapprofd's geometric approximation does. */
	return (int64_t)(-log(u) * (double)interval) + 1;
}

/* The app's frames, leaf first: drop ours, which sit above the wrapper's return address. */
static uint32_t heap_backtrace(uint64_t *out, void *ra)
{
	void *ips[HEAP_MAX_FRAMES + HEAP_SKIP_MAX];
	int n = unw_backtrace(ips, HEAP_MAX_FRAMES + HEAP_SKIP_MAX);
	int skip = -1;

	for (int i = 0; i < n && i < HEAP_SKIP_MAX; i++) {
		if (ips[i] == ra) {
			skip = i;
			break;
		}
	}
	if (skip < 0) {
		/* The unwinder lost its way in our frames: keep the call site alone. */
		out[0] = (uint64_t)(uintptr_t)ra;
		return 1;
	}
	uint32_t k = 0;
	for (int i = skip; i < n && k < HEAP_MAX_FRAMES; i++)
		out[k++] = (uint64_t)(uintptr_t)ips[i];
	return k;
}

static void heap_record(void *p, size_t size, uint64_t bytes, const uint64_t *ips, uint32_t n)
{
	struct heap_tables *t = &heap_tab;
	struct heap_live e = { .addr = (uintptr_t)p, .bytes = bytes };
	uint64_t h = heap_stack_hash(ips, n); /* outside the lock */
	uint32_t si;

	/* interval x samples / size objects per sample: an unbiased count. */
	e.objs = bytes == size || size == 0
		? (uint64_t)1 << HEAP_FX
		: (uint64_t)((double)bytes / (double)size * (double)(1 << HEAP_FX));
	pthread_mutex_lock(&heap_lock);
	if (!t->ready)
		goto out;
	t->samples++;
	/* Still there: its free went behind our back. Forget the old one. */
	struct heap_live *old = heap_live_find(t, e.addr);
	if (old)
		heap_untrack_entry(t, old);
	if (heap_stack_get(t, h, ips, n, &si) < 0) {
		t->dropped++;
		goto out;
	}
	struct heap_stack *s = &t->stacks[si];
	s->alloc_objs += e.objs;
	s->alloc_space += bytes;
	if (heap_live_room(t) < 0) {
		t->dropped++; /* counted in alloc_*, but its free cannot be matched */
		goto out;
	}
	e.stack = si;
	heap_track_entry(t, &e);
out:
	pthread_mutex_unlock(&heap_lock);
}

/* A countdown crossed zero (or is stale, or the allocation is large). */
__attribute__((noinline)) static void heap_slow(uint64_t ctl, void *p, size_t n, void *ra)
{
	struct heap_tls *t = &heap_tls;
	uint32_t interval = (uint32_t)ctl;
	uint64_t bytes;

	if (t->inside)
		return;
	if (t->ctl != ctl) {
		/* First allocation of this thread in this capture. */
		heap_seed(t);
		t->ctl = ctl;
		t->left = heap_draw(t, interval);
		if (n < interval && (t->left -= (int64_t)n) > 0)
			return;
	}
	if (n >= interval) {
		/* Large ones are always taken, at their size, outside the countdown. */
		bytes = n;
	} else {
		uint64_t k = 0;
		while (t->left <= 0) {
			t->left += heap_draw(t, interval);
			k++;
		}
		bytes = k * interval;
	}
	int saved_errno = errno;
	int64_t left = t->left;
	uint64_t ips[HEAP_MAX_FRAMES];
	/* What the unwinder allocates is ours: never sampled, never counted. */
	t->inside++;
	uint32_t nf = heap_backtrace(ips, ra);
	heap_record(p, n, bytes, ips, nf);
	t->inside--;
	t->left = left;
	errno = saved_errno;
}

static inline __attribute__((always_inline)) void heap_on_alloc(void *p, size_t n, void *ra)
{
	uint64_t ctl = atomic_load_explicit(&heap_ctl, memory_order_relaxed);

	if (likely(!ctl))
		return;
	struct heap_tls *t = &heap_tls;
	if (likely(t->ctl == ctl && n < (uint32_t)ctl) && likely((t->left -= (int64_t)n) > 0))
		return;
	heap_slow(ctl, p, n, ra);
}

__attribute__((noinline, cold)) static void heap_untrack(void *p)
{
	/* NULL shares its bit with a block 32 MiB-aligned: checked here, off the hot path. */
	if (!p)
		return;
	pthread_mutex_lock(&heap_lock);
	if (heap_tab.ready) {
		struct heap_live *e = heap_live_find(&heap_tab, (uintptr_t)p);
		if (e)
			heap_untrack_entry(&heap_tab, e);
	}
	pthread_mutex_unlock(&heap_lock);
}

/* realloc: take the old entry out before the block can be reused. */
static bool heap_take(void *p, struct heap_live *out, uint32_t *tabid)
{
	bool found = false;

	pthread_mutex_lock(&heap_lock);
	if (heap_tab.ready) {
		struct heap_live *e = heap_live_find(&heap_tab, (uintptr_t)p);
		if (e) {
			*out = *e;
			*tabid = heap_tab.id;
			heap_untrack_entry(&heap_tab, e);
			found = true;
		}
	}
	pthread_mutex_unlock(&heap_lock);
	return found;
}

/* A failed realloc leaves the old block in place: so is its entry. */
static void heap_put_back(const struct heap_live *e, uint32_t tabid)
{
	pthread_mutex_lock(&heap_lock);
	if (heap_tab.ready && heap_tab.id == tabid && !heap_live_find(&heap_tab, e->addr) &&
	    heap_live_room(&heap_tab) == 0)
		heap_track_entry(&heap_tab, e);
	pthread_mutex_unlock(&heap_lock);
}

__attribute__((noinline, cold)) static void heap_oom(size_t n)
{
	heap_oom_cb fn = atomic_load_explicit(&heap_oom_fn, memory_order_acquire);
	struct heap_tls *t;

	if (!fn)
		return;
	t = &heap_tls;
	if (t->inside || t->in_oom)
		return;
	int saved_errno = errno;
	t->in_oom = 1;
	fn(n);
	t->in_oom = 0;
	errno = saved_errno;
}

/* ---- the interposers */

void *HEAP_API(malloc)(size_t n)
{
	void *p = REAL(malloc)(n);
	if (unlikely(!p))
		heap_oom(n);
	else
		heap_on_alloc(p, n, __builtin_return_address(0));
	return p;
}

void HEAP_API(free)(void *p)
{
	if (unlikely(heap_maybe_live(p)))
		heap_untrack(p);
	REAL(free)(p);
}

void *HEAP_API(calloc)(size_t nmemb, size_t size)
{
	size_t n;

	if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	void *p = REAL(calloc)(nmemb, size);
	if (unlikely(!p))
		heap_oom(n);
	else
		heap_on_alloc(p, n, __builtin_return_address(0));
	return p;
}

static inline __attribute__((always_inline)) void *heap_realloc_ra(void *old, size_t n, void *ra)
{
	struct heap_live e;
	uint32_t tabid = 0;
	bool had = old && heap_maybe_live(old) && heap_take(old, &e, &tabid);

	void *p = REAL(realloc)(old, n);
	if (unlikely(!p)) {
		/* glibc: realloc(p, 0) frees p and returns NULL; that is no failure. */
		if (old && n == 0)
			return NULL;
		if (had)
			heap_put_back(&e, tabid);
		heap_oom(n);
		return NULL;
	}
	heap_on_alloc(p, n, ra);
	return p;
}

void *HEAP_API(realloc)(void *old, size_t n)
{
	return heap_realloc_ra(old, n, __builtin_return_address(0));
}

void *HEAP_API(reallocarray)(void *old, size_t nmemb, size_t size)
{
	size_t n;

	if (unlikely(__builtin_mul_overflow(nmemb, size, &n))) {
		errno = ENOMEM;
		return NULL;
	}
	return heap_realloc_ra(old, n, __builtin_return_address(0));
}

static inline __attribute__((always_inline)) void *heap_aligned(size_t align, size_t n, void *ra)
{
	void *p = REAL(memalign)(align, n);
	if (unlikely(!p))
		heap_oom(n);
	else
		heap_on_alloc(p, n, ra);
	return p;
}

int HEAP_API(posix_memalign)(void **out, size_t align, size_t n)
{
	if (align == 0 || align % sizeof(void *) != 0 || (align & (align - 1)) != 0)
		return EINVAL;
	void *p = heap_aligned(align, n, __builtin_return_address(0));
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *HEAP_API(aligned_alloc)(size_t align, size_t n)
{
	return heap_aligned(align, n, __builtin_return_address(0));
}

void *HEAP_API(memalign)(size_t align, size_t n)
{
	return heap_aligned(align, n, __builtin_return_address(0));
}

void *HEAP_API(valloc)(size_t n)
{
	void *p = REAL(valloc)(n);
	if (unlikely(!p))
		heap_oom(n);
	else
		heap_on_alloc(p, n, __builtin_return_address(0));
	return p;
}

void *HEAP_API(pvalloc)(size_t n)
{
	void *p = REAL(pvalloc)(n);
	if (unlikely(!p))
		heap_oom(n);
	else
		heap_on_alloc(p, n, __builtin_return_address(0));
	return p;
}

/* ---- control, from the agent thread */

static int64_t heap_enter(void)
{
	heap_tls.inside++;
	return heap_tls.left;
}

static void heap_leave(int64_t left)
{
	heap_tls.left = left;
	heap_tls.inside--;
}

static void heap_fork_prepare(void)
{
	pthread_mutex_lock(&heap_lock);
}

static void heap_fork_parent(void)
{
	pthread_mutex_unlock(&heap_lock);
}

/* The child has no agent thread to ask for its profile: stop there. */
static void heap_fork_child(void)
{
	atomic_store(&heap_ctl, 0);
	atomic_store(&heap_filter_on, NULL);
	heap_tables_free(&heap_tab);
	pthread_mutex_unlock(&heap_lock);
}

static void heap_init_once(void)
{
	heap_bits = heap_map((size_t)1 << (HEAP_FILTER_BITS - 3));
	heap_counts = heap_map((size_t)1 << HEAP_FILTER_BITS);
	pthread_atfork(heap_fork_prepare, heap_fork_parent, heap_fork_child);
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
}

static void heap_detach(struct heap_tables *out)
{
	pthread_mutex_lock(&heap_lock);
	*out = heap_tab;
	memset(&heap_tab, 0, sizeof(heap_tab));
	atomic_store(&heap_filter_on, NULL);
	heap_filter_clear();
	pthread_mutex_unlock(&heap_lock);
}

int heap_start(uint32_t interval)
{
	struct heap_tables nt, old;
	int r = 0;

	if (interval == 0)
		interval = HEAP_DEFAULT_INTERVAL;
	if (interval > (1u << 30))
		return -EINVAL;
	pthread_mutex_lock(&heap_api_lock);
	int64_t left = heap_enter();
	if (atomic_load(&heap_ctl)) {
		r = -EBUSY;
		goto out;
	}
	pthread_once(&heap_once, heap_init_once);
	if (!heap_bits || !heap_counts) {
		r = -ENOMEM;
		goto out;
	}
	if (++heap_gen == 0)
		heap_gen = 1;
	if ((r = heap_tables_new(&nt, interval, heap_gen)) < 0)
		goto out;
	pthread_mutex_lock(&heap_lock);
	old = heap_tab;
	heap_tab = nt;
	heap_filter_clear();
	atomic_store(&heap_filter_on, heap_bits);
	pthread_mutex_unlock(&heap_lock);
	heap_tables_free(&old);
	/* libunwind's first use initialises global state: do it here, not in malloc. */
	void *ips[4];
	unw_backtrace(ips, 4);
	atomic_store_explicit(&heap_ctl, (uint64_t)heap_gen << 32 | interval, memory_order_release);
	LOG_D("heap sampling every %u bytes", interval);
out:
	heap_leave(left);
	pthread_mutex_unlock(&heap_api_lock);
	return r;
}

void heap_stop(void)
{
	atomic_store(&heap_ctl, 0);
}

int heap_active(void)
{
	return atomic_load_explicit(&heap_ctl, memory_order_relaxed) != 0;
}

void heap_discard(void)
{
	struct heap_tables t;

	pthread_mutex_lock(&heap_api_lock);
	int64_t left = heap_enter();
	heap_stop();
	heap_detach(&t);
	heap_tables_free(&t);
	heap_leave(left);
	pthread_mutex_unlock(&heap_api_lock);
}

void heap_set_oom_hook(void (*fn)(size_t size))
{
	atomic_store_explicit(&heap_oom_fn, fn, memory_order_release);
}

void heap_set_limits(uint32_t max_stacks, uint32_t max_live)
{
	pthread_mutex_lock(&heap_api_lock);
	heap_lim_stacks = max_stacks > HEAP_MAX_STACKS ? HEAP_MAX_STACKS : max_stacks;
	heap_lim_live = max_live > HEAP_MAX_LIVE ? HEAP_MAX_LIVE : max_live;
	pthread_mutex_unlock(&heap_api_lock);
}

#ifdef HEAP_NO_INTERPOSE
int heap_supported(void)
{
	return 0;
}
#else
static void heap_anchor(void)
{
}

int heap_supported(void)
{
	Dl_info a, b;
	int64_t left = heap_enter();
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	/* Our malloc is the process's when it lives in the same object as a static function. */
	int ok = m && dladdr(m, &a) && dladdr((void *)(uintptr_t)heap_anchor, &b) &&
		 a.dli_fbase == b.dli_fbase;
	heap_leave(left);
	return ok;
}
#endif

static uint64_t heap_fx_round(uint64_t v)
{
	return (v + ((uint64_t)1 << (HEAP_FX - 1))) >> HEAP_FX;
}

void heap_get_totals(struct heap_totals *out)
{
	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&heap_lock);
	const struct heap_tables *t = &heap_tab;
	uint64_t ao = 0, io = 0;
	for (uint32_t i = 0; i < t->nstacks; i++) {
		ao += t->stacks[i].alloc_objs;
		out->alloc_space += t->stacks[i].alloc_space;
		io += t->stacks[i].inuse_objs;
		out->inuse_space += t->stacks[i].inuse_space;
	}
	out->alloc_objects = heap_fx_round(ao);
	out->inuse_objects = heap_fx_round(io);
	out->samples = t->samples;
	out->live = t->nlive;
	out->dropped = t->dropped;
	out->stacks = t->nstacks;
	pthread_mutex_unlock(&heap_lock);
}

/* ---- pprof */

static int heap_emit(const struct heap_tables *t, int fd, int64_t start_ns, int64_t duration_ns,
		     uint64_t *dropped, uint64_t *bytes)
{
	struct pp_builder *b = NULL;
	struct sym_ctx *sym = NULL;
	uint64_t *mapids = NULL;
	char comment[128];
	int r;

	if ((r = pp_new(&b)) < 0)
		goto out;
	if ((r = pp_add_sample_type(b, "alloc_objects", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "alloc_space", "bytes")) < 0 ||
	    (r = pp_add_sample_type(b, "inuse_objects", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "inuse_space", "bytes")) < 0 ||
	    (r = pp_set_period(b, "space", "bytes", t->interval)) < 0 ||
	    (r = pp_set_default_sample_type(b, "inuse_space")) < 0)
		goto out;
	pp_set_time(b, start_ns, duration_ns);
	snprintf(comment, sizeof(comment),
		 "profilingd native heap: Poisson sampling every %u bytes, %llu dropped",
		 t->interval, (unsigned long long)t->dropped);
	pp_add_comment(b, comment);
	if ((r = sym_open(getpid(), &sym)) < 0)
		goto out;
	mapids = calloc((size_t)sym_module_count(sym) + 1, sizeof(*mapids));
	r = -ENOMEM;
	if (!mapids)
		goto out;
	/* pprof takes the first mapping for the main binary: the executable's goes first. */
	struct sym_frame exe;
	sym_lookup(sym, getauxval(AT_PHDR), &exe);
	if (exe.module >= 0 && (r = sym_pprof_mapping(b, sym, mapids, exe.module, true)) < 0)
		goto out;

	int64_t pid = getpid();
	for (uint32_t i = 0; i < t->nstacks; i++) {
		const struct heap_stack *s = &t->stacks[i];
		uint64_t locs[HEAP_MAX_FRAMES];
		uint32_t k;
		r = 0;
		for (k = 0; k < s->nframes && r == 0; k++) {
			/* Every frame is a return address (our wrapper was the leaf): look up the call. */
			r = sym_pprof_location(b, sym, mapids, t->pool[s->frames + k] - 1, &locs[k]);
		}
		int64_t vals[4] = {
			(int64_t)heap_fx_round(s->alloc_objs), (int64_t)s->alloc_space,
			(int64_t)heap_fx_round(s->inuse_objs), (int64_t)s->inuse_space,
		};
		/* The redactor keeps a sample by its pid label. */
		struct pp_label pl = { .key = "pid", .num = pid };
		if (r == 0)
			r = pp_add_sample(b, locs, s->nframes, vals, 4, &pl, 1);
		if (r == -ENOSPC) {
			(*dropped)++; /* past the pprof builder's caps */
			continue;
		}
		if (r < 0)
			goto out;
	}
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, bytes);
out:
	pp_free(b);
	sym_close(sym);
	free(mapids);
	return r;
}

int heap_write_pprof(int fd, int64_t start_ns, int64_t duration_ns,
		     struct heap_stats *st, uint64_t *bytes)
{
	struct heap_tables t;
	struct heap_stats local;
	int r;

	if (!st)
		st = &local;
	memset(st, 0, sizeof(*st));
	pthread_mutex_lock(&heap_api_lock);
	int64_t left = heap_enter();
	heap_stop();
	/* Detached, the tables are ours alone: symbolise without holding the lock. */
	heap_detach(&t);
	if (!t.ready) {
		r = -EINVAL;
		goto out;
	}
	st->samples = t.samples;
	st->live = t.nlive;
	st->dropped = t.dropped;
	st->interval = t.interval;
	r = heap_emit(&t, fd, start_ns, duration_ns, &st->dropped, bytes);
	LOG_D("heap profile: %llu samples, %llu live, %u stacks, %llu dropped: %d",
	      (unsigned long long)st->samples, (unsigned long long)st->live, t.nstacks,
	      (unsigned long long)st->dropped, r);
out:
	heap_tables_free(&t);
	heap_leave(left);
	pthread_mutex_unlock(&heap_api_lock);
	return r;
}
