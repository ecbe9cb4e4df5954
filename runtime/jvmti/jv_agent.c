/*
 * libprofiling_jvmti.so entry points and the agent thread (docs/JVMTI.md).
 *
 * Loaded with -agentpath:.../libprofiling_jvmti.so[=options] (Agent_OnLoad:
 * the agent thread starts at VMInit) or live through the attach mechanism
 * (Agent_OnAttach: it starts at once). Options, comma-separated:
 *   socket=PATH      runtime socket (default $PROFILINGD_RUNTIME_SOCKET,
 *                    else /run/profilingd/runtime.sock)
 *   debug=1          log to stderr; otherwise the agent never prints
 *   oom_hold_ms=N    how long a Java heap OOM holds its thread for the
 *                    daemon's heap dump (default 60000, at most 600000)
 *   sampler=async    stack samples from signals with AsyncGetCallTrace (the
 *                    default where libjvm.so exports it; jv_async.c)
 *   sampler=thread   per-thread GetStackTrace (the default without AGCT)
 *   sampler=all      GetAllStackTraces (one safepoint); for measurements
 *   asgct=0          behave as a JVM without AsyncGetCallTrace (tests)
 *   vmstructs=0      behave as a JVM without gHotSpotVMStructs: no C frames
 *                    between or below the Java segments (tests)
 *
 * The agent thread is a JVMTI agent thread (a Java daemon thread running
 * native code): it owns the runtime.sock connection, reconnects when the
 * daemon restarts, runs the sampler's ticks and writes every artifact.
 * Event callbacks on other threads never touch the socket.
 */
#include "jv.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define JV_HZ_DEFAULT   100
#define JV_HZ_MAX       1000
#define JV_DUR_DEFAULT  10000
#define JV_DUR_MIN      100
#define JV_DUR_MAX      120000
#define JV_TICK_MS      100
#define JV_OOM_WINDOW_MS 60000  /* one held OOM per window; others just return */
#define JV_OOM_HOLD_MAX 600000
#define JV_RETRY_MAX_MS 30000   /* reconnect backoff ceiling */
#define JV_DEFAULT_SOCKET "/run/profilingd/runtime.sock"
#define JV_METHODS_DUR_MAX 86400000u /* method events run until their config's expiry: 24 h */
#define JV_METHODS_MAX_HITS 200000u  /* the daemon's cap on method_max_hits, and the default */

jvmtiEnv *jv_jvmti;
struct jv_caps jv_caps;

static struct {
	char socket[sizeof(((struct sockaddr_un *)0)->sun_path)];
	bool debug, all_at_once, no_async, no_agct, no_vmstructs;
	uint32_t oom_hold_ms;
} opt = { .oom_hold_ms = 60000 };

/* Stack samples come from jv_async.c: AGCT found and its events enabled. */
static bool use_async;
/* And the VMStructs it splices native frames with (jv_vmstructs.c). */
static bool use_mixed;

static _Atomic bool loaded, started, dying;
static int wake_fd = -1;           /* eventfd: an OOM to report, or VM death */
static _Atomic bool connected;
static pthread_t agent_tid;
static bool heap_armed;
static char vm_version[32];

/* The held OOM: its thread waits on oom_cond until done or the hold ends. */
static pthread_mutex_t oom_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t oom_cond;
static bool oom_held, oom_done;
static _Atomic int oom_pending;
static _Atomic uint64_t oom_last_ms;
static _Atomic uint32_t oom_tid;   /* the held thread's OS tid, for the daemon */

/* ------------------------------------------------------------- options */

static int parse_options(const char *s)
{
	const char *env = getenv("PROFILINGD_RUNTIME_SOCKET");
	util_strlcpy(opt.socket, env && *env ? env : JV_DEFAULT_SOCKET, sizeof(opt.socket));
	if (!s)
		return 0;
	char buf[1024];
	if (util_strlcpy(buf, s, sizeof(buf)) >= sizeof(buf))
		return -E2BIG;
	for (char *save = NULL, *kv = strtok_r(buf, ",", &save); kv;
	     kv = strtok_r(NULL, ",", &save)) {
		char *v = strchr(kv, '=');
		if (!v)
			return -EINVAL;
		*v++ = '\0';
		char *end;
		if (!strcmp(kv, "socket")) {
			if (util_strlcpy(opt.socket, v, sizeof(opt.socket)) >= sizeof(opt.socket))
				return -ENAMETOOLONG;
		} else if (!strcmp(kv, "debug")) {
			opt.debug = strcmp(v, "0") != 0;
		} else if (!strcmp(kv, "oom_hold_ms")) {
			unsigned long n = strtoul(v, &end, 10);
			if (*end || !*v || n > JV_OOM_HOLD_MAX)
				return -ERANGE;
			opt.oom_hold_ms = (uint32_t)n;
		} else if (!strcmp(kv, "sampler")) {
			if (strcmp(v, "all") && strcmp(v, "thread") && strcmp(v, "async"))
				return -EINVAL;
			opt.all_at_once = !strcmp(v, "all");
			opt.no_async = strcmp(v, "async") != 0;
		} else if (!strcmp(kv, "asgct")) {
			if (strcmp(v, "0") && strcmp(v, "1"))
				return -EINVAL;
			opt.no_agct = !strcmp(v, "0");
		} else if (!strcmp(kv, "vmstructs")) {
			if (strcmp(v, "0") && strcmp(v, "1"))
				return -EINVAL;
			opt.no_vmstructs = !strcmp(v, "0");
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

/* --------------------------------------------------------------- wire */

static int send_msg(int sock, Pd__RuntimeMsg *rm)
{
	return wire_send_msg(sock, &rm->base, WIRE_RUNTIME_MAX_MSG, -1);
}

static int send_done(int sock, uint64_t sid, uint32_t status, const char *msg, uint64_t bytes,
		     uint64_t samples, uint64_t dropped, const char *format)
{
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;
	d.session_id = sid;
	d.status = status;
	d.message = (char *)msg;
	if (status == PROF_E_NONE) {
		d.has_bytes = 1;
		d.bytes = bytes;
		d.format = (char *)format;
		d.has_samples = 1;
		d.samples = samples;
		d.has_dropped = 1;
		d.dropped = dropped;
	}
	rm.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	rm.done = &d;
	return send_msg(sock, &rm);
}

static int send_hello(int sock)
{
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	char *caps[8], *missing[8];
	size_t nc = 0, nm = 0;

	/* stack_sampling and heap_dump (JNI) need no optional capability; the others do. */
	char *stack = (char *)names_cap_str(NAMES_CAP_STACK_SAMPLING);
	char *dump = (char *)names_cap_str(NAMES_CAP_HEAP_DUMP);
	char *heap = (char *)names_cap_str(NAMES_CAP_HEAP_PROFILE);
	char *ring = (char *)names_cap_str(NAMES_CAP_TRACE_RING);
	caps[nc++] = stack;
	caps[nc++] = dump;
	if (jv_caps.sampled_alloc)
		caps[nc++] = heap;
	else
		missing[nm++] = heap;
	if (jv_caps.gc_events)
		caps[nc++] = ring;
	else
		missing[nm++] = ring;
	/* Stack samples without safepoint bias (the daemon logs both lists);
	 * without them stack_sampling is the GetStackTrace sampler. */
	if (use_async)
		caps[nc++] = "async_stacks";
	else
		missing[nm++] = "async_stacks";
	/* The C frames between and below the Java segments (HotSpot's VMStructs). */
	if (use_async && use_mixed)
		caps[nc++] = "mixed_stacks";
	else
		missing[nm++] = "mixed_stacks";
	/* Method events: bytecode injection needs retransformation. */
	char *methods = (char *)names_cap_str(NAMES_CAP_METHOD_EVENTS);
	if (jv_caps.retransform)
		caps[nc++] = methods;
	else
		missing[nm++] = methods;
	h.pid = (uint32_t)getpid();
	h.runtime = "jvm";
	h.version = vm_version;
	h.capabilities = caps;
	h.n_capabilities = nc;
	h.missing = missing;
	h.n_missing = nm;
	rm.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	rm.hello = &h;
	return send_msg(sock, &rm);
}

static Pd__DaemonToRuntime *recv_msg(int sock, int *fd)
{
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	ssize_t n = wire_recv(sock, buf, sizeof(buf), fd);
	if (n <= 0)
		return NULL;
	return pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
}

static int connect_daemon(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	util_strlcpy(sa.sun_path, opt.socket, sizeof(sa.sun_path));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(s);
		return r;
	}
	return s;
}

/* ---------------------------------------------------------------- OOM */

static void oom_release(void)
{
	pthread_mutex_lock(&oom_lock);
	oom_done = true;
	pthread_cond_broadcast(&oom_cond);
	pthread_mutex_unlock(&oom_lock);
}

static void wake(void)
{
	uint64_t one = 1;
	ssize_t w = write(wake_fd, &one, sizeof(one));
	(void)w;
}

/*
 * On the thread that hit the OOM, before the OutOfMemoryError is thrown.
 * It only hands the event to the agent thread (an atomic and an eventfd)
 * and then waits, in native state, so safepoints (the daemon's heap dump
 * through the attach socket) proceed while it holds.
 */
static void JNICALL on_resource_exhausted(jvmtiEnv *j, JNIEnv *jni, jint flags,
					  const void *reserved, const char *description)
{
	if (!(flags & JVMTI_RESOURCE_EXHAUSTED_JAVA_HEAP) || !atomic_load(&connected) ||
	    atomic_load(&dying) || pthread_equal(pthread_self(), agent_tid))
		return;
	uint64_t now = util_mono_ms(), last = atomic_load(&oom_last_ms);
	if (last && now - last < JV_OOM_WINDOW_MS)
		return;
	if (!atomic_compare_exchange_strong(&oom_last_ms, &last, now))
		return;
	pthread_mutex_lock(&oom_lock);
	oom_held = true;
	oom_done = false;
	pthread_mutex_unlock(&oom_lock);
	/* Its OS tid is what Thread.print calls nid: the heap dump's threads
	 * carry it, so the daemon can mark this thread's stack as the OOM's. */
	atomic_store(&oom_tid, (uint32_t)gettid());
	atomic_store(&oom_pending, 1);
	wake();
	LOG_N("Java heap exhausted (%s): holding this thread up to %u ms for the daemon",
	      description ? description : "", opt.oom_hold_ms);

	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += opt.oom_hold_ms / 1000;
	dl.tv_nsec += (long)(opt.oom_hold_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&oom_lock);
	int r = 0;
	while (!oom_done && r != ETIMEDOUT)
		r = pthread_cond_timedwait(&oom_cond, &oom_lock, &dl);
	bool done = oom_done;
	oom_held = false;
	pthread_mutex_unlock(&oom_lock);
	LOG_N("OOM hold released: %s", done ? "the daemon is done" : "timed out");
}

static void send_oom(int sock)
{
	if (!atomic_exchange(&oom_pending, 0))
		return;
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeEvent ev = PD__RUNTIME_EVENT__INIT;
	ev.kind = 1;
	ev.has_value = 1;
	ev.value = 0;
	ev.has_hold = 1;
	ev.hold = 1;
	ev.tid = atomic_load(&oom_tid);
	ev.has_tid = ev.tid != 0;
	rm.msg_case = PD__RUNTIME_MSG__MSG_EVENT;
	rm.event = &ev;
	if (send_msg(sock, &rm) < 0)
		oom_release(); /* nobody will say done */
}

/* ------------------------------------------------------------ captures */

static uint32_t clamp_u32(uint32_t v, uint32_t def, uint32_t lo, uint32_t hi)
{
	if (v == 0)
		return def;
	return v < lo ? lo : v > hi ? hi : v;
}

/* Messages that may arrive in any state. Takes *fd when it keeps it. */
static void side_msg(const Pd__DaemonToRuntime *m)
{
	switch (m->msg_case) {
	case PD__DAEMON_TO_RUNTIME__MSG_EVENT_DONE:
		if (m->event_done->kind == 1)
			oom_release();
		break;
	case PD__DAEMON_TO_RUNTIME__MSG_HEAP_ARM:
		/* Sample from now on, so an OOM capture covers what came before. */
		if (jv_caps.sampled_alloc && !heap_armed) {
			uint32_t iv = m->heap_arm->has_sampling_interval_bytes
				      ? m->heap_arm->sampling_interval_bytes : 0;
			heap_armed = jvh_start(iv) == 0;
		}
		break;
	default:
		break; /* crash fds: a JVM writes its own hs_err file; the fd is closed */
	}
}

/* The wake eventfd fired: report an OOM; -EPIPE if the VM is going away. */
static int on_wake(int sock)
{
	uint64_t n;
	ssize_t r = read(wake_fd, &n, sizeof(n));
	(void)r;
	if (atomic_load(&dying))
		return -EPIPE;
	send_oom(sock);
	return 0;
}

/* Set while a method-event capture runs: a cancel (the kill switch) takes
 * the hooks out before CANCELLED goes back, so the daemon's "removed" holds. */
static int (*undo_before_cancel)(JNIEnv *);

/*
 * Wait out a capture of dur ms, answering what arrives meanwhile; tick()
 * runs every tick_ns, and enough() (may be NULL) after it may end the
 * capture early. 0 when the time is up, the daemon said stop or enough()
 * said so, 1 when it cancelled (CANCELLED sent), -EPIPE when the connection
 * or the VM ends.
 */
static int wait_capture(JNIEnv *jni, int sock, uint64_t sid, uint32_t dur, uint64_t tick_ns,
			void (*tick)(JNIEnv *), bool (*enough)(void))
{
	uint64_t t0 = util_now_ns(CLOCK_MONOTONIC), end = t0 + (uint64_t)dur * 1000000ull;
	uint64_t next = t0 + tick_ns;
	if (tick)
		tick(jni);
	for (;;) {
		uint64_t now = util_now_ns(CLOCK_MONOTONIC);
		if (now >= end)
			return 0;
		if (tick && now >= next) {
			tick(jni);
			if (enough && enough())
				return 0;
			/* Ticks that a slow tick missed are skipped, not caught up. */
			next += tick_ns;
			now = util_now_ns(CLOCK_MONOTONIC);
			if (next <= now)
				next = now + tick_ns;
		}
		uint64_t until = tick && next < end ? next : end;
		int ms = until > now ? (int)((until - now + 999999) / 1000000) : 0;
		if (ms > JV_TICK_MS)
			ms = JV_TICK_MS;
		struct pollfd pf[2] = { { .fd = sock, .events = POLLIN },
					{ .fd = wake_fd, .events = POLLIN } };
		int pr = poll(pf, 2, ms);
		if (pr < 0 && errno != EINTR)
			return -EPIPE;
		if (pr <= 0)
			continue;
		if ((pf[1].revents & POLLIN) && on_wake(sock) < 0)
			return -EPIPE;
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		int fd = -1;
		Pd__DaemonToRuntime *m = recv_msg(sock, &fd);
		if (fd >= 0)
			close(fd);
		if (!m)
			return -EPIPE;
		int ret = -1;
		if (m->msg_case == PD__DAEMON_TO_RUNTIME__MSG_CANCEL && m->cancel->session_id == sid) {
			if (undo_before_cancel)
				undo_before_cancel(jni);
			send_done(sock, sid, PROF_E_CANCELLED, "cancelled", 0, 0, 0, NULL);
			ret = 1;
		} else if (m->msg_case == PD__DAEMON_TO_RUNTIME__MSG_STOP &&
			   m->stop->session_id == sid) {
			ret = 0;
		} else if (m->msg_case == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE) {
			send_done(sock, m->capture->session_id, PROF_E_PROFILING_IN_PROGRESS,
				  "a capture is already running", 0, 0, 0, NULL);
		} else {
			side_msg(m);
		}
		pd__daemon_to_runtime__free_unpacked(m, NULL);
		if (ret >= 0)
			return ret;
	}
}

static int capture_stack(JNIEnv *jni, int sock, const Pd__CaptureRequest *cr, int fd, uint32_t dur)
{
	const Pd__Params *p = cr->params;
	uint32_t hz = clamp_u32(p && p->has_frequency_hz ? p->frequency_hz : 0, JV_HZ_DEFAULT, 1,
				JV_HZ_MAX);
	bool wall = p && p->has_clock && p->clock == 1;
	struct jvs_stats st;
	uint64_t bytes = 0;
	int r;

	int64_t start = (int64_t)util_now_ns(CLOCK_REALTIME);
	if ((r = use_async ? jva_start(jni, hz, wall) : jvs_start(jni, hz, wall, opt.all_at_once)) < 0)
		return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0, 0, NULL);
	LOG_D("session %llu: Java stacks at %u Hz for %u ms (%s, %s)",
	      (unsigned long long)cr->session_id, hz, dur, wall ? "wall" : "cpu",
	      use_async ? "AsyncGetCallTrace" : opt.all_at_once ? "GetAllStackTraces"
							    : "GetStackTrace");
	/* The signal sampler's tick only drains its ring; the timers sample. */
	r = use_async ? wait_capture(jni, sock, cr->session_id, dur, JVA_DRAIN_NS, jva_tick, NULL)
		      : wait_capture(jni, sock, cr->session_id, dur, 1000000000ull / hz, jvs_tick,
				     NULL);
	if (r != 0) {
		jva_discard();
		jvs_discard();
		return r < 0 ? r : 0;
	}
	int64_t dur_ns = (int64_t)util_now_ns(CLOCK_REALTIME) - start;
	r = use_async ? jva_write_pprof(jni, fd, start, dur_ns, &st, &bytes)
		      : jvs_write_pprof(jni, fd, start, dur_ns, &st, &bytes);
	if (r < 0)
		return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0, 0, NULL);
	LOG_D("session %llu: %llu samples in %llu ticks, %llu dropped, %llu bytes",
	      (unsigned long long)cr->session_id, (unsigned long long)st.samples,
	      (unsigned long long)st.ticks, (unsigned long long)st.dropped,
	      (unsigned long long)bytes);
	return send_done(sock, cr->session_id, PROF_E_NONE, NULL, bytes, st.samples, st.dropped,
			 "pprof");
}

static int capture_heap(JNIEnv *jni, int sock, const Pd__CaptureRequest *cr, int fd, uint32_t dur)
{
	const Pd__Params *p = cr->params;
	uint32_t iv = p && p->has_sampling_interval_bytes ? p->sampling_interval_bytes : 0;
	struct jvh_stats st;
	uint64_t bytes = 0;
	int r;

	if (iv > (1u << 30))
		iv = 1u << 30;
	/* Android's KEY_TRACK_JAVA_ALLOCATIONS (docs/ANDROID.md): this agent's
	 * heap profile is the sampled Java allocations, so "off" would leave
	 * nothing to record; refused rather than an empty profile. */
	if (p && p->has_track_java_allocations && p->track_java_allocations == PROF_SWITCH_OFF)
		return send_done(sock, cr->session_id, PROF_E_INVALID_REQUEST,
				 "track_java_allocations is off: a JVM's heap profile is its "
				 "sampled Java allocations", 0, 0, 0, NULL);
	int64_t start = (int64_t)util_now_ns(CLOCK_REALTIME);
	/* Armed by an OOM trigger: the profile covers everything since then. */
	if (!heap_armed && (r = jvh_start(iv)) < 0)
		return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0, 0, NULL);
	r = wait_capture(jni, sock, cr->session_id, dur, 0, NULL, NULL);
	if (r != 0) {
		if (!heap_armed)
			jvh_stop();
		return r < 0 ? r : 0;
	}
	int64_t dur_ns = (int64_t)util_now_ns(CLOCK_REALTIME) - start;
	r = jvh_write_pprof(jni, fd, start, dur_ns, &st, &bytes);
	if (heap_armed)
		heap_armed = jvh_start(iv) == 0;
	if (r < 0)
		return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0, 0, NULL);
	return send_done(sock, cr->session_id, PROF_E_NONE, NULL, bytes, st.samples, st.dropped,
			 "pprof");
}

static int capture_trace(JNIEnv *jni, int sock, const Pd__CaptureRequest *cr, int fd, uint32_t dur)
{
	uint64_t bytes = 0, events = 0, dropped = 0;
	int r = wait_capture(jni, sock, cr->session_id, dur, 0, NULL, NULL);
	if (r != 0)
		return r < 0 ? r : 0;
	if ((r = jvg_write_trace(fd, &bytes, &events, &dropped)) < 0)
		return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0, 0, NULL);
	return send_done(sock, cr->session_id, PROF_E_NONE, NULL, bytes, events, dropped,
			 "perfetto");
}

/* Method events (jv_methods.c): tick and stop condition for wait_capture. */
static uint64_t methods_max_hits;
static bool methods_budget_on;     /* the daemon sent method_budget_us */
static uint64_t methods_budget_ns;
static bool methods_all_over;      /* every target went over the budget */

static void methods_tick(JNIEnv *jni)
{
	/* Nothing to drain: the hook writes into its thread's slot, read once
	 * at the end. The tick hooks a target class that loaded while the
	 * hooks went in, and removes the targets over the budget (both need
	 * JNI, which methods_enough has not). */
	jve_recheck(jni);
	if (methods_budget_on && !methods_all_over && jve_check_budget(jni, methods_budget_ns)) {
		LOG_I("method events: every target over the overhead budget of %llu us: the "
		      "capture ends", (unsigned long long)(methods_budget_ns / 1000));
		methods_all_over = true;
	}
}

static bool methods_enough(void)
{
	return methods_all_over || jve_enough();
}

static int capture_methods(JNIEnv *jni, int sock, const Pd__CaptureRequest *cr, int fd)
{
	const Pd__Params *p = cr->params;
	uint32_t dur = clamp_u32(p && p->has_duration_ms ? p->duration_ms : 0, JV_DUR_DEFAULT,
				 JV_DUR_MIN, JV_METHODS_DUR_MAX);
	uint32_t every = p && p->has_method_every ? p->method_every : 0;
	char why[512];
	struct jve_stats st;
	uint64_t bytes = 0;

	methods_max_hits = p && p->has_method_max_hits && p->method_max_hits
		? p->method_max_hits : JV_METHODS_MAX_HITS;
	methods_budget_on = p && p->has_method_budget_us;
	methods_budget_ns = methods_budget_on ? (uint64_t)p->method_budget_us * 1000 : 0;
	methods_all_over = false;
	int64_t start = (int64_t)util_now_ns(CLOCK_REALTIME);
	int r = jve_start(jni, p ? p->method_targets : NULL, p ? p->n_method_targets : 0, every,
			  methods_max_hits, why, sizeof(why));
	if (r < 0)
		return send_done(sock, cr->session_id, r == -EINVAL ? PROF_E_INVALID_REQUEST
				 : PROF_E_EXECUTING, why, 0, 0, 0, NULL);
	undo_before_cancel = jve_stop;
	r = wait_capture(jni, sock, cr->session_id, dur, JV_TICK_MS * 1000000ull, methods_tick,
			 methods_enough);
	undo_before_cancel = NULL;
	/* Hooks out first, whatever ended the capture (after a cancel they
	 * are out already: a no-op); a VM on its way out (VMDeath) no longer
	 * retransforms, and needs no removal. */
	if (!atomic_load(&dying))
		jve_stop(jni);
	if (r != 0)
		return r < 0 ? r : 0;
	int64_t dur_ns = (int64_t)util_now_ns(CLOCK_REALTIME) - start;
	char bnote[200];
	if (p && p->has_format && p->format == PROF_FORMAT_PERFETTO) {
		uint64_t events = 0, dropped = 0;
		r = jve_write_perfetto(jni, fd, &bytes, &events, &dropped);
		if (r < 0)
			return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0,
					 0, NULL);
		return send_done(sock, cr->session_id, PROF_E_NONE,
				 jve_budget_note(bnote, sizeof(bnote)), bytes, events, dropped,
				 "perfetto");
	}
	r = jve_write_pprof(jni, fd, start, dur_ns, &st, &bytes);
	if (r < 0)
		return send_done(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, 0, 0, NULL);
	LOG_D("session %llu: method events: hits=%llu stacks=%llu lost=%llu dropped=%llu, "
	      "%llu ns a hit; %s", (unsigned long long)cr->session_id,
	      (unsigned long long)st.hits, (unsigned long long)st.stacks,
	      (unsigned long long)st.lost, (unsigned long long)st.untracked,
	      (unsigned long long)st.mean_ns, jve_note());
	/* A failed removal is in the result's comments and the log; the
	 * budget's removal also in the result's note (CaptureDone.message). */
	return send_done(sock, cr->session_id, PROF_E_NONE, jve_budget_note(bnote, sizeof(bnote)),
			 bytes, st.stacks, st.lost + st.untracked, "pprof");
}

static int capture(JNIEnv *jni, int sock, const Pd__CaptureRequest *cr, int fd)
{
	const Pd__Params *p = cr->params;
	uint32_t dur = clamp_u32(p && p->has_duration_ms ? p->duration_ms : 0, JV_DUR_DEFAULT,
				 JV_DUR_MIN, JV_DUR_MAX);
	const char *no = NULL;
	switch (cr->type) {
	case PROF_STACK_SAMPLING:
		return capture_stack(jni, sock, cr, fd, dur);
	case PROF_HEAP_PROFILE:
		if (jv_caps.sampled_alloc)
			return capture_heap(jni, sock, cr, fd, dur);
		no = "this JVM does not grant can_generate_sampled_object_alloc_events";
		break;
	case PROF_SYSTEM_TRACE:
		if (jv_caps.gc_events)
			return capture_trace(jni, sock, cr, fd, dur);
		no = "this JVM does not grant can_generate_garbage_collection_events";
		break;
	case PROF_METHOD_EVENTS:
		if (jv_caps.retransform)
			return capture_methods(jni, sock, cr, fd);
		no = "this JVM does not grant can_retransform_classes";
		break;
	case PROF_HEAP_DUMP: {
		char err[256] = "";
		uint64_t bytes = 0;
		int r = jvd_heap_dump(jni, fd, &bytes, err, sizeof(err));
		if (r < 0)
			return send_done(sock, cr->session_id, PROF_E_EXECUTING, err, 0, 0, 0, NULL);
		return send_done(sock, cr->session_id, PROF_E_NONE, NULL, bytes, 0, 0, "hprof");
	}
	default:
		no = "capture type not supported by this runtime";
		break;
	}
	return send_done(sock, cr->session_id, PROF_E_INVALID_REQUEST, no, 0, 0, 0, NULL);
}

/* ---------------------------------------------------------- the thread */

/* One connection's life. -EPIPE: reconnect; -ECANCELED: the VM is dying. */
static int serve(JNIEnv *jni, int sock)
{
	int r;
	if ((r = send_hello(sock)) < 0)
		return -EPIPE;
	for (;;) {
		struct pollfd pf[2] = { { .fd = sock, .events = POLLIN },
					{ .fd = wake_fd, .events = POLLIN } };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return -EPIPE;
		}
		if ((pf[1].revents & POLLIN) && on_wake(sock) < 0)
			return -ECANCELED;
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		int fd = -1;
		Pd__DaemonToRuntime *m = recv_msg(sock, &fd);
		if (!m) {
			if (fd >= 0)
				close(fd);
			LOG_D("the daemon closed the runtime connection");
			return -EPIPE;
		}
		r = 0;
		switch (m->msg_case) {
		case PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK:
			LOG_D("connected to %s", opt.socket);
			break;
		case PD__DAEMON_TO_RUNTIME__MSG_CAPTURE:
			if (fd < 0)
				r = send_done(sock, m->capture->session_id, PROF_E_INVALID_REQUEST,
					      "no output fd", 0, 0, 0, NULL);
			else
				r = capture(jni, sock, m->capture, fd);
			util_sigpipe_drain();
			break;
		default:
			side_msg(m);
			break;
		}
		if (fd >= 0)
			close(fd);
		pd__daemon_to_runtime__free_unpacked(m, NULL);
		if (r < 0)
			return atomic_load(&dying) ? -ECANCELED : -EPIPE;
	}
}

static void JNICALL agent_main(jvmtiEnv *j, JNIEnv *jni, void *arg)
{
	uint32_t backoff = 500;
	agent_tid = pthread_self();
	/* The capture fd is a pipe the daemon may close early (its cap, a
	 * cancel). HotSpot ignores SIGPIPE in its own handler, but a VM with
	 * a different one (or libjsig chaining) must not die of our write:
	 * block it in this thread, so the write just fails with EPIPE. */
	if (util_sigpipe_block() < 0)
		LOG_W("cannot block SIGPIPE in the agent thread");
	while (!atomic_load(&dying)) {
		int sock = connect_daemon();
		if (sock >= 0) {
			backoff = 500;
			atomic_store(&connected, true);
			int r = serve(jni, sock);
			atomic_store(&connected, false);
			close(sock);
			oom_release(); /* nobody is left to say done */
			jva_discard();
			jvs_discard();
			if (heap_armed) {
				jvh_stop();
				heap_armed = false;
			}
			if (r == -ECANCELED)
				break;
		} else {
			LOG_D("cannot connect to %s: %s; retrying in %u ms", opt.socket,
			      strerror(-sock), backoff);
		}
		/* Wait for the daemon (or a restart of it), waking for VM death. */
		struct pollfd pf = { .fd = wake_fd, .events = POLLIN };
		if (poll(&pf, 1, (int)backoff) > 0) {
			uint64_t n;
			ssize_t rr = read(wake_fd, &n, sizeof(n));
			(void)rr;
			atomic_store(&oom_pending, 0);
		}
		backoff = backoff * 2 > JV_RETRY_MAX_MS ? JV_RETRY_MAX_MS : backoff * 2;
	}
	LOG_D("agent thread ends");
}

static int start_thread(JNIEnv *jni)
{
	jclass c = (*jni)->FindClass(jni, "java/lang/Thread");
	jmethodID init = c ? (*jni)->GetMethodID(jni, c, "<init>", "(Ljava/lang/String;)V") : NULL;
	jstring name = (*jni)->NewStringUTF(jni, "profilingd-agent");
	jobject t = init && name ? (*jni)->NewObject(jni, c, init, name) : NULL;
	if (!t) {
		if ((*jni)->ExceptionCheck(jni))
			(*jni)->ExceptionClear(jni);
		return -ENOMEM;
	}
	jvmtiError e = (*jv_jvmti)->RunAgentThread(jv_jvmti, t, agent_main, NULL,
						   JVMTI_THREAD_NORM_PRIORITY);
	(*jni)->DeleteLocalRef(jni, t);
	(*jni)->DeleteLocalRef(jni, name);
	(*jni)->DeleteLocalRef(jni, c);
	if (e != JVMTI_ERROR_NONE) {
		LOG_W("RunAgentThread failed: JVMTI error %d", (int)e);
		return -EIO;
	}
	atomic_store(&started, true);
	return 0;
}

static void JNICALL on_vm_init(jvmtiEnv *j, JNIEnv *jni, jthread thread)
{
	/* Before the first capture, so that it does not pay for the sweep. */
	if (use_async)
		jva_prepare_loaded();
	start_thread(jni);
}

static void JNICALL on_vm_death(jvmtiEnv *j, JNIEnv *jni)
{
	atomic_store(&dying, true);
	/* No signal may walk the stacks of a VM that is shutting down. */
	jva_halt();
	oom_release();
	if (wake_fd >= 0)
		wake();
}

/* ---------------------------------------------------------------- setup */

/*
 * Ask only for what the JVM can give here (GetPotentialCapabilities; the
 * live phase offers less than OnLoad), and record what was granted.
 */
static int add_caps(void)
{
	jvmtiEnv *j = jv_jvmti;
	jvmtiCapabilities pot, want;
	memset(&pot, 0, sizeof(pot));
	memset(&want, 0, sizeof(want));
	if ((*j)->GetPotentialCapabilities(j, &pot) != JVMTI_ERROR_NONE)
		return -EIO;
	want.can_get_line_numbers = pot.can_get_line_numbers;
	want.can_get_source_file_name = pot.can_get_source_file_name;
	want.can_get_thread_cpu_time = pot.can_get_thread_cpu_time;
	want.can_generate_sampled_object_alloc_events = pot.can_generate_sampled_object_alloc_events;
	want.can_tag_objects = pot.can_tag_objects;
	want.can_generate_object_free_events = pot.can_generate_object_free_events;
	want.can_generate_garbage_collection_events = pot.can_generate_garbage_collection_events;
	want.can_generate_resource_exhaustion_heap_events =
		pot.can_generate_resource_exhaustion_heap_events;
	/* For AGCT: HotSpot keeps debug info at every pc while CompiledMethodLoad is on. */
	want.can_generate_compiled_method_load_events =
		!opt.no_async && !opt.no_agct && pot.can_generate_compiled_method_load_events;
	/* Method events (jv_methods.c): retransform the targets' classes,
	 * see every class as it loads, and check the hooks with GetBytecodes. */
	want.can_retransform_classes = pot.can_retransform_classes;
	want.can_generate_all_class_hook_events = pot.can_generate_all_class_hook_events;
	want.can_get_bytecodes = pot.can_get_bytecodes;
	if ((*j)->AddCapabilities(j, &want) != JVMTI_ERROR_NONE)
		return -EIO;
	jvmtiCapabilities got;
	memset(&got, 0, sizeof(got));
	(*j)->GetCapabilities(j, &got);
	jv_caps.line_numbers = got.can_get_line_numbers;
	jv_caps.source_files = got.can_get_source_file_name;
	jv_caps.thread_cpu = got.can_get_thread_cpu_time;
	jv_caps.sampled_alloc = got.can_generate_sampled_object_alloc_events;
	jv_caps.tag_objects = got.can_tag_objects;
	jv_caps.object_free = got.can_generate_object_free_events;
	jv_caps.gc_events = got.can_generate_garbage_collection_events;
	jv_caps.resource_exhausted = got.can_generate_resource_exhaustion_heap_events;
	jv_caps.compiled_load = got.can_generate_compiled_method_load_events;
	jv_caps.retransform = got.can_retransform_classes && got.can_generate_all_class_hook_events;
	jv_caps.bytecodes = got.can_get_bytecodes;
	LOG_I("capabilities: line numbers %d, source files %d, thread cpu time %d, sampled "
	      "allocations %d, tags %d, object free %d, gc events %d, heap exhaustion %d",
	      jv_caps.line_numbers, jv_caps.source_files, jv_caps.thread_cpu, jv_caps.sampled_alloc,
	      jv_caps.tag_objects, jv_caps.object_free, jv_caps.gc_events,
	      jv_caps.resource_exhausted);
	return 0;
}

static void enable(jvmtiEvent ev)
{
	jvmtiError e = (*jv_jvmti)->SetEventNotificationMode(jv_jvmti, JVMTI_ENABLE, ev, NULL);
	if (e != JVMTI_ERROR_NONE)
		LOG_W("cannot enable JVMTI event %d: error %d", (int)ev, (int)e);
}

static jint setup(JavaVM *vm, char *options, bool onload)
{
	if (atomic_exchange(&loaded, true)) {
		/* A second load (attach again): the first agent keeps running. */
		return JNI_OK;
	}
	int r = parse_options(options);
	log_init(opt.debug ? LOG_SINK_STDERR : LOG_SINK_NONE, LOG_DEBUG, "profiling_jvmti");
	if (r < 0) {
		LOG_E("bad options '%s': %s", options ? options : "", strerror(-r));
		atomic_store(&loaded, false);
		return JNI_ERR;
	}
	jint v = (*vm)->GetEnv(vm, (void **)&jv_jvmti, JVMTI_VERSION_11);
	if (v != JNI_OK)
		v = (*vm)->GetEnv(vm, (void **)&jv_jvmti, JVMTI_VERSION_1_2);
	if (v != JNI_OK || add_caps() < 0) {
		LOG_E("no JVMTI environment");
		atomic_store(&loaded, false);
		return JNI_ERR;
	}
	char *ver = NULL;
	if ((*jv_jvmti)->GetSystemProperty(jv_jvmti, "java.vm.version", &ver) == JVMTI_ERROR_NONE) {
		snprintf(vm_version, sizeof(vm_version), "jvmti %s", ver);
		(*jv_jvmti)->Deallocate(jv_jvmti, (unsigned char *)ver);
	} else {
		snprintf(vm_version, sizeof(vm_version), "jvmti");
	}
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&oom_cond, &ca);
	pthread_condattr_destroy(&ca);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (wake_fd < 0) {
		atomic_store(&loaded, false);
		return JNI_ERR;
	}

	jvmtiEventCallbacks cb;
	memset(&cb, 0, sizeof(cb));
	cb.VMInit = on_vm_init;
	cb.VMDeath = on_vm_death;
	cb.ResourceExhausted = on_resource_exhausted;
	cb.GarbageCollectionStart = jvg_on_gc_start;
	cb.GarbageCollectionFinish = jvg_on_gc_finish;
	cb.SampledObjectAlloc = jvh_on_alloc;
	cb.ObjectFree = jvh_on_free;
	cb.ClassFileLoadHook = jve_on_class_file_load; /* enabled while method events run */
	use_async = !opt.no_async && !opt.no_agct && jva_init(vm, &cb, opt.debug);
	(*jv_jvmti)->SetEventCallbacks(jv_jvmti, &cb, (jint)sizeof(cb));
	if (use_async && jva_enable_events() < 0) {
		LOG_W("cannot enable the events AsyncGetCallTrace needs: GetStackTrace sampler");
		use_async = false;
	}
	use_mixed = use_async && jva_init_mixed(!opt.no_vmstructs);
	LOG_I("stack sampler: %s", use_async ? "AsyncGetCallTrace from signals"
		: opt.no_async ? (opt.all_at_once ? "GetAllStackTraces" : "GetStackTrace")
			       : "GetStackTrace (no AsyncGetCallTrace in this VM)");
	enable(JVMTI_EVENT_VM_DEATH);
	if (jv_caps.resource_exhausted)
		enable(JVMTI_EVENT_RESOURCE_EXHAUSTED);
	if (jv_caps.gc_events) {
		enable(JVMTI_EVENT_GARBAGE_COLLECTION_START);
		enable(JVMTI_EVENT_GARBAGE_COLLECTION_FINISH);
	}
	if (onload) {
		enable(JVMTI_EVENT_VM_INIT);
		return JNI_OK;
	}
	JNIEnv *jni = NULL;
	if (use_async)
		jva_prepare_loaded();
	if ((*vm)->GetEnv(vm, (void **)&jni, JNI_VERSION_1_8) != JNI_OK || start_thread(jni) < 0) {
		LOG_E("cannot start the agent thread");
		return JNI_ERR;
	}
	return JNI_OK;
}

JNIEXPORT jint JNICALL Agent_OnLoad(JavaVM *vm, char *options, void *reserved)
{
	return setup(vm, options, true);
}

JNIEXPORT jint JNICALL Agent_OnAttach(JavaVM *vm, char *options, void *reserved)
{
	return setup(vm, options, false);
}

JNIEXPORT void JNICALL Agent_OnUnload(JavaVM *vm)
{
	atomic_store(&dying, true);
	oom_release();
}
