/*
 * JVM method events (issue #19; docs/METHOD_EVENTS.md, "JVM targets";
 * docs/JVMTI.md): who calls a chosen Java method, by bytecode injection.
 *
 * Install: the targets' classes that are loaded are retransformed
 * (RetransformClasses); the ClassFileLoadHook, on while a capture runs,
 * hands each named class to jv_inject.c, which puts a call of the static
 * native profilingd.MethodHook.hit(ID) at the entry of each target method
 * only. Classes that load later go through the same hook as they load;
 * one whose load straddled the hook's enabling is found by jve_recheck.
 * Remove (stop, expiry, cancel, the kill switch, a failure): the hook is
 * told to ignore calls, the ClassFileLoadHook stops changing anything and
 * the classes are retransformed again, so the JVM goes back to their
 * original bytes; GetBytecodes then checks that no method still calls the
 * hook. When removal fails, this process takes no further method events,
 * and the log and the result say so. JVMTI MethodEntry events are not used:
 * they put every thread into interpreter-only mode.
 *
 * The hook (any Java thread, at every hit) is re-entrancy guarded with a
 * thread-local flag, takes no lock and allocates nothing: it counts the hit
 * in its thread's slot and, every Nth hit, takes its stack with
 * GetStackTrace (the current thread: no safepoint) into the slot's bounded
 * table of distinct stacks. Past a cap it counts a drop. The slots are
 * allocated once, at the first capture, and kept for the VM's life, so a
 * stale call on a thread still running an old method version never
 * touches freed memory.
 */
#include "jv.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jtarget.h"
#include "jv_inject.h"
#include "log.h"
#include "hit_trace.h"
#include "pprof.h"
#include "util.h"

#define JVE_HOOK_CLASS "profilingd/MethodHook"
#define JVE_HOOK_NAME  "hit"
#define JVE_ALL        ((1u << JVE_MAX_TARGETS) - 1)

struct jve_stack {
	uint64_t hash;
	_Atomic uint64_t count;
	uint64_t first_ns;
	_Atomic uint64_t last_ns;
	uint32_t target, nframes;
	jvmtiFrameInfo f[JVE_FRAMES];
};

/* One recorded argument (a target's #args): its parameter index, its
 * jvi_arg_kind, a number or the string's UTF-8 (cut at a character's end
 * within HTR_ARG_STR_MAX bytes). */
struct jve_argv {
	uint8_t idx, kind, len;
	union {
		int64_t i;
		double d;
	} v;
	char s[HTR_ARG_STR_MAX];
};

/* A recorded hit's arguments, filled by the typed hooks right after its
 * hit call on the same thread; n is published last. */
struct jve_arghit {
	uint32_t stack;                   /* its stack's index in the slot */
	_Atomic uint32_t n;
	struct jve_argv a[JVI_ARGS_MAX];
};

struct jve_slot {
	int tid;
	_Atomic uint32_t nstacks;         /* entries published to the agent thread */
	_Atomic uint64_t hits[JVE_MAX_TARGETS];
	_Atomic uint64_t ns[JVE_MAX_TARGETS]; /* time in the hook, per target (the budget's) */
	_Atomic uint64_t lost;            /* stacks past the table */
	uint64_t since;                   /* owner only: hits since the last stack */
	struct jve_stack st[JVE_STACKS];
	/* Each recorded hit's time and stack, for the Perfetto result: the
	 * first JVE_RING of the capture, the rest counted in ring_drop. */
	struct { uint64_t ts; uint32_t stack, arg; } ring[JVE_RING]; /* arg: 1-based, 0 none */
	_Atomic uint32_t nring;
	_Atomic uint64_t ring_drop;
	/* Recorded hits with arguments: the first JVE_ARG_HITS in H.args, the
	 * rest counted in arg_drop (their hits and stacks still are). */
	_Atomic uint32_t narg;
	_Atomic uint64_t arg_drop;
};

/* The capture's state. Written by the agent thread while no capture runs
 * (gen == 0); the hook reads it while gen is this capture's. */
static struct {
	_Atomic uint32_t gen;             /* 0: off; else the hook's id >> 3 */
	_Atomic uint64_t seq;             /* captures so far: a thread's slot is this capture's */
	uint32_t next_gen;
	uint32_t every;
	/* The removed targets (bit t: over budget): the hook ignores them at
	 * once, before their classes are retransformed without them. */
	_Atomic uint32_t off;
	/* Hits taken so far and the cap: the hook itself stops at max_hits,
	 * so no more than that are ever recorded (the check only ends the
	 * capture). One shared counter: a relaxed load first, so once at the
	 * cap the hook writes nothing shared. */
	_Atomic uint64_t taken;
	uint64_t max_hits;
	struct jve_slot *slots;           /* JVE_SLOTS, allocated once */
	/* JVE_SLOTS x JVE_ARG_HITS, allocated at the first capture with #args
	 * and kept, as the slots are; targs: the targets with #args (bit t). */
	struct jve_arghit *args;
	uint32_t targs;
	_Atomic uint32_t nslots;
	_Atomic uint64_t untracked[JVE_MAX_TARGETS]; /* hits of threads past JVE_SLOTS */
	bool broken;                      /* a removal failed: no more method events */
	jclass hook_cls;                  /* global ref */
	jmethodID loader_name;            /* ClassLoader.getName (JDK 9+) */

	/* Read by the ClassFileLoadHook on loading threads, under lock. */
	pthread_mutex_t lock;
	bool hooking;
	struct jt_target t[JVE_MAX_TARGETS];
	char spelled[JVE_MAX_TARGETS][JVE_TARGET_LEN];
	unsigned nt;
	unsigned hooked[JVE_MAX_TARGETS];  /* methods rewritten, this capture */
	unsigned classes;
	bool rehooking;                    /* retransform_uncounted runs: not counted by the hook */
	char why[JVE_MAX_TARGETS][160];    /* the first refusal of a target's class */
	char note[256];                    /* the removal's outcome, for the result */
	uint64_t over_ns[JVE_MAX_TARGETS]; /* jve_check_budget: the mean that went over */
	uint64_t budget_ns;
	char removal[JVE_MAX_TARGETS][120]; /* a target's removal, when it failed */
	uint64_t install_ns, remove_ns;    /* how long each took, for the result */
	unsigned ticks, recheck_at;        /* jve_recheck's schedule */
	jint loaded;                       /* classes GetLoadedClasses listed at install */
} H = { .lock = PTHREAD_MUTEX_INITIALIZER };

static __thread bool in_hook;
/* The arguments of this thread's last hit, when it was recorded and its
 * target has #args; the typed hooks fill it, any later hit call clears it. */
static __thread struct jve_arghit *t_arg;
static __thread uint32_t t_arg_gen;   /* the capture t_arg belongs to */
/* The slot (1-based) of this thread in capture t_seq. Not the 12-bit
 * generation: that one comes round again after 4095 captures. */
static __thread uint64_t t_seq;
static __thread uint32_t t_slot;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void bump(_Atomic uint64_t *v, uint64_t by)
{
	/* One writer (the slot's thread): no read-modify-write bus lock. */
	atomic_store_explicit(v, atomic_load_explicit(v, memory_order_relaxed) + by,
			      memory_order_relaxed);
}

static struct jve_slot *my_slot(void)
{
	uint64_t seq = atomic_load_explicit(&H.seq, memory_order_acquire);
	if (t_seq != seq) {
		t_seq = seq;
		uint32_t i = atomic_fetch_add_explicit(&H.nslots, 1, memory_order_relaxed);
		t_slot = i < JVE_SLOTS ? i + 1 : 0;
		if (t_slot)
			H.slots[i].tid = (int)syscall(SYS_gettid);
	}
	return t_slot ? &H.slots[t_slot - 1] : NULL;
}

/* The stack's index in the slot's table, or -1 when it was not kept. */
static int keep_stack(struct jve_slot *sl, uint32_t target, uint64_t t0)
{
	jvmtiFrameInfo f[JVE_FRAMES];
	jint n = 0;
	/* Depth 1: frame 0 is MethodHook.hit itself; the target is next. */
	if ((*jv_jvmti)->GetStackTrace(jv_jvmti, NULL, 1, JVE_FRAMES, f, &n) != JVMTI_ERROR_NONE ||
	    n <= 0) {
		bump(&sl->lost, 1);
		return -1;
	}
	uint64_t h = 1469598103934665603ull ^ target;
	for (jint i = 0; i < n; i++) {
		h = (h ^ (uint64_t)(uintptr_t)f[i].method) * 1099511628211ull;
		h = (h ^ (uint64_t)f[i].location) * 1099511628211ull;
	}
	uint32_t ns = atomic_load_explicit(&sl->nstacks, memory_order_relaxed);
	for (uint32_t i = 0; i < ns; i++) {
		struct jve_stack *s = &sl->st[i];
		if (s->hash == h && s->target == target && s->nframes == (uint32_t)n &&
		    !memcmp(s->f, f, (size_t)n * sizeof(*f))) {
			bump(&s->count, 1);
			atomic_store_explicit(&s->last_ns, t0, memory_order_relaxed);
			return (int)i;
		}
	}
	if (ns >= JVE_STACKS) {
		bump(&sl->lost, 1);
		return -1;
	}
	struct jve_stack *s = &sl->st[ns];
	s->hash = h;
	s->target = target;
	s->nframes = (uint32_t)n;
	memcpy(s->f, f, (size_t)n * sizeof(*f));
	s->first_ns = t0;
	atomic_store_explicit(&s->last_ns, t0, memory_order_relaxed);
	atomic_store_explicit(&s->count, 1, memory_order_relaxed);
	atomic_store_explicit(&sl->nstacks, ns + 1, memory_order_release);
	return (int)ns;
}

/* A recorded hit's arguments entry (1-based index), or 0 past the cap. */
static uint32_t keep_args(struct jve_slot *sl, int stack)
{
	uint32_t n = atomic_load_explicit(&sl->narg, memory_order_relaxed);
	if (n >= JVE_ARG_HITS) {
		bump(&sl->arg_drop, 1);
		return 0;
	}
	struct jve_arghit *h = &H.args[(size_t)(sl - H.slots) * JVE_ARG_HITS + n];
	h->stack = (uint32_t)stack;
	atomic_store_explicit(&h->n, 0, memory_order_relaxed);
	atomic_store_explicit(&sl->narg, n + 1, memory_order_release);
	t_arg = h;
	t_arg_gen = atomic_load_explicit(&H.gen, memory_order_relaxed);
	return n + 1;
}

/* A recorded hit's (time, stack) for the Perfetto result; past the ring, a drop. */
static void keep_hit(struct jve_slot *sl, uint64_t t0, int stack, uint32_t arg)
{
	uint32_t n = atomic_load_explicit(&sl->nring, memory_order_relaxed);
	if (n >= JVE_RING) {
		bump(&sl->ring_drop, 1);
		return;
	}
	sl->ring[n].ts = t0;
	sl->ring[n].stack = (uint32_t)stack;
	sl->ring[n].arg = arg;
	atomic_store_explicit(&sl->nring, n + 1, memory_order_release);
}

/* profilingd.MethodHook.hit(int): every hooked method's first call. */
static void JNICALL hook_hit(JNIEnv *jni, jclass cls, jint id)
{
	if (in_hook)
		return;
	t_arg = NULL;
	uint32_t gen = atomic_load_explicit(&H.gen, memory_order_acquire);
	/* A call from a capture that ended (an old method version still running). */
	if (!gen || ((uint32_t)id >> 3) != gen)
		return;
	uint32_t target = (uint32_t)id & 7;
	if (atomic_load_explicit(&H.off, memory_order_relaxed) & (1u << target))
		return;
	/* Exactly max_hits: a hit past the cap is not taken, and once there
	 * the shared counter is only read (see H.taken). */
	if (atomic_load_explicit(&H.taken, memory_order_relaxed) >= H.max_hits ||
	    atomic_fetch_add_explicit(&H.taken, 1, memory_order_relaxed) >= H.max_hits)
		return;
	in_hook = true;
	uint64_t t0 = now_ns();
	struct jve_slot *sl = my_slot();
	if (!sl) {
		atomic_fetch_add_explicit(&H.untracked[target], 1, memory_order_relaxed);
	} else {
		bump(&sl->hits[target], 1);
		if (++sl->since >= H.every) {
			sl->since = 0;
			int k = keep_stack(sl, target, t0);
			if (k >= 0)
				keep_hit(sl, t0, k, (H.targs & (1u << target)) && H.args
							    ? keep_args(sl, k) : 0);
		}
		bump(&sl->ns[target], now_ns() - t0);
	}
	in_hook = false;
}

/* The next argument of this thread's recorded hit, or NULL (no hit
 * recorded, all taken, a bad index). */
static struct jve_argv *arg_next(jint idx, uint8_t kind, uint32_t *n)
{
	struct jve_arghit *h = t_arg;
	if (!h || in_hook || idx < 0 || idx >= JVI_ARGS_MAX)
		return NULL;
	/* The capture ended between the hit and this call: a next one may
	 * have handed the entry to another hit already. */
	if (atomic_load_explicit(&H.gen, memory_order_acquire) != t_arg_gen) {
		t_arg = NULL;
		return NULL;
	}
	*n = atomic_load_explicit(&h->n, memory_order_relaxed);
	if (*n >= JVI_ARGS_MAX)
		return NULL;
	struct jve_argv *a = &h->a[*n];
	a->idx = (uint8_t)idx;
	a->kind = kind;
	a->len = 0;
	return a;
}

static void arg_done(uint32_t n)
{
	atomic_store_explicit(&t_arg->n, n + 1, memory_order_release);
}

/* profilingd.MethodHook.argI/argJ/argF/argD(int index, T value). */
static void JNICALL hook_arg_i(JNIEnv *jni, jclass cls, jint idx, jint v)
{
	uint32_t n;
	struct jve_argv *a = arg_next(idx, JVI_ARG_INT, &n);
	if (a) {
		a->v.i = v;
		arg_done(n);
	}
}

static void JNICALL hook_arg_j(JNIEnv *jni, jclass cls, jint idx, jlong v)
{
	uint32_t n;
	struct jve_argv *a = arg_next(idx, JVI_ARG_LONG, &n);
	if (a) {
		a->v.i = v;
		arg_done(n);
	}
}

static void JNICALL hook_arg_f(JNIEnv *jni, jclass cls, jint idx, jfloat v)
{
	uint32_t n;
	struct jve_argv *a = arg_next(idx, JVI_ARG_FLOAT, &n);
	if (a) {
		a->v.d = v;
		arg_done(n);
	}
}

static void JNICALL hook_arg_d(JNIEnv *jni, jclass cls, jint idx, jdouble v)
{
	uint32_t n;
	struct jve_argv *a = arg_next(idx, JVI_ARG_DOUBLE, &n);
	if (a) {
		a->v.d = v;
		arg_done(n);
	}
}

/* UTF-16 code units to UTF-8 in out (cap bytes, no NUL): whole characters
 * only; a lone surrogate becomes '?'. The bytes written. */
static size_t utf16_to_utf8(const jchar *u, size_t n, char *out, size_t cap)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t c = u[i];
		if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && u[i + 1] >= 0xdc00 &&
		    u[i + 1] <= 0xdfff) {
			c = 0x10000 + ((c - 0xd800) << 10) + (u[i + 1] - 0xdc00u);
			i++;
		} else if (c >= 0xd800 && c <= 0xdfff) {
			c = '?';
		}
		uint8_t b[4];
		size_t k;
		if (c < 0x80) {
			b[0] = (uint8_t)c;
			k = 1;
		} else if (c < 0x800) {
			b[0] = (uint8_t)(0xc0 | c >> 6);
			b[1] = (uint8_t)(0x80 | (c & 0x3f));
			k = 2;
		} else if (c < 0x10000) {
			b[0] = (uint8_t)(0xe0 | c >> 12);
			b[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
			b[2] = (uint8_t)(0x80 | (c & 0x3f));
			k = 3;
		} else {
			b[0] = (uint8_t)(0xf0 | c >> 18);
			b[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
			b[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
			b[3] = (uint8_t)(0x80 | (c & 0x3f));
			k = 4;
		}
		if (k > cap - o)
			break;
		memcpy(out + o, b, k);
		o += k;
	}
	return o;
}

/* profilingd.MethodHook.argS(int index, String value): its first
 * JVE_ARG_UNITS UTF-16 code units, copied with GetStringRegion into this
 * thread's stack (no allocation, no pinning), as UTF-8. */
static void JNICALL hook_arg_s(JNIEnv *jni, jclass cls, jint idx, jstring v)
{
	uint32_t n;
	struct jve_argv *a = arg_next(idx, JVI_ARG_STRING, &n);
	if (!a)
		return;
	if (!v) {
		memcpy(a->s, "<null>", 6);
		a->len = 6;
		arg_done(n);
		return;
	}
	jchar u[JVE_ARG_UNITS];
	jsize len = (*jni)->GetStringLength(jni, v);
	jsize k = len < JVE_ARG_UNITS ? len : JVE_ARG_UNITS;
	if (k > 0)
		(*jni)->GetStringRegion(jni, v, 0, k, u);
	if ((*jni)->ExceptionCheck(jni)) {
		(*jni)->ExceptionClear(jni);
		return;
	}
	a->len = (uint8_t)utf16_to_utf8(u, k > 0 ? (size_t)k : 0, a->s, sizeof(a->s));
	arg_done(n);
}

/* ------------------------------------------------------------ classes */

/* The name a target's @LOADER is matched with: getName(), "boot" for NULL. */
static bool loader_is(JNIEnv *jni, jobject loader, const char *want)
{
	if (!*want)
		return true;
	if (!loader)
		return !strcmp(want, "boot");
	if (!H.loader_name || !jni)
		return false;
	jstring s = (*jni)->CallObjectMethod(jni, loader, H.loader_name);
	if ((*jni)->ExceptionCheck(jni)) {
		(*jni)->ExceptionClear(jni);
		return false;
	}
	bool eq = false;
	if (s) {
		const char *c = (*jni)->GetStringUTFChars(jni, s, NULL);
		eq = c && !strcmp(c, want);
		if (c)
			(*jni)->ReleaseStringUTFChars(jni, s, c);
		(*jni)->DeleteLocalRef(jni, s);
	}
	return eq;
}

void JNICALL jve_on_class_file_load(jvmtiEnv *j, JNIEnv *jni, jclass redefined, jobject loader,
				    const char *name, jobject pd, jint len,
				    const unsigned char *data, jint *new_len,
				    unsigned char **new_data)
{
	struct jvi_target t[JVE_MAX_TARGETS];
	unsigned idx[JVE_MAX_TARGETS], by[JVE_MAX_TARGETS], hooked = 0;
	size_t nt = 0;
	uint8_t *out = NULL;
	size_t out_len = 0;
	char err[160];

	static __thread bool in_cflh;
	/* Loading a class inside this hook (the loader's getName) comes back
	 * here on the same thread, which already holds the lock. */
	if (!name || len <= 0 || in_cflh)
		return;
	in_cflh = true;
	pthread_mutex_lock(&H.lock);
	if (!H.hooking)
		goto out;
	uint32_t gen = atomic_load(&H.gen), off = atomic_load(&H.off);
	for (unsigned i = 0; i < H.nt; i++)
		if (!(off & (1u << i)) && !strcmp(H.t[i].cls, name) &&
		    loader_is(jni, loader, H.t[i].loader)) {
			t[nt] = (struct jvi_target){ .method = H.t[i].method,
						     .desc = H.t[i].desc[0] ? H.t[i].desc : NULL,
						     .id = (uint16_t)(gen << 3 | i),
						     .args = H.t[i].args };
			idx[nt++] = i;
		}
	if (!nt)
		goto out;
	static const struct jvi_hook hook = { .cls = JVE_HOOK_CLASS, .name = JVE_HOOK_NAME };
	int r = jvi_rewrite(data, (size_t)len, t, nt, &hook, &out, &out_len, &hooked, by, err,
			    sizeof(err));
	if (r < 0) {
		LOG_W("method events: class %s left unchanged: %s", name, err);
		for (size_t k = 0; k < nt; k++)
			if (!H.why[idx[k]][0])
				util_fmt(H.why[idx[k]], sizeof(H.why[0]), "class %s refused: %s", name,
					 err);
		goto out;
	}
	if (!hooked || out_len > INT32_MAX)
		goto out;
	unsigned char *mem = NULL;
	if ((*j)->Allocate(j, (jlong)out_len, &mem) != JVMTI_ERROR_NONE)
		goto out;
	memcpy(mem, out, out_len);
	*new_data = mem;
	*new_len = (jint)out_len;
	if (!(redefined && H.rehooking)) {
		for (size_t k = 0; k < nt; k++)
			H.hooked[idx[k]] += by[k];
		H.classes++;
	}
	LOG_D("method events: %s %s, %u method(s) hooked", name,
	      redefined ? "retransformed" : "hooked as it loads", hooked);
out:
	pthread_mutex_unlock(&H.lock);
	in_cflh = false;
	free(out);
}

/* How many classes the last GetLoadedClasses listed. */
static jint last_loaded;

/* Loaded classes named by a target of mask (bit t: target t; global refs
 * in *out, *n of them). */
static int matching_classes(JNIEnv *jni, unsigned mask, jclass **out, jint *n, bool *seen)
{
	jvmtiEnv *j = jv_jvmti;
	jclass *all = NULL;
	jint na = 0;
	*out = NULL;
	*n = 0;
	if ((*j)->GetLoadedClasses(j, &na, &all) != JVMTI_ERROR_NONE)
		return -EIO;
	last_loaded = na;
	jclass *m = calloc((size_t)na + 1, sizeof(*m));
	if (!m) {
		(*j)->Deallocate(j, (unsigned char *)all);
		return -ENOMEM;
	}
	for (jint i = 0; i < na; i++) {
		char *sig = NULL;
		jboolean mod = JNI_FALSE;
		bool want = false;
		if ((*j)->GetClassSignature(j, all[i], &sig, NULL) == JVMTI_ERROR_NONE && sig &&
		    sig[0] == 'L') {
			size_t l = strlen(sig);
			for (unsigned k = 0; k < H.nt; k++) {
				if (!(mask & (1u << k)) || l != strlen(H.t[k].cls) + 2 ||
				    strncmp(sig + 1, H.t[k].cls, l - 2))
					continue;
				jobject ld = NULL;
				(*j)->GetClassLoader(j, all[i], &ld);
				if (loader_is(jni, ld, H.t[k].loader)) {
					want = true;
					if (seen)
						seen[k] = true;
				}
				if (ld)
					(*jni)->DeleteLocalRef(jni, ld);
			}
		}
		if (sig)
			(*j)->Deallocate(j, (unsigned char *)sig);
		if (want && (*j)->IsModifiableClass(j, all[i], &mod) == JVMTI_ERROR_NONE && mod)
			m[(*n)++] = (*jni)->NewGlobalRef(jni, all[i]);
		(*jni)->DeleteLocalRef(jni, all[i]);
	}
	(*j)->Deallocate(j, (unsigned char *)all);
	*out = m;
	return 0;
}

static void free_classes(JNIEnv *jni, jclass *c, jint n)
{
	for (jint i = 0; c && i < n; i++)
		(*jni)->DeleteGlobalRef(jni, c[i]);
	free(c);
}

/* Methods of classes c that call the hook of generation gen for a target
 * of mask (GetBytecodes), and methods of those targets' names that do not. */
static void count_hooked(jclass *c, jint n, uint32_t gen, unsigned mask, unsigned *hooked,
			 unsigned *clean)
{
	jvmtiEnv *j = jv_jvmti;
	*hooked = *clean = 0;
	if (!jv_caps.bytecodes)
		return;
	for (jint i = 0; i < n; i++) {
		jmethodID *ms = NULL;
		jint nm = 0;
		if ((*j)->GetClassMethods(j, c[i], &nm, &ms) != JVMTI_ERROR_NONE)
			continue;
		for (jint k = 0; k < nm; k++) {
			char *name = NULL;
			bool named = false;
			if ((*j)->GetMethodName(j, ms[k], &name, NULL, NULL) == JVMTI_ERROR_NONE &&
			    name)
				for (unsigned t = 0; t < H.nt && !named; t++)
					named = (mask & (1u << t)) && !strcmp(name, H.t[t].method);
			if (name)
				(*j)->Deallocate(j, (unsigned char *)name);
			unsigned char *b = NULL;
			jint bl = 0;
			if (!named || (*j)->GetBytecodes(j, ms[k], &bl, &b) != JVMTI_ERROR_NONE)
				continue;
			/* The prologue starts sipush ID; invokestatic (jv_inject.h). */
			uint32_t id = bl >= JVI_HOOK_LEN ? (uint32_t)b[1] << 8 | b[2] : 0;
			if (bl >= JVI_HOOK_LEN && b[0] == 0x11 && b[3] == 0xb8 &&
			    (id >> 3) == gen && (mask & (1u << (id & 7))))
				(*hooked)++;
			else
				(*clean)++;
			(*j)->Deallocate(j, b);
		}
		(*j)->Deallocate(j, (unsigned char *)ms);
	}
}

/* ----------------------------------------------------------- capture */

/* The hook class, defined once in the boot loader so every loader sees it. */
static int define_hook(JNIEnv *jni, char *why, size_t n)
{
	if (H.hook_cls)
		return 0;
	static const struct jvi_hook hook = { .cls = JVE_HOOK_CLASS, .name = JVE_HOOK_NAME };
	uint8_t *b = NULL;
	size_t bl = 0;
	int r = jvi_hook_class(&hook, &b, &bl);
	if (r < 0) {
		util_fmt(why, n, "cannot build the hook class: %s", strerror(-r));
		return r;
	}
	jclass c = (*jni)->DefineClass(jni, JVE_HOOK_CLASS, NULL, (const jbyte *)b, (jsize)bl);
	free(b);
	if (!c) {
		(*jni)->ExceptionClear(jni);
		util_fmt(why, n, "cannot define %s in the boot loader", JVE_HOOK_CLASS);
		return -EIO;
	}
	JNINativeMethod nm[1 + JVI_ARG_KINDS] = {
		{ .name = JVE_HOOK_NAME, .signature = JVI_HOOK_DESC, .fnPtr = (void *)hook_hit },
	};
	void *fn[JVI_ARG_KINDS] = {
		[JVI_ARG_INT] = (void *)hook_arg_i, [JVI_ARG_LONG] = (void *)hook_arg_j,
		[JVI_ARG_FLOAT] = (void *)hook_arg_f, [JVI_ARG_DOUBLE] = (void *)hook_arg_d,
		[JVI_ARG_STRING] = (void *)hook_arg_s,
	};
	for (unsigned k = 0; k < JVI_ARG_KINDS; k++)
		nm[1 + k] = (JNINativeMethod){ .name = (char *)jvi_arg_hooks[k].name,
					       .signature = (char *)jvi_arg_hooks[k].desc,
					       .fnPtr = fn[k] };
	if ((*jni)->RegisterNatives(jni, c, nm, 1 + JVI_ARG_KINDS) != 0) {
		(*jni)->ExceptionClear(jni);
		(*jni)->DeleteLocalRef(jni, c);
		util_fmt(why, n, "cannot register the hook's native method");
		return -EIO;
	}
	H.hook_cls = (*jni)->NewGlobalRef(jni, c);
	(*jni)->DeleteLocalRef(jni, c);
	jclass cl = (*jni)->FindClass(jni, "java/lang/ClassLoader");
	if (cl) {
		H.loader_name = (*jni)->GetMethodID(jni, cl, "getName", "()Ljava/lang/String;");
		(*jni)->DeleteLocalRef(jni, cl);
	}
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	return 0;
}

/* A class neither loaded nor found by the system loader: a typo, most likely. */
static bool on_class_path(JNIEnv *jni, const char *cls)
{
	char res[JT_CLASS_MAX + 8];
	util_fmt(res, sizeof(res), "%s.class", cls);
	jclass cl = (*jni)->FindClass(jni, "java/lang/ClassLoader");
	jmethodID m = cl ? (*jni)->GetStaticMethodID(jni, cl, "getSystemResource",
						   "(Ljava/lang/String;)Ljava/net/URL;") : NULL;
	jstring s = m ? (*jni)->NewStringUTF(jni, res) : NULL;
	jobject url = s ? (*jni)->CallStaticObjectMethod(jni, cl, m, s) : NULL;
	if ((*jni)->ExceptionCheck(jni))
		(*jni)->ExceptionClear(jni);
	bool found = url != NULL;
	if (url)
		(*jni)->DeleteLocalRef(jni, url);
	if (s)
		(*jni)->DeleteLocalRef(jni, s);
	if (cl)
		(*jni)->DeleteLocalRef(jni, cl);
	return found;
}

/* Remove every hook of this capture (see the top). 0, or -EIO when some
 * method still calls the hook: then this process takes no more captures. */
static int remove_hooks(JNIEnv *jni)
{
	jvmtiEnv *j = jv_jvmti;
	uint32_t gen = atomic_load(&H.gen);
	jclass *c = NULL;
	jint n = 0;
	unsigned still = 0, clean = 0;
	uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);

	atomic_store_explicit(&H.gen, 0, memory_order_release);
	pthread_mutex_lock(&H.lock);
	H.hooking = false;
	pthread_mutex_unlock(&H.lock);
	int r = matching_classes(jni, JVE_ALL, &c, &n, NULL);
	jvmtiError e = JVMTI_ERROR_NONE;
	if (r == 0 && n > 0)
		e = (*j)->RetransformClasses(j, n, c);
	(*j)->SetEventNotificationMode(j, JVMTI_DISABLE, JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, NULL);
	if (r == 0 && e == JVMTI_ERROR_NONE)
		count_hooked(c, n, gen, JVE_ALL, &still, &clean);
	free_classes(jni, c, n);
	H.remove_ns = util_now_ns(CLOCK_MONOTONIC) - t0;
	if (r < 0 || e != JVMTI_ERROR_NONE || still) {
		H.broken = true;
		util_fmt(H.note, sizeof(H.note), "hooks NOT removed (%s; %u method(s) still call the "
			 "hook): this process takes no further method events",
			 r < 0 ? strerror(-r) : e != JVMTI_ERROR_NONE ? "RetransformClasses failed"
								    : "bytecodes checked", still);
		LOG_E("method events: %s", H.note);
		return -EIO;
	}
	util_fmt(H.note, sizeof(H.note), "hooks removed in %.1f ms: %u class(es) retransformed back "
		 "to their original bytes; %u target method(s) checked with GetBytecodes, none calls "
		 "the hook", (double)H.remove_ns / 1e6, (unsigned)n, clean);
	LOG_D("method events: %s", H.note);
	return 0;
}

int jve_start(JNIEnv *jni, char **targets, size_t nt, uint32_t every, uint64_t max_hits,
	      char *why, size_t n)
{
	jvmtiEnv *j = jv_jvmti;
	struct jt_target t[JVE_MAX_TARGETS];
	uint64_t t0 = util_now_ns(CLOCK_MONOTONIC);
	int r;

	if (H.broken) {
		util_fmt(why, n, "method events are off in this process: an earlier removal of "
			 "hooks failed");
		return -EIO;
	}
	if (!jv_caps.retransform) {
		util_fmt(why, n, "this JVM does not grant can_retransform_classes");
		return -ENOTSUP;
	}
	if (nt == 0 || nt > JVE_MAX_TARGETS) {
		util_fmt(why, n, "method events need 1..%d targets, got %zu", JVE_MAX_TARGETS, nt);
		return -EINVAL;
	}
	for (size_t i = 0; i < nt; i++) {
		char w[160];
		if (!targets[i] || strlen(targets[i]) >= JVE_TARGET_LEN ||
		    jt_parse(targets[i], &t[i], w, sizeof(w)) < 0) {
			util_fmt(why, n, "method target '%.64s': %s", targets[i] ? targets[i] : "",
				 targets[i] && strlen(targets[i]) < JVE_TARGET_LEN ? w : "too long");
			return -EINVAL;
		}
	}
	if (!H.slots && !(H.slots = calloc(JVE_SLOTS, sizeof(*H.slots)))) {
		util_fmt(why, n, "out of memory");
		return -ENOMEM;
	}
	uint32_t targs = 0;
	for (size_t i = 0; i < nt; i++)
		if (t[i].args)
			targs |= 1u << i;
	if (targs && !H.args && !(H.args = calloc((size_t)JVE_SLOTS * JVE_ARG_HITS,
						     sizeof(*H.args)))) {
		util_fmt(why, n, "out of memory for the arguments");
		return -ENOMEM;
	}
	if ((r = define_hook(jni, why, n)) < 0)
		return r;

	/* No capture runs (gen is 0): the slots are ours to reset. */
	memset(H.slots, 0, JVE_SLOTS * sizeof(*H.slots));
	atomic_store(&H.nslots, 0);
	for (unsigned i = 0; i < JVE_MAX_TARGETS; i++)
		atomic_store(&H.untracked[i], 0);
	H.every = every ? every : 1;
	H.targs = targs;
	H.max_hits = max_hits ? max_hits : UINT64_MAX;
	atomic_store(&H.taken, 0);
	atomic_store(&H.off, 0);
	atomic_fetch_add(&H.seq, 1);
	H.next_gen = H.next_gen % 4095 + 1; /* 1..4095: id = gen << 3 | target fits sipush */
	pthread_mutex_lock(&H.lock);
	memcpy(H.t, t, nt * sizeof(t[0]));
	for (size_t i = 0; i < nt; i++)
		util_strlcpy(H.spelled[i], targets[i], sizeof(H.spelled[i]));
	H.nt = (unsigned)nt;
	memset(H.hooked, 0, sizeof(H.hooked));
	memset(H.why, 0, sizeof(H.why));
	H.note[0] = '\0';
	memset(H.over_ns, 0, sizeof(H.over_ns));
	memset(H.removal, 0, sizeof(H.removal));
	H.budget_ns = 0;
	H.classes = 0;
	H.ticks = 0;
	H.recheck_at = 1;
	H.hooking = true;
	pthread_mutex_unlock(&H.lock);
	atomic_store_explicit(&H.gen, H.next_gen, memory_order_release);

	jvmtiError e = (*j)->SetEventNotificationMode(j, JVMTI_ENABLE,
						      JVMTI_EVENT_CLASS_FILE_LOAD_HOOK, NULL);
	jclass *c = NULL;
	jint nc = 0;
	bool seen[JVE_MAX_TARGETS] = { false };
	if (e != JVMTI_ERROR_NONE) {
		util_fmt(why, n, "cannot enable ClassFileLoadHook: JVMTI error %d", (int)e);
		r = -EIO;
		goto fail;
	}
	if ((r = matching_classes(jni, JVE_ALL, &c, &nc, seen)) < 0) {
		util_fmt(why, n, "cannot list the loaded classes: %s", strerror(-r));
		goto fail;
	}
	if (nc > 0 && (e = (*j)->RetransformClasses(j, nc, c)) != JVMTI_ERROR_NONE) {
		util_fmt(why, n, "RetransformClasses failed: JVMTI error %d", (int)e);
		r = -EIO;
		goto fail;
	}
	unsigned hooked = 0, clean = 0;
	H.loaded = last_loaded;
	count_hooked(c, nc, H.next_gen, JVE_ALL, &hooked, &clean);
	free_classes(jni, c, nc);
	c = NULL;
	/* A loaded class without the method, or refused: a clear refusal now.
	 * A class not loaded yet is hooked when it loads, if it can be found. */
	for (unsigned i = 0; i < nt; i++) {
		pthread_mutex_lock(&H.lock);
		unsigned h = H.hooked[i];
		char w[160];
		util_strlcpy(w, H.why[i], sizeof(w));
		pthread_mutex_unlock(&H.lock);
		if (h)
			continue;
		if (w[0]) {
			util_fmt(why, n, "method target '%.64s': %s", targets[i], w);
		} else if (seen[i]) {
			util_fmt(why, n, "method target '%.64s': class %s has no method %s%s "
				 "with code (abstract and native methods cannot be hooked)",
				 targets[i], t[i].cls, t[i].method, t[i].desc);
		} else if (!t[i].loader[0] && !on_class_path(jni, t[i].cls)) {
			util_fmt(why, n, "method target '%.64s': class %s is not loaded and the "
				 "system class loader cannot find it", targets[i], t[i].cls);
		} else {
			LOG_I("method events: %s is not loaded yet: hooked when it loads", t[i].cls);
			continue;
		}
		r = -EINVAL;
		goto fail;
	}
	H.install_ns = util_now_ns(CLOCK_MONOTONIC) - t0;
	LOG_I("method events: %u target(s), %u class(es) retransformed, %u method(s) call the hook "
	      "(GetBytecodes); installed in %.1f ms over %d loaded classes", (unsigned)nt,
	      (unsigned)nc, hooked, (double)H.install_ns / 1e6, (int)H.loaded);
	return 0;
fail:
	free_classes(jni, c, nc);
	LOG_W("method events refused: %s", why);
	if (remove_hooks(jni) < 0)
		util_fmt(why + strlen(why), n - strlen(why), "; %s", H.note);
	return r;
}

/* RetransformClasses of classes whose hooks are counted already, or by
 * the caller from the bytecodes: the ClassFileLoadHook does not add them
 * to H.hooked (a class loading meanwhile still counts). */
static jvmtiError retransform_uncounted(jclass *c, jint n)
{
	jvmtiEnv *j = jv_jvmti;
	pthread_mutex_lock(&H.lock);
	H.rehooking = true;
	pthread_mutex_unlock(&H.lock);
	jvmtiError e = (*j)->RetransformClasses(j, n, c);
	pthread_mutex_lock(&H.lock);
	H.rehooking = false;
	pthread_mutex_unlock(&H.lock);
	return e;
}

void jve_recheck(JNIEnv *jni)
{
	uint32_t gen = atomic_load(&H.gen), off = atomic_load(&H.off);
	if (!gen || H.broken || H.recheck_at > JVE_RECHECK_LAST || ++H.ticks < H.recheck_at)
		return;
	H.recheck_at *= 2;
	unsigned mask = 0;
	pthread_mutex_lock(&H.lock);
	for (unsigned t = 0; t < H.nt; t++)
		if (!H.hooked[t] && !(off & (1u << t)))
			mask |= 1u << t;
	pthread_mutex_unlock(&H.lock);
	if (!mask) {
		H.recheck_at = JVE_RECHECK_LAST + 1; /* every target is in: done */
		return;
	}
	jclass *c = NULL;
	jint n = 0;
	if (matching_classes(jni, mask, &c, &n, NULL) < 0 || n == 0) {
		free_classes(jni, c, n);
		return;
	}
	/* Counted from the bytecodes below, per target, not by the hook: a
	 * class listed here may hold a target hooked already, which the
	 * retransform hooks again. */
	jvmtiError e = retransform_uncounted(c, n);
	unsigned total = 0;
	for (unsigned t = 0; t < H.nt && e == JVMTI_ERROR_NONE; t++) {
		unsigned h = 0, clean = 0;
		if (!(mask & (1u << t)))
			continue;
		count_hooked(c, n, gen, 1u << t, &h, &clean);
		pthread_mutex_lock(&H.lock);
		H.hooked[t] += h;
		pthread_mutex_unlock(&H.lock);
		total += h;
	}
	LOG_I("method events: %d class(es) of a target with nothing hooked were loaded at tick %u: "
	      "retransformed%s, %u method(s) now call the hook", (int)n, H.ticks,
	      e == JVMTI_ERROR_NONE ? "" : " (RetransformClasses failed)", total);
	free_classes(jni, c, n);
}

bool jve_enough(void)
{
	return H.max_hits != UINT64_MAX &&
	       atomic_load_explicit(&H.taken, memory_order_relaxed) >= H.max_hits;
}

/* Take target t's hooks out while the others run on: the hook ignores it
 * from now (H.off), the ClassFileLoadHook no longer hooks it, and its
 * classes are retransformed without it (other targets of the same class
 * are put back by the same pass). GetBytecodes then checks that none of
 * its methods still calls the hook. A failure ends method events in this
 * process, as a failed removal at the end does. */
static void remove_target(JNIEnv *jni, unsigned t)
{
	jclass *c = NULL;
	jint n = 0;
	unsigned still = 0, clean = 0;

	/* Under the lock: a ClassFileLoadHook running now ends first. */
	pthread_mutex_lock(&H.lock);
	atomic_fetch_or(&H.off, 1u << t);
	pthread_mutex_unlock(&H.lock);
	int r = matching_classes(jni, 1u << t, &c, &n, NULL);
	jvmtiError e = JVMTI_ERROR_NONE;
	if (r == 0 && n > 0)
		e = retransform_uncounted(c, n);
	if (r == 0 && e == JVMTI_ERROR_NONE)
		count_hooked(c, n, atomic_load(&H.gen), 1u << t, &still, &clean);
	free_classes(jni, c, n);
	if (r < 0 || e != JVMTI_ERROR_NONE || still) {
		H.broken = true;
		util_fmt(H.removal[t], sizeof(H.removal[t]), "NOT removed (%s; %u method(s) still "
			 "call the hook; ignored by the hook)",
			 r < 0 ? strerror(-r) : e != JVMTI_ERROR_NONE ? "RetransformClasses failed"
								    : "bytecodes checked", still);
		LOG_E("method events: target %s over budget: hooks %s: this process takes no "
		      "further method events", H.spelled[t], H.removal[t]);
		return;
	}
	LOG_I("method events: target %s over budget (%llu ns a hit, budget %llu us): removed, "
	      "%u class(es) retransformed, %u method(s) checked", H.spelled[t],
	      (unsigned long long)H.over_ns[t], (unsigned long long)(H.budget_ns / 1000),
	      (unsigned)n, clean);
}

bool jve_check_budget(JNIEnv *jni, uint64_t budget_ns)
{
	uint64_t ns[JVE_MAX_TARGETS] = { 0 }, hits[JVE_MAX_TARGETS] = { 0 };
	uint32_t n = atomic_load(&H.nslots), off = atomic_load(&H.off);
	if (!H.slots || !H.nt)
		return false;
	/* The hook times itself per target in the slots; untracked threads'
	 * hits are not timed. */
	for (uint32_t i = 0; i < n && i < JVE_SLOTS; i++)
		for (unsigned t = 0; t < H.nt; t++) {
			ns[t] += atomic_load_explicit(&H.slots[i].ns[t], memory_order_relaxed);
			hits[t] += atomic_load_explicit(&H.slots[i].hits[t], memory_order_relaxed);
		}
	for (unsigned t = 0; t < H.nt; t++) {
		if ((off & (1u << t)) || hits[t] < JVE_BUDGET_MIN_HITS ||
		    ns[t] <= budget_ns * hits[t])
			continue;
		H.over_ns[t] = ns[t] / hits[t];
		H.budget_ns = budget_ns;
		remove_target(jni, t);
		off |= 1u << t;
	}
	return off == (1u << H.nt) - 1 || H.broken;
}

/* A target's budget outcome, for the note and the comments. */
static void budget_line(unsigned t, char *buf, size_t n)
{
	util_fmt(buf, n, "method target %s: over budget (%llu ns a hit, budget %llu µs): %s",
		 H.spelled[t], (unsigned long long)H.over_ns[t],
		 (unsigned long long)(H.budget_ns / 1000), H.removal[t][0] ? H.removal[t] : "removed");
}

const char *jve_budget_note(char *buf, size_t n)
{
	size_t len = 0;
	if (!n)
		return NULL;
	buf[0] = '\0';
	for (unsigned t = 0; t < H.nt && len + 1 < n; t++) {
		if (!(atomic_load(&H.off) & (1u << t)))
			continue;
		if (len) {
			util_fmt(buf + len, n - len, "; ");
			len += strlen(buf + len);
		}
		if (len + 1 < n) {
			budget_line(t, buf + len, n - len);
			len += strlen(buf + len);
		}
	}
	return buf[0] ? buf : NULL;
}

int jve_stop(JNIEnv *jni)
{
	if (!atomic_load(&H.gen) && !H.hooking)
		return 0;
	return remove_hooks(jni);
}

static void thread_name(int tid, char *out, size_t n)
{
	char path[64];
	out[0] = '\0';
	util_fmt(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	if (fgets(out, (int)n, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/* Whether two recorded hits have the same arguments (one pprof sample). */
static bool args_equal(const struct jve_arghit *a, const struct jve_arghit *b)
{
	uint32_t n = atomic_load_explicit(&a->n, memory_order_acquire);
	if (n != atomic_load_explicit(&b->n, memory_order_acquire) || n > JVI_ARGS_MAX)
		return false;
	for (uint32_t k = 0; k < n; k++) {
		const struct jve_argv *x = &a->a[k], *y = &b->a[k];
		if (x->idx != y->idx || x->kind != y->kind)
			return false;
		if (x->kind == JVI_ARG_STRING ? x->len != y->len || memcmp(x->s, y->s, x->len)
					      : memcmp(&x->v, &y->v, sizeof(x->v)))
			return false;
	}
	return true;
}

/* An argument's text for a string label or annotation: a String's UTF-8,
 * a float or double in decimal (pprof numbers and htr_arg are integers). */
static const char *arg_text(const struct jve_argv *a, char *buf, size_t n)
{
	if (a->kind == JVI_ARG_STRING)
		snprintf(buf, n, "%.*s", (int)(a->len <= sizeof(a->s) ? a->len : sizeof(a->s)), a->s);
	else
		snprintf(buf, n, "%.17g", a->v.d);
	return buf;
}

static const char *const arg_key[JVI_ARGS_MAX] = { "arg0", "arg1", "arg2", "arg3", "arg4", "arg5" };

/* A recorded hit's arguments as pprof labels after the nl in l; the new count. */
static size_t arg_labels(const struct jve_arghit *h, struct pp_label *l, size_t nl,
			 char txt[JVI_ARGS_MAX][HTR_ARG_STR_MAX + 32])
{
	uint32_t n = atomic_load_explicit(&h->n, memory_order_acquire);
	for (uint32_t k = 0; k < n && k < JVI_ARGS_MAX; k++) {
		const struct jve_argv *a = &h->a[k];
		l[nl] = (struct pp_label){ .key = arg_key[a->idx < JVI_ARGS_MAX ? a->idx : 0] };
		if (a->kind == JVI_ARG_INT || a->kind == JVI_ARG_LONG)
			l[nl].num = a->v.i;
		else
			l[nl].str = arg_text(a, txt[k], sizeof(txt[k]));
		nl++;
	}
	return nl;
}

int jve_write_pprof(JNIEnv *jni, int fd, int64_t start_ns, int64_t dur_ns, struct jve_stats *st,
		    uint64_t *bytes)
{
	struct pp_builder *b = NULL;
	struct jvm_names *names = NULL;
	uint64_t hits[JVE_MAX_TARGETS] = { 0 }, ns = 0, lost = 0;
	char line[JVE_TARGET_LEN + 160];
	int r;

	uint64_t with_args = 0, arg_drop = 0;
	memset(st, 0, sizeof(*st));
	uint32_t nslots = atomic_load(&H.nslots);
	if (nslots > JVE_SLOTS)
		nslots = JVE_SLOTS;
	for (uint32_t i = 0; i < nslots; i++) {
		struct jve_slot *sl = &H.slots[i];
		for (unsigned t = 0; t < JVE_MAX_TARGETS; t++) {
			hits[t] += atomic_load(&sl->hits[t]);
			ns += atomic_load(&sl->ns[t]);
		}
		lost += atomic_load(&sl->lost);
		arg_drop += atomic_load(&sl->arg_drop);
	}
	for (unsigned t = 0; t < JVE_MAX_TARGETS; t++) {
		uint64_t u = atomic_load(&H.untracked[t]);
		hits[t] += u;
		st->hits += hits[t];
		st->untracked += u;
	}
	st->lost = lost;
	uint64_t tracked = st->hits - st->untracked;
	st->mean_ns = tracked ? ns / tracked : 0;
	if ((r = pp_new(&b)) < 0 || (r = jvm_names_new(jni, b, &names)) < 0)
		goto out;
	if ((r = pp_add_sample_type(b, "hits", "count")) < 0 ||
	    (r = pp_add_sample_type(b, "stacks", "count")) < 0 ||
	    (r = pp_set_default_sample_type(b, "hits")) < 0)
		goto out;
	pp_set_time(b, start_ns, dur_ns);
	int64_t pid = getpid();
	for (uint32_t i = 0; i < nslots; i++) {
		struct jve_slot *sl = &H.slots[i];
		uint32_t n = atomic_load_explicit(&sl->nstacks, memory_order_acquire);
		char tname[32];
		thread_name(sl->tid, tname, sizeof(tname));
		uint32_t na = H.args && H.targs ? atomic_load_explicit(&sl->narg, memory_order_acquire)
						: 0;
		if (na > JVE_ARG_HITS)
			na = JVE_ARG_HITS;
		const struct jve_arghit *ah = na ? &H.args[(size_t)i * JVE_ARG_HITS] : NULL;
		bool taken[JVE_ARG_HITS] = { false };
		for (uint32_t k = 0; k < n && k < JVE_STACKS; k++) {
			struct jve_stack *s = &sl->st[k];
			uint64_t locs[JVE_FRAMES], cnt = atomic_load(&s->count), args_k = 0;
			for (uint32_t f = 0; f < s->nframes; f++)
				if ((r = jvm_location(names, s->f[f].method, s->f[f].location,
						      &locs[f])) < 0)
					goto out;
			/* The redactor keeps a sample by its pid label. */
			struct pp_label labels[5 + JVI_ARGS_MAX] = {
				{ .key = "pid", .num = pid },
				{ .key = "thread_id", .num = sl->tid },
				{ .key = "thread_name", .str = tname },
				{ .key = "first_hit", .num = (int64_t)s->first_ns,
				  .num_unit = "nanoseconds" },
				{ .key = "last_hit", .num = (int64_t)atomic_load(&s->last_ns),
				  .num_unit = "nanoseconds" },
			};
			/* #args: a sample per distinct argument tuple of this stack's
			 * recorded hits; the hits past the per-thread cap go in the
			 * sample without arguments below. */
			for (uint32_t e = 0; e < na; e++) {
				if (taken[e] || ah[e].stack != k)
					continue;
				uint64_t g = 1;
				taken[e] = true;
				for (uint32_t f = e + 1; f < na; f++)
					if (!taken[f] && ah[f].stack == k && args_equal(&ah[e], &ah[f])) {
						taken[f] = true;
						g++;
					}
				char txt[JVI_ARGS_MAX][HTR_ARG_STR_MAX + 32];
				size_t nl = arg_labels(&ah[e], labels, 5, txt);
				int64_t gv[2] = { (int64_t)(g * H.every), (int64_t)g };
				if ((r = pp_add_sample(b, locs, s->nframes, gv, 2, labels, nl)) < 0)
					goto out;
				args_k += g;
			}
			with_args += args_k;
			uint64_t rest = cnt > args_k ? cnt - args_k : 0;
			int64_t vals[2] = { (int64_t)(rest * H.every), (int64_t)rest };
			if (rest && (r = pp_add_sample(b, locs, s->nframes, vals, 2, labels, 5)) < 0)
				goto out;
			st->stacks += cnt;
		}
	}
	util_fmt(line, sizeof(line), "hits=%llu stacks=%llu lost=%llu dropped=%llu",
		 (unsigned long long)st->hits, (unsigned long long)st->stacks,
		 (unsigned long long)st->lost, (unsigned long long)st->untracked);
	pp_add_comment(b, line);
	pp_add_comment(b, "profilingd JVMTI agent: bytecode injection (ClassFileLoadHook + "
		       "RetransformClasses), a call at the entry of each target method");
	for (unsigned t = 0; t < H.nt; t++) {
		util_fmt(line, sizeof(line), "method target: %s: %u method(s) hooked, %llu hits%s%s",
			 H.spelled[t], H.hooked[t], (unsigned long long)hits[t],
			 H.why[t][0] ? "; " : "", H.why[t]);
		pp_add_comment(b, line);
		if (atomic_load(&H.off) & (1u << t)) {
			budget_line(t, line, sizeof(line));
			pp_add_comment(b, line);
		}
	}
	if (H.max_hits != UINT64_MAX && atomic_load(&H.taken) >= H.max_hits) {
		util_fmt(line, sizeof(line), "max hits: %llu reached; later hits were not recorded",
			 (unsigned long long)H.max_hits);
		pp_add_comment(b, line);
	}
	if (H.targs) {
		util_fmt(line, sizeof(line), "arguments: %llu recorded hit(s) with their arguments "
			 "(labels arg<N>); %llu more past %d a thread: counted, not recorded",
			 (unsigned long long)with_args, (unsigned long long)arg_drop, JVE_ARG_HITS);
		pp_add_comment(b, line);
	}
	util_fmt(line, sizeof(line), "time in the hook: %llu ns a hit (mean of %llu)",
		 (unsigned long long)st->mean_ns, (unsigned long long)tracked);
	pp_add_comment(b, line);
	util_fmt(line, sizeof(line), "hooks installed in %.1f ms (%d loaded classes looked at)",
		 (double)H.install_ns / 1e6, (int)H.loaded);
	pp_add_comment(b, line);
	if (H.note[0])
		pp_add_comment(b, H.note);
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, bytes);
out:
	jvm_names_free(names);
	pp_free(b);
	return r;
}

const char *jve_note(void)
{
	return H.note;
}

/* ------------------------------------------------------ Perfetto result */

/* "pkg.Class.method" of a frame, or "(unknown)". */
static void method_name(JNIEnv *jni, jmethodID id, char *out, size_t n)
{
	jvmtiEnv *j = jv_jvmti;
	char *mname = NULL, *csig = NULL, cls[384];
	jclass k = NULL;
	snprintf(out, n, "(unknown)");
	if ((*j)->GetMethodName(j, id, &mname, NULL, NULL) == JVMTI_ERROR_NONE &&
	    (*j)->GetMethodDeclaringClass(j, id, &k) == JVMTI_ERROR_NONE &&
	    (*j)->GetClassSignature(j, k, &csig, NULL) == JVMTI_ERROR_NONE) {
		jvm_class_name(csig, cls, sizeof(cls));
		snprintf(out, n, "%s.%s", cls, mname);
	}
	if (mname)
		(*j)->Deallocate(j, (unsigned char *)mname);
	if (csig)
		(*j)->Deallocate(j, (unsigned char *)csig);
	/* The agent thread never returns to Java: its local refs pile up. */
	if (k && jni)
		(*jni)->DeleteLocalRef(jni, k);
}

int jve_write_perfetto(JNIEnv *jni, int fd, uint64_t *bytes, uint64_t *events, uint64_t *dropped)
{
	struct htr w = { .buf = NULL };
	uint8_t *seen = NULL;
	char *text = NULL, leaf[256], fr[512];
	const size_t text_cap = JVE_FRAMES * sizeof(fr);
	int r = 0;

	*bytes = *events = *dropped = 0;
	uint32_t nslots = atomic_load(&H.nslots);
	if (nslots > JVE_SLOTS)
		nslots = JVE_SLOTS;
	seen = calloc(JVE_SLOTS * JVE_STACKS, 1);
	text = malloc(text_cap);
	if (!seen || !text || !H.slots) {
		r = -ENOMEM;
		goto out;
	}
	/* The hook's times are CLOCK_REALTIME: the snapshot places them. */
	if ((r = htr_begin(&w, fd, CLOCK_REALTIME, (int32_t)getpid(), NULL)) < 0)
		goto out;
	for (uint32_t i = 0; i < nslots; i++) {
		struct jve_slot *sl = &H.slots[i];
		uint32_t nh = atomic_load_explicit(&sl->nring, memory_order_acquire);
		uint32_t nst = atomic_load_explicit(&sl->nstacks, memory_order_acquire);
		*dropped += atomic_load(&sl->ring_drop);
		if (!nh)
			continue;
		char tname[32];
		thread_name(sl->tid, tname, sizeof(tname));
		if ((r = htr_thread(&w, sl->tid, tname)) < 0)
			goto out;
		for (uint32_t h = 0; h < nh && h < JVE_RING; h++) {
			uint32_t k = sl->ring[h].stack;
			if (k >= nst || k >= JVE_STACKS)
				continue;
			uint64_t iid = (uint64_t)i * JVE_STACKS + k + 1;
			const char *names = NULL;
			size_t len = 0;
			if (!seen[iid - 1]) {
				/* The stack's names once, with its first hit. */
				const struct jve_stack *st = &sl->st[k];
				text[0] = leaf[0] = '\0';
				for (uint32_t f = 0; f < st->nframes && f < JVE_FRAMES; f++) {
					method_name(jni, st->f[f].method, fr, sizeof(fr));
					if (!f)
						snprintf(leaf, sizeof(leaf), "%.255s", fr);
					if (!htr_text_add(text, text_cap, &len, fr))
						break;
				}
				names = text;
				seen[iid - 1] = 1;
			}
			struct htr_arg av[HTR_ARGS_MAX];
			char atxt[HTR_ARGS_MAX][HTR_ARG_STR_MAX + 32];
			size_t nav = 0;
			uint32_t ai = sl->ring[h].arg;
			if (ai && ai <= JVE_ARG_HITS && H.args) {
				const struct jve_arghit *ah = &H.args[(size_t)i * JVE_ARG_HITS + ai - 1];
				uint32_t an = atomic_load_explicit(&ah->n, memory_order_acquire);
				for (uint32_t q = 0; q < an && q < JVI_ARGS_MAX && nav < HTR_ARGS_MAX; q++) {
					const struct jve_argv *a = &ah->a[q];
					struct htr_arg *x = &av[nav++];
					*x = (struct htr_arg){ .index = a->idx };
					if (a->kind == JVI_ARG_INT || a->kind == JVI_ARG_LONG) {
						x->kind = HTR_ARG_INT;
						x->v.i = a->v.i;
					} else {
						x->kind = HTR_ARG_STR;
						x->s = arg_text(a, atxt[q], sizeof(atxt[q]));
						x->len = strlen(x->s);
					}
				}
			}
			if ((r = htr_hit_args(&w, sl->tid, sl->ring[h].ts, iid, leaf, names, len, av,
					      nav)) < 0)
				goto out;
			(*events)++;
		}
	}
out:
	*bytes = w.bytes;
	htr_free(&w);
	free(seen);
	free(text);
	return r;
}
