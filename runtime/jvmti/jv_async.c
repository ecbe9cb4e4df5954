/*
 * Java stack samples from signals, without safepoint bias (docs/JVMTI.md,
 * "Signal sampler"). Every thread of the JVM gets a sampling signal aimed
 * at it (common/thread_timer.h): on its own CPU time, a perf task-clock
 * event where the kernel allows one, else a POSIX timer on its CPU clock
 * (clock 0); or on CLOCK_MONOTONIC (clock 1, wall: blocked threads too),
 * always a POSIX timer. The SIGPROF handler runs on the
 * interrupted thread, wherever it is (inside a counted loop with no
 * safepoint poll too), and calls HotSpot's AsyncGetCallTrace (AGCT) on the
 * signal's ucontext. Above the top Java frame it unwinds the native part
 * (JNI code, libjvm) with libunwind, only through executable file mappings
 * known at capture start, so it never walks into JIT code it cannot read.
 *
 * The handler is async-signal-safe: no malloc, no lock, no JVMTI call. It
 * claims a slot of a preallocated MPSC ring (a CAS on the head; a full ring
 * drops and counts), fills it and publishes it with a release store. The
 * agent thread drains the ring every tick into the (thread, stack) table
 * and symbolises at the end with JVMTI (jv_names.c), dladdr and, for what
 * the dynamic symbols do not name, the module's .symtab (jv_symtab.c).
 *
 * Below the top Java frame (docs/JVMTI.md, "Mixed stacks") it splices the
 * C frames AGCT walks across: between a native method and the Java code it
 * called back (the JNI function, jni_Call*Method, JavaCalls), and below the
 * lowest Java frame (the launcher, start_thread). Each Java segment begins
 * at a call stub's frame, found on the stack by the return address HotSpot
 * publishes (StubRoutines::_call_stub_return_address); the stub's caller is
 * unwound with libunwind until the older segment's last Java sp, read from
 * the JavaCallWrapper's frame anchor. The offsets come from HotSpot's
 * VMStructs (jv_vmstructs.c); without them the stacks are as before.
 *
 * AGCT needs: the ClassLoad event enabled (else it answers -1), jmethodIDs
 * allocated for every method it may meet (GetClassMethods on each prepared
 * class and on every class loaded before us), and, for exact frames at
 * non-safepoint pcs in compiled code, the CompiledMethodLoad event enabled
 * (HotSpot then records debug info at non-safepoints, as with
 * -XX:+DebugNonSafepoints). Its failure codes become pseudo-frames named as
 * in HotSpot's forte.cpp ("[GC_active]", "[not_walkable_Java]", ...).
 */
#define UNW_LOCAL_ONLY
#include "jv.h"

#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pprof.h"
#include "thread_timer.h"
#include "util.h"


#define JVA_SIGNAL SIGPROF

/* HotSpot's AGCT ABI (prims/forte.cpp); not in any JDK header. */
typedef struct {
	jint lineno;         /* the bci; -3 for a native method */
	jmethodID method_id;
} ASGCT_CallFrame;

typedef struct {
	JNIEnv *env;
	jint num_frames;     /* > 0 frames; <= 0 one of the codes below */
	ASGCT_CallFrame *frames;
} ASGCT_CallTrace;

typedef void (*agct_fn)(ASGCT_CallTrace *trace, jint depth, void *ucontext);

/* forte.cpp's codes, 0 .. -10, by -code. */
static const char *const agct_errors[JVA_AGCT_ERRORS] = {
	"no_Java_frame", "no_class_load", "GC_active", "unknown_not_Java",
	"not_walkable_not_Java", "unknown_Java", "not_walkable_Java", "unknown_state",
	"thread_exit", "deopt", "safepoint",
};

/* One sample, written by the handler. */
struct jva_rec {
	_Atomic uint32_t ready;
	int32_t tid;
	int32_t nframes;     /* AGCT's num_frames */
	uint32_t nnative;
	uint32_t weight;     /* 1 + the timer's overrun */
	uint32_t pad;
	JNIEnv *env;         /* names the thread (learn_names) */
	uint64_t native[JVA_MAX_NATIVE];
	ASGCT_CallFrame frames[JVS_MAX_FRAMES];
	/* The native runs below the top Java frame: run i, runs[i].len pcs of
	 * below[] in turn, goes before AGCT frame runs[i].at (the native
	 * method that called back); at == nframes: below the lowest frame. */
	uint32_t nruns, nbelow;
	struct {
		uint16_t at, len;
	} runs[JVA_MAX_RUNS];
	uint64_t below[JVA_MAX_SPLICE];
};

/* The native run below a thread's lowest Java frame, kept by its handler:
 * it stays the same while that frame lives, so the next sample whose
 * bottom stub is at the same place, returning to the same pc with the same
 * saved rbp, copies it instead of unwinding it again. */
struct jva_bottom {
	uintptr_t stub, ret, rbp;
	uint32_t n;
	uint64_t pcs[JVA_RUN_FRAMES];
};

/* A sampled thread. not_java: set by the handler when it is no Java thread. */
struct jva_thread {
	pid_t tid;
	_Atomic uint32_t not_java;
	struct tt_timer tt;
	struct jva_bottom bottom; /* only this thread's handler touches it */
};

/* One frame of an aggregated stack: a Java frame, a native pc or a pseudo-frame. */
enum { JVA_F_JAVA, JVA_F_NATIVE, JVA_F_ERROR };
struct jva_frame {
	uint64_t v;    /* jmethodID, pc, or -code */
	int32_t bci;
	int32_t kind;
};

struct jva_stack {
	int32_t tid;
	uint32_t nframes;
	JNIEnv *env;
	uint64_t hash, count, weight;
	struct jva_frame *frames;
};

/* A Java thread's labels, by its JNIEnv (unique among live threads). */
struct jva_name {
	JNIEnv *env;
	jlong java_id;
	char name[64];
};

struct jva_range {
	uintptr_t lo, hi;
};

#define JVA_TAB_CAP (2 * JVS_MAX_STACKS)

/* ---- shared with the handler: written before timers arm, read-only while they run */
static agct_fn agct;
static JavaVM *jvm;
static struct jva_rec *ring;
static struct jva_thread *threads;        /* JVS_MAX_THREADS, index from tt_index */
static struct jva_range ranges[JVA_MAX_RANGES];
static uint32_t nranges;
static _Atomic uint64_t ring_head, ring_tail;
static _Atomic uint64_t ring_dropped, agct_err[JVA_AGCT_ERRORS], not_java;
static _Atomic uint64_t handler_ns, handler_runs; /* what the handler costs (debug log) */
static struct jvv_layout lay;      /* lay.ok: mixed stacks (read at load) */
static bool mixed;                 /* lay.ok and the call stub's address known */
static uintptr_t stub_ret;         /* StubRoutines::_call_stub_return_address */
static _Atomic uint64_t runs_spliced, runs_unplaced;
static bool timing;
static _Atomic int running, inflight;

/* ---- the agent thread's (thread table changes also under lock) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t nthreads, threads_skipped;
static pid_t self_tid;
static bool wall, prepared;
static uint64_t interval_ns;
static struct sigaction old_action;
static struct jva_stack *tab;
static uint32_t nstacks;
static uint64_t samples, dropped;
static struct jva_name names[JVS_MAX_THREADS];
static uint32_t nnames;
static jfieldID eetop_fid;     /* java.lang.Thread.eetop: the JavaThread* */
static jmethodID get_id;
static intptr_t env_offset;    /* JNIEnv* - JavaThread*, from the agent's own thread */

static pid_t gettid_(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------- the handler */

static bool in_ranges(uintptr_t pc)
{
	uint32_t lo = 0, hi = nranges;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;
		if (pc < ranges[mid].lo)
			hi = mid;
		else if (pc >= ranges[mid].hi)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

/* A free ring slot, or NULL when the ring is full (counted). */
static struct jva_rec *claim(void)
{
	uint64_t h = atomic_load_explicit(&ring_head, memory_order_relaxed);
	do {
		if (h - atomic_load_explicit(&ring_tail, memory_order_acquire) >= JVA_RING) {
			atomic_fetch_add_explicit(&ring_dropped, 1, memory_order_relaxed);
			return NULL;
		}
	} while (!atomic_compare_exchange_weak_explicit(&ring_head, &h, h + 1,
							memory_order_acq_rel,
							memory_order_relaxed));
	return &ring[h % JVA_RING];
}

/*
 * The part of the interrupted thread's stack the handler may read: from
 * its sp to the base HotSpot recorded for the thread (JavaThread::
 * _stack_base/_stack_size), at most JVA_SCAN_BYTES. Every word read below
 * lies inside [lo, hi), so a wrong value found on the stack can only give a
 * wrong frame, never a fault.
 */
struct jva_bounds {
	uintptr_t lo, hi, thread;
};

static uintptr_t word(uintptr_t a)
{
	return *(const uintptr_t *)a;
}

static bool stack_bounds(JNIEnv *env, const ucontext_t *uc, struct jva_bounds *b)
{
	if (!mixed || env_offset <= 0)
		return false;
	/* The JNIEnv is a field of the JavaThread (learnt through eetop). */
	uintptr_t t = (uintptr_t)env - (uintptr_t)env_offset;
	uintptr_t base = word(t + lay.stack_base), size = word(t + lay.stack_size);
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	if (!base || !size || size > base || sp >= base || sp < base - size)
		return false;
	b->thread = t;
	b->lo = (sp + 7) & ~(uintptr_t)7;
	b->hi = (base - b->lo > JVA_SCAN_BYTES ? b->lo + JVA_SCAN_BYTES : base) & ~(uintptr_t)7;
	return b->lo < b->hi;
}

/*
 * HotSpot's call stub on x86_64 Linux (StubRoutines::call_stub, the frame
 * that starts each Java segment) begins with push rbp; mov rbp, rsp. At its
 * rbp p: the caller's rbp, at p+8 the return into JavaCalls::call_helper,
 * at p+16 and p+24 its 7th and 8th C arguments, passed on the stack by the
 * ABI: the parameter count (int) and the JavaThread*. Below p it keeps 12
 * words (the JavaCallWrapper* at p-48, saved registers), pushes the n
 * parameter words and calls the Java entry, whose return address is then
 * _call_stub_return_address at p - 8 * (13 + n); an interpreted callee
 * moves it down by the locals it adds after the parameters.
 */
#define STUB_WORDS     13
#define STUB_WRAPPER   48
#define STUB_MAX_SLOTS 1024 /* parameters and interpreter locals searched over */

/* The next call stub's rbp from *from up, or 0; *from moves past it. */
static uintptr_t find_stub(const struct jva_bounds *b, uintptr_t *from)
{
	for (uintptr_t q = *from; q + 8 <= b->hi; q += 8) {
		if (word(q) != stub_ret)
			continue;
		/* p is above q by 13 words, the n parameters and any locals. */
		for (uint32_t w = STUB_WORDS; w < STUB_WORDS + STUB_MAX_SLOTS; w++) {
			uintptr_t p = q + 8 * w;
			if (p + 32 > b->hi)
				break;
			int32_t n = *(const int32_t *)(p + 16);
			/* The JavaThread* is everywhere on a HotSpot stack: the
			 * return into a file mapping (call_helper) narrows it. */
			if (n >= 0 && (uint32_t)n <= w - STUB_WORDS && word(p + 24) == b->thread &&
			    in_ranges(word(p + 8))) {
				*from = p + 32;
				return p;
			}
		}
	}
	*from = b->hi;
	return 0;
}

/*
 * The native frames of the call stub at p's caller (call_helper, the JNI
 * functions, the native method's C code, or the launcher and start_thread
 * below the lowest segment), until the older Java frame (stop_sp: its
 * last_Java_sp; 0: none, to the end of the stack) or a pc outside the
 * executable file mappings (the native method's wrapper is JIT code).
 */
static uint32_t unwind_from_stub(const ucontext_t *uc, uintptr_t p, uintptr_t stop_sp,
				 uint64_t *out, uint32_t max)
{
	ucontext_t c = *uc;
	unw_cursor_t cur;
	uint32_t n = 0;
	c.uc_mcontext.gregs[REG_RIP] = (greg_t)word(p + 8);
	c.uc_mcontext.gregs[REG_RSP] = (greg_t)(p + 16);
	c.uc_mcontext.gregs[REG_RBP] = (greg_t)word(p);
	/* Not a signal frame: the pc is a return address (libunwind looks up pc - 1). */
	if (unw_init_local2(&cur, (unw_context_t *)&c, 0) < 0)
		return 0;
	while (n < max) {
		unw_word_t ip = 0, sp = 0;
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !in_ranges(ip) ||
		    unw_get_reg(&cur, UNW_REG_SP, &sp) < 0 || (stop_sp && sp >= stop_sp))
			break;
		out[n++] = ip;
		if (unw_step(&cur) <= 0)
			break;
	}
	return n;
}

/*
 * Splice the native runs below the top Java frame into r. The call stubs,
 * innermost first, pair with the native methods among AGCT's frames below
 * the top one (a Java -> native -> Java transition each); the stub whose
 * wrapper's anchor is empty had no Java caller: its run goes below the
 * lowest frame. When the two counts differ (the VM itself called Java: a
 * static initialiser, class loading) the middle runs are left out, since
 * which frame each belongs to is not known; when AGCT cut the stack at
 * JVS_MAX_FRAMES, only the runs of the frames it kept.
 */
/* The run below the lowest Java frame, from the thread's cache when its
 * stub is the one seen last (c may be NULL: no cache). */
static uint32_t bottom_run(const ucontext_t *uc, uintptr_t p, struct jva_bottom *c,
			   uint64_t *out, uint32_t max)
{
	uintptr_t ret = word(p + 8), rbp = word(p);
	if (c && c->stub == p && c->ret == ret && c->rbp == rbp) {
		uint32_t n = c->n < max ? c->n : max;
		memcpy(out, c->pcs, n * sizeof(*out));
		return n;
	}
	uint32_t n = unwind_from_stub(uc, p, 0, out, max);
	if (c && max == JVA_RUN_FRAMES) {
		memcpy(c->pcs, out, n * sizeof(*out));
		c->n = n;
		c->stub = p;
		c->ret = ret;
		c->rbp = rbp;
	}
	return n;
}

static void splice(struct jva_rec *r, const ucontext_t *uc, const struct jva_bounds *b,
		   struct jva_bottom *cache)
{
	uint16_t at[JVA_MAX_RUNS];
	uintptr_t mid[JVA_MAX_RUNS], stop[JVA_MAX_RUNS], bottom = 0, from = b->lo;
	uint32_t k = 0, m = 0;
	bool cut = r->nframes >= JVS_MAX_FRAMES;

	for (int32_t i = 1; i < r->nframes && i < JVS_MAX_FRAMES && k < JVA_MAX_RUNS; i++)
		if (r->frames[i].lineno == -3) /* AGCT's mark of a native method */
			at[k++] = (uint16_t)i;
	for (;;) {
		uintptr_t p = find_stub(b, &from);
		if (!p)
			break;
		uintptr_t cw = word(p - STUB_WRAPPER);
		if (cw & 7 || cw < p + 32 || cw + lay.wrapper_size > b->hi)
			goto unplaced; /* not a wrapper on this stack: stop trusting the walk */
		uintptr_t last = word(cw + lay.wrapper_anchor + lay.last_sp);
		if (!last) {
			bottom = p;
			break;
		}
		if (last <= p || last >= b->hi)
			goto unplaced;
		if (m == JVA_MAX_RUNS)
			break;
		mid[m] = p;
		stop[m++] = last;
	}
	if (cut)
		m = m < k ? m : k;
	else if (m != k)
		goto unplaced;
	for (uint32_t i = 0; i < m && r->nbelow < JVA_MAX_SPLICE; i++) {
		uint32_t room = JVA_MAX_SPLICE - r->nbelow;
		uint32_t n = unwind_from_stub(uc, mid[i], stop[i], &r->below[r->nbelow],
					      room < JVA_RUN_FRAMES ? room : JVA_RUN_FRAMES);
		if (n) {
			r->runs[r->nruns].at = at[i];
			r->runs[r->nruns++].len = (uint16_t)n;
			r->nbelow += n;
		}
	}
	if (!cut && bottom && r->nbelow < JVA_MAX_SPLICE && r->nruns < JVA_MAX_RUNS) {
		uint32_t room = JVA_MAX_SPLICE - r->nbelow;
		uint32_t n = bottom_run(uc, bottom, cache, &r->below[r->nbelow],
					room < JVA_RUN_FRAMES ? room : JVA_RUN_FRAMES);
		if (n) {
			r->runs[r->nruns].at = (uint16_t)r->nframes;
			r->runs[r->nruns++].len = (uint16_t)n;
			r->nbelow += n;
		}
	}
	atomic_fetch_add_explicit(&runs_spliced, r->nruns, memory_order_relaxed);
	return;
unplaced:
	/* Keep what is placed for sure: nothing between the segments. */
	atomic_fetch_add_explicit(&runs_unplaced, 1, memory_order_relaxed);
	if (!cut && bottom && r->nruns == 0) {
		uint32_t n = bottom_run(uc, bottom, cache, r->below, JVA_RUN_FRAMES);
		if (n) {
			r->runs[0].at = (uint16_t)r->nframes;
			r->runs[0].len = (uint16_t)n;
			r->nruns = 1;
			r->nbelow = n;
		}
	}
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;
	JNIEnv *env = NULL;

	/* seq_cst pairs with jva_stop(): either it sees us inside, or we see !running. */
	atomic_fetch_add(&inflight, 1);
	int sx = atomic_load(&running) ? tt_index(si) : -1;
	if (sx < 0)
		goto out;
	uint32_t ix = (uint32_t)sx;
	/* GetEnv reads the VM's thread-local current thread: no lock, no allocation. */
	if ((*jvm)->GetEnv(jvm, (void **)&env, JNI_VERSION_1_6) != JNI_OK || !env) {
		if (ix < JVS_MAX_THREADS)
			atomic_store_explicit(&threads[ix].not_java, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&not_java, 1, memory_order_relaxed);
		goto out;
	}
	/* With debug=1 only: the thread CPU clock is a system call. */
	struct timespec t0 = { 0 }, t1;
	if (timing)
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	struct jva_rec *r = claim();
	if (!r)
		goto out;
	ASGCT_CallTrace tr = { .env = env, .num_frames = 0, .frames = r->frames };
	agct(&tr, JVS_MAX_FRAMES, ucv);
	r->nframes = tr.num_frames;
	if (tr.num_frames <= 0 && -tr.num_frames < JVA_AGCT_ERRORS)
		atomic_fetch_add_explicit(&agct_err[-tr.num_frames], 1, memory_order_relaxed);

	/* The native frames above the top Java frame (JNI code, the VM's C++),
	 * up to the thread's last Java sp when it is in native code or the VM. */
	struct jva_bounds b;
	bool mix = stack_bounds(env, ucv, &b);
	uintptr_t top_stop = mix ? word(b.thread + lay.thread_anchor + lay.last_sp) : 0;
	unw_cursor_t cur;
	uint32_t n = 0;
	if (unw_init_local2(&cur, (unw_context_t *)ucv, UNW_INIT_SIGNAL_FRAME) == 0) {
		while (n < JVA_MAX_NATIVE) {
			unw_word_t ip = 0, sp = 0;
			if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !in_ranges(ip))
				break; /* JIT code, a stub or the interpreter: Java's part */
			if (top_stop && (unw_get_reg(&cur, UNW_REG_SP, &sp) < 0 || sp >= top_stop))
				break;
			r->native[n++] = ip;
			if (unw_step(&cur) <= 0)
				break;
		}
	}
	r->nnative = n;
	r->nruns = r->nbelow = 0;
	if (mix && tr.num_frames > 0) {
		splice(r, ucv, &b, ix < JVS_MAX_THREADS ? &threads[ix].bottom : NULL);
	}
	r->tid = (int32_t)gettid_();
	r->env = env;
	r->weight = tt_sample(si, ix < JVS_MAX_THREADS ? &threads[ix].tt : NULL, UINT32_MAX);
	atomic_store_explicit(&r->ready, 1, memory_order_release);
	if (timing) {
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
		atomic_fetch_add_explicit(&handler_ns,
					  (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000000ll +
						     (t1.tv_nsec - t0.tv_nsec)),
					  memory_order_relaxed);
		atomic_fetch_add_explicit(&handler_runs, 1, memory_order_relaxed);
	}
out:
	atomic_fetch_sub(&inflight, 1);
	errno = saved_errno;
}

/* ------------------------------------------------------- JVMTI callbacks */

/* AGCT needs a jmethodID for every method: GetClassMethods allocates them. */
static void prepare_class(jvmtiEnv *j, jclass k)
{
	jint n = 0;
	jmethodID *m = NULL;
	if ((*j)->GetClassMethods(j, k, &n, &m) == JVMTI_ERROR_NONE && m)
		(*j)->Deallocate(j, (unsigned char *)m);
}

static void JNICALL on_class_load(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k)
{
	/* Only enabled for AGCT, which checks that someone listens to ClassLoad. */
}

static void JNICALL on_class_prepare(jvmtiEnv *j, JNIEnv *jni, jthread t, jclass k)
{
	prepare_class(j, k);
}

static void JNICALL on_compiled_load(jvmtiEnv *j, jmethodID m, jint size, const void *addr,
				     jint nmap, const jvmtiAddrLocationMap *map,
				     const void *info)
{
	/* Enabled so that HotSpot keeps debug info at non-safepoint pcs. */
}

static int arm_locked(pid_t tid);

static void JNICALL on_thread_start(jvmtiEnv *j, JNIEnv *jni, jthread t)
{
	if (!atomic_load(&running))
		return;
	pthread_mutex_lock(&lock);
	if (atomic_load(&running))
		arm_locked(gettid_());
	pthread_mutex_unlock(&lock);
}

static void remember_name(JNIEnv *jni, jthread t, JNIEnv *env);

static void JNICALL on_thread_end(jvmtiEnv *j, JNIEnv *jni, jthread t)
{
	if (!atomic_load(&running))
		return;
	pid_t tid = gettid_();
	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < nthreads; i++)
		if (threads[i].tid == tid)
			tt_disarm(&threads[i].tt);
	/* Its name, while it can still be read: the samples outlive it. */
	if (atomic_load(&running))
		remember_name(jni, t, jni);
	pthread_mutex_unlock(&lock);
}

bool jva_init(JavaVM *vm, jvmtiEventCallbacks *cb, bool time_handler)
{
	jvm = vm;
	timing = time_handler;
	agct = (agct_fn)dlsym(RTLD_DEFAULT, "AsyncGetCallTrace");
	if (!agct) {
		void *h = dlopen("libjvm.so", RTLD_LAZY | RTLD_NOLOAD);
		if (h)
			agct = (agct_fn)dlsym(h, "AsyncGetCallTrace");
	}
	if (!agct)
		return false;
	cb->ClassLoad = on_class_load;
	cb->ClassPrepare = on_class_prepare;
	cb->CompiledMethodLoad = on_compiled_load;
	cb->ThreadStart = on_thread_start;
	cb->ThreadEnd = on_thread_end;
	return true;
}

bool jva_init_mixed(bool use_vmstructs)
{
	if (!use_vmstructs) {
		memset(&lay, 0, sizeof(lay));
		snprintf(lay.missing, sizeof(lay.missing), "VMStructs (vmstructs=0)");
		LOG_I("vmstructs=0: Java -> native -> Java stacks lack their C frames");
		return false;
	}
	return jvv_read(&lay) == 0;
}

bool jva_available(void)
{
	return agct != NULL;
}

/* The events AGCT depends on; 0 or -EIO when one cannot be enabled. */
int jva_enable_events(void)
{
	static const jvmtiEvent evs[] = {
		JVMTI_EVENT_CLASS_LOAD, JVMTI_EVENT_CLASS_PREPARE, JVMTI_EVENT_THREAD_START,
		JVMTI_EVENT_THREAD_END,
	};
	jvmtiEnv *j = jv_jvmti;
	for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
		if ((*j)->SetEventNotificationMode(j, JVMTI_ENABLE, evs[i], NULL) != JVMTI_ERROR_NONE)
			return -EIO;
	/* Optional: without it frames at non-safepoint pcs are less exact. */
	if (jv_caps.compiled_load &&
	    (*j)->SetEventNotificationMode(j, JVMTI_ENABLE, JVMTI_EVENT_COMPILED_METHOD_LOAD,
					   NULL) != JVMTI_ERROR_NONE)
		LOG_W("cannot enable CompiledMethodLoad: compiled frames may be less exact");
	return 0;
}

int jva_prepare_loaded(void)
{
	jvmtiEnv *j = jv_jvmti;
	jclass *ks = NULL;
	jint n = 0;
	if (prepared)
		return 0;
	if ((*j)->GetLoadedClasses(j, &n, &ks) != JVMTI_ERROR_NONE)
		return -EIO;
	for (jint i = 0; i < n; i++)
		prepare_class(j, ks[i]);
	(*j)->Deallocate(j, (unsigned char *)ks);
	prepared = true;
	LOG_D("jmethodIDs allocated for %d loaded classes", (int)n);
	return 0;
}

/* --------------------------------------------------------------- timers */

static int arm_locked(pid_t tid)
{
	for (uint32_t i = 0; i < nthreads; i++)
		if (threads[i].tid == tid)
			return 0;
	if (nthreads >= JVS_MAX_THREADS) {
		threads_skipped++;
		return -ENOSPC;
	}
	struct jva_thread *t = &threads[nthreads];
	atomic_store(&t->not_java, 0);
	memset(&t->bottom, 0, sizeof(t->bottom)); /* stub 0: nothing kept */
	int r = tt_arm(&t->tt, tid, JVA_SIGNAL, interval_ns, wall, (int)nthreads);
	if (r < 0)
		return r; /* it exited meanwhile */
	t->tid = tid;
	nthreads++;
	return 0;
}

static void rescan_locked(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid > 0 && tid != self_tid)
			arm_locked(tid);
	}
	closedir(d);
}

static uint32_t count_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	uint32_t n = 0;
	if (!d)
		return 0;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* Executable file mappings, sorted (the kernel lists them by address). */
static void read_ranges(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	nranges = 0;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && nranges < JVA_MAX_RANGES) {
		unsigned long lo, hi;
		char perms[8];
		int off = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) < 3)
			continue;
		if (perms[2] != 'x' || line[off] != '/')
			continue; /* anonymous: JIT code, stubs, the interpreter */
		ranges[nranges].lo = lo;
		ranges[nranges].hi = hi;
		nranges++;
	}
	fclose(f);
}

/* ------------------------------------------------------------ thread names */

static void remember_name(JNIEnv *jni, jthread t, JNIEnv *env)
{
	uint32_t i;
	for (i = 0; i < nnames; i++)
		if (names[i].env == env)
			break;
	if (i == nnames) {
		if (nnames >= JVS_MAX_THREADS)
			return;
		nnames++;
	}
	struct jva_name *nm = &names[i];
	memset(nm, 0, sizeof(*nm));
	nm->env = env;
	jvmtiThreadInfo ti;
	memset(&ti, 0, sizeof(ti));
	if ((*jv_jvmti)->GetThreadInfo(jv_jvmti, t, &ti) == JVMTI_ERROR_NONE) {
		if (ti.name) {
			util_strlcpy(nm->name, ti.name, sizeof(nm->name));
			(*jv_jvmti)->Deallocate(jv_jvmti, (unsigned char *)ti.name);
		}
		if (ti.thread_group)
			(*jni)->DeleteLocalRef(jni, ti.thread_group);
		if (ti.context_class_loader)
			(*jni)->DeleteLocalRef(jni, ti.context_class_loader);
	}
	if (get_id) {
		nm->java_id = (*jni)->CallLongMethod(jni, t, get_id);
		if ((*jni)->ExceptionCheck(jni)) {
			(*jni)->ExceptionClear(jni);
			nm->java_id = 0;
		}
	}
}

/*
 * A thread's JNIEnv is a field of HotSpot's JavaThread, which
 * java.lang.Thread.eetop points to: the offset between the two, read on
 * this thread, names the samples of every live thread by their env.
 */
static void learn_names(JNIEnv *jni)
{
	jthread *ts = NULL;
	jint n = 0;
	if (!eetop_fid || !env_offset)
		return;
	if ((*jv_jvmti)->GetAllThreads(jv_jvmti, &n, &ts) != JVMTI_ERROR_NONE)
		return;
	pthread_mutex_lock(&lock);
	for (jint i = 0; i < n; i++) {
		jlong top = (*jni)->GetLongField(jni, ts[i], eetop_fid);
		if (top)
			remember_name(jni, ts[i], (JNIEnv *)(uintptr_t)((intptr_t)top + env_offset));
		(*jni)->DeleteLocalRef(jni, ts[i]);
	}
	pthread_mutex_unlock(&lock);
	(*jv_jvmti)->Deallocate(jv_jvmti, (unsigned char *)ts);
}

static void init_names(JNIEnv *jni)
{
	jthread me = NULL;
	nnames = 0;
	env_offset = 0;
	jclass c = (*jni)->FindClass(jni, "java/lang/Thread");
	if (c) {
		get_id = (*jni)->GetMethodID(jni, c, "getId", "()J");
		eetop_fid = (*jni)->GetFieldID(jni, c, "eetop", "J");
		(*jni)->DeleteLocalRef(jni, c);
	}
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	if (eetop_fid && (*jv_jvmti)->GetCurrentThread(jv_jvmti, &me) == JVMTI_ERROR_NONE && me) {
		jlong top = (*jni)->GetLongField(jni, me, eetop_fid);
		intptr_t off = (intptr_t)jni - (intptr_t)top;
		/* The env lives inside the JavaThread: a small positive offset. */
		if (top && off > 0 && off < 65536)
			env_offset = off;
		(*jni)->DeleteLocalRef(jni, me);
	}
	if (!env_offset)
		LOG_D("no Thread.eetop offset: threads started before the capture get OS names");
}

/* ------------------------------------------------------------- aggregation */

static uint64_t hash_frames(int32_t tid, const struct jva_frame *f, uint32_t n)
{
	uint64_t h = 1469598103934665603ull ^ (uint32_t)tid;
	for (uint32_t i = 0; i < n; i++) {
		h ^= f[i].v;
		h *= 1099511628211ull;
		h ^= (uint64_t)(uint32_t)f[i].bci ^ ((uint64_t)f[i].kind << 32);
		h *= 1099511628211ull;
	}
	return h;
}

static void add_stack(int32_t tid, JNIEnv *env, const struct jva_frame *f, uint32_t n,
		      uint32_t weight)
{
	uint64_t h = hash_frames(tid, f, n);
	for (uint32_t i = (uint32_t)h & (JVA_TAB_CAP - 1);; i = (i + 1) & (JVA_TAB_CAP - 1)) {
		struct jva_stack *s = &tab[i];
		if (!s->count) {
			if (nstacks >= JVS_MAX_STACKS || !(s->frames = malloc((size_t)n * sizeof(*f)))) {
				dropped++;
				return;
			}
			memcpy(s->frames, f, (size_t)n * sizeof(*f));
			s->tid = tid;
			s->env = env;
			s->nframes = n;
			s->hash = h;
			s->count = 1;
			s->weight = weight;
			nstacks++;
			samples++;
			return;
		}
		if (s->hash == h && s->tid == tid && s->nframes == n &&
		    !memcmp(s->frames, f, (size_t)n * sizeof(*f))) {
			s->count++;
			s->weight += weight;
			samples++;
			return;
		}
	}
}

/* Move what the handlers published into the table; stops at a slot in progress. */
static void drain(void)
{
	static struct jva_frame f[JVA_MAX_NATIVE + JVS_MAX_FRAMES + JVA_MAX_SPLICE];
	uint64_t t = atomic_load_explicit(&ring_tail, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&ring_head, memory_order_acquire);
	for (; t < h; t++) {
		struct jva_rec *r = &ring[t % JVA_RING];
		if (!atomic_load_explicit(&r->ready, memory_order_acquire))
			break;
		uint32_t n = 0;
		for (uint32_t i = 0; i < r->nnative && i < JVA_MAX_NATIVE; i++)
			f[n++] = (struct jva_frame){ .v = r->native[i], .kind = JVA_F_NATIVE };
		if (r->nframes > 0) {
			/* Runs are in stack order (their at ascending), each inside below[]. */
			uint32_t run = 0, pc = 0;
			int32_t nf = r->nframes < JVS_MAX_FRAMES ? r->nframes : JVS_MAX_FRAMES;
			for (int32_t i = 0; i <= nf; i++) {
				for (; run < r->nruns && run < JVA_MAX_RUNS && r->runs[run].at == i; run++)
					for (uint32_t k = 0; k < r->runs[run].len && pc < JVA_MAX_SPLICE; k++)
						f[n++] = (struct jva_frame){ .v = r->below[pc++],
									     .kind = JVA_F_NATIVE };
				if (i < nf)
					f[n++] = (struct jva_frame){
						.v = (uint64_t)(uintptr_t)r->frames[i].method_id,
						.bci = r->frames[i].lineno, .kind = JVA_F_JAVA };
			}
		} else {
			f[n++] = (struct jva_frame){ .v = (uint64_t)(-(int64_t)r->nframes),
						     .kind = JVA_F_ERROR };
		}
		add_stack(r->tid, r->env, f, n, r->weight);
		atomic_store_explicit(&r->ready, 0, memory_order_relaxed);
		atomic_store_explicit(&ring_tail, t + 1, memory_order_release);
	}
}

/* ---------------------------------------------------------------- capture */

static void free_all(void)
{
	if (tab)
		for (uint32_t i = 0; i < JVA_TAB_CAP; i++)
			free(tab[i].frames);
	free(tab);
	tab = NULL;
	nstacks = 0;
	if (ring)
		munmap(ring, JVA_RING * sizeof(*ring));
	ring = NULL;
	/* Under the lock: a ThreadStart/ThreadEnd callback may be looking. */
	pthread_mutex_lock(&lock);
	free(threads);
	threads = NULL;
	nthreads = 0;
	pthread_mutex_unlock(&lock);
}

int jva_start(JNIEnv *jni, uint32_t hz, bool wall_clock)
{
	struct sigaction sa;
	int r;

	if (!agct)
		return -ENOSYS;
	if (ring)
		return -EBUSY;
	if (hz == 0 || hz > 10000)
		return -EINVAL;
	/* MAP_NORESERVE: only the slots samples touch are committed. */
	ring = mmap(NULL, JVA_RING * sizeof(*ring), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ring == MAP_FAILED) {
		ring = NULL;
		return -ENOMEM;
	}
	threads = calloc(JVS_MAX_THREADS, sizeof(*threads));
	tab = calloc(JVA_TAB_CAP, sizeof(*tab));
	if (!threads || !tab) {
		free_all();
		return -ENOMEM;
	}
	if ((r = jva_prepare_loaded()) < 0) {
		free_all();
		return r;
	}
	interval_ns = 1000000000ull / hz;
	wall = wall_clock;
	if (!wall)
		tt_choose();
	if (wall) {
		/* Every thread every interval, idle or not: past the budget the
		 * interval grows, the same for all, and the period says so. */
		uint32_t n = count_tasks();
		if ((uint64_t)n * hz > JVA_WALL_BUDGET)
			interval_ns = (uint64_t)n * 1000000000ull / JVA_WALL_BUDGET;
	}
	samples = dropped = 0;
	threads_skipped = 0;
	atomic_store(&ring_head, 0);
	atomic_store(&ring_tail, 0);
	atomic_store(&ring_dropped, 0);
	atomic_store(&not_java, 0);
	atomic_store(&handler_ns, 0);
	atomic_store(&handler_runs, 0);
	for (int i = 0; i < JVA_AGCT_ERRORS; i++)
		atomic_store(&agct_err[i], 0);
	self_tid = gettid_();
	read_ranges();
	init_names(jni);
	/* The stubs are generated at VM start: their address is known by now. */
	atomic_store(&runs_spliced, 0);
	atomic_store(&runs_unplaced, 0);
	stub_ret = lay.ok ? *lay.call_stub_ret : 0;
	mixed = lay.ok && stub_ret && env_offset > 0;
	if (lay.ok && !mixed)
		LOG_I("no %s: Java -> native -> Java stacks lack their C frames",
		      stub_ret ? "JNIEnv offset in JavaThread" : "call stub address");
	if (mixed) {
		/* The handler finds each thread's stack through its env: try it
		 * on this thread's, which must hold a local of ours. */
		uintptr_t t = (uintptr_t)jni - (uintptr_t)env_offset, here = (uintptr_t)&t;
		uintptr_t base = word(t + lay.stack_base), size = word(t + lay.stack_size);
		if (!base || !size || size > base || here >= base || here < base - size) {
			mixed = false;
			LOG_I("JavaThread::_stack_base/_stack_size do not hold the agent's stack: "
			      "Java -> native -> Java stacks lack their C frames");
		}
	}

	/* libunwind sets up global state under a lock on first use: not in the handler. */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	unw_context_t uc;
	unw_cursor_t cur;
	unw_getcontext(&uc);
	if (unw_init_local(&cur, &uc) == 0)
		unw_step(&cur);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(JVA_SIGNAL, &sa, &old_action) < 0) {
		r = -errno;
		free_all();
		return r;
	}
	pthread_mutex_lock(&lock);
	atomic_store(&running, 1);
	rescan_locked();
	pthread_mutex_unlock(&lock);
	return 0;
}

static void stop(void)
{
	if (!atomic_load(&running))
		return;
	pthread_mutex_lock(&lock);
	if (!atomic_load(&running)) { /* VMDeath and the agent thread at once */
		pthread_mutex_unlock(&lock);
		return;
	}
	for (uint32_t i = 0; i < nthreads; i++)
		tt_disarm(&threads[i].tt);
	atomic_store(&running, 0);
	pthread_mutex_unlock(&lock);
	/* A signal already queued may still run: wait until none is inside. */
	while (atomic_load(&inflight))
		sched_yield();
	/* A SIGPROF still pending must not meet SIG_DFL, which kills the VM. */
	util_sig_restore(JVA_SIGNAL, &old_action);
}

void jva_halt(void)
{
	stop();
}

void jva_tick(JNIEnv *jni)
{
	if (!ring)
		return;
	drain();
	/* Threads that are not the VM's Java threads (GC workers) cost signals only. */
	pthread_mutex_lock(&lock);
	for (uint32_t i = 0; i < nthreads; i++)
		if (atomic_load_explicit(&threads[i].not_java, memory_order_relaxed))
			tt_disarm(&threads[i].tt);
	pthread_mutex_unlock(&lock);
}

void jva_discard(void)
{
	stop();
	free_all();
}

static const struct jva_name *name_of(JNIEnv *env)
{
	for (uint32_t i = 0; i < nnames; i++)
		if (names[i].env == env)
			return &names[i];
	return NULL;
}

/* The .symtab of each module met while writing one profile (jv_symtab.c). */
#define JVA_MAX_MODULES 32
static struct jva_module {
	char path[256];
	struct jvy_table *t; /* NULL: stripped or unreadable */
} mods[JVA_MAX_MODULES];
static uint32_t nmods;

typedef char *(*demangle_fn)(const char *mangled, char *buf, size_t *len, int *status);

static void free_modules(void)
{
	for (uint32_t i = 0; i < nmods; i++)
		jvy_free(mods[i].t);
	nmods = 0;
}

static const struct jvy_table *module_symtab(const char *path)
{
	for (uint32_t i = 0; i < nmods; i++)
		if (!strcmp(mods[i].path, path))
			return mods[i].t;
	if (nmods == JVA_MAX_MODULES || strlen(path) >= sizeof(mods[0].path))
		return NULL; /* past the cap: named by dladdr only */
	struct jva_module *m = &mods[nmods++];
	util_strlcpy(m->path, path, sizeof(m->path));
	int r = jvy_load(path, &m->t);
	if (r < 0 && r != -ENOENT)
		LOG_D("no .symtab names from %s: %s", path, strerror(-r));
	return m->t;
}

/* A .symtab name for pprof: C++ names demangled where the process has
 * libstdc++'s demangler, without their parameter lists. */
static void symtab_name(const char *sym, char *out, size_t n)
{
	static demangle_fn demangle;
	static bool looked;
	int status = -1;
	char *d = NULL;
	if (!looked) {
		demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
		looked = true;
	}
	if (demangle && sym[0] == '_' && sym[1] == 'Z')
		d = demangle(sym, NULL, NULL, &status);
	if (!d || status != 0) {
		util_strlcpy(out, sym, n);
		free(d);
		return;
	}
	/* Cut at the parameters' '(' outside template arguments. */
	int depth = 0;
	for (char *c = d; *c; c++) {
		if (*c == '<')
			depth++;
		else if (*c == '>' && depth > 0)
			depth--;
		else if (*c == '(' && !depth && c > d && strncmp(c - (c - d >= 8 ? 8 : 0),
									   "operator", 8)) {
			*c = '\0';
			break;
		}
	}
	util_strlcpy(out, d, n);
	free(d);
}

/* The pprof location of a native pc: its dynamic symbol (dladdr), else its
 * module's .symtab name, else module+offset. */
static int native_location(struct pp_builder *b, uint64_t pc, uint64_t *loc)
{
	Dl_info di;
	struct link_map *lm = NULL;
	const char *sym;
	char name[320];
	uint64_t fn;
	int r;
	memset(&di, 0, sizeof(di));
	/* pc is a return address except at the leaf: pc - 1 is inside the call. */
	if (!dladdr1((void *)(uintptr_t)(pc - 1), &di, (void **)&lm, RTLD_DL_LINKMAP))
		memset(&di, 0, sizeof(di));
	if (di.dli_sname)
		util_strlcpy(name, di.dli_sname, sizeof(name));
	else if (di.dli_fname && lm && di.dli_fname[0] == '/' &&
		 (sym = jvy_lookup(module_symtab(di.dli_fname), pc - 1 - (uint64_t)lm->l_addr,
				   NULL)))
		symtab_name(sym, name, sizeof(name));
	else if (di.dli_fname)
		snprintf(name, sizeof(name), "%s+0x%llx",
			 strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 : di.dli_fname,
			 (unsigned long long)(pc - (uint64_t)(uintptr_t)di.dli_fbase));
	else
		snprintf(name, sizeof(name), "0x%llx", (unsigned long long)pc);
	if ((r = pp_add_function(b, name, NULL, di.dli_fname ? di.dli_fname : "", 0, &fn)) < 0)
		return r;
	return pp_add_location(b, 0, pc, fn, 0, loc);
}

static int error_location(struct pp_builder *b, uint64_t code, uint64_t *loc)
{
	char name[48];
	uint64_t fn;
	int r;
	snprintf(name, sizeof(name), "[%s]", code < JVA_AGCT_ERRORS ? agct_errors[code] : "unknown");
	if ((r = pp_add_function(b, name, NULL, "", 0, &fn)) < 0)
		return r;
	/* Addresses below the Java names' synthetic ones (jv_names.c starts at 0x1000). */
	return pp_add_location(b, 0, 0x100 + code, fn, 0, loc);
}

/* The pprof comment: how the samples were taken and what AGCT refused. */
static int add_comment(struct pp_builder *b)
{
	char c[768], src[256];
	if (wall)
		util_strlcpy(src, "CLOCK_MONOTONIC timers", sizeof(src));
	else
		tt_describe(src, sizeof(src));
	size_t o = (size_t)snprintf(c, sizeof(c),
				    "profilingd JVMTI agent: AsyncGetCallTrace from %s; "
				    "AGCT codes:", src);
	bool any = false;
	for (int i = 0; i < JVA_AGCT_ERRORS && o < sizeof(c); i++) {
		uint64_t n = atomic_load(&agct_err[i]);
		if (n) {
			o += (size_t)snprintf(c + o, sizeof(c) - o, " %s %llu", agct_errors[i],
					      (unsigned long long)n);
			any = true;
		}
	}
	if (!any && o < sizeof(c))
		o += (size_t)snprintf(c + o, sizeof(c) - o, " none");
	/* Whether the C frames between and below the Java segments are in. */
	if (o < sizeof(c)) {
		if (mixed)
			snprintf(c + o, sizeof(c) - o, "; mixed stacks: %llu native runs below "
				 "Java frames, %llu samples without the ones between segments",
				 (unsigned long long)atomic_load(&runs_spliced),
				 (unsigned long long)atomic_load(&runs_unplaced));
		else
			snprintf(c + o, sizeof(c) - o, "; mixed stacks: off (no %s)",
				 lay.ok ? "call stub address, JNIEnv offset or stack bounds" : lay.missing);
	}
	return pp_add_comment(b, c);
}

int jva_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns, struct jvs_stats *st,
		    uint64_t *bytes)
{
	struct pp_builder *b = NULL;
	struct jvm_names *nm = NULL;
	int r;

	if (!ring)
		return -EINVAL;
	stop();
	drain();
	learn_names(jni);
	st->samples = samples;
	st->dropped = dropped + atomic_load(&ring_dropped);
	st->ticks = 0;
	uint64_t runs = atomic_load(&handler_runs);
	LOG_D("AGCT sampler: %llu samples, %llu dropped (ring %llu), %llu on non-Java threads, "
	      "%u threads (%u skipped), %u native ranges; handler %.2f us CPU a sample",
	      (unsigned long long)samples, (unsigned long long)st->dropped,
	      (unsigned long long)atomic_load(&ring_dropped),
	      (unsigned long long)atomic_load(&not_java), nthreads, threads_skipped, nranges,
	      runs ? (double)atomic_load(&handler_ns) / (double)runs / 1000.0 : 0.0);
	if ((r = pp_new(&b)) < 0 || (r = jvm_names_new(jni, b, &nm)) < 0)
		goto out;
	const char *kind = wall ? "wall" : "cpu";
	if ((r = pp_add_sample_type(b, "samples", "count")) < 0 ||
	    (r = pp_add_sample_type(b, kind, "nanoseconds")) < 0 ||
	    (r = pp_set_period(b, kind, "nanoseconds", (int64_t)interval_ns)) < 0 ||
	    (r = pp_set_default_sample_type(b, kind)) < 0 || (r = add_comment(b)) < 0)
		goto out;
	pp_set_time(b, start_ns, dur_ns);
	int64_t pid = getpid();
	for (uint32_t i = 0; i < JVA_TAB_CAP; i++) {
		struct jva_stack *s = &tab[i];
		uint64_t locs[JVA_MAX_NATIVE + JVS_MAX_FRAMES + JVA_MAX_SPLICE];
		if (!s->count)
			continue;
		for (uint32_t k = 0; k < s->nframes; k++) {
			const struct jva_frame *f = &s->frames[k];
			if (f->kind == JVA_F_NATIVE)
				r = native_location(b, f->v, &locs[k]);
			else if (f->kind == JVA_F_ERROR || !f->v)
				/* A NULL jmethodID: AGCT met a method with none allocated. */
				r = error_location(b, f->kind == JVA_F_ERROR ? f->v : 5, &locs[k]);
			else
				r = jvm_location(nm, (jmethodID)(uintptr_t)f->v, f->bci, &locs[k]);
			if (r < 0)
				goto out;
		}
		int64_t vals[2] = { (int64_t)s->count, (int64_t)(s->weight * interval_ns) };
		/* Named by its env; a thread not found there by its OS name. */
		char comm[64] = "";
		uint32_t tid = (uint32_t)s->tid;
		const struct jva_name *th = name_of(s->env);
		if (!th) {
			char path[64];
			snprintf(path, sizeof(path), "/proc/self/task/%u/comm", tid);
			if (util_read_file(path, comm, sizeof(comm)) < 0)
				comm[0] = '\0';
			comm[strcspn(comm, "\n")] = '\0';
		}
		struct pp_label labels[3] = {
			{ .key = "pid", .num = pid },
			{ .key = "thread_id", .num = th ? th->java_id : 0 },
			{ .key = "thread_name", .str = th ? th->name : comm },
		};
		if ((r = pp_add_sample(b, locs, s->nframes, vals, 2, labels, 3)) < 0)
			goto out;
	}
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, bytes);
out:
	free_modules();
	jvm_names_free(nm);
	pp_free(b);
	jva_discard();
	return r;
}
