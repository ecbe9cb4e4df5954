/*
 * Native heap profiler of the in-process runtime agent (docs/HEAP.md).
 *
 * heap.c defines malloc, free, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc, memalign, valloc and pvalloc; whatever
 * shared object carries it (libprofiling.so, libprofiling_preload.so)
 * interposes them on libc's for the whole process and forwards to glibc's
 * __libc_* entry points. Allocations are sampled by bytes, Poisson style as
 * in heapprofd: every thread draws its next sample point from an
 * exponential distribution whose mean is the interval. A sampled
 * allocation smaller than the interval stands for interval x (sample
 * points it crossed) bytes; one of at least the interval is always taken
 * at its true size. Sampled allocations keep their stack (libunwind) until
 * they are freed.
 *
 * Cost: when no capture runs, one relaxed atomic load and a branch per
 * call. While capturing, an unsampled allocation costs a per-thread
 * countdown, and a free one probe of a 256 KiB bitmap.
 *
 * Caps (past them the sample is counted in heap_stats.dropped):
 * HEAP_MAX_STACKS distinct stacks (the sample is lost); HEAP_MAX_LIVE live
 * sampled allocations (the sample counts in alloc_* but not in inuse_*);
 * HEAP_MAX_FRAMES frames per stack (deeper stacks lose their root end).
 *
 * The API is for the agent thread (and the preload constructor); one
 * caller at a time.
 */
#ifndef PD_HEAP_H
#define PD_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define HEAP_DEFAULT_INTERVAL 4096u
#define HEAP_MAX_FRAMES 64
#define HEAP_MAX_STACKS 65536u
#define HEAP_MAX_LIVE   (1u << 20)

struct heap_stats {
	uint64_t samples;   /* sampled allocations seen in the capture */
	uint64_t live;      /* of which still allocated at the end */
	uint64_t dropped;   /* samples past a cap */
	uint32_t interval;  /* bytes */
};

/* Start sampling; 0 means HEAP_DEFAULT_INTERVAL. -EBUSY if running. Resets the tables. */
int heap_start(uint32_t interval_bytes);
/* Stop sampling new allocations; frees are still matched until write or discard. */
void heap_stop(void);
/*
 * Write a gzip'd pprof of the tables to fd and release them: sample types
 * alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 * inuse_space/bytes (the default), a numeric "pid" label on every sample,
 * symbolised functions. Stops sampling first. -EINVAL when there are no
 * tables (never started, or already written). 0 or -errno.
 */
int heap_write_pprof(int fd, int64_t start_ns, int64_t duration_ns,
		     struct heap_stats *st, uint64_t *bytes);
/* Stop and drop the tables without writing (a cancelled capture). */
void heap_discard(void);
/*
 * fn(size) runs when the real allocator returns NULL: on the failing
 * thread, outside any profiler lock, never nested in itself, never for a
 * failure of the profiler's own allocations; errno is kept. NULL removes it.
 */
void heap_set_oom_hook(void (*fn)(size_t size));
/* 1 while sampling new allocations. */
int heap_active(void);
/*
 * 1 when this copy's malloc is the one the process uses, so captures see
 * its allocations (0 under a sanitizer, or when another interposer, e.g.
 * the preload library next to libprofiling.so, comes first).
 */
int heap_supported(void);

/* Running totals of the current tables (estimates, like the profile). */
struct heap_totals {
	uint64_t alloc_objects, alloc_space, inuse_objects, inuse_space;
	uint64_t samples, live, dropped, stacks;
};
void heap_get_totals(struct heap_totals *t);

/* Lower the caps for the next heap_start (tests); 0 keeps the default. */
void heap_set_limits(uint32_t max_stacks, uint32_t max_live);

#ifdef HEAP_NO_INTERPOSE
/*
 * Built without interposition (sanitizer builds): the same entry points
 * under these names, forwarding to the plain libc functions.
 */
void *heap_malloc(size_t n);
void heap_free(void *p);
void *heap_calloc(size_t nmemb, size_t size);
void *heap_realloc(void *p, size_t n);
void *heap_reallocarray(void *p, size_t nmemb, size_t size);
int heap_posix_memalign(void **out, size_t align, size_t n);
void *heap_aligned_alloc(size_t align, size_t n);
void *heap_memalign(size_t align, size_t n);
void *heap_valloc(size_t n);
void *heap_pvalloc(size_t n);
#endif

#endif
