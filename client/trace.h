/*
 * The trace flight recorder: prof_trace_begin/end/instant/counter write into
 * a per-thread ring that always runs, so a capture can include what
 * happened before it was asked for. Each ring is fixed-size and overwrites
 * its oldest events (counted as dropped): the ring buffer fill policy, the
 * default. A capture with buffer_fill_policy discard opens a discard window
 * (Android's meaning, as the kernel buffer's): each thread's ring then
 * starts at its first event in the window, keeps TRC_RING_EVENTS of them,
 * and drops the later ones, counted in trc_stats.discarded; the window's
 * snapshot holds no event from before it. Writers take no lock: a ring has
 * one writer, its thread; the snapshot copies it and keeps the newest run
 * of events it copied whole and in a row: where the writer lapped the copy,
 * the events before that point are dropped too, so a thread's events in a
 * snapshot have no gap (one would pair a begin with another's end). A
 * lapped copy is taken again from the new head, up to 3 tries in all.
 *
 * Caps: TRC_RING_EVENTS events per thread, TRC_MAX_RINGS rings (threads
 * past that record nothing and count in trc_stats.threads_skipped), names
 * of TRC_NAME_MAX - 1 bytes (longer ones are cut).
 */
#ifndef PD_TRACE_H
#define PD_TRACE_H

#include <stdint.h>

#include "trace_fmt.h"

#define TRC_RING_EVENTS TFMT_RING_EVENTS
#define TRC_MAX_RINGS TFMT_MAX_RINGS

struct trc_stats {
	uint64_t events, dropped;
	uint64_t discarded; /* in a discard window: events not written, the ring full */
	uint32_t threads, threads_skipped;
};

/*
 * Open and close a discard window (one at a time: the daemon runs one
 * capture per process). Until trc_discard_end, trc_snapshot writes the
 * window's events only. Both are a single atomic store.
 */
void trc_discard_begin(void);
void trc_discard_end(void);

/*
 * Write a Perfetto trace (a stream of TracePackets) of every ring's
 * current contents to fd: a process track, a thread track per ring, and
 * slices, instants and counters on them. Timestamps are CLOCK_BOOTTIME.
 */
int trc_snapshot(int fd, struct trc_stats *st, uint64_t *bytes);

/* Dump every ring to fd, raw; async-signal-safe (write() only). */
int trc_crash_dump(int fd);

#endif
