/*
 * profilingd-perf internals: CPU stack samples of a process that has no
 * runtime agent, taken with perf_event_open (pf_events.c), unwound and
 * symbolised with libdw (pf_unwind.c), aggregated (pf_agg.c) and written as
 * gzip'd pprof (pf_output.c), or, for method events, as a Perfetto trace of
 * the hits (pf_trace.c). Design, registers and limits: docs/AGENTLESS.md,
 * docs/METHOD_EVENTS.md.
 */
#ifndef PD_PF_H
#define PD_PF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "nargs.h"

#define PF_MAX_EVENTS    1024     /* events (threads) open at once */
#define PF_MAX_TIDS      4096     /* threads remembered per capture */
#define PF_MAX_SAMPLES   200000   /* samples kept per capture; the rest are dropped */
#define PF_MAX_FRAMES    128      /* frames per sample */
#define PF_MAX_STACKS    65536    /* distinct (thread, stack) entries */
#define PF_MAX_ARENA     (1u << 21) /* frames stored for those entries (16 MiB) */
#define PF_MAX_MODULES   4096     /* ELF modules symbolised */
#define PF_STACK_BYTES   16384    /* user stack copied per sample */
#define PF_RESCAN_MS     100      /* how often new threads are looked for */
#define PF_MAX_HZ        1000
#define PF_MAX_DURATION_MS 600000u
#define PF_MAX_METHOD_DURATION_MS 86400000u /* --method: a config's longest expiry */

/*
 * Registers handed to the unwinder, in DWARF numbering (x86-64 psABI):
 * 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8-15 r8-r15,
 * 16 the return address column, which holds rip for the first frame.
 */
#define PF_NREGS      17
#define PF_DWARF_SP   7
#define PF_DWARF_PC   16

/* A frame that is a return address: symbolise pc - 1, the call itself. */
#define PF_FRAME_RET  (1ull << 63)
#define PF_FRAME_PC(f) ((f) & ~PF_FRAME_RET)

enum pf_unwinder { PF_UNW_DWARF = 0, PF_UNW_FP = 1 };

/* One PERF_RECORD_SAMPLE. The pointers point into the record. */
struct pf_sample {
	uint64_t id;                /* PERF_SAMPLE_IDENTIFIER (method events), else 0 */
	uint32_t pid, tid;
	uint64_t time_ns;
	uint64_t period;            /* CPU nanoseconds this sample stands for */
	const uint8_t *callchain;   /* u64s: the kernel's frame-pointer walk, with context markers */
	uint64_t ncallchain;
	bool has_regs;              /* false for a non-64-bit ABI or no user regs */
	uint64_t regs[PF_NREGS];    /* DWARF order, see above */
	const uint8_t *stack;       /* copy of the user stack from regs[PF_DWARF_SP] */
	uint64_t stack_size;        /* valid bytes in stack */
};

/* pf_events.c: perf events and their rings */

/* Bitmask of perf register numbers (asm/perf_regs.h); 0 on an unsupported arch. */
uint64_t pf_regs_mask(void);

/* A mapped ring: the metadata page, then size bytes of data (a power of two). */
struct pf_ring {
	void *meta;          /* struct perf_event_mmap_page */
	uint8_t *data;
	uint64_t size;
	bool ident;          /* samples start with PERF_SAMPLE_IDENTIFIER (method events) */
};

typedef void (*pf_sample_fn)(const struct pf_sample *s, void *arg);

struct pf_ring_stats {
	uint64_t samples;    /* records handed to the callback */
	uint64_t lost;       /* samples the kernel could not write (PERF_RECORD_LOST*) */
	uint64_t bad;        /* malformed records or a corrupt ring */
	uint64_t throttled;  /* PERF_RECORD_THROTTLE: the kernel slowed sampling */
};

/*
 * Parse one PERF_RECORD_SAMPLE of the layout pf_events asks for. 0, or
 * -EBADMSG when the record is shorter than its fields say.
 */
int pf_parse_sample(const uint8_t *rec, size_t len, struct pf_sample *out);
/* The same for method events' layout: ident says the record starts with
 * PERF_SAMPLE_IDENTIFIER (the event's id, which names its probe). */
int pf_parse_sample_ident(const uint8_t *rec, size_t len, bool ident, struct pf_sample *out);

/*
 * Hand every complete record between the ring's tail and head to fn (samples)
 * or to the stats, advancing the tail record by record so the kernel can
 * reuse the space. scratch holds one record that wraps (>= 65536 bytes).
 */
void pf_ring_drain(struct pf_ring *r, uint8_t *scratch, pf_sample_fn fn, void *arg,
		   struct pf_ring_stats *st);

struct pf_events;

/*
 * A method-event target for pf_events_open_uprobes: the file as a path the
 * kernel resolves at each open (the caller passes /proc/self/fd/N of a
 * file it opened as the target's user, so no other file can be named by
 * the time the kernel looks) and the function's file offset
 * (pf_elf_symbol_offset).
 */
#define PF_MAX_UPROBES 8
struct pf_uprobe {
	char path[40];
	uint64_t offset;
};

/*
 * Method events: per thread of pid, one uprobe event per target (all of a
 * thread's writing into one ring), a sample (stack, thread, time) every
 * `every`th hit (0 = every hit; the sample's period is `every`); with
 * limit > 0 each probe event writes at most limit samples, then the
 * kernel disables it (PERF_EVENT_IOC_REFRESH). Needs
 * CAP_PERFMON or CAP_SYS_ADMIN. 0, or a negative errno with why set.
 */
int pf_events_open_uprobes(pid_t pid, const struct pf_uprobe *up, unsigned nup, uint64_t every,
			   uint64_t limit, struct pf_events **out, char *why, size_t whylen);

/*
 * Open one event per thread of pid (hz samples per second of the thread's
 * CPU time). 0, or a negative errno with a reason in why (always set).
 */
int pf_events_open(pid_t pid, unsigned hz, struct pf_events **out, char *why, size_t whylen);
/* Open events for threads that appeared since the last scan. */
void pf_events_rescan(struct pf_events *ev);
/*
 * Wait up to timeout_ms for data and drain the rings that have some; close
 * events of threads that exited. Returns the number of events still open.
 */
int pf_events_poll(struct pf_events *ev, int timeout_ms, pf_sample_fn fn, void *arg);
/* Stop sampling, drain every ring, re-read thread names. */
void pf_events_stop(struct pf_events *ev, pf_sample_fn fn, void *arg);
/* Name of tid as last read from /proc ("" if unknown). */
const char *pf_events_comm(const struct pf_events *ev, uint32_t tid);
/* Method events: the hits the probes counted, of threads closed so far
 * (all of them after pf_events_stop). Exact even when samples were lost. */
uint64_t pf_events_hits(const struct pf_events *ev);
/*
 * Method events: the samples the probes closed so far overflowed into
 * (each event's count / every). The kernel reports samples it could not
 * write (PERF_RECORD_LOST) only with its next write to that ring, so a
 * burst that fills the ring at its end leaves them unreported: this minus
 * the samples drained is the exact number lost.
 */
uint64_t pf_events_expected(const struct pf_events *ev);
/* The same for target k alone (the order of pf_events_open_uprobes). */
uint64_t pf_events_probe_hits(const struct pf_events *ev, unsigned k);
/* The target (0..nup-1) whose probe wrote a sample of tid with this
 * PERF_SAMPLE_IDENTIFIER, or -1 (closed since, or not a probe's). */
int pf_events_probe_of(const struct pf_events *ev, uint32_t tid, uint64_t id);
/* Method events: PERF_EVENT_IOC_DISABLE on every probe at once (the
 * --max-hits cap); threads found later get none. Counts stay readable. */
void pf_events_disable(struct pf_events *ev);
/* Close target k's probe in every thread (its budget), counting its hits;
 * later threads do not get it. Returns the targets still probed. */
unsigned pf_events_close_probe(struct pf_events *ev, unsigned k);
/* Drain every ring, woken or not (what stays below the wakeup mark). */
void pf_events_drain(struct pf_events *ev, pf_sample_fn fn, void *arg);
void pf_events_stats(const struct pf_events *ev, struct pf_ring_stats *st,
		     unsigned *threads_seen, unsigned *threads_skipped);
void pf_events_close(struct pf_events *ev);

/* pf_unwind.c: libdw */

struct pf_unwind;

int pf_unwind_open(pid_t pid, struct pf_unwind **out);
/*
 * DWARF CFI unwinding over the sample's registers and stack copy. Writes at
 * most max frames, leaf first (PF_FRAME_RET marks return addresses).
 */
size_t pf_unwind_dwarf(struct pf_unwind *u, const struct pf_sample *s, uint64_t *frames,
		       size_t max);
/* The kernel's frame-pointer callchain, user part only, same encoding. */
size_t pf_unwind_fp(const struct pf_sample *s, uint64_t *frames, size_t max);
/* Re-read /proc/<pid>/maps if a pc fell outside every known module (dlopen). */
void pf_unwind_refresh(struct pf_unwind *u);

struct pf_module {
	uint64_t start, limit;
	const char *file;
	const char *build_id;     /* hex, or NULL */
};

struct pf_sym {
	int module;               /* index for pf_unwind_module, or -1 */
	const char *function;     /* NULL if unknown */
	const char *file;         /* source file, or NULL */
	int line;
};

/* Symbolise a frame as stored by the unwinders. */
void pf_unwind_symbolize(struct pf_unwind *u, uint64_t frame, struct pf_sym *out);
int pf_unwind_module(struct pf_unwind *u, int idx, struct pf_module *out);
/* The executable's module index (registering it), or -1. */
int pf_unwind_main_module(struct pf_unwind *u);
void pf_unwind_close(struct pf_unwind *u);

/* pf_elf.c: symbol -> file offset (libelf) */

/*
 * The file offset of function sym (defined, in .symtab, else .dynsym; a
 * versioned .dynsym name matches its name part) in the ELF file open at
 * fd: st_value - p_vaddr + p_offset of the executable PT_LOAD segment
 * holding it. 0, -ENOENT (no such function), -ENOEXEC (not ELF); why set.
 */
int pf_elf_symbol_offset(int fd, const char *sym, uint64_t *off, char *why, size_t whylen);
/* The GNU build id of fd's file as lower-case hex (n >= 2 * its bytes + 1):
 * 0, -ENOENT (none), -ENOEXEC (not ELF). */
int pf_elf_build_id(int fd, char *hex, size_t n);
/* 0 when off lies in an executable PT_LOAD segment of fd's file, else -ENOENT/-ENOEXEC. */
int pf_elf_check_offset(int fd, uint64_t off, char *why, size_t whylen);

/* pf_args.c: a hit's arguments (#args=TYPES) */

#define PF_MAX_ARGSETS 16384 /* distinct argument sets per capture (~7.5 MiB) */

struct pf_argval {
	uint8_t index;        /* the register's position, 0 (rdi) .. 5 (r9) */
	char kind;            /* 'i', 'u', 'p', 's' */
	uint8_t slen;         /* 's': bytes in s */
	uint8_t unreadable;   /* 's': the pointer could not be read */
	uint64_t v;           /* 'i', 'u', 'p': the register; 's': 0 */
	char s[NARGS_STR_MAX + 1]; /* 's': valid UTF-8, NUL-terminated */
};

/* A hit's arguments in register order; zero-filled past n (compared whole). */
struct pf_argset {
	uint8_t n;
	struct pf_argval a[NARGS_MAX];
};

/*
 * The arguments types asks for from sample s of pid (registers from its
 * REGS_USER, strings read from pid's memory: "<unreadable>" when the
 * pointer cannot be read, or when pidfd, pid's pidfd (-1: none), says it
 * exited by the end of the read, its pid maybe another's). 0, or -ENODATA
 * when the sample has no user registers (out is then empty).
 */
int pf_args_read(pid_t pid, int pidfd, const char *types, const struct pf_sample *s,
		 struct pf_argset *out);

struct pf_argtab;
int pf_argtab_new(struct pf_argtab **out);
/* The id (>= 1) of the set equal to a, added if new. -ENOSPC at
 * PF_MAX_ARGSETS sets: the caller counts the hit, does not record it. */
int pf_argtab_add(struct pf_argtab *t, const struct pf_argset *a, uint32_t *id);
/* The set of id, or NULL (id 0: no arguments). */
const struct pf_argset *pf_argtab_get(const struct pf_argtab *t, uint32_t id);
void pf_argtab_free(struct pf_argtab *t);

/* pf_agg.c: identical (thread, unwinder, stack) samples merged */

struct pf_agg;

struct pf_stack {
	uint32_t tid;
	int probe;                /* method events: the target (0..), else -1 */
	uint32_t args;            /* its argument set (pf_argtab), 0: none */
	enum pf_unwinder unwinder;
	const uint64_t *frames;
	size_t nframes;
	uint64_t count;
	uint64_t cpu_ns;
};

int pf_agg_new(struct pf_agg **out);
/* 0, or -ENOSPC at a cap (the caller counts the sample as dropped). */
int pf_agg_add(struct pf_agg *a, uint32_t tid, enum pf_unwinder unw, const uint64_t *frames,
	       size_t nframes, uint64_t cpu_ns);
/* The same with the method-event target that fired (-1: none) and its
 * argument set (pf_argtab id, 0: none) in the key. */
int pf_agg_add_probe(struct pf_agg *a, uint32_t tid, int probe, uint32_t args,
		     enum pf_unwinder unw, const uint64_t *frames, size_t nframes,
		     uint64_t cpu_ns);
/* The index (for pf_agg_get) of the entry the last successful pf_agg_add
 * created or counted in. */
size_t pf_agg_last(const struct pf_agg *a);
size_t pf_agg_size(const struct pf_agg *a);
void pf_agg_get(const struct pf_agg *a, size_t i, struct pf_stack *out);
void pf_agg_free(struct pf_agg *a);

/* pf_output.c: pprof */

struct pf_counts {
	uint64_t samples;    /* in the profile */
	uint64_t dwarf, fp;  /* by the unwinder used */
	uint64_t short_;     /* fewer than 2 frames */
	uint64_t empty;      /* no user frame at all: not in the profile */
	uint64_t dropped;    /* past a cap */
	uint64_t lost, bad, throttled;
	unsigned threads;    /* threads with samples in the profile */
	unsigned threads_seen, threads_skipped;
};

struct pmap;
struct pf_capture_info {
	pid_t pid;
	unsigned hz;
	int64_t start_ns;     /* CLOCK_REALTIME */
	int64_t duration_ns;
	const struct pmap *jit; /* the target's /tmp/perf-<pid>.map, or NULL */
	/* Method events (nmethods > 0): the targets as asked, the sampling
	 * step and the hits counted; the profile's values are then hits. */
	const char *const *methods;
	unsigned nmethods;
	uint64_t every, hits;
	/* --budget-us: the mean ns per recorded hit that went over budget_ns
	 * (0: not over, or no budget); the probes were removed then. */
	uint64_t over_budget_ns, budget_ns;
	/* Per target (nmethods of each): the mean ns of a target whose probe
	 * was closed over budget (0: not), and its own hits. */
	const uint64_t *over_k, *hits_k;
	/* --max-hits: the cap, and samples past it that were not recorded. */
	uint64_t max_hits, past_cap;
	/* #args: the argument sets the stacks name (NULL: none asked), and
	 * the hits not recorded because the table was full. */
	const struct pf_argtab *args;
	uint64_t args_dropped;
};

/* Write the gzip'd profile to fd. 0 or negative errno. */
int pf_output_write(int fd, const struct pf_capture_info *ci, const struct pf_agg *agg,
		    struct pf_unwind *u, const struct pf_events *ev, const struct pf_counts *c);

/* pf_trace.c: method events as a Perfetto trace (--format perfetto) */

/* One recorded hit: its CLOCK_MONOTONIC time, thread, pf_agg entry. */
struct pf_hit {
	uint64_t ts;
	uint32_t tid;
	uint32_t stack;
};

/* The hits in arrival order, at most PF_MAX_SAMPLES (past it: dropped++,
 * the hit is still counted by the probes but gets no event). */
struct pf_hits {
	struct pf_hit *v;
	size_t n, cap;
	uint64_t dropped;
};

/* 0, or -ENOSPC at the cap / -ENOMEM (dropped counted either way). */
int pf_hits_add(struct pf_hits *h, uint64_t ts, uint32_t tid, size_t stack);
void pf_hits_free(struct pf_hits *h);

/*
 * Write the hits as an uncompressed Perfetto trace to fd: a clock
 * snapshot, the process's and each thread's TrackDescriptor, and per hit
 * a TYPE_INSTANT TrackEvent on its thread's track named by the leaf
 * function, its stack an interned "stack" debug annotation (frames leaf
 * first, one a line). 0 or a negative errno.
 */
int pf_trace_write(int fd, const struct pf_capture_info *ci, const struct pf_agg *agg,
		   struct pf_unwind *u, const struct pf_events *ev, const struct pf_hits *hits);

#endif
