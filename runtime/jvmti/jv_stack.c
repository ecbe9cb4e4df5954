/*
 * Java stack sampling on the agent thread. Each tick lists the live Java
 * threads and takes each one's stack with GetStackTrace (a per-thread
 * handshake in HotSpot 17+), or, with sampler=all, all of them with one
 * GetAllStackTraces (a global safepoint). docs/JVMTI.md compares the two.
 *
 * CPU clock: a thread is sampled when it is RUNNABLE and, where the JVM
 * grants can_get_thread_cpu_time, its CPU time advanced since the last tick
 * (a thread blocked in native code is RUNNABLE to the JVM too). The sample
 * then weighs the CPU time it used since the previous tick. Wall clock:
 * every thread, every tick, one interval each.
 *
 * Memory is bounded: JVS_MAX_STACKS distinct (thread, stack) keys of at most
 * JVS_MAX_FRAMES frames each (the root end of a deeper stack is cut), and
 * JVS_MAX_THREADS threads; past a cap the observation is counted in
 * `dropped`.
 */
#include "jv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "pprof.h"

struct jvs_thread {
	jlong java_id;
	jlong last_cpu;   /* -1: not read yet */
	char name[64];
};

struct jvs_stack {
	uint32_t slot;    /* thread slot + 1; 0: untracked thread */
	uint32_t nframes;
	uint64_t hash;
	uint64_t count;
	uint64_t value_ns;
	jvmtiFrameInfo *frames;
};

static struct {
	bool on, wall, all_at_once;
	uint32_t hz;
	uint64_t interval_ns;
	uint32_t gen;     /* thread-local storage tag of this capture */
	struct jvs_thread *threads;
	uint32_t nthreads;
	struct jvs_stack *tab; /* open addressing, JVS_TAB_CAP entries */
	uint32_t nstacks;
	struct jvs_stats st;
	jclass thread_cls;
	jmethodID get_id;
	jobject self;
	jvmtiFrameInfo frames[JVS_MAX_FRAMES];
} S;

#define JVS_TAB_CAP (2 * JVS_MAX_STACKS)

static void free_tables(void)
{
	if (S.tab)
		for (uint32_t i = 0; i < JVS_TAB_CAP; i++)
			free(S.tab[i].frames);
	free(S.tab);
	free(S.threads);
	S.tab = NULL;
	S.threads = NULL;
	S.nthreads = S.nstacks = 0;
}

static void drop_refs(JNIEnv *jni)
{
	if (S.thread_cls)
		(*jni)->DeleteGlobalRef(jni, S.thread_cls);
	if (S.self)
		(*jni)->DeleteGlobalRef(jni, S.self);
	S.thread_cls = NULL;
	S.self = NULL;
}

int jvs_start(JNIEnv *jni, uint32_t hz, bool wall, bool all_at_once)
{
	static uint32_t gen;
	jthread me = NULL;

	jvs_discard();
	drop_refs(jni);
	S.tab = calloc(JVS_TAB_CAP, sizeof(*S.tab));
	S.threads = calloc(JVS_MAX_THREADS, sizeof(*S.threads));
	if (!S.tab || !S.threads) {
		free_tables();
		return -ENOMEM;
	}
	jclass c = (*jni)->FindClass(jni, "java/lang/Thread");
	if (c) {
		S.thread_cls = (*jni)->NewGlobalRef(jni, c);
		S.get_id = (*jni)->GetMethodID(jni, c, "getId", "()J");
		(*jni)->DeleteLocalRef(jni, c);
	}
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	if ((*jv_jvmti)->GetCurrentThread(jv_jvmti, &me) == JVMTI_ERROR_NONE && me) {
		S.self = (*jni)->NewGlobalRef(jni, me);
		(*jni)->DeleteLocalRef(jni, me);
	}
	memset(&S.st, 0, sizeof(S.st));
	S.gen = ++gen & 0x7fff;
	if (!S.gen)
		S.gen = ++gen & 0x7fff;
	S.hz = hz;
	S.interval_ns = 1000000000ull / hz;
	S.wall = wall;
	S.all_at_once = all_at_once;
	S.on = true;
	return 0;
}

void jvs_discard(void)
{
	free_tables();
	S.on = false;
}

/* This capture's slot of a thread (1-based), assigned at first sight. */
static uint32_t slot_of(JNIEnv *jni, jthread t)
{
	void *v = NULL;
	jvmtiEnv *j = jv_jvmti;
	if ((*j)->GetThreadLocalStorage(j, t, &v) == JVMTI_ERROR_NONE && v) {
		uintptr_t u = (uintptr_t)v;
		if ((u >> 16) == S.gen && (u & 0xffff) >= 1 && (u & 0xffff) <= S.nthreads)
			return (uint32_t)(u & 0xffff);
	}
	if (S.nthreads >= JVS_MAX_THREADS)
		return 0;
	struct jvs_thread *th = &S.threads[S.nthreads];
	memset(th, 0, sizeof(*th));
	th->last_cpu = -1;
	jvmtiThreadInfo ti;
	memset(&ti, 0, sizeof(ti));
	if ((*j)->GetThreadInfo(j, t, &ti) == JVMTI_ERROR_NONE) {
		if (ti.name) {
			strncpy(th->name, ti.name, sizeof(th->name) - 1);
			(*j)->Deallocate(j, (unsigned char *)ti.name);
		}
		if (ti.thread_group)
			(*jni)->DeleteLocalRef(jni, ti.thread_group);
		if (ti.context_class_loader)
			(*jni)->DeleteLocalRef(jni, ti.context_class_loader);
	}
	if (S.get_id) {
		th->java_id = (*jni)->CallLongMethod(jni, t, S.get_id);
		if ((*jni)->ExceptionCheck(jni)) {
			(*jni)->ExceptionClear(jni);
			th->java_id = 0;
		}
	}
	S.nthreads++;
	(*j)->SetThreadLocalStorage(j, t, (void *)(((uintptr_t)S.gen << 16) | S.nthreads));
	return S.nthreads;
}

static uint64_t stack_hash(uint32_t slot, const jvmtiFrameInfo *f, jint n)
{
	uint64_t h = 1469598103934665603ull ^ slot;
	for (jint i = 0; i < n; i++) {
		h ^= (uint64_t)(uintptr_t)f[i].method;
		h *= 1099511628211ull;
		h ^= (uint64_t)f[i].location;
		h *= 1099511628211ull;
	}
	return h;
}

static void record(uint32_t slot, const jvmtiFrameInfo *f, jint n, uint64_t value_ns)
{
	uint64_t h = stack_hash(slot, f, n);
	for (uint32_t i = (uint32_t)h & (JVS_TAB_CAP - 1);; i = (i + 1) & (JVS_TAB_CAP - 1)) {
		struct jvs_stack *s = &S.tab[i];
		if (!s->count) {
			if (S.nstacks >= JVS_MAX_STACKS ||
			    !(s->frames = malloc((size_t)n * sizeof(*f)))) {
				S.st.dropped++;
				return;
			}
			memcpy(s->frames, f, (size_t)n * sizeof(*f));
			s->slot = slot;
			s->nframes = (uint32_t)n;
			s->hash = h;
			s->count = 1;
			s->value_ns = value_ns;
			S.nstacks++;
			S.st.samples++;
			return;
		}
		if (s->hash == h && s->slot == slot && s->nframes == (uint32_t)n &&
		    !memcmp(s->frames, f, (size_t)n * sizeof(*f))) {
			s->count++;
			s->value_ns += value_ns;
			S.st.samples++;
			return;
		}
	}
}

/*
 * Whether to take thread t's sample now, and its weight. CPU clock: it must
 * be RUNNABLE (not suspended or in a native wait the JVM knows of) and its
 * CPU time must have moved since the last tick.
 */
static bool want(uint32_t slot, jthread t, jint state, uint64_t *value_ns)
{
	*value_ns = S.interval_ns;
	if (S.wall)
		return true;
	if (!(state & JVMTI_THREAD_STATE_RUNNABLE) || (state & JVMTI_THREAD_STATE_SUSPENDED))
		return false;
	if (!jv_caps.thread_cpu || !slot)
		return true;
	struct jvs_thread *th = &S.threads[slot - 1];
	jlong cpu;
	if ((*jv_jvmti)->GetThreadCpuTime(jv_jvmti, t, &cpu) != JVMTI_ERROR_NONE)
		return true;
	jlong last = th->last_cpu;
	th->last_cpu = cpu;
	if (last < 0)
		return false; /* first sight: no baseline yet to tell running from waiting */
	if (cpu <= last)
		return false;
	*value_ns = (uint64_t)(cpu - last);
	return true;
}

static bool is_self(JNIEnv *jni, jthread t)
{
	return S.self && (*jni)->IsSameObject(jni, t, S.self);
}

void jvs_tick(JNIEnv *jni)
{
	jvmtiEnv *j = jv_jvmti;
	uint64_t v;
	if (!S.on)
		return;
	S.st.ticks++;
	if (S.all_at_once) {
		jvmtiStackInfo *si = NULL;
		jint n = 0;
		if ((*j)->GetAllStackTraces(j, JVS_MAX_FRAMES, &si, &n) != JVMTI_ERROR_NONE)
			return;
		for (jint i = 0; i < n; i++) {
			if (!is_self(jni, si[i].thread) && si[i].frame_count > 0) {
				uint32_t slot = slot_of(jni, si[i].thread);
				if (want(slot, si[i].thread, si[i].state, &v))
					record(slot, si[i].frame_buffer, si[i].frame_count, v);
			}
			(*jni)->DeleteLocalRef(jni, si[i].thread);
		}
		(*j)->Deallocate(j, (unsigned char *)si);
		return;
	}
	jthread *ts = NULL;
	jint n = 0;
	if ((*j)->GetAllThreads(j, &n, &ts) != JVMTI_ERROR_NONE)
		return;
	for (jint i = 0; i < n; i++) {
		jint state = 0, nf = 0;
		if (!is_self(jni, ts[i]) &&
		    (*j)->GetThreadState(j, ts[i], &state) == JVMTI_ERROR_NONE &&
		    (state & JVMTI_THREAD_STATE_ALIVE)) {
			uint32_t slot = slot_of(jni, ts[i]);
			if (want(slot, ts[i], state, &v) &&
			    (*j)->GetStackTrace(j, ts[i], 0, JVS_MAX_FRAMES, S.frames, &nf) ==
				    JVMTI_ERROR_NONE && nf > 0)
				record(slot, S.frames, nf, v);
		}
		(*jni)->DeleteLocalRef(jni, ts[i]);
	}
	(*j)->Deallocate(j, (unsigned char *)ts);
}

int jvs_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns,
		    struct jvs_stats *st, uint64_t *bytes)
{
	struct pp_builder *b = NULL;
	struct jvm_names *names = NULL;
	int r;

	if (!S.on)
		return -EINVAL;
	*st = S.st;
	if ((r = pp_new(&b)) < 0 || (r = jvm_names_new(jni, b, &names)) < 0)
		goto out;
	const char *kind = S.wall ? "wall" : "cpu";
	if ((r = pp_add_sample_type(b, "samples", "count")) < 0 ||
	    (r = pp_add_sample_type(b, kind, "nanoseconds")) < 0 ||
	    (r = pp_set_period(b, kind, "nanoseconds", (int64_t)S.interval_ns)) < 0 ||
	    (r = pp_set_default_sample_type(b, kind)) < 0)
		goto out;
	pp_set_time(b, start_ns, dur_ns);
	pp_add_comment(b, S.all_at_once ? "profilingd JVMTI agent: GetAllStackTraces (safepoint)"
		       : S.wall ? "profilingd JVMTI agent: per-thread GetStackTrace, all threads"
				: "profilingd JVMTI agent: per-thread GetStackTrace of running "
				  "RUNNABLE threads, weighted by thread CPU time");
	int64_t pid = getpid();
	for (uint32_t i = 0; i < JVS_TAB_CAP; i++) {
		struct jvs_stack *s = &S.tab[i];
		uint64_t locs[JVS_MAX_FRAMES];
		if (!s->count)
			continue;
		for (uint32_t k = 0; k < s->nframes; k++)
			if ((r = jvm_location(names, s->frames[k].method, s->frames[k].location,
					      &locs[k])) < 0)
				goto out;
		int64_t vals[2] = { (int64_t)s->count, (int64_t)s->value_ns };
		const struct jvs_thread *th = s->slot ? &S.threads[s->slot - 1] : NULL;
		/* The redactor keeps a sample by its pid label. */
		struct pp_label labels[3] = {
			{ .key = "pid", .num = pid },
			{ .key = "thread_id", .num = th ? th->java_id : 0 },
			{ .key = "thread_name", .str = th ? th->name : "" },
		};
		if ((r = pp_add_sample(b, locs, s->nframes, vals, 2, labels, 3)) < 0)
			goto out;
	}
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, bytes);
out:
	jvm_names_free(names);
	pp_free(b);
	drop_refs(jni);
	jvs_discard();
	return r;
}
