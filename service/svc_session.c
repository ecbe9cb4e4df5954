/*
 * Capture sessions: admission checks, the request to the runtime, the
 * deadline, and the store-then-deliver step.
 *
 *   request --(runtime hello'd?)--> WAIT_RUNTIME --hello--> CAPTURING
 *   CAPTURING --CaptureDone ok--> store --> deliver (Result + fd)
 *   any state --cancel / deadline / runtime gone / error--> failed Result
 *
 * The runtime writes the artifact into the write end of a pipe; the daemon
 * drains the read end (svc_sink, capped at max_result_bytes) into
 * <state>/raw/<id>.raw, a root-owned file no app ever holds an fd to, so
 * no app can read back what the daemon adds or grow the daemon's disk. The
 * capture is over when CaptureDone has come and the sink has the bytes it
 * declared. The redactor's output is fsync'd, handed to the app's uid and
 * renamed into <state>/results/<uid>/, so a result file is either absent
 * or complete.
 *
 * A session is bound to its target process (svc_ident: pidfd or pid and
 * start time, its ids), not to a pid. Before the capture starts (runtime
 * or helper), and when profilingd-perf is done, the process is checked
 * again: one that is gone, was replaced or changed its ids (a setuid exec)
 * fails the session with PROF_E_PERMISSION. A runtime is matched only when
 * its own process is the session's (same pid and start time), and helpers
 * get the start time to re-check on their side.
 */
#include "svc.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "profiling/profiling.h"
#include "svc_sink.h"
#include "svc_ident.h"
#include "util.h"
#include "wire.h"

enum sess_state { S_WAIT_RUNTIME, S_CAPTURING, S_REDACTING };

struct session {
	uint64_t id;
	uid_t uid;
	gid_t gid;
	pid_t pid;
	struct svc_ident ident;          /* the target process (pid 0: none, a dead one's dump) */
	uint32_t type;
	uint32_t duration_ms, hz, clock;
	uint32_t trigger;                /* PROF_TRIGGER_*, 0 for a direct request */
	char tag[WIRE_MAX_TAG + 1];
	char app[RL_APP_MAX];
	uint64_t client_id;
	struct svc_conn *rt;
	enum sess_state state;
	int raw_fd;
	char raw_path[SVC_PATH_MAX];
	struct svc_sink *sink;           /* the runtime's pipe, drained into raw_fd */
	bool done_msg;                   /* CaptureDone came; waiting for the drain */
	uint64_t declared;               /* its bytes; UINT64_MAX: not declared */
	int out_fd;                      /* the redactor's output, in the app's dir */
	char out_path[SVC_PATH_MAX + 32];
	struct svc_redact *rd;
	uint64_t samples, dropped;       /* from the runtime, for the log */
	char note[192];                  /* for the app with its result, or "" */
	/* System traces: kernel sched data recorded beside the runtime's ring. */
	struct svc_redact *ft;
	struct svc_redact *perf;         /* agentless stack sampling */
	struct svc_redact *ja;           /* JVM: attach heap dump or agent load */
	bool jvm;                        /* a HotSpot VM (svc_jvm_detect) */
	bool agent_tried;                /* the JVMTI agent load was attempted */
	bool released;                   /* EventDone sent to a runtime holding for us */
	int ft_fd;
	char ft_path[SVC_PATH_MAX + 32];
	bool ft_running, capture_done;
	uint32_t buffer_kb;
	uint32_t wait_ms;                /* for a runtime to say hello */
	uint32_t interval;               /* heap profile sampling interval, bytes */
	const char *redact_format;       /* NULL: the type's format */
	struct event *timer;
	uint64_t start_ns;
	struct session *next;
};

static struct event_base *base;
static const struct svc_config *cfg;
static struct session *sessions;
static unsigned nsessions;
static char raw_dir[SVC_PATH_MAX], results_dir[SVC_PATH_MAX];

static const struct {
	const char *name, *ext, *format;
	uint32_t cap;
} type_info[] = {
	[PROF_HEAP_DUMP] = { "heapdump", "hprof", "hprof", SVC_CAP_HEAP_DUMP },
	[PROF_HEAP_PROFILE] = { "heapprofile", "pb.gz", "pprof", SVC_CAP_HEAP_PROFILE },
	[PROF_STACK_SAMPLING] = { "stack", "pb.gz", "pprof", SVC_CAP_STACK_SAMPLING },
	[PROF_SYSTEM_TRACE] = { "trace", "perfetto-trace", "perfetto", SVC_CAP_TRACE_RING },
};

/* Phase changes to the observer (svc_ctl); defined at the end. */
static void notify(struct session *s, const char *phase, int error, const char *msg,
		   uint64_t result_id, const char *path);

static bool type_valid(uint32_t t)
{
	return t >= PROF_HEAP_DUMP && t <= PROF_SYSTEM_TRACE;
}

const char *svc_session_raw_dir(void)
{
	return raw_dir;
}

unsigned svc_session_active(void)
{
	return nsessions;
}

static struct session *find(uint64_t id)
{
	for (struct session *s = sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

static void unlink_session(struct session *s)
{
	for (struct session **pp = &sessions; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			nsessions--;
			return;
		}
	}
}

/* The app's connection for this result: the requester, else a listener. */
static struct svc_conn *result_peer(const struct session *s)
{
	struct svc_conn *c = svc_conn_by_id(s->client_id);
	return c ? c : svc_conn_listener_for(s->uid);
}

static int send_result_to(struct svc_conn *c, uint64_t id, uint32_t type, uint32_t trigger,
			  const char *tag, int error, const char *msg, const char *path,
			  uint64_t size, uint64_t result_id, uint64_t start_ns, int fd,
			  const char *note)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__Result r = PD__RESULT__INIT;

	if (!c)
		return -ENOTCONN;
	r.request_id = id;
	r.type = type;
	r.has_trigger = 1;
	r.trigger = trigger;
	r.error = (uint32_t)error;
	r.error_message = (char *)(msg ? msg : "");
	r.tag = (char *)tag;
	if (path) {
		r.path = (char *)path;
		r.has_size = 1;
		r.size = size;
		r.format = (char *)type_info[type].format;
	}
	/* A stored result, failure results included: the app acks it by this id. */
	r.has_result_id = result_id != 0;
	r.result_id = result_id;
	r.has_start_ns = 1;
	r.start_ns = start_ns;
	if (note && *note)
		r.note = (char *)note;
	r.has_end_ns = 1;
	r.end_ns = util_now_ns(CLOCK_REALTIME);
	out.msg_case = PD__DAEMON_MSG__MSG_RESULT;
	out.result = &r;
	return svc_conn_send(c, &out.base, fd);
}

static int send_result(struct session *s, int error, const char *msg, const char *path,
		       uint64_t size, uint64_t result_id, int fd)
{
	return send_result_to(result_peer(s), s->id, s->type, s->trigger, s->tag, error, msg, path,
			      size, result_id, s->start_ns, fd, NULL);
}

/* Drop the session's files and helpers; done before the app hears the end,
 * so that nothing of it is left once the result is out. */
static void release_files(struct session *s)
{
	svc_redact_abort(s->rd);
	s->rd = NULL;
	svc_redact_abort(s->ft);
	s->ft = NULL;
	svc_redact_abort(s->perf);
	s->perf = NULL;
	svc_redact_abort(s->ja);
	s->ja = NULL;
	if (s->ft_fd >= 0)
		close(s->ft_fd);
	s->ft_fd = -1;
	if (s->ft_path[0])
		unlink(s->ft_path);
	s->ft_path[0] = '\0';
	svc_sink_free(s->sink);
	s->sink = NULL;
	if (s->raw_fd >= 0) {
		/* Free the blocks even if another fd to the inode survives (a
		 * helper's, or one an older daemon handed out). */
		if (s->raw_path[0] && ftruncate(s->raw_fd, 0) < 0)
			LOG_D("session %llu: ftruncate of the raw file: %s",
			      (unsigned long long)s->id, strerror(errno));
		close(s->raw_fd);
	}
	s->raw_fd = -1;
	if (s->raw_path[0])
		unlink(s->raw_path);
	s->raw_path[0] = '\0';
	if (s->out_fd >= 0)
		close(s->out_fd);
	s->out_fd = -1;
	if (s->out_path[0])
		unlink(s->out_path);
	s->out_path[0] = '\0';
}

void svc_session_event_done(pid_t pid, uint32_t kind, int status)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__EventDone ed = PD__EVENT_DONE__INIT;
	struct svc_conn *rt = svc_conn_runtime_for(pid);
	if (!rt)
		return;
	ed.kind = kind;
	ed.has_status = 1;
	ed.status = (uint32_t)status;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_EVENT_DONE;
	out.event_done = &ed;
	svc_conn_send(rt, &out.base, -1);
}

/* An OOM capture is written (or failed): a runtime holding its OOM thread
 * for it may let the process go on. */
static void release_hold(struct session *s, int status)
{
	if (s->released || s->trigger != PROF_TRIGGER_OOM)
		return;
	s->released = true;
	svc_session_event_done(s->pid, 1, status);
}

static void session_free(struct session *s)
{
	release_hold(s, PROF_E_UNKNOWN);
	if (s->trigger)
		svc_trigger_session_end(s->app, s->trigger, s->id, s->pid, s->type);
	unlink_session(s);
	release_files(s);
	svc_ident_fini(&s->ident);
	if (s->timer)
		event_free(s->timer);
	free(s);
}

/* End a session with an error: record it, tell the app, free it. */
static void fail(struct session *s, int error, const char *msg)
{
	LOG_I("session %llu (pid %d) failed: %s: %s", (unsigned long long)s->id, (int)s->pid,
	      prof_strerror(error), msg);
	svc_db_session_end(s->id, "failed", error, msg, util_now_ns(CLOCK_REALTIME));
	release_files(s);
	notify(s, "failed", error, msg, 0, NULL);
	if (send_result(s, error, msg, NULL, 0, 0, -1) < 0)
		LOG_D("session %llu: app not connected for its failure result",
		      (unsigned long long)s->id);
	session_free(s);
}

static void send_cancel(struct session *s)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__CaptureCancel cc = PD__CAPTURE_CANCEL__INIT;

	if (s->state != S_CAPTURING || !s->rt)
		return;
	cc.session_id = s->id;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_CANCEL;
	out.cancel = &cc;
	svc_conn_send(s->rt, &out.base, -1);
}

static void start_capture(struct session *s, struct svc_conn *rt);
static bool start_agentless(struct session *s);

/* The runtime of the session's own process: same pid and start time. */
static struct svc_conn *runtime_of(const struct session *s)
{
	struct svc_conn *rt = svc_conn_runtime_for(s->pid);
	return rt && svc_conn_ident(rt)->start == s->ident.start ? rt : NULL;
}

/*
 * Is the target still the process admitted, with the same ids? If not the
 * session fails (PROF_E_PERMISSION), the requester's connection is closed
 * when it was that process's, and -ESRCH or -EPERM comes back.
 */
static int recheck(struct session *s)
{
	char msg[160];
	if (s->ident.pid <= 0)
		return 0;
	int r = svc_ident_check(&s->ident);
	if (r == 0)
		return 0;
	util_fmt(msg, sizeof(msg), r == -EPERM
		 ? "pid %d changed its ids since the request (a setuid exec?): not capturable"
		 : "pid %d is gone or is another process now", (int)s->pid);
	uint64_t client_id = s->client_id;
	fail(s, PROF_E_PERMISSION, msg);
	struct svc_conn *c = svc_conn_by_id(client_id);
	if (c)
		svc_conn_check(c);
	return r;
}

/* [jvm] heap_dump_via_agent, and pid's agent is connected and offers it. */
static bool dump_by_agent(const struct session *s)
{
	struct svc_conn *rt = cfg->jvm_dump_via_agent ? runtime_of(s) : NULL;
	return rt && (svc_conn_runtime_caps(rt) & SVC_CAP_HEAP_DUMP);
}
static int open_raw(struct session *s);
static void start_jvm_dump(struct session *s);
static bool start_agent_load(struct session *s);
static void arm(struct session *s, uint32_t ms);

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	char msg[192];

	if (s->state == S_WAIT_RUNTIME) {
		/* A JVM's heap dump is the VM's own, through the attach protocol
		 * (or its agent's, when configured and connected). */
		if (s->jvm && s->type == PROF_HEAP_DUMP && !dump_by_agent(s)) {
			start_jvm_dump(s);
			return;
		}
		struct svc_conn *rt = runtime_of(s);
		if (rt) {
			start_capture(s, rt);
			return;
		}
		/* A JVM without our agent: load it, then wait for its hello. */
		if (s->jvm && !s->agent_tried && start_agent_load(s))
			return;
		if (s->ja)
			return; /* the load is still running; its end decides */
		/* No agent: stack samples the daemon can take itself. */
		if (s->type == PROF_STACK_SAMPLING && start_agentless(s))
			return;
		util_fmt(msg, sizeof(msg), "no runtime agent connected for pid %d within %u ms",
			 (int)s->pid, s->wait_ms);
		fail(s, PROF_E_RUNTIME_UNAVAILABLE, msg);
		return;
	}
	if (s->done_msg)
		util_fmt(msg, sizeof(msg), "the runtime declared %llu bytes but wrote %llu by its "
			 "deadline of %u ms", (unsigned long long)s->declared,
			 (unsigned long long)svc_sink_bytes(s->sink),
			 s->duration_ms + cfg->deadline_grace_ms);
	else
		util_fmt(msg, sizeof(msg), "runtime missed its deadline of %u ms",
			 s->duration_ms + cfg->deadline_grace_ms);
	send_cancel(s);
	fail(s, PROF_E_TIMEOUT, msg);
}

static void arm(struct session *s, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	evtimer_add(s->timer, &tv);
}

static void start_redaction(struct session *s);

/* profilingd-ftrace finished: the kernel half of a system trace. */
static void ftrace_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	s->ft = NULL;
	s->ft_running = false;
	if (code != 0) {
		LOG_W("session %llu: no kernel sched data in the trace: %s", (unsigned long long)s->id,
		      msg);
		if (s->ft_fd >= 0)
			close(s->ft_fd);
		s->ft_fd = -1;
	}
	if (s->capture_done)
		start_redaction(s);
}

static void start_ftrace(struct session *s)
{
	if (util_fmt(s->ft_path, sizeof(s->ft_path), "%s/%llu.ftrace", raw_dir,
		     (unsigned long long)s->id) < 0)
		return;
	s->ft_fd = open(s->ft_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->ft_fd < 0) {
		s->ft_path[0] = '\0';
		return;
	}
	int r = svc_ftrace_start(s->id, s->duration_ms, s->buffer_kb, s->ft_fd, ftrace_done, s, &s->ft);
	if (r < 0) {
		LOG_W("session %llu: no kernel sched data: %s", (unsigned long long)s->id,
		      r == -ENOENT ? "profilingd-ftrace is not installed" : strerror(-r));
		close(s->ft_fd);
		s->ft_fd = -1;
		return;
	}
	s->ft_running = true;
}

static int open_raw(struct session *s)
{
	if (util_fmt(s->raw_path, sizeof(s->raw_path), "%s/%llu.raw", raw_dir,
		     (unsigned long long)s->id) < 0) {
		s->raw_path[0] = '\0';
		return -ENAMETOOLONG;
	}
	s->raw_fd = open(s->raw_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->raw_fd < 0) {
		int e = -errno;
		s->raw_path[0] = '\0';
		return e;
	}
	return 0;
}

static void perf_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	char m[300];
	s->perf = NULL;
	/* A process that changed its ids while it was sampled (a setuid exec)
	 * was not the requester's to sample all along: nothing is kept. */
	if (recheck(s) < 0)
		return;
	if (code != 0) {
		util_fmt(m, sizeof(m), "agentless sampling failed: %s", msg && *msg ? msg : "?");
		fail(s, code == SVC_REDACT_NOSPACE ? PROF_E_NO_DISK_SPACE : PROF_E_EXECUTING, m);
		return;
	}
	LOG_I("session %llu: agentless samples: %s", (unsigned long long)s->id, msg);
	/* profilingd-perf saw our agent library in the target: say why it
	 * was sampled without it. */
	const char *lib = msg ? strstr(msg, " unregistered_agent=") : NULL;
	if (lib)
		util_fmt(s->note, sizeof(s->note), "sampled agentless: %s is loaded in pid %d but "
			 "its agent did not register (check PROFILINGD_SOCKET; PROFILING_DEBUG=1 "
			 "says why)", lib + strlen(" unregistered_agent="), (int)s->pid);
	s->capture_done = true;
	evtimer_del(s->timer);
	start_redaction(s);
}

/* Sample pid with profilingd-perf. false when that cannot start. */
static bool start_agentless(struct session *s)
{
	if (recheck(s) < 0)
		return true; /* the session has failed: nothing else to try */
	int r = open_raw(s);
	if (r == 0)
		r = svc_perf_start(s->pid, s->ident.start, s->hz, s->duration_ms, s->raw_fd,
				   perf_done, s, &s->perf);
	if (r < 0) {
		LOG_I("session %llu: pid %d has no agent and cannot be sampled without one: %s",
		      (unsigned long long)s->id, (int)s->pid,
		      r == -ENOENT ? "profilingd-perf is not installed" : strerror(-r));
		if (s->raw_fd >= 0)
			close(s->raw_fd);
		s->raw_fd = -1;
		if (s->raw_path[0])
			unlink(s->raw_path);
		s->raw_path[0] = '\0';
		return false;
	}
	s->state = S_CAPTURING;
	s->start_ns = util_now_ns(CLOCK_REALTIME);
	notify(s, "capturing", 0, NULL, 0, NULL);
	LOG_I("session %llu: no agent in pid %d: sampling it with perf_event_open at %u Hz for %u ms",
	      (unsigned long long)s->id, (int)s->pid, s->hz, s->duration_ms);
	return true;
}

/* profilingd-jattach wrote the JVM's heap dump (with its threads) into raw. */
static void jvm_dump_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	char m[300];
	s->ja = NULL;
	if (code != 0) {
		util_fmt(m, sizeof(m), "JVM heap dump failed: %s", msg && *msg ? msg : "?");
		fail(s, code == 69 ? PROF_E_RUNTIME_UNAVAILABLE : PROF_E_EXECUTING, m);
		return;
	}
	LOG_I("session %llu: JVM heap dump of pid %d: %s", (unsigned long long)s->id, (int)s->pid,
	      msg);
	s->capture_done = true;
	release_hold(s, 0);
	start_redaction(s);
}

static void start_jvm_dump(struct session *s)
{
	char msg[160];
	if (recheck(s) < 0)
		return;
	int r = open_raw(s);
	if (r == 0)
		r = svc_jattach_start(s->pid, s->ident.start, SVC_JATTACH_HEAPDUMP,
				      cfg->jvm_attach_timeout_ms, s->raw_fd, jvm_dump_done, s, &s->ja);
	if (r < 0) {
		util_fmt(msg, sizeof(msg), "cannot take a JVM heap dump: %s",
			 r == -ENOENT ? "profilingd-jattach is not installed" : strerror(-r));
		fail(s, r == -ENOSPC || r == -EDQUOT ? PROF_E_NO_DISK_SPACE
						     : PROF_E_RUNTIME_UNAVAILABLE, msg);
		return;
	}
	s->state = S_CAPTURING;
	s->start_ns = util_now_ns(CLOCK_REALTIME);
	LOG_I("session %llu: heap dump of JVM pid %d through the attach protocol",
	      (unsigned long long)s->id, (int)s->pid);
}

static void agent_load_done(void *ud, int code, const char *msg)
{
	struct session *s = ud;
	s->ja = NULL;
	if (s->state != S_WAIT_RUNTIME) {
		/* Its hello came before the helper's exit: the capture runs already. */
		LOG_I("session %llu: JVMTI agent loaded into pid %d (it said hello already)",
		      (unsigned long long)s->id, (int)s->pid);
		return;
	}
	if (code != 0) {
		LOG_I("session %llu: the JVMTI agent could not be loaded into pid %d: %s",
		      (unsigned long long)s->id, (int)s->pid, msg && *msg ? msg : "?");
		arm(s, 0); /* decide now: agentless samples, or unavailable */
		return;
	}
	LOG_I("session %llu: JVMTI agent loaded into pid %d; waiting for its hello",
	      (unsigned long long)s->id, (int)s->pid);
	/* A hello starts the capture (svc_session_runtime_up); this is the limit. */
	arm(s, s->wait_ms > cfg->runtime_wait_ms ? s->wait_ms : cfg->runtime_wait_ms);
}

/* Ask the JVM to load the profilingd agent. false when that cannot start. */
static bool start_agent_load(struct session *s)
{
	s->agent_tried = true;
	if (!svc_jvm_agent_available())
		return false;
	if (recheck(s) < 0)
		return true; /* the session has failed */
	int r = svc_jattach_start(s->pid, s->ident.start, SVC_JATTACH_LOAD,
				  cfg->jvm_attach_timeout_ms, -1, agent_load_done, s, &s->ja);
	if (r < 0) {
		LOG_I("session %llu: cannot load the JVMTI agent: %s", (unsigned long long)s->id,
		      strerror(-r));
		return false;
	}
	return true;
}

/*
 * The kernel half of a system trace, for the redactor's own fd: the file
 * profilingd-ftrace wrote (root-only, in raw/, never the runtime's), opened
 * again read-only. It is never merged into the runtime's file: the
 * redactor takes kernel data from this fd alone, and drops kernel-looking
 * packets from the runtime's stream. -1 when there is none (no helper, it
 * failed, or it recorded nothing): the trace then has the app's own events.
 */
static int kernel_stream(struct session *s, const char *format)
{
	struct stat st, st2;
	if (strcmp(format, "perfetto") || s->ft_fd < 0 || !s->ft_path[0] ||
	    fstat(s->ft_fd, &st) < 0 || st.st_size == 0)
		return -1;
	int fd = open(s->ft_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && (fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev)) {
		close(fd);
		fd = -1;
		errno = ESTALE;
	}
	if (fd < 0)
		LOG_W("session %llu: kernel sched data left out: %s", (unsigned long long)s->id,
		      strerror(errno));
	return fd;
}

static void capture_drained(struct session *s);

/* The runtime's pipe ended: EOF, its declared bytes, the cap, or an error. */
static void sink_cb(void *ud, int status)
{
	struct session *s = ud;
	char msg[160];

	if (status == 0) {
		/* EOF before CaptureDone: the deadline timer still runs. */
		if (s->done_msg)
			capture_drained(s);
		return;
	}
	send_cancel(s);
	if (status == -EFBIG) {
		util_fmt(msg, sizeof(msg), "artifact exceeds max_result_bytes (%llu)",
			 (unsigned long long)cfg->max_result_bytes);
		fail(s, PROF_E_POST_PROCESSING, msg);
	} else if (status == -EPROTO) {
		util_fmt(msg, sizeof(msg), "the runtime wrote more than the %llu bytes it declared",
			 (unsigned long long)s->declared);
		fail(s, PROF_E_POST_PROCESSING, msg);
	} else {
		util_fmt(msg, sizeof(msg), "cannot store the capture: %s", strerror(-status));
		fail(s, status == -ENOSPC || status == -EDQUOT ? PROF_E_NO_DISK_SPACE
							     : PROF_E_UNKNOWN, msg);
	}
}

/* CaptureDone came and the sink has all of it: check, then redact. */
static void capture_drained(struct session *s)
{
	char msg[160];
	uint64_t got = svc_sink_bytes(s->sink);

	evtimer_del(s->timer);
	svc_sink_free(s->sink); /* the read end goes: a late writer gets EPIPE */
	s->sink = NULL;
	if (s->declared != UINT64_MAX && got != s->declared) {
		util_fmt(msg, sizeof(msg), "the runtime declared %llu bytes but wrote %llu",
			 (unsigned long long)s->declared, (unsigned long long)got);
		fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	s->capture_done = true;
	/* A system trace waits for its kernel half, which ends on its own. */
	if (!s->ft_running)
		start_redaction(s);
}

/*
 * The runtime's end of the capture: the write end of a pipe whose read end
 * the sink drains into the raw file. Returns the write end, or -errno.
 */
static int open_sink(struct session *s)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	int r = svc_sink_start(base, p[0], s->raw_fd, cfg->max_result_bytes, sink_cb, s, &s->sink);
	if (r < 0) {
		close(p[0]);
		close(p[1]);
		return r;
	}
	return p[1];
}

static void start_capture(struct session *s, struct svc_conn *rt)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__CaptureRequest cr = PD__CAPTURE_REQUEST__INIT;
	Pd__Params p = PD__PARAMS__INIT;
	char msg[128];
	int wfd = -1;

	/* The target, and the runtime's own process, still what they were. */
	if (recheck(s) < 0)
		return;
	if (svc_conn_ident(rt)->start != s->ident.start) {
		fail(s, PROF_E_PERMISSION, "the runtime is not the target process's");
		return;
	}
	if (!(svc_conn_runtime_caps(rt) & type_info[s->type].cap)) {
		util_fmt(msg, sizeof(msg), "the runtime of pid %d cannot take a %s capture",
			 (int)s->pid, type_info[s->type].name);
		fail(s, PROF_E_INVALID_REQUEST, msg);
		return;
	}
	int r = open_raw(s);
	if (r == 0 && (wfd = open_sink(s)) < 0)
		r = wfd;
	if (r < 0) {
		util_fmt(msg, sizeof(msg), "cannot create the capture file: %s", strerror(-r));
		fail(s, r == -ENOSPC || r == -EDQUOT ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN, msg);
		return;
	}
	if (s->type == PROF_SYSTEM_TRACE)
		start_ftrace(s);
	p.has_duration_ms = 1;
	p.duration_ms = s->duration_ms;
	p.has_frequency_hz = 1;
	p.frequency_hz = s->hz;
	p.has_clock = s->clock != 0;
	p.clock = s->clock;
	p.has_sampling_interval_bytes = s->interval != 0;
	p.sampling_interval_bytes = s->interval;
	cr.session_id = s->id;
	cr.type = s->type;
	cr.params = &p;
	cr.deadline_ms = s->duration_ms + cfg->deadline_grace_ms;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_CAPTURE;
	out.capture = &cr;
	s->rt = rt;
	s->state = S_CAPTURING;
	s->start_ns = util_now_ns(CLOCK_REALTIME);
	r = svc_conn_send(rt, &out.base, wfd);
	/* Our copy goes now (the queue keeps its own until sent): EOF then
	 * means the runtime, and whoever it gave the fd to, closed theirs. */
	close(wfd);
	if (r < 0) {
		fail(s, PROF_E_EXECUTING, "cannot reach the runtime");
		return;
	}
	arm(s, cr.deadline_ms);
	notify(s, "capturing", 0, NULL, 0, NULL);
	LOG_I("session %llu: %s capture of pid %d for %u ms at %u Hz",
	      (unsigned long long)s->id, type_info[s->type].name, (int)s->pid,
	      s->duration_ms, s->hz);
}

/* Result names: <type>_<tag>_<utc>_<id>.<ext>; tags are [a-z0-9-]{0,20}. */
static void result_name(const struct session *s, char *out, size_t n)
{
	char tag[21];
	size_t j = 0;
	for (size_t i = 0; s->tag[i] && j < sizeof(tag) - 1; i++) {
		char ch = s->tag[i];
		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		tag[j++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ? ch : '-';
	}
	tag[j] = '\0';
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	char ts[32];
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	util_fmt(out, n, "%s_%s_%s_%llu.%s", type_info[s->type].name, j ? tag : "none", ts,
		 (unsigned long long)s->id, type_info[s->type].ext);
}

static int app_dir(const struct session *s, char *out, size_t n)
{
	if (util_fmt(out, n, "%s/%u", results_dir, (unsigned)s->uid) < 0)
		return -ENAMETOOLONG;
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* Owned by the app so that it can remove its own results. */
	if (chown(out, s->uid, s->gid) < 0 && errno != EPERM)
		return -errno;
	return chmod(out, 0700) < 0 ? -errno : 0;
}

static void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/*
 * Send result r (fd and metadata) to the app's connection c; counts an
 * attempt. The file is opened as svc_store_open checks it: uid's own
 * regular file with one link, whatever the app has put at path since. A
 * file that fails the check is not delivered and is logged; -ENOENT, or
 * -ELOOP/-EINVAL/-EPERM/-EMLINK for one that is not the result any more.
 */
static int deliver_to(struct svc_conn *c, uint64_t request_id, uint32_t type, uint32_t trigger,
		      const char *tag, const char *path, uid_t uid, uint64_t size,
		      uint64_t result_id, uint64_t start_ns, const char *note)
{
	char what[96];
	int fd = svc_store_open(path, uid, what, sizeof(what));
	if (fd < 0) {
		if (fd != -ENOENT)
			LOG_W("result %llu: %s is %s: not delivered", (unsigned long long)result_id,
			      path, what);
		return fd;
	}
	int r = send_result_to(c, request_id, type, trigger, tag, PROF_E_NONE, NULL, path, size,
			       result_id, start_ns, fd, note);
	close(fd);
	if (r == 0)
		svc_db_result_attempt(result_id);
	return r;
}

/* The redactor is done: move its output into place and hand it over. */
static void redact_done(void *ud, int code, const char *rmsg)
{
	struct session *s = ud;
	char dir[SVC_PATH_MAX], name[256], path[SVC_PATH_MAX + 256], msg[320];
	struct stat st;
	uint64_t result_id = 0;
	int r;

	s->rd = NULL;
	if (code != 0) {
		if (cfg->keep_failed_raw && s->raw_path[0]) {
			char keep[SVC_PATH_MAX + 32];
			if (util_fmt(keep, sizeof(keep), "%s/failed-%llu.raw", raw_dir,
				     (unsigned long long)s->id) == 0 && rename(s->raw_path, keep) == 0) {
				s->raw_path[0] = '\0';
				LOG_N("session %llu: raw artifact kept as %s (keep_failed_raw)",
				      (unsigned long long)s->id, keep);
			}
			/* A trace's kernel half is the other input the redactor read. */
			if (s->ft_path[0] &&
			    util_fmt(keep, sizeof(keep), "%s/failed-%llu.ftrace", raw_dir,
				     (unsigned long long)s->id) == 0 && rename(s->ft_path, keep) == 0) {
				s->ft_path[0] = '\0';
				LOG_N("session %llu: kernel trace kept as %s (keep_failed_raw)",
				      (unsigned long long)s->id, keep);
			}
		}
		if (code == SVC_REDACT_NOSPACE) {
			util_fmt(msg, sizeof(msg), "no space left for the result: %s",
				 rmsg && *rmsg ? rmsg : "?");
			fail(s, PROF_E_NO_DISK_SPACE, msg);
			return;
		}
		util_fmt(msg, sizeof(msg), "redaction failed: %s", rmsg && *rmsg ? rmsg : "?");
		fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	if (fstat(s->out_fd, &st) < 0 || st.st_size <= 0) {
		fail(s, PROF_E_POST_PROCESSING, "the redactor wrote nothing");
		return;
	}
	if ((r = svc_admit_result_reserve(s->app, (uint64_t)st.st_size, msg, sizeof(msg))) != 0) {
		fail(s, r, msg);
		return;
	}
	if ((fchown(s->out_fd, s->uid, s->gid) < 0 && errno != EPERM) ||
	    fchmod(s->out_fd, 0600) < 0 || fsync(s->out_fd) < 0) {
		int e = errno;
		util_fmt(msg, sizeof(msg), "cannot finish the result file: %s", strerror(e));
		fail(s, e == ENOSPC || e == EDQUOT ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN, msg);
		return;
	}
	if ((r = app_dir(s, dir, sizeof(dir))) < 0) {
		fail(s, PROF_E_UNKNOWN, "cannot prepare the result directory");
		return;
	}
	result_name(s, name, sizeof(name));
	if (util_fmt(path, sizeof(path), "%s/%s", dir, name) < 0) {
		fail(s, PROF_E_UNKNOWN, "result path too long");
		return;
	}
	if (rename(s->out_path, path) < 0) {
		int e = errno;
		util_fmt(msg, sizeof(msg), "cannot move the result into place: %s", strerror(e));
		fail(s, e == ENOSPC || e == EDQUOT ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN, msg);
		return;
	}
	s->out_path[0] = '\0';
	fsync_dir(dir);
	/*
	 * The commit point: the index row and the session's "done" in one
	 * transaction. A crash before it leaves the session active, and the
	 * next start removes this file and reports the failure instead
	 * (sweep_recovered), so the app gets the file or a failure, once.
	 */
	uint64_t end_ns = util_now_ns(CLOCK_REALTIME);
	if ((r = svc_db_result_commit(s->id, s->app, s->uid, s->type, s->trigger, path,
				      (uint64_t)st.st_size, type_info[s->type].format, s->start_ns,
				      end_ns, &result_id)) < 0) {
		unlink(path);
		svc_admit_recount(); /* give back what svc_admit_result_reserve took */
		util_fmt(msg, sizeof(msg), "cannot index the result: %s", strerror(-r));
		fail(s, r == -ENOSPC ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN, msg);
		return;
	}
	release_files(s);

	/*
	 * The result's note: the session's own (an agent library that did not
	 * register), else, for a stack capture the redactor kept no sample of
	 * ("ok ... kept=0", its status line; samples that are all foreign are
	 * refused), why the profile is empty. Stored with the result (on a
	 * fresh result requeue only sets the note) and sent with it.
	 */
	const char *note = s->note[0] ? s->note : NULL;
	if (!note && s->type == PROF_STACK_SAMPLING && rmsg && strstr(rmsg, " kept=0 "))
		note = s->clock ? "no samples: no thread of the process was sampled in the window"
				: "no samples: the process used no CPU in the window";
	if (note)
		svc_db_result_requeue(s->id, note);
	notify(s, "delivering", 0, NULL, 0, NULL);
	struct svc_conn *c = result_peer(s);
	r = c ? deliver_to(c, s->id, s->type, s->trigger, s->tag, path, s->uid,
			   (uint64_t)st.st_size, result_id, s->start_ns, note) : -ENOTCONN;
	LOG_I("session %llu: %llu samples (%llu dropped by the runtime); redacted (%s) "
	      "-> %s, %lld bytes%s", (unsigned long long)s->id, (unsigned long long)s->samples,
	      (unsigned long long)s->dropped, rmsg, path, (long long)st.st_size,
	      r == 0 ? "" : " (app not connected; queued)");
	if (note)
		LOG_I("session %llu: %s", (unsigned long long)s->id, note);
	notify(s, "done", 0, NULL, result_id, path);
	session_free(s);
}

/* Check the runtime's artifact, then hand it to the redactor. */
static void start_redaction(struct session *s)
{
	char dir[SVC_PATH_MAX], msg[160];
	unsigned char magic[2];
	struct stat st;
	int r;

	if (fstat(s->raw_fd, &st) < 0 || st.st_size <= 0) {
		fail(s, PROF_E_POST_PROCESSING, "the runtime wrote no data");
		return;
	}
	if ((uint64_t)st.st_size > cfg->max_result_bytes) {
		util_fmt(msg, sizeof(msg), "artifact of %lld bytes exceeds max_result_bytes",
			 (long long)st.st_size);
		fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	/* pprof is gzip'd: anything else is not what was asked for. */
	if (!strcmp(type_info[s->type].format, "pprof") &&
	    (pread(s->raw_fd, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b)) {
		fail(s, PROF_E_POST_PROCESSING, "artifact is not a gzip'd pprof");
		return;
	}
	if ((r = app_dir(s, dir, sizeof(dir))) < 0 ||
	    util_fmt(s->out_path, sizeof(s->out_path), "%s/.tmp-%llu", dir,
		     (unsigned long long)s->id) < 0) {
		s->out_path[0] = '\0';
		fail(s, r == -ENOSPC || r == -EDQUOT ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN,
		     "cannot prepare the result directory");
		return;
	}
	/* Root-owned until it is complete; the app cannot see a partial file. */
	s->out_fd = open(s->out_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->out_fd < 0) {
		int e = errno;
		s->out_path[0] = '\0';
		util_fmt(msg, sizeof(msg), "cannot create the result file: %s", strerror(e));
		fail(s, e == ENOSPC || e == EDQUOT ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN, msg);
		return;
	}
	s->state = S_REDACTING;
	notify(s, "redacting", 0, NULL, 0, NULL);
	const char *format = s->redact_format ? s->redact_format : type_info[s->type].format;
	int kfd = kernel_stream(s, format);
	struct stat kst;
	/* The cap is on what the redactor reads: both halves, as when they
	 * were one file. */
	if (kfd >= 0 && fstat(kfd, &kst) == 0 &&
	    (uint64_t)st.st_size + (uint64_t)kst.st_size > cfg->max_result_bytes) {
		close(kfd);
		util_fmt(msg, sizeof(msg), "trace of %lld bytes with its kernel half exceeds "
			 "max_result_bytes", (long long)(st.st_size + kst.st_size));
		fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	r = svc_redact_start(s->raw_fd, kfd, s->out_fd, format, s->pid, s->ident.start,
			     redact_done, s, &s->rd);
	if (kfd >= 0)
		close(kfd); /* the redactor has its own copy */
	if (r < 0) {
		util_fmt(msg, sizeof(msg), "cannot start the redactor: %s", strerror(-r));
		fail(s, PROF_E_POST_PROCESSING, msg);
	}
}

int svc_session_capture_done(struct svc_conn *rt, const Pd__CaptureDone *d)
{
	struct session *s = find(d->session_id);

	/* Late answers to sessions that already timed out or were cancelled. */
	if (!s || s->rt != rt || s->state != S_CAPTURING)
		return 0;
	if (d->status != PROF_E_NONE) {
		int e = d->status <= PROF_E_UNKNOWN ||
			(d->status >= PROF_E_RUNTIME_UNAVAILABLE && d->status <= PROF_E_PERMISSION)
			? (int)d->status : PROF_E_EXECUTING;
		fail(s, e, d->message ? d->message : "the runtime reported a failure");
		return 0;
	}
	s->samples = d->samples;
	s->dropped = d->dropped;
	s->rt = NULL;
	s->done_msg = true;
	/*
	 * Done once the sink has what the runtime declared (or EOF when it
	 * declared nothing); the deadline timer keeps running until then, so
	 * a runtime that holds its write end open and stops short times out.
	 */
	s->declared = d->has_bytes ? d->bytes : UINT64_MAX;
	int r = s->declared == UINT64_MAX ? (svc_sink_ended(s->sink) ? 1 : 0)
					  : svc_sink_expect(s->sink, s->declared);
	if (r == -EPROTO) {
		char msg[160];
		util_fmt(msg, sizeof(msg), "the runtime declared %llu bytes but wrote %llu",
			 (unsigned long long)s->declared,
			 (unsigned long long)svc_sink_bytes(s->sink));
		fail(s, PROF_E_POST_PROCESSING, msg);
	} else if (r == 1) {
		capture_drained(s);
	}
	return 0;
}

static int check_param(uint32_t has, uint32_t v, uint32_t def, uint32_t lo, uint32_t hi,
		       uint32_t *out)
{
	if (!has || v == 0) {
		*out = def;
		return 0;
	}
	if (v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/*
 * The admission rules in DESIGN §2 order: validity, cost windows, one
 * session per process and the system cap, disk quota; the cost is charged
 * only when all have passed. Returns 0 or a positive PROF_E_*.
 */
/* Whose capture a request is: the caller, or (root only) another process. */
struct target {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool system;   /* asked by root for another process: a system capture */
	char app[RL_APP_MAX];
	struct svc_ident ident; /* the process; create_session takes it over */
};

/* t's process may be captured for t->uid (svc_ident_capturable). */
static int target_capturable(const struct target *t, char *msg, size_t n)
{
	if (svc_ident_capturable(&t->ident, t->uid))
		return 0;
	util_fmt(msg, n, "pid %d runs with ids other than uid %u's alone (a setuid or setgid "
		 "program): only root may capture it", (int)t->pid, (unsigned)t->uid);
	return PROF_E_PERMISSION;
}

/* Fills t (its ident too, which the caller finishes). */
static int resolve_target(struct svc_conn *client, const Pd__Request *rq, struct target *t,
			  char *msg, size_t n)
{
	t->pid = svc_conn_pid(client);
	t->uid = svc_conn_uid(client);
	t->gid = svc_conn_gid(client);
	t->system = false;
	util_strlcpy(t->app, svc_conn_app(client), sizeof(t->app));
	if (!rq->has_target_pid || rq->target_pid == 0 || (pid_t)rq->target_pid == t->pid) {
		/* The caller itself: the process its connection is bound to. */
		if (svc_ident_dup(&t->ident, svc_conn_ident(client)) < 0) {
			util_fmt(msg, n, "out of file descriptors");
			return PROF_E_UNKNOWN;
		}
		return target_capturable(t, msg, n);
	}
	if (t->uid != 0) {
		util_fmt(msg, n, "only root may capture another process");
		return PROF_E_PERMISSION;
	}
	if (rq->target_pid > INT32_MAX ||
	    svc_ident_of_pid(&t->ident, (pid_t)rq->target_pid, 0) < 0) {
		util_fmt(msg, n, "no process %u", rq->target_pid);
		return PROF_E_INVALID_REQUEST;
	}
	t->pid = (pid_t)rq->target_pid;
	t->system = true;
	/*
	 * The result belongs to the target's app, unless the target runs with
	 * mixed ids (setuid): then it stays with root, who asked, and never
	 * goes to the real uid that started the setuid program.
	 */
	if (!svc_ident_mixed(&t->ident)) {
		t->uid = t->ident.uid[0];
		t->gid = t->ident.gid[0];
		svc_app_key(cfg, t->pid, t->uid, t->app, sizeof(t->app));
	}
	return 0;
}

static int admit(const struct target *t, const Pd__Request *rq, uint32_t *dur, uint32_t *hz,
		 char *msg, size_t n)
{
	const Pd__Params *p = rq->params;
	const char *app = t->app;
	pid_t pid = t->pid;
	int e;

	if (!type_valid(rq->type)) {
		util_fmt(msg, n, "unknown capture type %u", rq->type);
		return PROF_E_INVALID_REQUEST;
	}
	if (check_param(p && p->has_duration_ms, p ? p->duration_ms : 0, cfg->default_duration_ms,
			SVC_DURATION_MIN_MS, SVC_DURATION_MAX_MS, dur) < 0) {
		util_fmt(msg, n, "duration_ms must be %u..%u", SVC_DURATION_MIN_MS,
			 SVC_DURATION_MAX_MS);
		return PROF_E_INVALID_REQUEST;
	}
	if (check_param(p && p->has_frequency_hz, p ? p->frequency_hz : 0,
			cfg->default_frequency_hz, SVC_HZ_MIN, SVC_HZ_MAX, hz) < 0) {
		util_fmt(msg, n, "frequency_hz must be %u..%u", SVC_HZ_MIN, SVC_HZ_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (p && p->has_sampling_interval_bytes &&
	    p->sampling_interval_bytes > SVC_INTERVAL_MAX) {
		util_fmt(msg, n, "sampling_interval_bytes must be 0..%u", SVC_INTERVAL_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	if (p && p->has_buffer_kb && p->buffer_kb &&
	    (p->buffer_kb < SVC_BUFFER_KB_MIN || p->buffer_kb > SVC_BUFFER_KB_MAX)) {
		util_fmt(msg, n, "buffer_kb must be %u..%u", SVC_BUFFER_KB_MIN, SVC_BUFFER_KB_MAX);
		return PROF_E_INVALID_REQUEST;
	}
	struct svc_conn *rt = svc_conn_runtime_for(pid);
	if (rt && !(svc_conn_runtime_caps(rt) & type_info[rq->type].cap) &&
	    !(rq->type == PROF_HEAP_DUMP && svc_jvm_detect(pid))) {
		util_fmt(msg, n, "%s", rq->type == PROF_HEAP_DUMP
			 ? "this runtime has no heap dump; use PROF_HEAP_PROFILE for native code"
			 : "the runtime of this process cannot take that capture type");
		return PROF_E_INVALID_REQUEST;
	}
	if (rq->type == PROF_HEAP_DUMP && !rt && !svc_jvm_detect(pid)) {
		util_fmt(msg, n, "pid %d is not a JVM: heap dumps are of Java heaps; "
			 "use PROF_HEAP_PROFILE for native code", (int)pid);
		return PROF_E_INVALID_REQUEST;
	}
	if ((e = svc_admit_rate_check(app, rq->type, t->system, msg, n)) != 0)
		return e;
	for (struct session *s = sessions; s; s = s->next) {
		if (s->pid == pid) {
			util_fmt(msg, n, "session %llu is already capturing pid %d",
				 (unsigned long long)s->id, (int)pid);
			return PROF_E_PROFILING_IN_PROGRESS;
		}
	}
	if (nsessions >= cfg->max_sessions) {
		util_fmt(msg, n, "%u captures running system-wide (max_sessions)", nsessions);
		return PROF_E_PROFILING_IN_PROGRESS;
	}
	if ((e = svc_admit_disk_check(app, msg, n)) != 0)
		return e;
	return svc_admit_charge(app, rq->type, t->system, msg, n);
}

/* Create and arm an admitted session. 0 or a positive PROF_E_* with *why. */
static int create_session(struct target *t, const Pd__Request *rq, uint32_t dur, uint32_t hz,
			  uint64_t client_id, uint32_t trigger, uint32_t wait_ms, uint64_t *id,
			  const char **why)
{
	uint64_t now = util_now_ns(CLOCK_REALTIME);
	int r = 0;
	struct session *s = calloc(1, sizeof(*s));
	if (!s) {
		*why = "out of memory";
		return PROF_E_UNKNOWN;
	}
	s->raw_fd = -1;
	s->out_fd = -1;
	s->ft_fd = -1;
	s->declared = UINT64_MAX;
	svc_ident_init(&s->ident);
	s->uid = t->uid;
	s->gid = t->gid;
	s->pid = t->pid;
	s->type = rq->type;
	s->duration_ms = dur;
	s->hz = hz;
	s->clock = rq->params && rq->params->has_clock ? rq->params->clock : 0;
	s->interval = rq->params && rq->params->has_sampling_interval_bytes
		? rq->params->sampling_interval_bytes : 0;
	s->trigger = trigger;
	s->buffer_kb = rq->params && rq->params->has_buffer_kb && rq->params->buffer_kb
		? rq->params->buffer_kb : 4096;
	s->client_id = client_id;
	s->start_ns = now;
	util_strlcpy(s->tag, rq->tag ? rq->tag : "", sizeof(s->tag));
	util_strlcpy(s->app, t->app, sizeof(s->app));
	s->timer = evtimer_new(base, timer_cb, s);
	if (!s->timer || svc_db_alloc_id(&s->id) < 0 ||
	    (r = svc_db_session_new(s->id, s->app, s->uid, s->pid, s->type, s->trigger, s->tag,
				    now)) < 0) {
		if (s->timer)
			event_free(s->timer);
		free(s);
		*why = r == -ENOSPC ? "no disk space to record the session"
		       : "cannot record the session";
		return r == -ENOSPC ? PROF_E_NO_DISK_SPACE : PROF_E_UNKNOWN;
	}
	s->wait_ms = wait_ms;
	/* The session owns the target's ident (and its pidfd) from here. */
	s->ident = t->ident;
	svc_ident_init(&t->ident);
	s->jvm = svc_jvm_detect(s->pid);
	s->next = sessions;
	sessions = s;
	nsessions++;
	*id = s->id;
	s->state = S_WAIT_RUNTIME;
	/*
	 * Start from the event loop, after the synchronous reply is queued:
	 * at once when the runtime is here, else when it says hello.
	 */
	arm(s, runtime_of(s) || s->jvm ? 0 : wait_ms);
	return 0;
}

struct conn_probe {
	const struct svc_ident *of;
	bool found;
};

static void probe_conn(struct svc_conn *c, void *ud)
{
	struct conn_probe *p = ud;
	const struct svc_ident *id = svc_conn_ident(c);
	if (id && id->pid == p->of->pid && id->start == p->of->start)
		p->found = true;
}

/*
 * Can a runtime still come for the process? Only one with libprofiling or
 * the preload agent in it, and those connect to the daemon (a client, or a
 * runtime before its hello). A process with no connection at all will not
 * say hello: waiting runtime_wait_ms for it only delays an agentless
 * capture. Triggers keep the wait: they fire at exec, before a preloaded
 * agent has had the time to connect.
 */
static bool runtime_may_come(const struct svc_ident *t)
{
	struct conn_probe p = { .of = t };
	svc_conn_foreach(probe_conn, &p);
	return p.found;
}

int svc_session_request(struct svc_conn *client, const Pd__Request *rq, uint64_t *id,
			const char **why)
{
	static char msg[256];
	uint32_t dur = 0, hz = 0;
	struct target t;

	*why = NULL;
	*id = 0;
	svc_ident_init(&t.ident);
	int e = resolve_target(client, rq, &t, msg, sizeof(msg));
	if (!e)
		e = admit(&t, rq, &dur, &hz, msg, sizeof(msg));
	if (e) {
		svc_ident_fini(&t.ident);
		*why = msg;
		/* Refusals get an id too, so the listener's copy can be matched. */
		if (svc_db_alloc_id(id) < 0)
			*id = 0;
		return e;
	}
	uint32_t wait_ms = cfg->runtime_wait_ms;
	if (rq->type == PROF_STACK_SAMPLING && wait_ms && !runtime_may_come(&t.ident)) {
		LOG_I("pid %d has no connection to the daemon, so no runtime: not waiting %u ms "
		      "for one", (int)t.pid, wait_ms);
		wait_ms = 0;
	}
	e = create_session(&t, rq, dur, hz, svc_conn_id(client), PROF_TRIGGER_NONE,
			   wait_ms, id, why);
	svc_ident_fini(&t.ident);
	return e;
}

int svc_session_trigger(pid_t pid, uint64_t start, uid_t uid, gid_t gid, const char *app,
			uint32_t type, const Pd__Params *params, uint32_t trigger, const char *tag,
			uint32_t wait_ms, uint64_t *id, char *msg, size_t n)
{
	struct target t = { .pid = pid, .uid = uid, .gid = gid, .system = true };
	Pd__Request rq = PD__REQUEST__INIT;
	uint32_t dur = 0, hz = 0;
	const char *why = NULL;

	util_strlcpy(t.app, app, sizeof(t.app));
	rq.type = type;
	rq.params = (Pd__Params *)params;
	rq.tag = (char *)tag;
	/* The process the trigger saw, still there, and the app's to capture. */
	if (svc_ident_of_pid(&t.ident, pid, start) < 0) {
		util_fmt(msg, n, "pid %d is gone or is another process now", (int)pid);
		return PROF_E_PERMISSION;
	}
	int e = target_capturable(&t, msg, n);
	if (!e)
		e = admit(&t, &rq, &dur, &hz, msg, n);
	if (!e) {
		e = create_session(&t, &rq, dur, hz, 0, trigger, wait_ms, id, &why);
		if (e)
			util_fmt(msg, n, "%s", why);
	}
	svc_ident_fini(&t.ident);
	return e;
}

int svc_session_adopt(pid_t pid, uid_t uid, gid_t gid, const char *app, const char *path,
		      const char *format, uint32_t trigger, const char *tag, char *msg, size_t n)
{
	struct target t = { .pid = pid, .uid = uid, .gid = gid, .system = true };
	Pd__Request rq = PD__REQUEST__INIT;
	Pd__Params prm = PD__PARAMS__INIT;
	const char *why = NULL;
	uint64_t id;

	svc_ident_init(&t.ident); /* the process is gone: its dump only */

	util_strlcpy(t.app, app, sizeof(t.app));
	rq.type = PROF_SYSTEM_TRACE;
	rq.params = &prm;
	rq.tag = (char *)tag;
	/* The process is gone: only the costs and quotas apply, not its session. */
	int e = svc_admit_rate_check(app, rq.type, true, msg, n);
	if (!e)
		e = svc_admit_disk_check(app, msg, n);
	if (!e)
		e = svc_admit_charge(app, rq.type, true, msg, n);
	if (!e)
		e = create_session(&t, &rq, SVC_DURATION_MIN_MS, SVC_HZ_MIN, 0, trigger, 0, &id, &why);
	if (e) {
		if (why)
			util_fmt(msg, n, "%s", why);
		unlink(path);
		return e;
	}
	struct session *s = find(id);
	evtimer_del(s->timer);
	if (open_raw(s) < 0 || rename(path, s->raw_path) < 0) {
		unlink(path);
		fail(s, PROF_E_UNKNOWN, "cannot take over the crash dump");
		return 0;
	}
	/* The renamed dump replaces the empty raw file open_raw made. */
	close(s->raw_fd);
	s->raw_fd = open(s->raw_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	s->redact_format = format;
	s->state = S_CAPTURING;
	s->capture_done = true;
	start_redaction(s);
	return 0;
}

int svc_session_stop(pid_t pid, uint32_t trigger)
{
	for (struct session *s = sessions; s; s = s->next) {
		if (s->pid != pid || s->trigger != trigger || s->state != S_CAPTURING || !s->rt)
			continue;
		Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
		Pd__CaptureStop cs = PD__CAPTURE_STOP__INIT;
		cs.session_id = s->id;
		out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_STOP;
		out.stop = &cs;
		svc_conn_send(s->rt, &out.base, -1);
		return 0;
	}
	return -ENOENT;
}

void svc_session_refused(struct svc_conn *client, uint64_t id, const Pd__Request *rq,
			 int error, const char *why)
{
	struct svc_conn *l = NULL;

	/* The app's listener gets every result, refusals included. */
	if (!id || !type_valid(rq->type))
		return;
	if (svc_conn_is_listener(client))
		l = client;
	else
		l = svc_conn_listener_for(svc_conn_uid(client));
	if (l)
		send_result_to(l, id, rq->type, PROF_TRIGGER_NONE, rq->tag ? rq->tag : "", error, why,
			       NULL, 0, 0, util_now_ns(CLOCK_REALTIME), -1, NULL);
}

struct redeliver_ctx {
	struct svc_conn *c;
	int sent;
};

static void redeliver_one(const struct svc_db_result *r, void *ud)
{
	struct redeliver_ctx *rc = ud;
	if (r->error) {
		/* A failure result (the capture was cut short): no file. */
		if (send_result_to(rc->c, r->session_id, r->type, r->trigger, r->tag, r->error,
				   r->message, NULL, 0, r->id, r->start_ns, -1, r->note) == 0) {
			svc_db_result_attempt(r->id);
			rc->sent++;
		}
		return;
	}
	int e = deliver_to(rc->c, r->session_id, r->type, r->trigger, r->tag, r->path, r->uid,
			   r->size, r->id, r->start_ns, r->note);
	if (e == -ENOENT || e == -ELOOP || e == -EINVAL || e == -EPERM || e == -EMLINK) {
		/*
		 * The file is gone (removed by hand), or what is at its path is
		 * not the result any more (a link, another user's file): nothing
		 * left to deliver. The row goes; the name is the app's to remove.
		 */
		svc_db_result_delete(r->id);
		return;
	}
	if (e == 0)
		rc->sent++;
}

void svc_session_redeliver(struct svc_conn *client)
{
	struct redeliver_ctx rc = { .c = client };
	uint64_t now = util_now_ns(CLOCK_REALTIME);
	uint64_t age = (uint64_t)cfg->delivery_max_age_days * 86400ull * 1000000000ull;
	/* A burst fits the peer's queue; the rest goes on its next listener call
	 * or connection. */
	unsigned limit = cfg->max_queued_msgs / 2 < 16 ? cfg->max_queued_msgs / 2 : 16;
	svc_db_pending(svc_conn_app(client), cfg->delivery_attempts, now > age ? now - age : 0,
		       limit, redeliver_one, &rc);
	if (rc.sent)
		LOG_PEER(svc_conn_uid(client), LOG_INFO,
			 "redelivered %d queued result(s) to pid %d (%s)",
			 rc.sent, (int)svc_conn_pid(client), svc_conn_app(client));
}

void svc_session_ack(struct svc_conn *client, uint64_t result_id)
{
	/* Root takes results of any app (captures it asked for others). */
	const char *app = svc_conn_uid(client) == 0 ? NULL : svc_conn_app(client);
	if (svc_db_result_delivered(result_id, app) < 0)
		LOG_PEER(svc_conn_uid(client), LOG_DEBUG,
			 "ack for result %llu from pid %d ignored (not its own, or acked)",
			 (unsigned long long)result_id, (int)svc_conn_pid(client));
}

void svc_session_runtime_up(struct svc_conn *rt)
{
	pid_t pid = svc_conn_pid(rt);
	uint64_t start = svc_conn_ident(rt)->start;
	for (struct session *s = sessions, *next; s; s = next) {
		next = s->next;
		/* The session's own process, not another that has its pid now. */
		if (s->state == S_WAIT_RUNTIME && s->pid == pid && s->ident.start == start &&
		    !(s->jvm && s->type == PROF_HEAP_DUMP && !dump_by_agent(s))) {
			evtimer_del(s->timer);
			start_capture(s, rt);
		}
	}
}

void svc_session_runtime_down(struct svc_conn *rt)
{
	for (struct session *s = sessions, *next; s; s = next) {
		next = s->next;
		if (s->rt == rt && s->state == S_CAPTURING) {
			s->rt = NULL;
			fail(s, PROF_E_EXECUTING, "the runtime disconnected mid-capture");
		}
	}
}

int svc_session_cancel(struct svc_conn *client, uint64_t id)
{
	struct session *s = find(id);
	if (!s || s->uid != svc_conn_uid(client))
		return -ENOENT;
	send_cancel(s);
	fail(s, PROF_E_CANCELLED, "cancelled by the app");
	return 0;
}

/*
 * Empty a regular file before it is unlinked: a daemon before this one
 * handed apps O_RDWR fds to files in raw/, and an app that still holds
 * one would otherwise keep the blocks after the unlink.
 */
static void truncate_entry(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0)
		LOG_D("ftruncate %s: %s", name, strerror(errno));
	close(fd);
}

/*
 * Remove the entries of directory dfd whose names start with prefix
 * (NULL: every entry but the hidden ones), emptied first when truncate is
 * set. Closes dfd. Returns how many.
 */
static int unlink_entries(int dfd, const char *prefix, bool truncate)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int n = 0;
	if (!d) {
		close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		if (prefix ? strncmp(e->d_name, prefix, strlen(prefix)) != 0 : e->d_name[0] == '.')
			continue;
		if (truncate)
			truncate_entry(dirfd(d), e->d_name);
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Results half-written by a crashed run: <results>/<uid>/.tmp-<id>. */
static void clean_tmp_results(void)
{
	DIR *d = opendir(results_dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		int afd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (afd >= 0)
			n += unlink_entries(afd, ".tmp-", false);
	}
	closedir(d);
	if (n)
		LOG_N("removed %d unfinished result file(s) left by a previous run", n);
}

static void clean_raw(void)
{
	int dfd = open(raw_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = dfd >= 0 ? unlink_entries(dfd, NULL, true) : 0;
	if (n)
		LOG_N("removed %d partial capture file(s) left by a previous run", n);
}

/*
 * A session the previous run left active may have renamed its result into
 * place just before it died, without indexing it: remove that file, since
 * the app is told the capture failed (<type>_<tag>_<utc>_<id>.<ext>).
 */
static void sweep_recovered(uint64_t id, uid_t uid, void *ud)
{
	char dir[SVC_PATH_MAX + 16];
	int *removed = ud;
	if (util_fmt(dir, sizeof(dir), "%s/%u", results_dir, (unsigned)uid) < 0)
		return;
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d))) {
		const char *us = strrchr(de->d_name, '_');
		char *end;
		if (de->d_name[0] == '.' || !us)
			continue;
		unsigned long long v = strtoull(us + 1, &end, 10);
		if (v == id && end != us + 1 && *end == '.' && unlinkat(dirfd(d), de->d_name, 0) == 0)
			(*removed)++;
	}
	closedir(d);
}

static struct event *retention;

static void retention_cb(evutil_socket_t fd, short what, void *arg)
{
	svc_store_prune(cfg, util_now_ns(CLOCK_REALTIME));
}

int svc_session_init(struct event_base *b, const struct svc_config *c)
{
	int r;
	base = b;
	cfg = c;
	if (util_fmt(raw_dir, sizeof(raw_dir), "%s/raw", cfg->state_dir) < 0 ||
	    util_fmt(results_dir, sizeof(results_dir), "%s/results", cfg->state_dir) < 0) {
		LOG_E("state_dir path too long");
		return -ENAMETOOLONG;
	}
	if ((r = util_mkdir_p(raw_dir, 0700)) < 0 || (r = util_mkdir_p(results_dir, 0755)) < 0) {
		LOG_E("cannot create the state directories under %s: %s", cfg->state_dir,
		      strerror(-r));
		return r;
	}
	chmod(raw_dir, 0700);
	clean_raw();
	clean_tmp_results();
	int swept = 0;
	if ((r = svc_db_recovered(sweep_recovered, &swept)) > 0)
		LOG_N("%d capture(s) cut short by the previous run: their apps get a failure result"
		      "%s", r, swept ? " (unindexed result files removed)" : "");
	retention = event_new(base, -1, EV_PERSIST, retention_cb, NULL);
	struct timeval hour = { .tv_sec = 3600 };
	if (!retention || event_add(retention, &hour) < 0)
		return -ENOMEM;
	svc_store_prune(cfg, util_now_ns(CLOCK_REALTIME));
	return 0;
}

void svc_session_fini(void)
{
	if (retention)
		event_free(retention);
	retention = NULL;
	while (sessions) {
		struct session *s = sessions;
		/* The app cannot be told now: it gets a failure result when it is back. */
		if (svc_db_session_abandon(s->id, "profilingd stopped during the capture") < 0)
			svc_db_session_end(s->id, "failed", PROF_E_UNKNOWN, "daemon stopped",
					   util_now_ns(CLOCK_REALTIME));
		session_free(s);
	}
}

/* ------------------------------------------------- status and observers */

static svc_session_observer observer;

void svc_session_set_observer(svc_session_observer fn)
{
	observer = fn;
}

static void session_info(const struct session *s, const char *phase,
			 struct svc_session_info *out)
{
	static const char *const names[] = {
		[S_WAIT_RUNTIME] = "waiting-for-runtime",
		[S_CAPTURING] = "capturing",
		[S_REDACTING] = "redacting",
	};
	uint64_t now = util_now_ns(CLOCK_REALTIME);
	memset(out, 0, sizeof(*out));
	out->id = s->id;
	out->pid = s->pid;
	out->uid = s->uid;
	out->app = s->app;
	out->tag = s->tag;
	out->type = s->type;
	out->trigger = s->trigger;
	out->duration_ms = s->duration_ms;
	out->phase = phase ? phase : names[s->state];
	out->elapsed_ms = now > s->start_ns ? (now - s->start_ns) / 1000000u : 0;
}

static void notify(struct session *s, const char *phase, int error, const char *msg,
		   uint64_t result_id, const char *path)
{
	struct svc_session_info si;
	if (!observer)
		return;
	session_info(s, phase, &si);
	si.error = error;
	si.message = msg;
	si.result_id = result_id;
	si.path = path;
	observer(&si);
}

void svc_session_foreach(void (*fn)(const struct svc_session_info *s, void *ud), void *ud)
{
	struct svc_session_info si;
	for (const struct session *s = sessions; s; s = s->next) {
		session_info(s, NULL, &si);
		fn(&si, ud);
	}
}
