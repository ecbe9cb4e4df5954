/*
 * rdc: redaction of raw capture artifacts (docs/DESIGN.md §6). Each redactor
 * reads an untrusted artifact from in_fd and writes a redacted copy that
 * holds only the requesting app's data to out_fd. They run inside the
 * profilingd-redact child: no privileges, a seccomp allow-list, so they
 * may only read/write/lseek/close the fds they are given, allocate memory
 * and start threads (rdc_pprof's two; no open, no sockets, no process).
 *
 * Every redactor parses all of its input: an artifact that does not parse,
 * or that would produce an empty result, is refused (-EBADMSG), never
 * passed through. Memory is bounded by the caps of each format, not by the
 * input size, where the format allows streaming.
 *
 * Return: 0, -EBADMSG (malformed or unacceptable input), -E2BIG (a cap was
 * hit), -ENOMEM, or another -errno from I/O.
 */
#ifndef PD_RDC_H
#define PD_RDC_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Who the app is: its processes and, where known, their threads. */
struct rdc_policy {
	const int32_t *pids;   /* the app's processes (tgids) */
	size_t npids;
	const int32_t *tids;   /* the app's threads; may be empty */
	size_t ntids;
	const struct rdc_dlp *dlp; /* patterns to scrub from names, or NULL */
	const struct rdc_proc *proc; /* the heap formats' process metadata, or NULL */
	/* Perfetto: the kernel's stream is redacted on two threads, a chunk of
	 * this many bytes each at a time (rdc_perfetto.c); 0 is
	 * RDC_PF_CHUNK, SIZE_MAX one thread. Tests make it small. */
	size_t pf_chunk;
	/* Perfetto: every packet by protobuf-c, none by the wire paths (the
	 * kernel's bundles, the runtime's track events). They write the same
	 * bytes; fuzz_perfetto checks that against this. */
	bool pf_no_wire;
};
#define RDC_PF_CHUNK (1u << 20)
/* Below this address-space cap (RLIMIT_AS, from [redact] max_memory_bytes)
 * profilingd-redact keeps a trace on one thread: the other two may take
 * up to ~170 MiB more (two 64 MiB unpack budgets, two 16 MiB held outputs,
 * the chunks and stacks), which a cap set for one thread would not have. */
#define RDC_PF_THREADS_AS (512ull << 20)

/*
 * The captured process as the daemon read it when the capture started
 * (issue #20): the heap formats write it as upstream's process metadata.
 * It is the app's own (its /proc/<pid>/cmdline, its uid), so keeping it
 * names no one else. oom_tid is a number the runtime reported (the OS tid
 * of the thread whose Java allocation failed): untrusted, only ever
 * compared with the dump's own thread ids, never used as an index.
 */
#define RDC_CMDLINE_MAX 1024 /* bytes of cmdline kept; the daemon cuts it */
struct rdc_proc {
	bool has_uid;
	uint32_t uid;
	const char *cmdline; /* NUL-separated arguments, as in /proc */
	size_t cmdline_len;  /* <= RDC_CMDLINE_MAX */
	uint32_t oom_tid;    /* 0: the dump was not caused by an OOM */
};

struct rdc_stats {
	uint64_t in_bytes, out_bytes;
	uint64_t kept, dropped;    /* samples, packets or records */
	uint64_t anonymised;       /* kept but stripped of identity */
	uint64_t scrubbed;         /* strings changed by DLP rules */
};

/* A file in_fd is read twice, from its current offset to its end, never
 * whole in memory; a pipe is read whole first (up to the 256 MiB input
 * cap). Output gzip'd, at Z_BEST_SPEED. Inflating and deflating run on
 * two threads of its own, joined before it returns. */
int rdc_pprof(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st);
/*
 * in_fd: the runtime's trace, the app's word only: kernel-origin packets
 * (ftrace_events, process_tree) in it are dropped, whatever their sequence.
 * kernel_fd: the kernel's stream from the daemon's own helper
 * (profilingd-ftrace), or -1; the only source of sched data and of the
 * forks that widen the app to its children. Read first, then in_fd.
 */
int rdc_perfetto(int in_fd, int kernel_fd, int out_fd, const struct rdc_policy *p,
		 struct rdc_stats *st);
/* in_fd must be seekable (two passes: class layouts, then the rewrite). */
int rdc_hprof(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st);

/*
 * Heap formats (issue #20), converters to Perfetto; both write a Trace of
 * TracePackets (docs/PERFETTO.md, "Heap formats").
 * rdc_heapgraph: an HPROF heap dump (read whole, up to 1 GiB) -> heap
 * graph packets for p->pids[0], no field values by construction.
 * rdc_heapgraph_buf: the same over a buffer (tests, fuzzing, bench).
 */
int rdc_heapgraph(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st);
int rdc_heapgraph_buf(const uint8_t *in, size_t n, int out_fd, int32_t pid,
		      const struct rdc_proc *proc, struct rdc_stats *st);
/*
 * rdc_heapprofile: a gzip'd pprof heap profile (the native agent's or the
 * JVMTI agent's) -> one ProfilePacket with ProcessHeapSamples, as
 * heapprofd writes it. Samples are kept by the pprof redactor's rule (a
 * "pid" label naming the app, or none); kernel frames are dropped.
 */
int rdc_heapprofile(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st);

/* A crash ring dump of the app's flight recorder -> a Perfetto trace. */
int rdc_ringdump(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st);

/* True if pid (or tid) belongs to the app. */
int rdc_is_app_pid(const struct rdc_policy *p, int32_t pid);
int rdc_is_app_tid(const struct rdc_policy *p, int32_t tid);

/* A redactor's own thread with a stack of stack bytes: the redactors run
 * under RLIMIT_AS, which the default 8 MiB stack would take from. 0 or
 * -errno. */
int rdc_thread_start(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg);

/* ---- DLP: POSIX extended regexes scrubbed from names and annotations. */

#define RDC_DLP_MAX 32            /* patterns */
#define RDC_DLP_REPLACEMENT "[redacted]"

struct rdc_dlp;
/* Built-in patterns: e-mail, IPv4, hex tokens of 32+ digits. */
extern const char *const rdc_dlp_builtin[];
extern const size_t rdc_dlp_builtin_count;
int rdc_dlp_compile(const char *const *patterns, size_t n, struct rdc_dlp **out);
void rdc_dlp_free(struct rdc_dlp *d);
/*
 * Copy in to out (outsz bytes, NUL-terminated, truncated if need be) with
 * every match replaced by RDC_DLP_REPLACEMENT. *changed (may be NULL) is
 * set to 1 if anything was replaced. d NULL copies unchanged. 0 or -errno.
 */
int rdc_dlp_scrub(const struct rdc_dlp *d, const char *in, char *out, size_t outsz,
		  int *changed);

#endif
