/*
 * CPU stack sampler of the in-process runtime agent. Every thread of the
 * process (but the caller) gets a POSIX timer on its own CPU clock that
 * delivers SIGPROF to that thread; the handler unwinds with libunwind into a
 * preallocated record array. The handler takes no lock and calls no malloc.
 * Each sample is weighted by 1 + the timer's overrun (si_overrun): CPU-clock
 * timers fire on scheduler ticks, so above the tick rate one signal stands
 * for several periods, and the profile's CPU total stays the process's CPU
 * time at any rate. The "samples" value counts signals, the "cpu" (or
 * "wall") value the periods they stand for.
 *
 * Caps: SMP_MAX_FRAMES frames per sample (deeper stacks are cut at the
 * root end), SMP_MAX_RECORDS samples per capture (later ones are counted as
 * dropped), SMP_MAX_THREADS timers (later threads are counted in
 * threads_skipped). One capture at a time per process.
 */
#ifndef PD_SAMPLER_H
#define PD_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#define SMP_MAX_FRAMES  64
#define SMP_MAX_RECORDS 32768
#define SMP_MAX_THREADS 1024

struct smp_stats {
	uint64_t samples;
	uint64_t dropped;
	uint32_t threads;
	uint32_t threads_skipped;
};

/*
 * Arm timers at hz for all current threads except the calling one: on each
 * thread's CPU clock, or with wall on CLOCK_MONOTONIC, so that blocked
 * threads are sampled too (hangs). A wall-clock signal interrupts a
 * blocking call; SA_RESTART restarts most, but sleeps return EINTR early.
 */
int smp_start(uint32_t hz, bool wall);
/* Arm timers for threads that appeared since; cheap, call every ~100 ms. */
int smp_rescan(void);
/* Disarm, wait for handlers in flight, restore the old SIGPROF action. */
void smp_stop(void);
/*
 * Aggregate and symbolise what was collected, and write gzip'd pprof to fd.
 * Releases the capture's buffers. 0 or -errno.
 */
int smp_write_pprof(int fd, int64_t start_ns, int64_t duration_ns,
		    struct smp_stats *stats, uint64_t *bytes);
/* Drop the buffers without writing (cancel). */
void smp_discard(void);

#endif
