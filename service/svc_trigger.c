/*
 * Triggers (DESIGN §3, §5): the registry apps fill through
 * prof_add_trigger, persisted in SQLite, and the glue from the watchers in
 * triggers/ to captures. A fired trigger goes through its cooldown
 * (rate_limit_period_s), then the cost windows (a system capture) and the
 * session rules; its result carries the trigger type and goes to the app's
 * result listener, or waits in the queue. A trigger that fires while its
 * capture still runs is counted, not stacked.
 *
 * Which processes are the app's: the pids of its connected clients, and
 * processes that exec the executable it registered from, under its uid.
 *
 * Caps: SVC_MAX_TRIGGERS registrations (past it prof_add_trigger gets
 * RATE_LIMIT_SYSTEM); SVC_MAX_APP_PIDS tracked processes in all and
 * max_pids_per_uid per uid: past either the newest process is not tracked
 * (none of its triggers watch it), with one line through the uid's log
 * budget. Every watch (CPU, memory, heartbeat) is of a tracked process, so
 * the per-uid cap bounds one uid's share of the watchers' tables
 * (TRG_MAX_PIDS each) and of their work per tick: one uid's thousands of
 * exec'd copies can neither fill the tables for everyone else nor make the
 * CPU watcher read thousands of files every tick.
 */
#include "svc.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
#include "trace_fmt.h"
#include "svc_ident.h"
#include "trg.h"
#include "util.h"

#define SVC_MAX_TRIGGERS 4096
#define SVC_MAX_APP_PIDS 4096

struct reg {
	bool used;
	bool sys;                     /* from [trigger.NAME]: matches by exe or cgroup, any uid */
	char cgroup[256];
	char java_main[256];          /* system triggers: a JVM's main class or jar */
	char app[RL_APP_MAX];
	uid_t uid;
	gid_t gid;
	char exe[SVC_PATH_MAX];
	uint32_t type, capture, period_s;
	uint32_t cpu_percent, cpu_window_ms, hang_timeout_ms, timeout_ms;
	Pd__Params params;
	uint32_t memory_percent;
	uint64_t memory_bytes;
	uint32_t psi_resource, psi_stall_us, psi_window_ms;
	uint64_t active;              /* the session of the capture running, or 0 */
	uint64_t last_session;        /* the last capture it made (OOM: linked to a kill) */
	uint64_t last_ns;
	uint64_t fired, coalesced, refused;
};

/* A process known to belong to an app. */
struct app_pid {
	pid_t pid;
	uint64_t start;               /* its start time: captures are of this process only */
	char app[RL_APP_MAX];
	uid_t uid;
	gid_t gid;
	int clients;                  /* connected clients of this pid */
	int sys_reg;                  /* the system trigger that claimed it, or -1 */
	int crash_fd;                 /* its crash ring memfd (give_crash_fd), or -1 */
};

static const struct svc_config *cfg;
static struct reg *regs;
/* Slots are taken lowest first and scans stop here: the table is calloc'd
 * (about 5 KiB a slot) and a scan of all of it would fault in every page. */
static size_t regs_hi;
static struct app_pid *pids;
static size_t npids;
static unsigned ncrash;            /* crash memfds held; at most max_runtimes */

static const uint32_t default_capture[] = {
	[PROF_TRIGGER_COLD_START] = PROF_STACK_SAMPLING,
	[PROF_TRIGGER_APP_FULLY_DRAWN] = PROF_SYSTEM_TRACE,
	[PROF_TRIGGER_OOM] = PROF_HEAP_PROFILE,
	[PROF_TRIGGER_EXCESSIVE_CPU] = PROF_STACK_SAMPLING,
	[PROF_TRIGGER_HANG] = PROF_STACK_SAMPLING,
	[PROF_TRIGGER_CRASH] = PROF_SYSTEM_TRACE,
	[PROF_TRIGGER_ANOMALY] = PROF_STACK_SAMPLING,
	[PROF_TRIGGER_PRESSURE_STALL] = PROF_SYSTEM_TRACE,
};

static struct reg *find_reg(const char *app, uint32_t type)
{
	for (size_t i = 0; i < regs_hi; i++)
		if (regs[i].used && regs[i].type == type && !strcmp(regs[i].app, app))
			return &regs[i];
	return NULL;
}

static struct app_pid *find_pid(pid_t pid)
{
	for (size_t i = 0; i < npids; i++)
		if (pids[i].pid == pid)
			return &pids[i];
	return NULL;
}

/* The registration of type for a process: its app's, else its system trigger. */
static struct reg *reg_for(const struct app_pid *p, uint32_t type)
{
	struct reg *r = find_reg(p->app, type);
	if (!r && p->sys_reg >= 0 && regs[p->sys_reg].used && regs[p->sys_reg].type == type)
		r = &regs[p->sys_reg];
	return r;
}

static void drop_pid(pid_t pid);

/* start 0: read it now. An entry left by an earlier process with this pid
 * (a missed exit) is replaced. */
static struct app_pid *add_pid(pid_t pid, uint64_t start, const char *app, uid_t uid, gid_t gid)
{
	if (!start && util_proc_start_time((int)pid, &start) < 0)
		return NULL;
	struct app_pid *p = find_pid(pid);
	if (p && p->start == start)
		return p;
	if (p)
		drop_pid(pid);
	uint32_t mine = 0;
	for (size_t i = 0; i < npids; i++)
		if (pids[i].uid == uid)
			mine++;
	if (mine >= cfg->max_pids_per_uid || npids == SVC_MAX_APP_PIDS) {
		LOG_PEER(uid, LOG_WARNING, "uid %u: pid %d not tracked: %u processes of this uid "
			 "tracked already (max_pids_per_uid %u, %zu of %d in all)", (unsigned)uid,
			 (int)pid, mine, cfg->max_pids_per_uid, npids, SVC_MAX_APP_PIDS);
		return NULL;
	}
	p = &pids[npids++];
	memset(p, 0, sizeof(*p));
	p->sys_reg = -1;
	p->crash_fd = -1;
	p->pid = pid;
	p->start = start;
	p->uid = uid;
	p->gid = gid;
	util_strlcpy(p->app, app, sizeof(p->app));
	return p;
}

static void drop_crash(struct app_pid *p)
{
	if (!p || p->crash_fd < 0)
		return;
	close(p->crash_fd);
	p->crash_fd = -1;
	ncrash--;
}

static void drop_pid(pid_t pid)
{
	drop_crash(find_pid(pid));
	trg_cpu_unwatch(pid);
	trg_mem_unwatch(pid);
	trg_hang_forget(pid);
	for (size_t i = 0; i < npids; i++)
		if (pids[i].pid == pid) {
			pids[i] = pids[--npids];
			return;
		}
}

/* Start watching pid for the app's registrations that watch processes. */
static void watch_pid(const struct app_pid *p)
{
	struct reg *r = reg_for(p, PROF_TRIGGER_EXCESSIVE_CPU);
	if (r && trg_cpu_watch(p->pid, r->cpu_percent, r->cpu_window_ms) == -ENOSPC)
		LOG_PEER(p->uid, LOG_WARNING, "cannot watch the CPU of pid %d: %d processes watched "
			 "already", (int)p->pid, TRG_MAX_PIDS);
	r = reg_for(p, PROF_TRIGGER_OOM);
	if (r && trg_mem_watch(p->pid, r->memory_percent, r->memory_bytes) == -ENOSPC)
		LOG_PEER(p->uid, LOG_WARNING, "cannot watch the memory of pid %d: %d processes watched already",
			 (int)p->pid, TRG_MAX_PIDS);
}

/* An OOM trigger wants the heap sampled from now on, not from its warning. */
static void arm_heap(struct svc_conn *rt, const struct reg *r)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__HeapArm ha = PD__HEAP_ARM__INIT;
	if (!rt || !r || r->capture != PROF_HEAP_PROFILE ||
	    !(svc_conn_runtime_caps(rt) & NAMES_CAP_HEAP_PROFILE))
		return;
	ha.has_sampling_interval_bytes = r->params.has_sampling_interval_bytes;
	ha.sampling_interval_bytes = r->params.sampling_interval_bytes;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_HEAP_ARM;
	out.heap_arm = &ha;
	svc_conn_send(rt, &out.base, -1);
}

/*
 * A CRASH trigger: the agent gets a memfd its fatal-signal handler fills.
 * Not a file of ours: sized to the largest ring dump and sealed, so the
 * app cannot grow it, and its pages are charged to the app (its memory
 * cgroup) as it writes them. The daemon keeps its own fd to the same open
 * file until the process exits; the shared file offset is then how far
 * the handler wrote.
 */
static void give_crash_fd(struct svc_conn *rt, struct app_pid *p)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__CrashFd cf = PD__CRASH_FD__INIT;
	if (!rt || !p || !find_reg(p->app, PROF_TRIGGER_CRASH) ||
	    !(svc_conn_runtime_caps(rt) & NAMES_CAP_TRACE_RING))
		return;
	/* A fresh one each time: the agent replaces its fd with the newest. */
	drop_crash(p);
	if (ncrash >= cfg->max_runtimes) {
		LOG_W("pid %d of %s gets no crash ring: %u held (max_runtimes)", (int)p->pid, p->app,
		      ncrash);
		return;
	}
	int fd = memfd_create("profilingd-crash", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0 || ftruncate(fd, (off_t)TFMT_DUMP_MAX_BYTES) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		LOG_W("pid %d of %s gets no crash ring: %s", (int)p->pid, p->app, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	cf.version = 1;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_CRASH_FD;
	out.crash_fd = &cf;
	if (svc_conn_send(rt, &out.base, fd) < 0) {
		close(fd);
		return;
	}
	p->crash_fd = fd;
	ncrash++;
}

/*
 * Copy what the dying agent wrote into its crash memfd to a root-only file
 * in raw/, for svc_session_adopt. Returns the bytes copied (0: it wrote
 * nothing) or -errno; path gets the file's name.
 */
static ssize_t save_crash(const struct app_pid *p, char *path, size_t n)
{
	static char buf[1 << 16];
	off_t len = lseek(p->crash_fd, 0, SEEK_CUR);
	off_t off = 0;
	int r = 0;

	if (len <= 0)
		return len < 0 ? -errno : 0;
	if ((uint64_t)len > TFMT_DUMP_MAX_BYTES)
		len = (off_t)TFMT_DUMP_MAX_BYTES;
	if (util_fmt(path, n, "%s/crash-%d.ring", svc_session_raw_dir(), (int)p->pid) < 0)
		return -ENAMETOOLONG;
	unlink(path); /* one left by an earlier process with this pid */
	int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (out < 0)
		return -errno;
	while (off < len && r == 0) {
		size_t want = (size_t)(len - off) < sizeof(buf) ? (size_t)(len - off) : sizeof(buf);
		ssize_t k = pread(p->crash_fd, buf, want, off);
		if (k <= 0)
			r = k < 0 ? -errno : -EIO;
		else if ((r = util_write_all(out, buf, (size_t)k)) == 0)
			off += k;
	}
	close(out);
	if (r < 0) {
		unlink(path);
		return r;
	}
	return (ssize_t)off;
}

static void listener_done(void *ud, int code, const char *msg);

void svc_trigger_runtime_up(struct svc_conn *rt)
{
	struct app_pid *p = find_pid(svc_conn_pid(rt));
	/* Only the runtime of the tracked process itself, not of a later
	 * owner of its pid, gets its heap arming or crash file. */
	if (!p || p->start != svc_conn_ident(rt)->start)
		return;
	struct reg *oom = find_reg(p->app, PROF_TRIGGER_OOM);
	if (!oom && p->sys_reg >= 0 && regs[p->sys_reg].used &&
	    regs[p->sys_reg].type == PROF_TRIGGER_OOM)
		oom = &regs[p->sys_reg];
	if (oom && svc_jvm_detect(p->pid)) {
		/* A VM out of heap cannot start its attach listener (a Java
		 * thread): start it now, for the heap dump an OOM will want. */
		int r = svc_jattach_start(p->pid, p->start, SVC_JATTACH_LISTEN, 15000, -1,
					  listener_done,
					  (void *)(intptr_t)p->pid, NULL);
		if (r < 0)
			LOG_W("JVM pid %d: cannot prepare its attach listener: %s", (int)p->pid,
			      strerror(-r));
	} else {
		arm_heap(rt, oom);
	}
	give_crash_fd(rt, p);
}

/*
 * Start r's capture of pid (capture 0: the trigger's own type). 0 when a
 * capture runs for it now (this one, or one already running), else the
 * refusal's PROF_E_*.
 */
static int fire_as(struct reg *r, pid_t pid, const char *tag, uint32_t capture)
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
	struct app_pid *p = find_pid(pid);
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
		e = svc_session_trigger(pid, start, uid, gid, app, capture ? capture : r->capture,
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

static void fire(struct reg *r, pid_t pid, const char *tag)
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
	struct app_pid *p = find_pid(f->pid);
	struct reg *r = p ? reg_for(p, PROF_TRIGGER_HANG) : NULL;
	Pd__Params prm = PD__PARAMS__INIT;
	char msg[256];
	uint64_t id;
	if (r && kill(f->pid, 0) == 0) {
		prm.has_duration_ms = 1;
		prm.duration_ms = SVC_DURATION_MIN_MS;
		int e = svc_session_trigger(f->pid, p->start, p->uid, p->gid, p->app,
					    PROF_SYSTEM_TRACE, &prm,
					    PROF_TRIGGER_HANG, "hang-trace", cfg->runtime_wait_ms, &id,
					    msg, sizeof(msg));
		if (e)
			LOG_I("hang of pid %d: no trace snapshot: %s", (int)f->pid, msg);
	}
	free(f);
}

void svc_trigger_session_end(const char *app, uint32_t trigger, uint64_t session_id, pid_t pid,
			     uint32_t type)
{
	struct reg *r = NULL;
	struct app_pid *p = find_pid(pid);
	if (p)
		r = reg_for(p, trigger);
	if (!r)
		r = find_reg(app, trigger);
	if (r && r->active != session_id)
		r = NULL;
	/* A system trigger whose process is gone (an OOM'd JVM) is found by its session. */
	for (size_t i = 0; !r && i < regs_hi; i++)
		if (regs[i].used && regs[i].active == session_id)
			r = &regs[i];
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

static void link_kill(struct reg *r, pid_t pid, const char *how);

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
	struct reg *cold = NULL;

	snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
	ssize_t n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0 || util_proc_ids((int)pid, &uid, &gid) < 0)
		return;
	exe[n] = '\0';
	/* Any registration of this executable under this uid makes pid the app's. */
	for (size_t i = 0; i < regs_hi; i++) {
		struct reg *r = &regs[i];
		if (!r->used || r->uid != uid || strcmp(r->exe, exe))
			continue;
		svc_app_key(cfg, pid, uid, app, sizeof(app));
		if (strcmp(app, r->app))
			continue;
		struct app_pid *p = add_pid(pid, 0, r->app, r->uid, r->gid);
		if (p)
			watch_pid(p);
		if (r->type == PROF_TRIGGER_COLD_START)
			cold = r;
	}
	/* System triggers: any uid, by executable path, cgroup and/or JVM main class. */
	char cg[2048] = "", jmain[256] = "";
	int jvm = -1; /* not looked at yet */
	for (size_t i = 0; i < regs_hi; i++) {
		struct reg *r = &regs[i];
		if (!r->used || !r->sys || (r->exe[0] && strcmp(r->exe, exe)))
			continue;
		if (r->cgroup[0]) {
			if (!cg[0])
				proc_cgroups(pid, cg, sizeof(cg));
			if (!strstr(cg, r->cgroup))
				continue;
		}
		if (r->java_main[0]) {
			if (jvm < 0)
				jvm = svc_jvm_detect(pid) && svc_jvm_main(pid, jmain, sizeof(jmain)) == 0;
			if (!jvm || !svc_jvm_main_matches(jmain, r->java_main))
				continue;
		}
		svc_app_key(cfg, pid, uid, app, sizeof(app));
		struct app_pid *p = add_pid(pid, 0, app, uid, gid);
		if (!p)
			break;
		p->sys_reg = (int)i;
		watch_pid(p);
		if (r->type == PROF_TRIGGER_COLD_START && !cold)
			cold = r;
	}
	if (cold)
		fire(cold, pid, names_trigger_str(cold->type));
}

static void on_proc_exit(pid_t pid, int wstatus)
{
	struct app_pid *p = find_pid(pid);
	if (!p)
		return;
	if (wstatus >= 0 && WIFSIGNALED(wstatus)) {
		int sig = WTERMSIG(wstatus);
		struct reg *oom = reg_for(p, PROF_TRIGGER_OOM);
		/* Without the kernel's own word, a SIGKILL soon after the warning. */
		if (sig == SIGKILL && oom && oom->last_session &&
		    util_now_ns(CLOCK_MONOTONIC) - oom->last_ns < 60ull * 1000000000ull &&
		    !trg_mem_counts_kills(pid))
			link_kill(oom, pid, "killed by SIGKILL (likely the OOM killer)");
		struct reg *cr = find_reg(p->app, PROF_TRIGGER_CRASH);
		char path[SVC_PATH_MAX + 32];
		ssize_t saved = 0;
		if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE ||
		     sig == SIGABRT) && cr) {
			char tag[32], msg[256];
			snprintf(tag, sizeof(tag), "signal-%d", sig);
			LOG_PEER(p->uid, LOG_NOTICE, "pid %d of %s died of signal %d", (int)pid, p->app,
				 sig);
			if (p->crash_fd >= 0 && (saved = save_crash(p, path, sizeof(path))) < 0)
				LOG_W("pid %d: cannot keep its flight-recorder dump: %s", (int)pid,
				      strerror((int)-saved));
			if (saved > 0) {
				int e = svc_admit_cooldown_check(p->app, PROF_TRIGGER_CRASH, cr->period_s,
								 msg, sizeof(msg));
				if (e)
					unlink(path);
				else
					e = svc_session_adopt(pid, p->uid, p->gid, p->app, path,
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
	drop_pid(pid);
}

static void on_cpu(pid_t pid, unsigned percent)
{
	struct app_pid *p = find_pid(pid);
	struct reg *r = p ? reg_for(p, PROF_TRIGGER_EXCESSIVE_CPU) : NULL;
	if (r)
		fire(r, pid, names_trigger_str(r->type));
}

static void on_hang(pid_t pid)
{
	struct app_pid *p = find_pid(pid);
	struct reg *r = p ? find_reg(p->app, PROF_TRIGGER_HANG) : NULL;
	if (r)
		fire(r, pid, names_trigger_str(r->type));
}

/* A stall: a trace of the app, from one of its processes that runs. */
static void on_psi(int key)
{
	if (key < 0 || (size_t)key >= regs_hi || !regs[key].used)
		return;
	struct reg *r = &regs[key];
	for (size_t i = 0; i < npids; i++)
		if (!strcmp(pids[i].app, r->app) && kill(pids[i].pid, 0) == 0) {
			fire(r, pids[i].pid, names_trigger_str(r->type));
			return;
		}
	LOG_D("pressure stall for %s, which has no running process", r->app);
}

static void watch_psi(struct reg *r)
{
	int e = trg_psi_watch((int)(r - regs), r->psi_resource, r->psi_stall_us, r->psi_window_ms);
	if (e < 0)
		LOG_W("pressure-stall trigger of %s not armed: %s (%s)", r->app, strerror(-e),
		      trg_psi_status());
}

static void on_mem_warn(pid_t pid)
{
	struct app_pid *p = find_pid(pid);
	struct reg *r = p ? reg_for(p, PROF_TRIGGER_OOM) : NULL;
	if (r)
		fire(r, pid, names_trigger_str(r->type));
}

/* The kill came: offer the capture before it again, saying so. */
static void link_kill(struct reg *r, pid_t pid, const char *how)
{
	char note[256];
	if (!r || !r->last_session)
		return;
	double secs = (double)(util_now_ns(CLOCK_MONOTONIC) - r->last_ns) / 1e9;
	util_fmt(note, sizeof(note), "%s %.1f s after this capture (pid %d)", how, secs, (int)pid);
	if (svc_db_result_requeue(r->last_session, note) == 0)
		LOG_N("%s: %s; its heap capture is queued again for the app", r->app, note);
	else
		LOG_N("%s: %s, but that capture has no stored result", r->app, note);
}

static void on_mem_kill(pid_t pid, const char *how)
{
	struct app_pid *p = find_pid(pid);
	if (p)
		link_kill(reg_for(p, PROF_TRIGGER_OOM), pid, how);
}

static const struct trg_ops trg_ops = {
	.exec = on_proc_exec,
	.exit = on_proc_exit,
	.cpu = on_cpu,
	.hang = on_hang,
	.mem_warn = on_mem_warn,
	.mem_kill = on_mem_kill,
	.psi = on_psi,
};

/* ------------------------------------------------------- registration */

static uint32_t or_default(bool has, uint32_t v, uint32_t def)
{
	return has && v ? v : def;
}

/* Validate t and fill r. 0 or a positive PROF_E_* with why. */
static int fill_reg(struct reg *r, const Pd__Trigger *t, char *why, size_t n)
{
	if (t->type < PROF_TRIGGER_COLD_START || t->type > PROF_TRIGGER_PRESSURE_STALL) {
		util_fmt(why, n, "unknown trigger type %u", t->type);
		return PROF_E_INVALID_REQUEST;
	}
	r->type = t->type;
	r->capture = or_default(t->has_capture, t->capture, default_capture[t->type]);
	if (r->capture < PROF_HEAP_DUMP || r->capture > PROF_SYSTEM_TRACE) {
		util_fmt(why, n, "unknown capture type %u", r->capture);
		return PROF_E_INVALID_REQUEST;
	}
	r->period_s = t->has_rate_limit_period_s ? t->rate_limit_period_s : 0;
	r->cpu_percent = or_default(t->has_cpu_percent, t->cpu_percent, 90);
	r->cpu_window_ms = or_default(t->has_cpu_window_ms, t->cpu_window_ms, 5000);
	r->hang_timeout_ms = or_default(t->has_hang_timeout_ms, t->hang_timeout_ms, 5000);
	r->timeout_ms = or_default(t->has_timeout_ms, t->timeout_ms, 5000);
	r->memory_percent = or_default(t->has_memory_percent, t->memory_percent, 90);
	r->psi_resource = t->has_psi_resource ? t->psi_resource : 0;
	r->psi_stall_us = or_default(t->has_psi_stall_us, t->psi_stall_us, 100000);
	r->psi_window_ms = or_default(t->has_psi_window_ms, t->psi_window_ms, 1000);
	if (r->psi_resource > 2 || r->psi_window_ms < 500 || r->psi_window_ms > 10000 ||
	    r->psi_stall_us > r->psi_window_ms * 1000u) {
		util_fmt(why, n, "psi: resource 0..2, window 500..10000 ms, stall <= window");
		return PROF_E_INVALID_REQUEST;
	}
	r->memory_bytes = t->has_memory_bytes ? t->memory_bytes : 0;
	if (r->memory_percent > 100) {
		util_fmt(why, n, "memory_percent must be 1..100");
		return PROF_E_INVALID_REQUEST;
	}
	if (r->cpu_percent > 100 * 1024 || r->cpu_window_ms < 250 || r->cpu_window_ms > 600000 ||
	    r->hang_timeout_ms < 100 || r->hang_timeout_ms > 3600000 || r->timeout_ms < 100 ||
	    r->timeout_ms > SVC_DURATION_MAX_MS) {
		util_fmt(why, n, "a threshold is out of range (see profiling.h)");
		return PROF_E_INVALID_REQUEST;
	}
	pd__params__init(&r->params);
	if (t->params) {
		r->params.has_duration_ms = t->params->has_duration_ms;
		r->params.duration_ms = t->params->duration_ms;
		r->params.has_frequency_hz = t->params->has_frequency_hz;
		r->params.frequency_hz = t->params->frequency_hz;
		r->params.has_sampling_interval_bytes = t->params->has_sampling_interval_bytes;
		r->params.sampling_interval_bytes = t->params->sampling_interval_bytes;
		r->params.has_buffer_kb = t->params->has_buffer_kb;
		r->params.buffer_kb = t->params->buffer_kb;
		r->params.has_clock = t->params->has_clock;
		r->params.clock = t->params->clock;
	}
	/* A cold start captures until fully drawn or its timeout; a hang samples
	 * the wall clock, so the blocked thread shows where it waits. */
	if (r->type == PROF_TRIGGER_COLD_START) {
		r->params.has_duration_ms = 1;
		r->params.duration_ms = r->timeout_ms;
	}
	if (r->type == PROF_TRIGGER_HANG && !r->params.has_clock) {
		r->params.has_clock = 1;
		r->params.clock = 1;
	}
	if (!r->params.has_duration_ms || !r->params.duration_ms) {
		/* An OOM capture must finish before the kill: the heap is sampled
		 * since registration, so a short capture holds it all. */
		r->params.has_duration_ms = 1;
		r->params.duration_ms = r->type == PROF_TRIGGER_OOM ? 200 : 2000;
	}
	return 0;
}

static struct reg *slot_for(const char *app, uint32_t type)
{
	struct reg *r = find_reg(app, type);
	for (size_t i = 0; !r && i < SVC_MAX_TRIGGERS; i++)
		if (!regs[i].used) {
			r = &regs[i];
			if (i + 1 > regs_hi)
				regs_hi = i + 1;
		}
	return r;
}

int svc_trigger_add(struct svc_conn *c, const Pd__Trigger *t, char *why, size_t n)
{
	struct reg tmp;
	char link[64];
	memset(&tmp, 0, sizeof(tmp));
	int e = fill_reg(&tmp, t, why, n);
	if (e)
		return e;
	util_strlcpy(tmp.app, svc_conn_app(c), sizeof(tmp.app));
	tmp.uid = svc_conn_uid(c);
	tmp.gid = svc_conn_gid(c);
	snprintf(link, sizeof(link), "/proc/%d/exe", (int)svc_conn_pid(c));
	ssize_t len = readlink(link, tmp.exe, sizeof(tmp.exe) - 1);
	tmp.exe[len > 0 ? len : 0] = '\0';
	struct reg *r = slot_for(tmp.app, tmp.type);
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
	struct app_pid *p = add_pid(svc_conn_pid(c), svc_conn_ident(c)->start, r->app, r->uid,
				    r->gid);
	if (p)
		watch_pid(p);
	if (r->type == PROF_TRIGGER_OOM)
		arm_heap(svc_conn_runtime_for(svc_conn_pid(c)), r);
	if (r->type == PROF_TRIGGER_CRASH)
		give_crash_fd(svc_conn_runtime_for(svc_conn_pid(c)), p);
	if (r->type == PROF_TRIGGER_PRESSURE_STALL)
		watch_psi(r);
	LOG_PEER(r->uid, LOG_INFO, "%s registered a %s trigger (capture %u, cooldown %u s)", r->app,
		 names_trigger_str(r->type), r->capture, r->period_s);
	return 0;
}

int svc_trigger_remove(struct svc_conn *c, int type)
{
	const char *app = svc_conn_app(c);
	for (size_t i = 0; i < regs_hi; i++) {
		struct reg *r = &regs[i];
		if (!r->used || strcmp(r->app, app) || (type >= 0 && r->type != (uint32_t)type))
			continue;
		if (r->type == PROF_TRIGGER_EXCESSIVE_CPU)
			for (size_t k = 0; k < npids; k++)
				if (!strcmp(pids[k].app, app))
					trg_cpu_unwatch(pids[k].pid);
		if (r->type == PROF_TRIGGER_PRESSURE_STALL)
			trg_psi_unwatch((int)(r - regs));
		memset(r, 0, sizeof(*r));
	}
	return svc_db_trigger_del(app, type);
}

void svc_trigger_signal(struct svc_conn *c, const Pd__AppSignal *sg)
{
	const char *app = svc_conn_app(c);
	pid_t pid = svc_conn_pid(c);
	struct reg *r;

	switch (sg->kind) {
	case 1: /* fully drawn: a cold start ends here */
		svc_session_stop(pid, PROF_TRIGGER_COLD_START);
		if ((r = find_reg(app, PROF_TRIGGER_APP_FULLY_DRAWN)))
			fire(r, pid, names_trigger_str(r->type));
		break;
	case 2:
		if ((r = find_reg(app, PROF_TRIGGER_ANOMALY)))
			fire(r, pid, sg->name && *sg->name ? sg->name : names_trigger_str(r->type));
		break;
	case 3:
		/* Only a tracked process beats: its entry goes when it does, and
		 * the per-uid cap bounds how many one uid has. */
		if ((r = find_reg(app, PROF_TRIGGER_HANG)) && find_pid(pid) &&
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
	struct app_pid *p = add_pid(svc_conn_pid(c), svc_conn_ident(c)->start, svc_conn_app(c),
				    svc_conn_uid(c), svc_conn_gid(c));
	if (!p)
		return;
	p->clients++;
	watch_pid(p);
}

void svc_trigger_client_down(struct svc_conn *c)
{
	struct app_pid *p = find_pid(svc_conn_pid(c));
	if (p && --p->clients <= 0) {
		/* Still the app's if it runs (an exec'd process stays watched); one
		 * with a crash dump waits for its exit event, which may come later. */
		trg_hang_forget(p->pid);
		if (p->crash_fd < 0 && kill(p->pid, 0) < 0)
			drop_pid(p->pid);
	}
}

void svc_trigger_runtime_event(struct svc_conn *rt, const Pd__RuntimeEvent *ev)
{
	pid_t pid = svc_conn_pid(rt);
	int e = PROF_E_INVALID_REQUEST;
	if (ev->kind == 1) {
		bool jvm = svc_jvm_detect(pid);
		if (jvm)
			LOG_PEER(svc_conn_uid(rt), LOG_NOTICE, "JVM pid %d ran out of Java heap",
				 (int)pid);
		else
			LOG_PEER(svc_conn_uid(rt), LOG_NOTICE,
				 "pid %d reports an allocation failure of %llu bytes", (int)pid,
				 (unsigned long long)ev->value);
		/* A runtime-reported OOM fires the same trigger as the kernel's signs;
		 * a JVM's is a heap dump (its graph) unless the trigger asked otherwise. */
		struct app_pid *p = find_pid(pid);
		struct reg *r = p ? find_reg(p->app, PROF_TRIGGER_OOM) : NULL;
		if (!r && p && p->sys_reg >= 0 && regs[p->sys_reg].used &&
		    regs[p->sys_reg].type == PROF_TRIGGER_OOM)
			r = &regs[p->sys_reg];
		if (r)
			e = fire_as(r, pid, jvm ? "oom-java" : "oom-malloc",
				    jvm && r->capture == PROF_HEAP_PROFILE ? PROF_HEAP_DUMP : 0);
		else
			LOG_PEER(svc_conn_uid(rt), LOG_INFO, "pid %d has no OOM trigger: nothing captured",
				 (int)pid);
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
	struct reg *r = t ? slot_for(app, type) : NULL;
	if (r && fill_reg(r, t, why, sizeof(why)) == 0) {
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
	regs = calloc(SVC_MAX_TRIGGERS, sizeof(*regs));
	pids = calloc(SVC_MAX_APP_PIDS, sizeof(*pids));
	if (!regs || !pids)
		return -ENOMEM;
	if ((r = trg_proc_init(base, &trg_ops)) < 0 || (r = trg_cpu_init(base, &trg_ops)) < 0 ||
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
		prm.has_duration_ms = st->duration_ms != 0;
		prm.duration_ms = st->duration_ms;
		t.params = &prm;
		struct reg *sr = slot_for("", 0);
		if (!sr || fill_reg(sr, &t, why, sizeof(why)) != 0) {
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
	trg_proc_fini();
	trg_cpu_fini();
	trg_hang_fini();
	trg_mem_fini();
	trg_psi_fini();
	for (size_t i = 0; i < npids; i++)
		drop_crash(&pids[i]);
	free(regs);
	regs_hi = 0;
	free(pids);
	regs = NULL;
	pids = NULL;
	npids = 0;
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
	for (size_t i = 0; regs && i < regs_hi; i++) {
		const struct reg *r = &regs[i];
		struct svc_trigger_info ti = { 0 };
		if (!r->used)
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
