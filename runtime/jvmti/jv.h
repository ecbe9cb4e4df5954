/*
 * libprofiling_jvmti.so: the profilingd runtime agent for HotSpot JVMs
 * (docs/JVMTI.md). One agent thread (a JVMTI agent thread, so it may call
 * JNI and JVMTI) owns the runtime.sock connection, runs the stack sampler's
 * ticks and writes every artifact. Event callbacks (allocation samples, GC,
 * ResourceExhausted) run on JVM threads and only record into bounded tables.
 *
 * Module prefixes: jv_ (agent), jvs_ (stack sampler, GetStackTrace), jva_
 * (stack sampler, AsyncGetCallTrace from signals), jvh_ (heap profile),
 * jvg_ (GC ring), jvm_ (method names, shared by the pprof writers), jvv_
 * (HotSpot's VMStructs: the frame layout the signal sampler splices with),
 * jvy_ (ELF .symtab names for the native frames dladdr cannot name), jve_
 * (method events by bytecode injection), jvi_ (its class-file rewriter,
 * jv_inject.h).
 */
#ifndef PD_JV_H
#define PD_JV_H

#include <jvmti.h>
#include <stdbool.h>
#include <stdint.h>

struct pp_builder;

/* What the JVM granted (GetPotentialCapabilities, then AddCapabilities). */
struct jv_caps {
	bool line_numbers, source_files, thread_cpu;
	bool sampled_alloc, tag_objects, object_free;
	bool gc_events, resource_exhausted;
	bool compiled_load; /* CompiledMethodLoad: debug info at non-safepoint pcs */
	bool retransform;   /* RetransformClasses and every ClassFileLoadHook: method events */
	bool bytecodes;     /* GetBytecodes: checks that hooks are in, and out again */
};

extern jvmtiEnv *jv_jvmti;
extern struct jv_caps jv_caps;

/* ---- method names: jmethodID -> pprof function/location (jv_names.c) */

struct jvm_names;
/* jni: the calling thread's, for the local references it creates (may be NULL). */
int jvm_names_new(JNIEnv *jni, struct pp_builder *b, struct jvm_names **out);
void jvm_names_free(struct jvm_names *n);
/*
 * The pprof location of (method, bci): function "pkg.Class.method", file
 * from GetSourceFileName, line from GetLineNumberTable. A method that can no
 * longer be resolved (its class was unloaded) gets "(unknown)".
 */
int jvm_location(struct jvm_names *n, jmethodID m, jlocation bci, uint64_t *loc);
/* "Lpkg/Cls;" -> "pkg.Cls", "[B" -> "byte[]"; out always NUL-terminated. */
void jvm_class_name(const char *sig, char *out, size_t n);

/* ---- stack sampler (jv_stack.c), on the agent thread only */

#define JVS_MAX_FRAMES  128    /* frames per stack; deeper stacks are cut at the root end */
#define JVS_MAX_STACKS  16384  /* distinct (thread, stack) keys per capture; more: dropped */
#define JVS_MAX_THREADS 4096   /* threads tracked per capture; more: sampled unlabelled */

struct jvs_stats {
	uint64_t samples, dropped, ticks;
};

int jvs_start(JNIEnv *jni, uint32_t hz, bool wall, bool all_at_once);
/* One sampling tick: every (RUNNABLE and running) thread's stack. */
void jvs_tick(JNIEnv *jni);
int jvs_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns,
		    struct jvs_stats *st, uint64_t *bytes);
void jvs_discard(void);

/* ---- signal sampler with AsyncGetCallTrace (jv_async.c) */

#define JVA_RING        4096   /* samples between two drains (every 50 ms); more: dropped */
#define JVA_MAX_NATIVE  32     /* native frames above the top Java frame */
#define JVA_MAX_SPLICE  64     /* native frames below it, all runs together; more: cut */
#define JVA_MAX_RUNS    16     /* native runs below the top Java frame; deeper ones: left out */
#define JVA_RUN_FRAMES  24     /* frames of one such run */
#define JVA_SCAN_BYTES  (256 * 1024) /* stack searched for call stubs, from the interrupted sp */
#define JVA_MAX_RANGES  1024   /* executable file mappings the handler unwinds through */
#define JVA_AGCT_ERRORS 11     /* AGCT's codes 0 .. -10 (forte.cpp) */
#define JVA_DRAIN_NS    50000000ull
#define JVA_WALL_BUDGET 10000  /* wall clock: signals a second at most; more threads, longer interval */

/*
 * At setup: finds AsyncGetCallTrace in libjvm.so and, when it is there,
 * sets the ClassLoad, ClassPrepare, CompiledMethodLoad, ThreadStart and
 * ThreadEnd callbacks in cb. false: no AGCT (the GetStackTrace sampler only).
 * time_handler: measure the handler's CPU time (two system calls a sample)
 * for the debug log.
 */
bool jva_init(JavaVM *vm, jvmtiEventCallbacks *cb, bool time_handler);
/* At setup, after jva_init: whether the stacks get the C frames between
 * and below the Java segments (docs/JVMTI.md, "Mixed stacks"); use_vmstructs
 * false behaves as a VM without the tables (tests). */
bool jva_init_mixed(bool use_vmstructs);
bool jva_available(void);
/* After SetEventCallbacks: enable the events AGCT needs. 0 or -EIO. */
int jva_enable_events(void);
/* Allocate the jmethodIDs of every class loaded so far (once). */
int jva_prepare_loaded(void);
/* On the agent thread: arm a timer per thread (CPU clock, or wall). */
int jva_start(JNIEnv *jni, uint32_t hz, bool wall);
/* Every JVA_DRAIN_NS: move the handlers' samples into the stack table. */
void jva_tick(JNIEnv *jni);
/* Stops the timers, writes the gzip'd pprof, frees everything. */
int jva_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns,
		    struct jvs_stats *st, uint64_t *bytes);
void jva_discard(void);
/* From any thread (VMDeath): stop the timers and the handler; the agent
 * thread frees the rest. */
void jva_halt(void);

/* ---- HotSpot's layout from its VMStructs tables (jv_vmstructs.c) */

/* Where each member of a gHotSpotVMStructs / gHotSpotVMTypes row is. */
struct jvv_tables {
	const char *structs, *types;
	uint64_t type_name_off_s, field_name_off, is_static_off, offset_off, address_off;
	uint64_t struct_stride;
	uint64_t type_name_off, type_size_off, type_stride;
};

/* Byte offsets, each checked to lie inside its type's size. */
struct jvv_layout {
	bool ok;
	uint32_t stack_base, stack_size;      /* JavaThread: address, size_t */
	uint32_t thread_anchor;               /* JavaThread::_anchor (JavaFrameAnchor) */
	uint32_t last_sp, last_pc;            /* JavaFrameAnchor::_last_Java_sp/_pc */
	uint32_t wrapper_anchor;              /* JavaCallWrapper::_anchor */
	uint32_t thread_size, wrapper_size;
	const uintptr_t *call_stub_ret;       /* &StubRoutines::_call_stub_return_address */
	char missing[96];                     /* !ok: the first field not found or out of range */
};

/* Reads t into l: 0, or -ENOENT/-ERANGE with l->missing set (l->ok false). */
int jvv_parse(const struct jvv_tables *t, struct jvv_layout *l);
/* The running VM's tables (dlsym in libjvm.so); as jvv_parse. */
int jvv_read(struct jvv_layout *l);
/* The tables of the libjvm.so dlopen'ed as handle (tests); as jvv_parse. */
int jvv_read_from(void *handle, struct jvv_layout *l);

/* ---- function names from an ELF file's .symtab (jv_symtab.c), off the signal path */

#define JVY_MAX_SYMS   (1u << 20)        /* functions kept per file; more: unnamed */
#define JVY_MAX_STRTAB (64ull << 20)     /* a larger string table: the file is not read */

/* The image to parse: read(ctx, off, buf, n) fills buf or fails (<0). */
struct jvy_reader {
	int (*read)(void *ctx, uint64_t off, void *buf, size_t n);
	void *ctx;
	uint64_t size;
};

struct jvy_table;
/* The defined, sized functions of an ELF64 little-endian image's .symtab,
 * sorted. 0; -ENOENT (stripped, none); -ENOEXEC (malformed); -ENOMEM. */
int jvy_parse(const struct jvy_reader *r, struct jvy_table **out);
/* An absolute path, read with pread (never mapped); as jvy_parse. */
int jvy_load(const char *path, struct jvy_table **out);
/* The function covering vaddr (a file address: pc minus the load bias),
 * its start in *start; NULL when none does. */
const char *jvy_lookup(const struct jvy_table *t, uint64_t vaddr, uint64_t *start);
void jvy_free(struct jvy_table *t);

/* ---- heap profile (jv_heap.c) */

#define JVH_MAX_SITES   8192   /* distinct (stack, class) sites per capture; more: dropped */
#define JVH_MAX_FRAMES  64
#define JVH_DEFAULT_INTERVAL (512 * 1024) /* HotSpot's own default */

struct jvh_stats {
	uint64_t samples, dropped;
};

int jvh_start(uint32_t interval_bytes);
void jvh_stop(void);
int jvh_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns, struct jvh_stats *st,
		    uint64_t *bytes);
void JNICALL jvh_on_alloc(jvmtiEnv *jvmti, JNIEnv *jni, jthread thread, jobject object,
			  jclass klass, jlong size);
void JNICALL jvh_on_free(jvmtiEnv *jvmti, jlong tag);

/* ---- GC ring (jv_gc.c) */

#define JVG_RING 4096 /* GC start/finish events kept; the oldest are overwritten */

void JNICALL jvg_on_gc_start(jvmtiEnv *jvmti);
void JNICALL jvg_on_gc_finish(jvmtiEnv *jvmti);
/* Perfetto TracePackets: the JVM's process track and a "GC" slice per collection. */
int jvg_write_trace(int fd, uint64_t *bytes, uint64_t *events, uint64_t *dropped);

/* ---- method events by bytecode injection (jv_methods.c) */

#define JVE_MAX_TARGETS 8      /* targets per capture (the daemon's cap too) */
#define JVE_TARGET_LEN  1024   /* bytes of a target's spelling, with its NUL */
#define JVE_SLOTS       64     /* threads with a stack table; later threads: hits counted, stacks dropped */
#define JVE_STACKS      64     /* distinct (target, stack) a thread keeps; more: lost */
#define JVE_FRAMES      32     /* frames per stack; deeper stacks are cut at the root end */
#define JVE_RING        1024   /* recorded hits a thread keeps for the Perfetto result; more: dropped */
#define JVE_ARG_HITS    128    /* recorded hits with #args a thread keeps the arguments of; more: counted */
#define JVE_ARG_UNITS   64     /* UTF-16 code units of a String argument read */

struct jve_stats {
	uint64_t hits, stacks, lost, untracked, mean_ns;
};

/* The ClassFileLoadHook callback (set at setup, enabled only while a
 * capture runs). */
void JNICALL jve_on_class_file_load(jvmtiEnv *j, JNIEnv *jni, jclass redefined, jobject loader,
				    const char *name, jobject pd, jint len,
				    const unsigned char *data, jint *new_len,
				    unsigned char **new_data);
/* Install the hooks of targets (java:... spellings). 0, or -EINVAL (a
 * target refused), -ENOTSUP, -EIO with the reason in why; on failure
 * every hook is removed again. every: a stack every Nth hit (0: 1). */
int jve_start(JNIEnv *jni, char **targets, size_t nt, uint32_t every, uint64_t max_hits,
	      char *why, size_t n);
/*
 * A target's class can load across jve_start's enabling of the
 * ClassFileLoadHook: past the hook's call before it was on, and not yet
 * listed by GetLoadedClasses, so that nothing would ever hook it. Called on
 * each capture tick: while a target has no method hooked, its loaded
 * classes are listed again and retransformed, on ticks 1, 2, 4, ...,
 * JVE_RECHECK_LAST (100 ms apart: up to 25.6 s in); a class that loads
 * later is the ClassFileLoadHook's. Counts come from GetBytecodes.
 */
#define JVE_RECHECK_LAST 256
void jve_recheck(JNIEnv *jni);
/* Whether max_hits (0: no cap) hits have been taken. The hook itself stops
 * at the cap, so a result never holds more; this only ends the capture. */
bool jve_enough(void);
/*
 * The overhead budget (issue #19), per target: each target whose hook's
 * mean time per hit, once it has JVE_BUDGET_MIN_HITS, is over budget_ns is
 * removed (its classes retransformed without it); the others run on. True
 * when no target is left (the caller then ends the capture) or a removal
 * failed.
 */
#define JVE_BUDGET_MIN_HITS 16
bool jve_check_budget(JNIEnv *jni, uint64_t budget_ns);
/* The removed targets, "method target S: over budget (N ns a hit, budget B
 * µs): removed" joined by "; ", in buf; NULL when none was. */
const char *jve_budget_note(char *buf, size_t n);
/* Remove every hook (retransform back); 0 or -EIO (then no more method
 * events in this process; jve_note says why). */
int jve_stop(JNIEnv *jni);
/* After jve_stop: the gzip'd pprof of the hits (sample value = hits). */
int jve_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns, struct jve_stats *st,
		    uint64_t *bytes);
/*
 * After jve_stop, the Perfetto result (format perfetto, issue #19): per
 * thread a track, per recorded hit (its first JVE_RING) a TYPE_INSTANT
 * event at its CLOCK_REALTIME time named by its leaf method, its stack an
 * interned "stack" debug annotation (docs/METHOD_EVENTS.md). bytes: what
 * was written; dropped: hits past the rings. 0 or a negative errno.
 */
int jve_write_perfetto(JNIEnv *jni, int fd, uint64_t *bytes, uint64_t *events, uint64_t *dropped);
/* What the last removal did, for the result and the log. */
const char *jve_note(void);

/* ----------------------------------------------------------- jv_dump.c */

/* HotSpotDiagnosticMXBean.dumpHeap (live objects) copied into fd. 0 or
 * -errno, with the reason (a Java exception's text) in err. */
int jvd_heap_dump(JNIEnv *jni, int fd, uint64_t *bytes, char *err, size_t n);

#endif
