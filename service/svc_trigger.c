/*
 * Triggers (DESIGN §3, §5; svc_trigger.h has the contract): the glue from
 * the apps' registrations and the watchers in triggers/ to captures. The
 * tables, their caps, and what a tracked process is given (heap arming,
 * crash rings) are svc_trigreg's. A fired trigger goes through its
 * cooldown, then svc_request_trigger; its capture's end comes back through
 * svc_session's end observers (session_end), which clears "active".
 *
 * Every watch (CPU, memory, heartbeat) is of a tracked process, so the
 * per-uid cap on tracked processes bounds one uid's share of the
 * watchers' tables (TRG_MAX_PIDS each) and of their work per tick.
 */
#include "svc_db.h"
#include "svc_db_result.h"
#include "svc_conn.h"
#include "svc_admit.h"
#include "svc_helper.h"
#include "svc_session.h"
#include "svc_capture.h"
#include "svc_request.h"
#include "svc_trigger.h"
#include "svc_jvm.h"
#include "svc_trigreg.h"
#include "svc_methods.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "svc_ident.h"
#include "trg.h"
#include "util.h"

static const struct svc_config *cfg;

static void listener_done(void *ud, int code, const char *msg);

void svc_trigger_runtime_up(struct svc_conn *rt)
{
	struct svc_app_pid *p = svc_trigreg_pid(svc_conn_pid(rt));
	/* Only the runtime of the tracked process itself, not of a later
	 * owner of its pid, gets its heap arming or crash file. */
	if (!p || p->start != svc_conn_ident(rt)->start)
		return;
	struct svc_reg *oom = svc_trigreg_for(p, PROF_TRIGGER_OOM);
	if (oom && svc_jvm_detect(p->pid, p->start)) {
		/* A VM out of heap cannot start its attach listener (a Java
		 * thread): start it now, for the heap dump an OOM will want. */
		int r = svc_jattach_start(p->pid, p->start, SVC_JATTACH_LISTEN, 15000, -1,
					  listener_done,
					  (void *)(intptr_t)p->pid, NULL);
		if (r < 0)
			LOG_W("JVM pid %d: cannot prepare its attach listener: %s", (int)p->pid,
			      strerror(-r));
	} else {
		svc_trigreg_arm_heap(rt, oom);
	}
	svc_trigreg_give_crash(rt, p);
}

/*
 * Start r's capture of pid (capture 0: the trigger's own type). 0 when a
 * capture runs for it now (this one, or one already running), else the
 * refusal's PROF_E_*.
 */
static int fire_as(struct svc_reg *r, pid_t pid, const char *tag, uint32_t capture)
{
	char msg[256];
	uint64_t id;

	if (r->active) {
		r->coalesced++;
		LOG_PEER(r->uid, LOG_DEBUG, "%s trigger of %s fired while its capture runs: counted",
			 names_trigger_str(r->type), r->app);
		return 0;
	}
	/* The capture belongs to the process's app; a system trigger has none
	 * of its own (its cooldown key is "sys:NAME"). */
	const char *app = r->app;
	uid_t uid = r->uid;
	gid_t gid = r->gid;
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	uint64_t start = p ? p->start : 0;
	if (r->sys && p) {
		app = p->app;
		uid = p->uid;
		gid = p->gid;
	}
	int e = svc_admit_cooldown_check(r->app, r->type, r->period_s, msg, sizeof(msg));
	if (!e) {
		/* An unmodified program has no agent to wait for: sample it at once. */
		uint32_t wait = r->sys ? 0 : r->type == PROF_TRIGGER_COLD_START ? r->timeout_ms
									  : cfg->runtime_wait_ms;
		e = svc_request_trigger(pid, start, uid, gid, app, capture ? capture : r->capture,
					&r->params, r->type, tag, wait, &id, msg, sizeof(msg));
	}
	if (e) {
		r->refused++;
		LOG_PEER(uid, LOG_INFO, "%s trigger of %s (pid %d) refused: %s: %s",
			 names_trigger_str(r->type), r->app, (int)pid, prof_strerror(e), msg);
		return e;
	}
	svc_admit_cooldown_record(r->app, r->type);
	r->active = id;
	r->last_session = id;
	r->last_ns = util_now_ns(CLOCK_MONOTONIC);
	if (p && r->type == PROF_TRIGGER_OOM) {
		p->oom_session = id;
		p->oom_ns = r->last_ns;
	}
	r->fired++;
	LOG_PEER(uid, LOG_INFO, "%s trigger of %s fired for pid %d: session %llu",
		 names_trigger_str(r->type), r->app, (int)pid, (unsigned long long)id);
	return 0;
}

static void listener_done(void *ud, int code, const char *msg)
{
	if (code != 0)
		LOG_W("JVM pid %d: its attach listener did not start: %s; an OOM heap dump may fail",
		      (int)(intptr_t)ud, msg);
	else
		LOG_D("JVM pid %d: attach listener ready", (int)(intptr_t)ud);
}

static void fire(struct svc_reg *r, pid_t pid, const char *tag)
{
	fire_as(r, pid, tag, 0);
}

static struct event_base *evbase;

struct followup {
	pid_t pid;
	char app[RL_APP_MAX];
};

/* After a hang's stack samples: the flight recorder too (what led there). */
static void hang_trace(evutil_socket_t fd, short what, void *arg)
{
	struct followup *f = arg;
	struct svc_app_pid *p = svc_trigreg_pid(f->pid);
	struct svc_reg *r = p ? svc_trigreg_for(p, PROF_TRIGGER_HANG) : NULL;
	Pd__Params prm = PD__PARAMS__INIT;
	char msg[256];
	uint64_t id;
	if (r && kill(f->pid, 0) == 0) {
		prm.has_duration_ms = 1;
		prm.duration_ms = SVC_DURATION_MIN_MS;
		int e = svc_request_trigger(f->pid, p->start, p->uid, p->gid, p->app,
					    PROF_SYSTEM_TRACE, &prm,
					    PROF_TRIGGER_HANG, "hang-trace", cfg->runtime_wait_ms, &id,
					    msg, sizeof(msg));
		if (e)
			LOG_I("hang of pid %d: no trace snapshot: %s", (int)f->pid, msg);
	}
	free(f);
}

/* A session ended (svc_session's end observer): its trigger, if it has
 * one, is no longer active. */
static void session_end(const struct svc_session_end *e, void *ud)
{
	const char *app = e->app;
	uint32_t trigger = e->trigger, type = e->type;
	uint64_t session_id = e->id;
	pid_t pid = e->pid;
	struct svc_reg *r = NULL;

	if (!trigger)
		return;
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	if (p)
		r = svc_trigreg_for(p, trigger);
	if (!r)
		r = svc_trigreg_find(app, trigger);
	if (r && r->active != session_id)
		r = NULL;
	/* A system trigger whose process is gone (an OOM'd JVM) is found by its session. */
	for (size_t i = 0; !r && i < svc_trigreg_hi(); i++)
		if (svc_trigreg_at(i) && svc_trigreg_at(i)->active == session_id)
			r = svc_trigreg_at(i);
	if (!r)
		return;
	r->active = 0;
	/* A hang's stack capture is followed by a snapshot of the trace ring,
	 * once the session has gone (one session per process). */
	if (trigger == PROF_TRIGGER_HANG && type == PROF_STACK_SAMPLING) {
		struct followup *f = calloc(1, sizeof(*f));
		if (f) {
			f->pid = pid;
			util_strlcpy(f->app, app, sizeof(f->app));
			if (event_base_once(evbase, -1, EV_TIMEOUT, hang_trace, f, NULL) < 0)
				free(f);
		}
	}
}

/* ------------------------------------------------------------ watchers */

static void link_kill(struct svc_reg *r, const struct svc_app_pid *p, const char *how);

static void proc_cgroups(pid_t pid, char *out, size_t n)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	if (util_read_file(path, out, n) < 0)
		out[0] = '\0';
}

static void on_proc_exec(pid_t pid)
{
	char link[64], exe[SVC_PATH_MAX], app[RL_APP_MAX];
	unsigned uid, gid;
	struct svc_reg *cold = NULL;

	/* An exec ends whatever the JVM cache knew of pid (svc_jvm.h). */
	svc_jvm_exec(pid);
	/* Every exec on the machine comes here: only one some registration
	 * could match costs a read of its ids (/proc/<pid>/status). */
	size_t i, hi = svc_trigreg_hi();
	if (!hi && !svc_methods_any())
		return;
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return;
	exe[n] = '\0';
	/* Method-event configs of this executable (their canary decides). */
	svc_methods_exec(pid, exe);
	for (i = 0; i < hi; i++) {
		const struct svc_reg *r = svc_trigreg_at(i);
		if (r && (!strcmp(r->exe, exe) || (r->sys && !r->exe[0])))
			break;
	}
	if (i == hi || util_proc_ids((int)pid, &uid, &gid) < 0)
		return;
	/* Any registration of this executable under this uid makes pid the app's. */
	for (i = 0; i < hi; i++) {
		struct svc_reg *r = svc_trigreg_at(i);
		if (!r || r->uid != uid || strcmp(r->exe, exe))
			continue;
		svc_app_key(cfg, pid, uid, app, sizeof(app));
		if (strcmp(app, r->app))
			continue;
		struct svc_app_pid *p = svc_trigreg_add_pid(pid, 0, r->app, r->uid, r->gid);
		if (p)
			svc_trigreg_watch(p);
		if (r->type == PROF_TRIGGER_COLD_START)
			cold = r;
	}
	/* System triggers: any uid, by executable path, cgroup and/or JVM main class. */
	char cg[2048] = "", jmain[256] = "";
	int jvm = -1; /* not looked at yet */
	for (i = 0; i < hi; i++) {
		struct svc_reg *r = svc_trigreg_at(i);
		if (!r || !r->sys || (r->exe[0] && strcmp(r->exe, exe)))
			continue;
		if (r->cgroup[0]) {
			if (!cg[0])
				proc_cgroups(pid, cg, sizeof(cg));
			if (!strstr(cg, r->cgroup))
				continue;
		}
		if (r->java_main[0]) {
			if (jvm < 0)
				jvm = svc_jvm_detect(pid, 0) && svc_jvm_main(pid, jmain, sizeof(jmain)) == 0;
			if (!jvm || !svc_jvm_main_matches(jmain, r->java_main))
				continue;
		}
		svc_app_key(cfg, pid, uid, app, sizeof(app));
		struct svc_app_pid *p = svc_trigreg_add_pid(pid, 0, app, uid, gid);
		if (!p)
			break;
		p->sys_reg = (int)i;
		svc_trigreg_watch(p);
		if (r->type == PROF_TRIGGER_COLD_START && !cold)
			cold = r;
	}
	if (cold)
		fire(cold, pid, names_trigger_str(cold->type));
}

static void on_proc_exit(pid_t pid, int wstatus)
{
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	if (!p)
		return;
	if (wstatus >= 0 && WIFSIGNALED(wstatus)) {
		int sig = WTERMSIG(wstatus);
		struct svc_reg *oom = svc_trigreg_for(p, PROF_TRIGGER_OOM);
		/* Without the kernel's own word, a SIGKILL soon after the warning. */
		if (sig == SIGKILL && oom && p->oom_session &&
		    util_now_ns(CLOCK_MONOTONIC) - p->oom_ns < 60ull * 1000000000ull &&
		    !trg_mem_counts_kills(pid))
			link_kill(oom, p, "killed by SIGKILL (likely the OOM killer)");
		struct svc_reg *cr = svc_trigreg_find(p->app, PROF_TRIGGER_CRASH);
		char path[SVC_PATH_MAX + 32];
		ssize_t saved = 0;
		if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
		     sig == SIGABRT) && cr) {
			char tag[32], msg[256];
			snprintf(tag, sizeof(tag), "signal-%d", sig);
			LOG_PEER(p->uid, LOG_NOTICE, "pid %d of %s died of signal %d", (int)pid, p->app,
				 sig);
			if (p->crash_fd >= 0 && (saved = svc_trigreg_save_crash(p, path, sizeof(path))) < 0)
				LOG_W("pid %d: cannot keep its flight-recorder dump: %s", (int)pid,
				      strerror((int)-saved));
			if (saved > 0) {
				int e = svc_admit_cooldown_check(p->app, PROF_TRIGGER_CRASH, cr->period_s,
								 msg, sizeof(msg));
				if (e)
					unlink(path);
				else
					e = svc_request_adopt(pid, p->uid, p->gid, p->app, path,
							      "ringdump", PROF_TRIGGER_CRASH, tag, msg,
							      sizeof(msg));
				if (e) {
					cr->refused++;
					LOG_PEER(p->uid, LOG_INFO, "crash trigger of %s refused: %s",
						 p->app, msg);
				} else {
					svc_admit_cooldown_record(p->app, PROF_TRIGGER_CRASH);
					cr->fired++;
				}
			} else {
				LOG_PEER(p->uid, LOG_NOTICE, "pid %d left no flight-recorder dump",
					 (int)pid);
			}
		}
	}
	svc_trigreg_drop_pid(pid);
}

static void on_cpu(pid_t pid, unsigned percent)
{
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	struct svc_reg *r = p ? svc_trigreg_for(p, PROF_TRIGGER_EXCESSIVE_CPU) : NULL;
	if (r)
		fire(r, pid, names_trigger_str(r->type));
}

static void on_hang(pid_t pid)
{
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	struct svc_reg *r = p ? svc_trigreg_find(p->app, PROF_TRIGGER_HANG) : NULL;
	if (r)
		fire(r, pid, names_trigger_str(r->type));
}

/* A stall: a trace of the app, from one of its processes that runs. */
static void on_psi(int key)
{
	struct svc_reg *r = key < 0 ? NULL : svc_trigreg_at((size_t)key);
	if (!r)
		return;
	for (size_t i = 0; i < svc_trigreg_npids(); i++) {
		const struct svc_app_pid *p = svc_trigreg_pid_at(i);
		if (!strcmp(p->app, r->app) && kill(p->pid, 0) == 0) {
			fire(r, p->pid, names_trigger_str(r->type));
			return;
		}
	}
	LOG_D("pressure stall for %s, which has no running process", r->app);
}

static void watch_psi(struct svc_reg *r)
{
	int e = trg_psi_watch(svc_trigreg_index(r), r->psi_resource, r->psi_stall_us, r->psi_window_ms);
	if (e < 0)
		LOG_W("pressure-stall trigger of %s not armed: %s (%s)", r->app, strerror(-e),
		      trg_psi_status());
}

static void on_mem_warn(pid_t pid)
{
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	struct svc_reg *r = p ? svc_trigreg_for(p, PROF_TRIGGER_OOM) : NULL;
	if (!r)
		return;
	/* A JVM near its memory line gets a heap dump (its graph, what holds
	 * the memory), as for the OOM its agent reports: an allocation sample
	 * of a few hundred ms says little about a live set built over minutes.
	 * A trigger asking for another capture gets that. */
	bool jvm = r->capture == PROF_HEAP_PROFILE && svc_jvm_detect(pid, p->start);
	fire_as(r, pid, names_trigger_str(r->type), jvm ? PROF_HEAP_DUMP : 0);
}

/* The kill came: offer the capture before it again, saying so. */
static void link_kill(struct svc_reg *r, const struct svc_app_pid *p, const char *how)
{
	char note[256];
	if (!r || !p || !p->oom_session)
		return;
	double secs = (double)(util_now_ns(CLOCK_MONOTONIC) - p->oom_ns) / 1e9;
	util_fmt(note, sizeof(note), "%s %.1f s after this capture (pid %d)", how, secs, (int)p->pid);
	if (svc_db_result_requeue(p->oom_session, note) == 0)
		LOG_N("%s: %s; its heap capture is queued again for the app", r->app, note);
	else
		LOG_N("%s: %s, but that capture has no stored result", r->app, note);
}

static void on_mem_kill(pid_t pid, const char *how)
{
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	if (p)
		link_kill(svc_trigreg_for(p, PROF_TRIGGER_OOM), p, how);
}

static const struct trg_ops trg_ops = {
	.exec = on_proc_exec,
	.lost = svc_jvm_lost,
	.exit = on_proc_exit,
	.cpu = on_cpu,
	.hang = on_hang,
	.mem_warn = on_mem_warn,
	.mem_kill = on_mem_kill,
	.psi = on_psi,
};

/* ------------------------------------------------------- registration */


int svc_trigger_add(struct svc_conn *c, const Pd__Trigger *t, char *why, size_t n)
{
	struct svc_reg tmp;
	char link[64];
	memset(&tmp, 0, sizeof(tmp));
	int e = svc_trigreg_fill(&tmp, t, why, n);
	if (e)
		return e;
	util_strlcpy(tmp.app, svc_conn_app(c), sizeof(tmp.app));
	tmp.uid = svc_conn_uid(c);
	tmp.gid = svc_conn_gid(c);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)svc_conn_pid(c));
	ssize_t len = readlink(link, tmp.exe, sizeof(tmp.exe) - 1);
	tmp.exe[len > 0 ? len : 0] = '\0';
	struct svc_reg *r = svc_trigreg_slot(tmp.app, tmp.type);
	if (!r) {
		util_fmt(why, n, "%d triggers registered system-wide", SVC_MAX_TRIGGERS);
		return PROF_E_RATE_LIMIT_SYSTEM;
	}
	/* Persist the request as given, so a restart re-derives the same defaults. */
	size_t plen = pd__trigger__get_packed_size(t);
	uint8_t buf[1024];
	if (plen > sizeof(buf)) {
		util_fmt(why, n, "trigger too large");
		return PROF_E_INVALID_REQUEST;
	}
	pd__trigger__pack(t, buf);
	if (svc_db_trigger_put(tmp.app, tmp.type, tmp.uid, tmp.gid, tmp.exe, buf, plen) < 0) {
		util_fmt(why, n, "cannot store the trigger");
		return PROF_E_UNKNOWN;
	}
	uint64_t active = r->used ? r->active : 0;
	*r = tmp;
	r->used = true;
	r->active = active;
	struct svc_app_pid *p = svc_trigreg_add_pid(svc_conn_pid(c), svc_conn_ident(c)->start, r->app, r->uid,
				    r->gid);
	if (p)
		svc_trigreg_watch(p);
	if (r->type == PROF_TRIGGER_OOM)
		svc_trigreg_arm_heap(svc_conn_runtime_for(svc_conn_pid(c)), r);
	if (r->type == PROF_TRIGGER_CRASH)
		svc_trigreg_give_crash(svc_conn_runtime_for(svc_conn_pid(c)), p);
	if (r->type == PROF_TRIGGER_PRESSURE_STALL)
		watch_psi(r);
	LOG_PEER(r->uid, LOG_INFO, "%s registered a %s trigger (capture %u, cooldown %u s)", r->app,
		 names_trigger_str(r->type), r->capture, r->period_s);
	return 0;
}

int svc_trigger_remove(struct svc_conn *c, int type)
{
	const char *app = svc_conn_app(c);
	for (size_t i = 0; i < svc_trigreg_hi(); i++) {
		struct svc_reg *r = svc_trigreg_at(i);
		if (!r || strcmp(r->app, app) || (type >= 0 && r->type != (uint32_t)type))
			continue;
		if (r->type == PROF_TRIGGER_EXCESSIVE_CPU)
			for (size_t k = 0; k < svc_trigreg_npids(); k++)
				if (!strcmp(svc_trigreg_pid_at(k)->app, app))
					trg_cpu_unwatch(svc_trigreg_pid_at(k)->pid);
		if (r->type == PROF_TRIGGER_PRESSURE_STALL)
			trg_psi_unwatch(svc_trigreg_index(r));
		memset(r, 0, sizeof(*r));
	}
	return svc_db_trigger_del(app, type);
}

void svc_trigger_signal(struct svc_conn *c, const Pd__AppSignal *sg)
{
	const char *app = svc_conn_app(c);
	pid_t pid = svc_conn_pid(c);
	struct svc_reg *r;

	switch (sg->kind) {
	case 1: /* fully drawn: a cold start ends here */
		svc_capture_stop(pid, PROF_TRIGGER_COLD_START);
		if ((r = svc_trigreg_find(app, PROF_TRIGGER_APP_FULLY_DRAWN)))
			fire(r, pid, names_trigger_str(r->type));
		break;
	case 2:
		if ((r = svc_trigreg_find(app, PROF_TRIGGER_ANOMALY)))
			fire(r, pid, sg->name && *sg->name ? sg->name : names_trigger_str(r->type));
		break;
	case 3:
		/* Only a tracked process beats: its entry goes when it does, and
		 * the per-uid cap bounds how many one uid has. */
		if ((r = svc_trigreg_find(app, PROF_TRIGGER_HANG)) && svc_trigreg_pid(pid) &&
		    trg_hang_beat(pid, r->hang_timeout_ms) == -ENOSPC)
			LOG_PEER(svc_conn_uid(c), LOG_WARNING, "heartbeats of pid %d ignored: %d "
				 "processes beating already", (int)pid, TRG_MAX_PIDS);
		break;
	default:
		break;
	}
}

void svc_trigger_client_up(struct svc_conn *c)
{
	struct svc_app_pid *p = svc_trigreg_add_pid(svc_conn_pid(c), svc_conn_ident(c)->start, svc_conn_app(c),
				    svc_conn_uid(c), svc_conn_gid(c));
	if (!p)
		return;
	p->clients++;
	svc_trigreg_watch(p);
}

void svc_trigger_client_down(struct svc_conn *c)
{
	struct svc_app_pid *p = svc_trigreg_pid(svc_conn_pid(c));
	if (p && --p->clients <= 0) {
		/* Still the app's if it runs (an exec'd process stays watched); one
		 * with a crash dump waits for its exit event, which may come later. */
		trg_hang_forget(p->pid);
		if (p->crash_fd < 0 && kill(p->pid, 0) < 0)
			svc_trigreg_drop_pid(p->pid);
	}
}

void svc_trigger_runtime_event(struct svc_conn *rt, const Pd__RuntimeEvent *ev)
{
	pid_t pid = svc_conn_pid(rt);
	int e = PROF_E_INVALID_REQUEST;
	if (ev->kind == 1) {
		bool jvm = svc_jvm_detect(pid, svc_conn_ident(rt)->start);
		if (jvm)
			LOG_PEER(svc_conn_uid(rt), LOG_NOTICE, "JVM pid %d ran out of Java heap",
				 (int)pid);
		else
			LOG_PEER(svc_conn_uid(rt), LOG_NOTICE,
				 "pid %d reports an allocation failure of %llu bytes", (int)pid,
				 (unsigned long long)ev->value);
		/* A runtime-reported OOM fires the same trigger as the kernel's signs;
		 * a JVM's is a heap dump (its graph) unless the trigger asked otherwise. */
		struct svc_app_pid *p = svc_trigreg_pid(pid);
		struct svc_reg *r = p ? svc_trigreg_for(p, PROF_TRIGGER_OOM) : NULL;
		uint64_t before = r ? r->active : 0;
		if (r)
			e = fire_as(r, pid, jvm ? "oom-java" : "oom-malloc",
				    jvm && r->capture == PROF_HEAP_PROFILE ? PROF_HEAP_DUMP : 0);
		else
			LOG_PEER(svc_conn_uid(rt), LOG_INFO, "pid %d has no OOM trigger: nothing captured",
				 (int)pid);
		/* The failing thread, for the heap graph's OOM stack (issue #20),
		 * to the capture this event started only; a tid that is not one
		 * of pid's threads is dropped. */
		if (r && e == 0 && r->active != before && ev->has_tid &&
		    svc_session_set_oom_tid(r->active, pid, ev->tid) < 0)
			LOG_PEER(svc_conn_uid(rt), LOG_INFO, "pid %d named thread %u as its OOM's, "
				 "which is not one of its threads: ignored", (int)pid, (unsigned)ev->tid);
	}
	/* A runtime holding its thread for us is let go when no capture runs. */
	if (ev->has_hold && ev->hold && e != 0)
		svc_session_event_done(pid, ev->kind, e);
}

static void load_one(const char *app, uint32_t type, uid_t uid, gid_t gid, const char *exe,
		     const void *spec, size_t len, void *ud)
{
	char why[128];
	Pd__Trigger *t = pd__trigger__unpack(NULL, len, spec);
	struct svc_reg *r = t ? svc_trigreg_slot(app, type) : NULL;
	if (r && svc_trigreg_fill(r, t, why, sizeof(why)) == 0) {
		util_strlcpy(r->app, app, sizeof(r->app));
		util_strlcpy(r->exe, exe, sizeof(r->exe));
		r->uid = uid;
		r->gid = gid;
		r->used = true;
		(*(int *)ud)++;
		if (r->type == PROF_TRIGGER_PRESSURE_STALL)
			watch_psi(r);
	} else if (r) {
		memset(r, 0, sizeof(*r));
	}
	if (t)
		pd__trigger__free_unpacked(t, NULL);
}

int svc_trigger_init(struct event_base *base, const struct svc_config *c)
{
	int r, n = 0;
	cfg = c;
	evbase = base;
	if ((r = svc_trigreg_init(c)) < 0)
		return r;
	if ((r = svc_session_subscribe_end(session_end, NULL)) < 0)
		return r;
	if ((r = trg_proc_init(base, &trg_ops)) < 0 || (r = trg_cpu_init(base, &trg_ops, cfg->cpu_perf_events)) < 0 ||
	    (r = trg_hang_init(base, &trg_ops)) < 0 || (r = trg_mem_init(base, &trg_ops)) < 0 ||
	    (r = trg_psi_init(base, &trg_ops)) < 0 ||
	    (r = trg_mem_global(cfg->mem_available_percent, cfg->mem_stall_percent)) < 0)
		return r;
	LOG_I("watchers: process events: %s; cpu: %s; hang: %s; memory: %s; pressure: %s",
	      trg_proc_status(), trg_cpu_status(), trg_hang_status(), trg_mem_status(),
	      trg_psi_status());
	for (unsigned i = 0; i < cfg->nsystrig; i++) {
		const struct svc_systrig *st = &cfg->systrig[i];
		Pd__Trigger t = PD__TRIGGER__INIT;
		Pd__Params prm = PD__PARAMS__INIT;
		char why[160];
		t.type = st->type;
#define SET(f, v) do { t.has_##f = (v) != 0; t.f = (v); } while (0)
		SET(capture, st->capture);
		SET(rate_limit_period_s, st->period_s);
		SET(cpu_percent, st->cpu_percent);
		SET(cpu_window_ms, st->cpu_window_ms);
		SET(memory_percent, st->memory_percent);
		SET(memory_bytes, st->memory_bytes);
		SET(timeout_ms, st->timeout_ms);
#undef SET
		/* The params a request would carry: 0 = absent = the default. */
#define SET(f, v) do { prm.has_##f = (v) != 0; prm.f = (v); } while (0)
		SET(duration_ms, st->duration_ms);
		SET(background_ms, st->background_ms);
		SET(buffer_fill_policy, st->fill_policy);
		SET(track_java_allocations, st->java_allocs);
		SET(format, st->format);
#undef SET
		t.params = &prm;
		struct svc_reg *sr = svc_trigreg_slot("", 0);
		if (!sr || svc_trigreg_fill(sr, &t, why, sizeof(why)) != 0) {
			LOG_E("[trigger.%s]: %s", st->name, sr ? why : "no room");
			if (sr)
				memset(sr, 0, sizeof(*sr));
			continue;
		}
		util_fmt(sr->app, sizeof(sr->app), "sys:%s", st->name);
		util_strlcpy(sr->exe, st->exe, sizeof(sr->exe));
		util_strlcpy(sr->cgroup, st->cgroup, sizeof(sr->cgroup));
		util_strlcpy(sr->java_main, st->java_main, sizeof(sr->java_main));
		sr->sys = true;
		sr->used = true;
		LOG_I("system trigger %s: %s of %s%s%s%s%s", st->name, names_trigger_str(sr->type),
		      sr->exe[0] ? sr->exe : "", sr->exe[0] && sr->cgroup[0] ? " in " : "", sr->cgroup,
		      sr->java_main[0] ? " java " : "", sr->java_main);
	}
	/* After the watchers: loading arms the PSI triggers. */
	if ((r = svc_db_trigger_load(load_one, &n)) < 0)
		return r;
	if (n)
		LOG_I("%d trigger(s) loaded", n);
	return 0;
}

void svc_trigger_fini(void)
{
	svc_session_unsubscribe_end(session_end, NULL);
	trg_proc_fini();
	trg_cpu_fini();
	trg_hang_fini();
	trg_mem_fini();
	trg_psi_fini();
	svc_trigreg_fini();
}

void svc_trigger_status(void (*fn)(const char *name, const char *status, void *ud), void *ud)
{
	fn("process-events", trg_proc_status(), ud);
	fn("cpu", trg_cpu_status(), ud);
	fn("hang", trg_hang_status(), ud);
	fn("memory", trg_mem_status(), ud);
	fn("pressure", trg_psi_status(), ud);
}

void svc_trigger_foreach(void (*fn)(const struct svc_trigger_info *t, void *ud), void *ud)
{
	static const char *const psi_names[] = { "memory", "cpu", "io" };
	for (size_t i = 0; i < svc_trigreg_hi(); i++) {
		const struct svc_reg *r = svc_trigreg_at(i);
		struct svc_trigger_info ti = { 0 };
		if (!r)
			continue;
		ti.app = r->app;
		ti.uid = r->uid;
		ti.type = r->type;
		ti.capture = r->capture;
		ti.period_s = r->period_s;
		ti.system_name = r->sys ? r->app + 4 : NULL; /* "sys:NAME" */
		ti.fired = r->fired;
		ti.coalesced = r->coalesced;
		ti.refused = r->refused;
		ti.last_ns = r->last_ns;
		ti.active = r->active;
		switch (r->type) {
		case PROF_TRIGGER_EXCESSIVE_CPU:
			util_fmt(ti.detail, sizeof(ti.detail), "cpu >= %u%% for %u ms", r->cpu_percent,
				 r->cpu_window_ms);
			break;
		case PROF_TRIGGER_OOM:
			if (r->memory_bytes)
				util_fmt(ti.detail, sizeof(ti.detail), "memory >= %llu bytes",
					 (unsigned long long)r->memory_bytes);
			else
				util_fmt(ti.detail, sizeof(ti.detail), "memory >= %u%% of the limit",
					 r->memory_percent);
			break;
		case PROF_TRIGGER_HANG:
			util_fmt(ti.detail, sizeof(ti.detail), "no heartbeat for %u ms",
				 r->hang_timeout_ms);
			break;
		case PROF_TRIGGER_COLD_START:
			util_fmt(ti.detail, sizeof(ti.detail), "until fully drawn or %u ms",
				 r->timeout_ms);
			break;
		case PROF_TRIGGER_PRESSURE_STALL:
			util_fmt(ti.detail, sizeof(ti.detail), "%s stall %u us in %u ms",
				 r->psi_resource < 3 ? psi_names[r->psi_resource] : "?",
				 r->psi_stall_us, r->psi_window_ms);
			break;
		default:
			break;
		}
		if (r->sys && (r->exe[0] || r->cgroup[0])) {
			size_t l = strlen(ti.detail);
			util_fmt(ti.detail + l, sizeof(ti.detail) - l, "%s%s%s%s", l ? "; " : "",
				 r->exe[0] ? r->exe : "", r->exe[0] && r->cgroup[0] ? " in " : "",
				 r->cgroup);
		}
		fn(&ti, ud);
	}
}
