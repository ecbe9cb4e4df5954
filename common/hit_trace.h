/*
 * Method-event hits as a Perfetto trace (docs/METHOD_EVENTS.md, "Perfetto
 * result"), written the same way by both producers: profilingd-perf for
 * native targets (runtime/perf/pf_trace.c) and the JVMTI agent for Java
 * ones (runtime/jvmti/jv_methods.c). Prefix htr_.
 *
 * The layout: a clock snapshot (BOOTTIME and the hits' clock), then on one
 * sequence the process's track (it clears the incremental state), a track
 * per thread (uuid (1 << 32) | tid, parent the process's uuid, the pid),
 * and one TYPE_INSTANT TrackEvent per hit on its thread's track.
 *
 * Why interning: a stack repeats across hits (a loop calls the method),
 * and thousands of hits of tens of frames written out each time would be
 * hundreds of MB. A stack is written once, with its first hit, as an
 * interned event name (its leaf function) and an interned debug
 * annotation string named "stack" (the frames, leaf first, one per line);
 * every later hit of it is ~30 bytes. Keeping all packets but the clock
 * snapshot on one sequence lets the redactor's per-sequence rules
 * (redact/rdc_perfetto.c) keep the interning with the app's tracks.
 *
 * Contract: calls return 0 or a negative errno (a failed write(2), or
 * -ENOMEM); after one fails the trace is cut short and the caller stops.
 * Memory: one packet buffer, grown to the largest packet (a stack's text,
 * bounded by the caller's text buffer). htr_free accepts NULL.
 */
#ifndef PD_HIT_TRACE_H
#define PD_HIT_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

struct htr {
	int fd;
	int32_t pid;
	uint32_t clock_id;  /* BuiltinClock of the hits' timestamps */
	uint8_t *buf;
	size_t cap;
	uint64_t bytes;     /* written so far */
	bool named;         /* the annotation name "stack" is interned */
};

/* Starts the trace on fd: the clock snapshot (CLOCK_BOOTTIME and clock,
 * which must be CLOCK_MONOTONIC or CLOCK_REALTIME, read now) and the
 * process's track, named pname when not NULL or empty. */
int htr_begin(struct htr *w, int fd, clockid_t clock, int32_t pid, const char *pname);
/* A thread's track; name may be NULL. Once per thread, before its hits. */
int htr_thread(struct htr *w, int32_t tid, const char *name);
/* One hit of thread tid at ts (the clock given to htr_begin). iid: its
 * stack's id (> 0), or 0 for a hit whose stack was lost ("method hit", no
 * annotation). On a stack's first hit pass its text (len bytes, leaf
 * first, '\n' between frames) and its leaf's name; later hits pass NULL. */
int htr_hit(struct htr *w, int32_t tid, uint64_t ts, uint64_t iid, const char *leaf,
	    const char *text, size_t len);

/* A recorded argument of a hit (docs/METHOD_EVENTS.md, "Arguments"): a
 * number, or a string that is not NUL-terminated (s, len; at most
 * HTR_ARG_STR_MAX bytes are written). Written as a debug annotation named
 * "arg<index>", not interned: values rarely repeat, and the redactor's
 * DLP rules look at each string where it stands. */
#define HTR_ARGS_MAX    6
#define HTR_ARG_STR_MAX 64
enum htr_arg_kind { HTR_ARG_INT, HTR_ARG_UINT, HTR_ARG_PTR, HTR_ARG_STR };
struct htr_arg {
	uint8_t index;          /* the parameter's position, 0..HTR_ARGS_MAX-1 */
	enum htr_arg_kind kind;
	union {
		int64_t i;      /* HTR_ARG_INT */
		uint64_t u;     /* HTR_ARG_UINT, HTR_ARG_PTR */
	} v;
	const char *s;          /* HTR_ARG_STR */
	size_t len;
};
/* htr_hit with up to HTR_ARGS_MAX arguments (nargs 0: htr_hit). */
int htr_hit_args(struct htr *w, int32_t tid, uint64_t ts, uint64_t iid, const char *leaf,
		 const char *text, size_t len, const struct htr_arg *args, size_t nargs);
/* Appends a frame's name to a stack's text (a '\n' before all but the
 * first): false when it does not fit, and the text is left as it was
 * (the outermost frames go: the leaf matters most). */
bool htr_text_add(char *text, size_t cap, size_t *len, const char *name);
void htr_free(struct htr *w);

#endif
