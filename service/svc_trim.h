/*
 * Hand the kernel back the library and program text that the daemon ran
 * once and will not run again soon (issue #18).
 *
 * Most of an idle daemon's resident set is file-backed: pages of libc,
 * SQLite, libevent and its own binary, mapped while it parsed its config,
 * checked and migrated its schemas, compiled its seccomp filter, or took
 * a burst of registrations, each fault mapping the 64 KiB around it (the
 * kernel's fault-around). They are clean copies of files in the page
 * cache. svc_trim_text unmaps them from this process (MADV_DONTNEED);
 * what the loop runs later is mapped again on first use, from the page
 * cache. They stay in the page cache: what goes is this process's claim
 * on them, which the kernel's reclaim would otherwise weigh as in use.
 *
 * What it touches, and why that is safe: only private mappings of a file
 * that are not writable and hold no anonymous page, in memory or swapped
 * out, i.e. whose every page still equals the file. A relocated
 * read-only segment (RELRO) holds anonymous pages and is left alone, as
 * is anything writable, the heap, stacks, shared mappings and mappings
 * of no file. Contents read the same after the call; only residency
 * changes. The daemon has one thread, so no mapping changes between the
 * read of smaps and the madvise.
 *
 * The cost: the first run of a path after a trim takes a minor fault per
 * 64 KiB it touches (a few microseconds each while the file is cached; a
 * read from disk when memory pressure has evicted it, as after the
 * kernel's own reclaim).
 *
 * When: svc_trim_init trims once (the end of start-up), then reads
 * /proc/self/statm every SVC_TRIM_CHECK_S seconds and trims again when
 * the loop has gone quiet after a burst ran code it does not run while
 * quiet (svc_trim_step). A steady loop's own paths come back once and
 * set the level to compare with, so they are not trimmed over and over:
 * at most two trims per burst (the second when the level is up again at
 * the first quiet check after the first: another burst, or the loop's
 * own paths). A trim reads smaps and makes one madvise per
 * mapping: 0.25-0.4 ms here. An app that alternates bursts of requests
 * with 10 s of quiet gets the daemon to trim at most once per two checks
 * (20 s), then pays the refaults of its own burst.
 *
 * Needs /proc/self/smaps and /proc/self/statm, open(2), read(2) and
 * madvise(2) (all in the daemon's seccomp policy).
 */
#ifndef PD_SVC_TRIM_H
#define PD_SVC_TRIM_H

struct event_base;

#define SVC_TRIM_CHECK_S 10
#define SVC_TRIM_SLACK_KIB 512
/* Grown by no more than one fault-around since the last check: quiet. */
#define SVC_TRIM_QUIET_KIB 64

/*
 * Unmap the resident pages of every mapping described above; *kib gets
 * the KiB they held (per /proc/self/smaps just before). 0, or -errno
 * when smaps cannot be read (*kib: what was unmapped before that). A
 * mapping madvise refuses is skipped.
 */
int svc_trim_text(long *kib);

/*
 * The check's state, and its step: cur is the file-backed resident KiB
 * now; returns true when the caller should trim now, after which it
 * calls svc_trim_trimmed with the level just after. Quiet means the
 * level grew by at most SVC_TRIM_QUIET_KIB since the last check (a level
 * that went down is quiet too). What a quiet loop maps back
 * after a trim made while quiet is its own paths: that level becomes
 * the floor, and only a level past the floor + SVC_TRIM_SLACK_KIB is
 * trimmed again. A burst may come between a trim and the next check, so
 * a level past the one just after the trim + slack is trimmed once more
 * before the floor is taken. The start-up trim teaches nothing, so
 * until a floor is known the level just after the last trim stands in
 * for it.
 */
struct svc_trim_state {
	long prev_kib;  /* at the last check; -1 before the first */
	long post_kib;  /* just after the last trim */
	long floor_kib; /* the quiet loop's own level; -1: not known */
	int learning;   /* 1: after a trim made while quiet; 2: after its second */
};
void svc_trim_start(struct svc_trim_state *s, long post_kib);
int svc_trim_step(struct svc_trim_state *s, long cur_kib);
void svc_trim_trimmed(struct svc_trim_state *s, long post_kib);

/* Trim now and arm the check. 0, or -errno (then nothing is armed). */
int svc_trim_init(struct event_base *base);

/* Disarm; safe when never armed. */
void svc_trim_fini(void);

#endif
