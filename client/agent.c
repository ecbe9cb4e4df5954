#include "agent.h"

#include <errno.h>
#include <stdatomic.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
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
#include "heap.h"
#include "sampler.h"
#include "trace.h"
#include "util.h"
#include "wire.h"

/* Ranges the agent enforces whatever the daemon asks (profiling.h). */
#define AGENT_HZ_DEFAULT  100
#define AGENT_HZ_MIN      1
#define AGENT_HZ_MAX      1000
#define AGENT_DUR_DEFAULT 10000
#define AGENT_DUR_MIN     100
#define AGENT_DUR_MAX     120000
#define AGENT_TICK_MS     100

static pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t agent_cond = PTHREAD_COND_INITIALIZER;
static int agent_refs;
static bool agent_ready, agent_done;
static pthread_t agent_thread;
static int agent_stopfd = -1;
static int agent_oomfd = -1;   /* the allocator's failures, counted */
static volatile int crash_fd = -1; /* where a fatal signal dumps the rings */
static int agent_send(int sock, const ProtobufCMessage *m);
static _Atomic uint64_t oom_size;

/* The heap hook: on the failing thread; an eventfd write is all it does. */
static void agent_on_oom(size_t size)
{
	uint64_t one = 1;
	atomic_store(&oom_size, size);
	if (agent_oomfd >= 0) {
		ssize_t w = write(agent_oomfd, &one, sizeof(one));
		(void)w;
	}
}

/* A fatal signal: dump the flight recorder (write() only), then die of it. */
static void crash_handler(int sig, siginfo_t *si, void *uc)
{
	int fd = crash_fd;
	if (fd >= 0)
		trc_crash_dump(fd);
	struct sigaction dfl;
	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigaction(sig, &dfl, NULL);
	raise(sig); /* blocked in here: delivered, with SIG_DFL, on return */
}

static void install_crash_handlers(void)
{
	static const int sigs[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old, sa;
		/* The app's own handler wins: never replace one. */
		if (sigaction(sigs[i], NULL, &old) < 0 || (old.sa_flags & SA_SIGINFO) ||
		    old.sa_handler != SIG_DFL)
			continue;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = crash_handler;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		sigaction(sigs[i], &sa, NULL);
	}
}

static void agent_send_oom(int sock)
{
	uint64_t n;
	if (read(agent_oomfd, &n, sizeof(n)) != sizeof(n))
		return;
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeEvent ev = PD__RUNTIME_EVENT__INIT;
	ev.kind = 1;
	ev.has_value = 1;
	ev.value = atomic_load(&oom_size);
	rm.msg_case = PD__RUNTIME_MSG__MSG_EVENT;
	rm.event = &ev;
	agent_send(sock, &rm.base);
}
static char agent_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static bool agent_ask; /* agent_path is client.sock: ask it for the runtime socket */

static uint32_t clamp_u32(uint32_t v, uint32_t def, uint32_t lo, uint32_t hi)
{
	if (v == 0)
		return def;
	return v < lo ? lo : v > hi ? hi : v;
}

static int agent_send(int sock, const ProtobufCMessage *m)
{
	return wire_send_msg(sock, m, WIRE_RUNTIME_MAX_MSG, -1);
}

static int agent_done_fmt(int sock, uint64_t sid, uint32_t status, const char *msg,
			  uint64_t bytes, const struct smp_stats *st, const char *format)
{
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;

	d.session_id = sid;
	d.status = status;
	if (msg)
		d.message = (char *)msg;
	if (status == PROF_E_NONE) {
		d.has_bytes = 1;
		d.bytes = bytes;
		d.format = (char *)format;
	}
	if (st) {
		d.has_dropped = 1;
		d.dropped = st->dropped;
		d.has_samples = 1;
		d.samples = st->samples;
	}
	rm.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	rm.done = &d;
	return agent_send(sock, &rm.base);
}

static int agent_done_msg(int sock, uint64_t sid, uint32_t status, const char *msg,
			  uint64_t bytes, const struct smp_stats *st)
{
	return agent_done_fmt(sock, sid, status, msg, bytes, st, "pprof");
}

static Pd__DaemonToRuntime *agent_recv(int sock, int *fd)
{
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	ssize_t n = wire_recv(sock, buf, sizeof(buf), fd);
	if (n <= 0)
		return NULL;
	return pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
}

static void install_crash_handlers(void);

/*
 * Messages that do not start or end a capture, handled in any state. Takes
 * *fd when it keeps it. Returns 1 if m was one of them.
 */
static int agent_side_msg(const Pd__DaemonToRuntime *m, int *fd)
{
	switch (m->msg_case) {
	case PD__DAEMON_TO_RUNTIME__MSG_CRASH_FD:
		/* Kept for the life of the process: the handler writes into it. */
		if (*fd >= 0) {
			int old = crash_fd;
			crash_fd = *fd;
			*fd = -1;
			if (old >= 0)
				close(old);
			install_crash_handlers();
		}
		return 1;
	case PD__DAEMON_TO_RUNTIME__MSG_HEAP_ARM:
		/* Keep sampling from now on: an OOM capture then covers it all. */
		if (heap_supported() && !heap_active())
			heap_start(m->heap_arm->has_sampling_interval_bytes
				   ? m->heap_arm->sampling_interval_bytes : 0);
		return 1;
	default:
		return 0;
	}
}

/*
 * Wait out a capture of dur ms on this thread, answering what arrives
 * meanwhile: tick() runs every AGENT_TICK_MS. Returns 0 when the time is
 * up, 1 when the daemon cancelled it (CANCELLED already sent), -EPIPE when
 * the daemon went away or the agent must stop.
 */
static int agent_wait(int sock, const Pd__CaptureRequest *cr, uint32_t dur, void (*tick)(void))
{
	uint64_t t0 = util_mono_ms();
	for (;;) {
		uint64_t el = util_mono_ms() - t0;
		if (el >= dur)
			return 0;
		struct pollfd pf[2] = { { .fd = sock, .events = POLLIN },
					{ .fd = agent_stopfd, .events = POLLIN } };
		uint64_t left = dur - el;
		int pr = poll(pf, 2, left < AGENT_TICK_MS ? (int)left : AGENT_TICK_MS);
		if (pr < 0 && errno != EINTR)
			return -EPIPE;
		if (pf[1].revents)
			return -EPIPE;
		if (pf[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			int fd = -1;
			Pd__DaemonToRuntime *m = agent_recv(sock, &fd);
			if (!m) {
				if (fd >= 0)
					close(fd);
				return -EPIPE;
			}
			int cancelled = m->msg_case == PD__DAEMON_TO_RUNTIME__MSG_CANCEL &&
					m->cancel->session_id == cr->session_id;
			/* Stop: finish now with what was collected (fully drawn). */
			int stopped = m->msg_case == PD__DAEMON_TO_RUNTIME__MSG_STOP &&
				      m->stop->session_id == cr->session_id;
			agent_side_msg(m, &fd);
			if (m->msg_case == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE)
				agent_done_msg(sock, m->capture->session_id,
					       PROF_E_PROFILING_IN_PROGRESS,
					       "a capture is already running", 0, NULL);
			if (fd >= 0)
				close(fd);
			pd__daemon_to_runtime__free_unpacked(m, NULL);
			if (cancelled) {
				agent_done_msg(sock, cr->session_id, PROF_E_CANCELLED, "cancelled", 0, NULL);
				return 1;
			}
			if (stopped)
				return 0;
		}
		if (tick)
			tick();
	}
}

/* A write into the daemon's file that failed for want of space is the
 * disk's fault, not the capture's: the app gets NO_DISK_SPACE. */
static uint32_t write_status(int r)
{
	return (uint32_t)names_errno_error(r, PROF_E_EXECUTING);
}

static void smp_tick(void)
{
	smp_rescan();
}

static int agent_stack(int sock, const Pd__CaptureRequest *cr, int out_fd, uint32_t dur)
{
	const Pd__Params *p = cr->params;
	uint32_t hz = clamp_u32(p && p->has_frequency_hz ? p->frequency_hz : 0,
				AGENT_HZ_DEFAULT, AGENT_HZ_MIN, AGENT_HZ_MAX);
	struct smp_stats st;
	uint64_t bytes = 0;
	int r;

	bool wall = p && p->has_clock && p->clock == 1;
	int64_t start_ns = (int64_t)util_now_ns(CLOCK_REALTIME);
	if ((r = smp_start(hz, wall)) < 0)
		return agent_done_msg(sock, cr->session_id, PROF_E_EXECUTING,
				      strerror(-r), 0, NULL);
	LOG_D("session %llu: sampling at %u Hz for %u ms",
	      (unsigned long long)cr->session_id, hz, dur);
	if ((r = agent_wait(sock, cr, dur, smp_tick)) != 0) {
		smp_discard();
		return r < 0 ? r : 0;
	}
	int64_t dur_ns = (int64_t)util_now_ns(CLOCK_REALTIME) - start_ns;
	r = smp_write_pprof(out_fd, start_ns, dur_ns, &st, &bytes);
	if (r < 0)
		return agent_done_msg(sock, cr->session_id, write_status(r),
				      strerror(-r), 0, &st);
	LOG_D("session %llu: %llu samples, %llu dropped, %llu bytes",
	      (unsigned long long)cr->session_id, (unsigned long long)st.samples,
	      (unsigned long long)st.dropped, (unsigned long long)bytes);
	return agent_done_msg(sock, cr->session_id, PROF_E_NONE, NULL, bytes, &st);
}

/*
 * The flight recorder runs all the time: wait, then snapshot every ring.
 * With buffer_fill_policy discard the capture is a discard window instead
 * (client/trace.h): its start, not its end, and CaptureDone.dropped is
 * then the events dropped because a ring was full, which the daemon puts
 * in the result's note.
 */
static int agent_trace(int sock, const Pd__CaptureRequest *cr, int out_fd, uint32_t dur)
{
	const Pd__Params *p = cr->params;
	bool discard = p && p->has_buffer_fill_policy && p->buffer_fill_policy == PROF_FILL_DISCARD;
	struct trc_stats ts;
	struct smp_stats st = { 0 };
	uint64_t bytes = 0;
	if (discard)
		trc_discard_begin();
	int w = agent_wait(sock, cr, dur, NULL);
	int r = w == 0 ? trc_snapshot(out_fd, &ts, &bytes) : 0;
	if (discard)
		trc_discard_end();
	if (w != 0)
		return w < 0 ? w : 0;
	if (r < 0)
		return agent_done_msg(sock, cr->session_id, write_status(r), strerror(-r), 0, NULL);
	st.samples = ts.events;
	st.dropped = discard ? ts.discarded : ts.dropped;
	return agent_done_fmt(sock, cr->session_id, PROF_E_NONE, NULL, bytes, &st, "perfetto");
}

/* Heap profile: from the request (or from start-up, when the preload
 * library was asked to start early) to the end of the duration. */
static int agent_heap(int sock, const Pd__CaptureRequest *cr, int out_fd, uint32_t dur)
{
	const Pd__Params *p = cr->params;
	uint32_t interval = p && p->has_sampling_interval_bytes ? p->sampling_interval_bytes : 0;
	struct heap_stats hs;
	struct smp_stats st = { 0 };
	uint64_t bytes = 0;
	int r;

	int64_t start_ns = (int64_t)util_now_ns(CLOCK_REALTIME);
	if (!heap_active() && (r = heap_start(interval)) < 0)
		return agent_done_msg(sock, cr->session_id, PROF_E_EXECUTING, strerror(-r), 0, NULL);
	if ((r = agent_wait(sock, cr, dur, NULL)) != 0) {
		heap_discard();
		return r < 0 ? r : 0;
	}
	int64_t dur_ns = (int64_t)util_now_ns(CLOCK_REALTIME) - start_ns;
	if ((r = heap_write_pprof(out_fd, start_ns, dur_ns, &hs, &bytes)) < 0)
		return agent_done_msg(sock, cr->session_id, write_status(r), strerror(-r), 0, NULL);
	st.samples = hs.samples;
	st.dropped = hs.dropped;
	return agent_done_msg(sock, cr->session_id, PROF_E_NONE, NULL, bytes, &st);
}

/* Run one capture on this thread. 0, or -EPIPE when the agent must stop. */
static int agent_capture(int sock, const Pd__CaptureRequest *cr, int out_fd)
{
	const Pd__Params *p = cr->params;
	uint32_t dur = clamp_u32(p && p->has_duration_ms ? p->duration_ms : 0,
				 AGENT_DUR_DEFAULT, AGENT_DUR_MIN, AGENT_DUR_MAX);
	switch (cr->type) {
	case PROF_STACK_SAMPLING:
		return agent_stack(sock, cr, out_fd, dur);
	case PROF_SYSTEM_TRACE:
		return agent_trace(sock, cr, out_fd, dur);
	case PROF_HEAP_PROFILE:
		if (heap_supported())
			return agent_heap(sock, cr, out_fd, dur);
		return agent_done_msg(sock, cr->session_id, PROF_E_INVALID_REQUEST,
				      "this process's malloc is not the profiler's (sanitizer or "
				      "another interposer)", 0, NULL);
	case PROF_HEAP_DUMP:
		return agent_done_msg(sock, cr->session_id, PROF_E_INVALID_REQUEST,
				      "native runtime has no heap dump; request PROF_HEAP_PROFILE",
				      0, NULL);
	default:
		return agent_done_msg(sock, cr->session_id, PROF_E_INVALID_REQUEST,
				      "capture type not supported by this runtime", 0, NULL);
	}
}

static int agent_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	util_strlcpy(sa.sun_path, agent_path, sizeof(sa.sun_path));
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int r = -errno;
		close(s);
		return r;
	}
	return s;
}

static int agent_hello(int sock)
{
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	char *caps[3] = { (char *)names_cap_str(NAMES_CAP_STACK_SAMPLING),
			  (char *)names_cap_str(NAMES_CAP_TRACE_RING),
			  (char *)names_cap_str(NAMES_CAP_HEAP_PROFILE) };

	h.pid = (uint32_t)getpid();
	h.runtime = "native";
	h.capabilities = caps;
	/* heap_profile only when our malloc is the process's (never assumed). */
	h.n_capabilities = heap_supported() ? 3 : 2;
	h.version = PROFILINGD_VERSION;
	rm.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	rm.hello = &h;
	return agent_send(sock, &rm.base);
}

static void agent_set_ready(void)
{
	pthread_mutex_lock(&agent_lock);
	agent_ready = true;
	pthread_cond_broadcast(&agent_cond);
	pthread_mutex_unlock(&agent_lock);
}

/*
 * agent_path is the daemon's client socket (PROFILINGD_SOCKET): learn its
 * runtime socket the way libprofiling does, from the Welcome to a
 * ClientHello, then hang up. The daemon's answer is waited for at most
 * AGENT_ASK_MS; a path that does not fit is refused. 0 or -errno.
 */
#define AGENT_ASK_MS 5000
static int agent_ask_runtime_socket(void)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	int fd = -1, r, s = agent_connect();

	if (s < 0)
		return s;
	h.version = PROF_API_VERSION;
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	if ((r = wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1)) < 0)
		goto out;
	for (;;) {
		struct pollfd pf[2] = { { .fd = s, .events = POLLIN },
					{ .fd = agent_stopfd, .events = POLLIN } };
		int pr = poll(pf, 2, AGENT_ASK_MS);
		if (pr < 0 && errno == EINTR)
			continue;
		r = pr < 0 ? -errno : pr == 0 ? -ETIMEDOUT : pf[1].revents ? -ECANCELED : 0;
		if (r < 0)
			goto out;
		ssize_t n = wire_recv(s, buf, sizeof(buf), &fd);
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (n <= 0) {
			r = n < 0 ? (int)n : -ECONNRESET;
			goto out;
		}
		Pd__DaemonMsg *d = pd__daemon_msg__unpack(NULL, (size_t)n, buf);
		if (!d) {
			r = -EBADMSG;
			goto out;
		}
		/* Anything before the Welcome (none is sent today) is skipped. */
		if (d->msg_case != PD__DAEMON_MSG__MSG_WELCOME) {
			pd__daemon_msg__free_unpacked(d, NULL);
			continue;
		}
		const char *rt = d->welcome->runtime_socket;
		r = rt && *rt && util_strlcpy(agent_path, rt, sizeof(agent_path)) < sizeof(agent_path)
			? 0 : -ENAMETOOLONG;
		pd__daemon_msg__free_unpacked(d, NULL);
		goto out;
	}
out:
	close(s);
	return r;
}

static void *agent_main(void *arg)
{
	int sock = -1, r;
	bool acked = false;
	char asked[sizeof(agent_path)];

	util_strlcpy(asked, agent_path, sizeof(asked));
	if (agent_ask && (r = agent_ask_runtime_socket()) < 0) {
		LOG_D("not registered with profilingd: no runtime socket from %s: %s; a capture "
		      "of this process will be agentless", asked, strerror(-r));
		goto out;
	}
	sock = agent_connect();
	if (sock < 0) {
		LOG_D("not registered with profilingd: cannot connect to %s: %s; a capture of "
		      "this process will be agentless (is PROFILINGD_SOCKET the daemon's client "
		      "socket?)", agent_path, strerror(-sock));
		goto out;
	}
	if (agent_hello(sock) < 0)
		goto out;
	for (;;) {
		struct pollfd pf[3] = { { .fd = sock, .events = POLLIN },
					{ .fd = agent_stopfd, .events = POLLIN },
					{ .fd = agent_oomfd, .events = POLLIN } };
		if (poll(pf, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents)
			break;
		if (pf[2].revents & POLLIN)
			agent_send_oom(sock);
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		int fd = -1;
		Pd__DaemonToRuntime *m = agent_recv(sock, &fd);
		if (!m) {
			if (fd >= 0)
				close(fd);
			if (acked)
				LOG_D("daemon closed the runtime connection");
			else
				LOG_D("not registered with profilingd: the daemon at %s refused the "
				      "hello; a capture of this process will be agentless", agent_path);
			break;
		}
		r = 0;
		switch (m->msg_case) {
		case PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK:
			acked = true;
			LOG_D("registered with profilingd at %s", agent_path);
			agent_set_ready();
			break;
		case PD__DAEMON_TO_RUNTIME__MSG_CRASH_FD:
		case PD__DAEMON_TO_RUNTIME__MSG_HEAP_ARM:
			agent_side_msg(m, &fd);
			break;
		case PD__DAEMON_TO_RUNTIME__MSG_CAPTURE:
			if (fd < 0)
				r = agent_done_msg(sock, m->capture->session_id,
						   PROF_E_INVALID_REQUEST, "no output fd", 0, NULL);
			else
				r = agent_capture(sock, m->capture, fd);
			/* The fd is a pipe the daemon closes at its cap or on a
			 * cancel: this thread blocks every signal (agent_start),
			 * so the write got EPIPE and the SIGPIPE waits here. */
			util_sigpipe_drain();
			break;
		default:
			break; /* a cancel for a capture that already ended */
		}
		if (fd >= 0)
			close(fd);
		pd__daemon_to_runtime__free_unpacked(m, NULL);
		if (r == -EPIPE)
			break;
	}
out:
	if (sock >= 0)
		close(sock);
	pthread_mutex_lock(&agent_lock);
	agent_done = true;
	pthread_cond_broadcast(&agent_cond);
	pthread_mutex_unlock(&agent_lock);
	return NULL;
}

static int agent_launch(const char *path, bool ask, int wait_ms);

int agent_start(const char *runtime_socket, int wait_ms)
{
	return agent_launch(runtime_socket, false, wait_ms);
}

int agent_start_via_client(const char *client_socket, int wait_ms)
{
	return agent_launch(client_socket, true, wait_ms);
}

static int agent_launch(const char *runtime_socket, bool ask, int wait_ms)
{
	sigset_t all, old;
	int r = 0;

	pthread_mutex_lock(&agent_lock);
	if (agent_refs > 0 && !agent_done) {
		agent_refs++;
		goto out;
	}
	if (agent_refs > 0) {
		/* The previous thread ended (daemon restart): start afresh. */
		pthread_mutex_unlock(&agent_lock);
		pthread_join(agent_thread, NULL);
		pthread_mutex_lock(&agent_lock);
		close(agent_stopfd);
		agent_stopfd = -1;
	}
	if (util_strlcpy(agent_path, runtime_socket, sizeof(agent_path)) >= sizeof(agent_path)) {
		r = -ENAMETOOLONG;
		goto out;
	}
	agent_ask = ask;
	agent_stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (agent_oomfd < 0) {
		agent_oomfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		heap_set_oom_hook(agent_on_oom);
	}
	if (agent_stopfd < 0) {
		r = -errno;
		goto out;
	}
	agent_ready = agent_done = false;
	/* The agent thread takes none of the app's signals, SIGPROF included. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	r = -pthread_create(&agent_thread, NULL, agent_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (r) {
		close(agent_stopfd);
		agent_stopfd = -1;
		goto out;
	}
	agent_refs = agent_refs > 0 ? agent_refs + 1 : 1;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += wait_ms / 1000;
	dl.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	while (!agent_ready && !agent_done)
		if (pthread_cond_timedwait(&agent_cond, &agent_lock, &dl) == ETIMEDOUT)
			break;
out:
	pthread_mutex_unlock(&agent_lock);
	return r;
}

void agent_stop(void)
{
	pthread_mutex_lock(&agent_lock);
	if (agent_refs == 0 || --agent_refs > 0) {
		pthread_mutex_unlock(&agent_lock);
		return;
	}
	uint64_t one = 1;
	ssize_t w = write(agent_stopfd, &one, sizeof(one));
	(void)w;
	pthread_mutex_unlock(&agent_lock);
	pthread_join(agent_thread, NULL);
	pthread_mutex_lock(&agent_lock);
	close(agent_stopfd);
	agent_stopfd = -1;
	pthread_mutex_unlock(&agent_lock);
}
