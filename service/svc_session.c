/*
 * Capture sessions: the table and each session's lifecycle (svc_session.h
 * has the contract, svc_session_priv.h the record and its states).
 *
 * The pipeline around the table, each its own module, top down:
 * svc_request (a request, trigger or crash dump becomes a session, after
 * svc_admit's rules), svc_capture (starts the capture and takes its
 * completions), svc_deliver (redaction, commit, delivery; the failure
 * result), svc_session (this: the table, phase changes, the end), and
 * svc_store (names and directories). Each calls only the ones below it;
 * what lies above (svc_trigger) learns of ends by subscribing.
 *
 * A session is bound to its target process (svc_ident: pidfd or pid and
 * start time, its ids), not to a pid; svc_capture re-checks it before the
 * capture starts.
 */
#include "profilingd.pb-c.h"
#include "svc_db.h"
#include "svc_conn.h"
#include "svc_helper.h"
#include "svc_session.h"
#include "svc_session_priv.h"

#include <errno.h>
#include <event2/event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "profiling/profiling.h"
#include "svc_sink.h"
#include "util.h"

static struct event_base *base;
static const struct svc_config *cfg;
static struct session *sessions;
static unsigned nsessions;

static svc_session_observer observer;
static struct {
	svc_session_end_fn fn;
	void *ud;
} end_obs[SVC_SESSION_END_OBSERVERS];

const struct svc_config *svc_session_config(void)
{
	return cfg;
}

struct event_base *svc_session_base(void)
{
	return base;
}

struct session *svc_session_first(void)
{
	return sessions;
}

unsigned svc_session_count(void)
{
	return nsessions;
}

struct session *svc_session_find(uint64_t id)
{
	for (struct session *s = sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

struct session *svc_session_of_pid(pid_t pid)
{
	for (struct session *s = sessions; s; s = s->next)
		if (s->pid == pid)
			return s;
	return NULL;
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
	struct session *s = arg;
	s->on_timer(s);
}

struct session *svc_session_alloc(void (*on_timer)(struct session *s))
{
	struct session *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->raw_fd = -1;
	s->out_fd = -1;
	s->ft_fd = -1;
	s->declared = UINT64_MAX;
	svc_ident_init(&s->ident);
	s->on_timer = on_timer;
	s->timer = evtimer_new(base, timer_cb, s);
	if (!s->timer) {
		free(s);
		return NULL;
	}
	return s;
}

int svc_session_files(struct session *s)
{
	if (!s->files && !(s->files = calloc(1, sizeof(*s->files))))
		return -ENOMEM;
	return 0;
}

void svc_session_discard(struct session *s)
{
	if (!s)
		return;
	svc_ident_fini(&s->ident);
	if (s->timer)
		event_free(s->timer);
	free(s->methods);
	free(s->files);
	free(s);
}

void svc_session_add(struct session *s)
{
	s->next = sessions;
	sessions = s;
	nsessions++;
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

void svc_session_arm(struct session *s, uint32_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };
	evtimer_add(s->timer, &tv);
}

struct svc_conn *svc_session_runtime_of(const struct session *s)
{
	struct svc_conn *rt = svc_conn_runtime_for(s->pid);
	return rt && svc_conn_ident(rt)->start == s->ident.start ? rt : NULL;
}

void svc_session_release_files(struct session *s)
{
	svc_helper_abort(s->rd);
	s->rd = NULL;
	svc_helper_abort(s->ft);
	s->ft = NULL;
	svc_helper_abort(s->perf);
	s->perf = NULL;
	svc_helper_abort(s->ja);
	s->ja = NULL;
	if (s->ft_fd >= 0)
		close(s->ft_fd);
	s->ft_fd = -1;
	struct sess_files *f = s->files;
	if (f && f->ft_path[0])
		unlink(f->ft_path);
	if (f)
		f->ft_path[0] = '\0';
	svc_sink_free(s->sink);
	s->sink = NULL;
	if (s->raw_fd >= 0) {
		/* Free the blocks even if another fd to the inode survives (a
		 * helper's, or one an older daemon handed out). */
		if (f && f->raw_path[0] && ftruncate(s->raw_fd, 0) < 0)
			LOG_D("session %llu: ftruncate of the raw file: %s",
			      (unsigned long long)s->id, strerror(errno));
		close(s->raw_fd);
	}
	s->raw_fd = -1;
	if (f && f->raw_path[0])
		unlink(f->raw_path);
	if (f)
		f->raw_path[0] = '\0';
	if (s->out_fd >= 0)
		close(s->out_fd);
	s->out_fd = -1;
	if (f && f->out_path[0])
		unlink(f->out_path);
	if (f)
		f->out_path[0] = '\0';
}

int svc_session_set_oom_tid(uint64_t id, pid_t pid, uint32_t tid)
{
	char path[64];
	struct stat st;
	struct session *s = svc_session_find(id);
	if (!s || s->pid != pid)
		return -ESRCH;
	/* The runtime's word: a number, kept only if it names one of the
	 * process's own threads (the redactor still only compares it). */
	if (!tid || tid > INT32_MAX)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/task/%u", (int)pid, (unsigned)tid);
	if (stat(path, &st) < 0)
		return -EINVAL;
	s->proc.oom_tid = tid;
	LOG_I("session %llu: the OOM's failing thread is %u of pid %d", (unsigned long long)id,
	      (unsigned)tid, (int)pid);
	return 0;
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

void svc_session_release_hold(struct session *s, int status)
{
	if (s->released || s->trigger != PROF_TRIGGER_OOM)
		return;
	s->released = true;
	svc_session_event_done(s->pid, 1, status);
}

void svc_session_free(struct session *s)
{
	struct svc_session_end e = { .id = s->id, .app = s->app, .pid = s->pid,
				     .type = s->type, .trigger = s->trigger };
	svc_session_release_hold(s, PROF_E_UNKNOWN);
	for (unsigned i = 0; i < SVC_SESSION_END_OBSERVERS; i++)
		if (end_obs[i].fn)
			end_obs[i].fn(&e, end_obs[i].ud);
	unlink_session(s);
	svc_session_release_files(s);
	svc_session_discard(s);
}

int svc_session_subscribe_end(svc_session_end_fn fn, void *ud)
{
	int slot = -1;
	for (int i = 0; i < SVC_SESSION_END_OBSERVERS; i++) {
		if (end_obs[i].fn == fn && end_obs[i].ud == ud)
			return -EEXIST;
		if (!end_obs[i].fn && slot < 0)
			slot = i;
	}
	if (slot < 0)
		return -ENOSPC;
	end_obs[slot].fn = fn;
	end_obs[slot].ud = ud;
	return 0;
}

void svc_session_unsubscribe_end(svc_session_end_fn fn, void *ud)
{
	for (unsigned i = 0; i < SVC_SESSION_END_OBSERVERS; i++)
		if (end_obs[i].fn == fn && end_obs[i].ud == ud)
			end_obs[i].fn = NULL;
}

int svc_session_init(struct event_base *b, const struct svc_config *c)
{
	base = b;
	cfg = c;
	return svc_store_init(base, cfg);
}

void svc_session_fini(void)
{
	while (sessions) {
		struct session *s = sessions;
		/* The app cannot be told now: it gets a failure result when it is back. */
		if (svc_db_session_abandon(s->id, "profilingd stopped during the capture") < 0)
			svc_db_session_end(s->id, "failed", PROF_E_UNKNOWN, "daemon stopped",
					   util_now_ns(CLOCK_REALTIME));
		svc_session_free(s);
	}
	svc_store_fini();
}

/* ------------------------------------------------- status and observers */

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

void svc_session_notify(struct session *s, const char *phase, int error, const char *msg,
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
