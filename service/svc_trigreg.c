/*
 * The trigger registrations and the processes they watch: the two tables
 * behind svc_trigger (svc_trigreg.h has the contract). Kept apart from the
 * glue (svc_trigger.c) so that the tables, their caps and what a process
 * is given (heap arming, crash rings) read on their own.
 */
#include "svc_conn.h"
#include "svc_store.h"
#include "svc_trigger.h"
#include "svc_trigreg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "trace_fmt.h"
#include "svc_ident.h"
#include "trg.h"
#include "util.h"

static const struct svc_config *cfg;
static struct svc_reg *regs;
/* Slots are taken lowest first and scans stop here: the table is calloc'd
 * (about 5 KiB a slot) and a scan of all of it would fault in every page. */
static size_t regs_hi;
static struct svc_app_pid *pids;
/* pid_keys[i] == pids[i].pid: every exit on the machine is looked up here,
 * and a scan of 4 bytes an entry stays in a few cache lines where one of
 * the entries (over 300 bytes each) would touch a line per process. */
static pid_t *pid_keys;
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

size_t svc_trigreg_hi(void)
{
	return regs_hi;
}

struct svc_reg *svc_trigreg_at(size_t i)
{
	return i < regs_hi && regs[i].used ? &regs[i] : NULL;
}

int svc_trigreg_index(const struct svc_reg *r)
{
	return (int)(r - regs);
}

size_t svc_trigreg_npids(void)
{
	return npids;
}

struct svc_app_pid *svc_trigreg_pid_at(size_t i)
{
	return i < npids ? &pids[i] : NULL;
}

struct svc_reg *svc_trigreg_find(const char *app, uint32_t type)
{
	for (size_t i = 0; i < regs_hi; i++)
		if (regs[i].used && regs[i].type == type && !strcmp(regs[i].app, app))
			return &regs[i];
	return NULL;
}

struct svc_app_pid *svc_trigreg_pid(pid_t pid)
{
	for (size_t i = 0; i < npids; i++)
		if (pid_keys[i] == pid)
			return &pids[i];
	return NULL;
}

/* The registration of type for a process: its app's, else its system trigger. */
struct svc_reg *svc_trigreg_for(const struct svc_app_pid *p, uint32_t type)
{
	struct svc_reg *r = svc_trigreg_find(p->app, type);
	if (!r && p->sys_reg >= 0 && regs[p->sys_reg].used && regs[p->sys_reg].type == type)
		r = &regs[p->sys_reg];
	return r;
}

/* start 0: read it now. An entry left by an earlier process with this pid
 * (a missed exit) is replaced. */
struct svc_app_pid *svc_trigreg_add_pid(pid_t pid, uint64_t start, const char *app, uid_t uid,
					gid_t gid)
{
	if (!start && util_proc_start_time((int)pid, &start) < 0)
		return NULL;
	struct svc_app_pid *p = svc_trigreg_pid(pid);
	if (p && p->start == start)
		return p;
	if (p)
		svc_trigreg_drop_pid(pid);
	uint32_t mine = 0;
	for (size_t i = 0; i < npids; i++)
		if (pids[i].uid == uid)
			mine++;
	/* At a cap: first forget processes gone without their exit seen (a
	 * lost event, or one that ended as it was tracked, before the
	 * connector's filter named it), so they cannot hold the slots. */
	if (mine >= cfg->max_pids_per_uid || npids == SVC_MAX_APP_PIDS) {
		uint64_t st;
		for (size_t i = npids; i-- > 0;)
			if ((npids == SVC_MAX_APP_PIDS || pids[i].uid == uid) &&
			    (util_proc_start_time((int)pid_keys[i], &st) < 0 || st != pids[i].start)) {
				if (pids[i].uid == uid)
					mine--;
				svc_trigreg_drop_pid(pid_keys[i]);
			}
	}
	if (mine >= cfg->max_pids_per_uid || npids == SVC_MAX_APP_PIDS) {
		LOG_PEER(uid, LOG_WARNING, "uid %u: pid %d not tracked: %u processes of this uid "
			 "tracked already (max_pids_per_uid %u, %zu of %d in all)", (unsigned)uid,
			 (int)pid, mine, cfg->max_pids_per_uid, npids, SVC_MAX_APP_PIDS);
		return NULL;
	}
	pid_keys[npids] = pid;
	p = &pids[npids++];
	memset(p, 0, sizeof(*p));
	p->sys_reg = -1;
	p->crash_fd = -1;
	p->pid = pid;
	p->start = start;
	p->uid = uid;
	p->gid = gid;
	util_strlcpy(p->app, app, sizeof(p->app));
	trg_proc_exits(pid_keys, npids);
	return p;
}

static void drop_crash(struct svc_app_pid *p)
{
	if (!p || p->crash_fd < 0)
		return;
	close(p->crash_fd);
	p->crash_fd = -1;
	ncrash--;
}

void svc_trigreg_drop_pid(pid_t pid)
{
	drop_crash(svc_trigreg_pid(pid));
	trg_cpu_unwatch(pid);
	trg_mem_unwatch(pid);
	trg_hang_forget(pid);
	for (size_t i = 0; i < npids; i++)
		if (pid_keys[i] == pid) {
			pids[i] = pids[--npids];
			pid_keys[i] = pid_keys[npids];
			trg_proc_exits(pid_keys, npids);
			return;
		}
}

/* Start watching pid for the app's registrations that watch processes. */
void svc_trigreg_watch(const struct svc_app_pid *p)
{
	struct svc_reg *r = svc_trigreg_for(p, PROF_TRIGGER_EXCESSIVE_CPU);
	if (r && trg_cpu_watch(p->pid, p->uid, r->cpu_percent, r->cpu_window_ms) == -ENOSPC)
		LOG_PEER(p->uid, LOG_WARNING, "cannot watch the CPU of pid %d: %d processes watched "
			 "already", (int)p->pid, TRG_MAX_PIDS);
	r = svc_trigreg_for(p, PROF_TRIGGER_OOM);
	if (r && trg_mem_watch(p->pid, r->memory_percent, r->memory_bytes) == -ENOSPC)
		LOG_PEER(p->uid, LOG_WARNING, "cannot watch the memory of pid %d: %d processes watched already",
			 (int)p->pid, TRG_MAX_PIDS);
}

/* An OOM trigger wants the heap sampled from now on, not from its warning. */
void svc_trigreg_arm_heap(struct svc_conn *rt, const struct svc_reg *r)
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
void svc_trigreg_give_crash(struct svc_conn *rt, struct svc_app_pid *p)
{
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__CrashFd cf = PD__CRASH_FD__INIT;
	if (!rt || !p || !svc_trigreg_find(p->app, PROF_TRIGGER_CRASH) ||
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
 * in raw/, for svc_request_adopt. Returns the bytes copied (0: it wrote
 * nothing) or -errno; path gets the file's name.
 */
ssize_t svc_trigreg_save_crash(const struct svc_app_pid *p, char *path, size_t n)
{
	static char buf[1 << 16];
	off_t len = lseek(p->crash_fd, 0, SEEK_CUR);
	off_t off = 0;
	int r = 0;

	if (len <= 0)
		return len < 0 ? -errno : 0;
	if ((uint64_t)len > TFMT_DUMP_MAX_BYTES)
		len = (off_t)TFMT_DUMP_MAX_BYTES;
	if (util_fmt(path, n, "%s/crash-%d.ring", svc_store_raw_dir(), (int)p->pid) < 0)
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

static uint32_t or_default(bool has, uint32_t v, uint32_t def)
{
	return has && v ? v : def;
}

/* Validate t and fill r. 0 or a positive PROF_E_* with why. */
int svc_trigreg_fill(struct svc_reg *r, const Pd__Trigger *t, char *why, size_t n)
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
		r->params.has_buffer_fill_policy = t->params->has_buffer_fill_policy;
		r->params.buffer_fill_policy = t->params->buffer_fill_policy;
		r->params.has_track_java_allocations = t->params->has_track_java_allocations;
		r->params.track_java_allocations = t->params->track_java_allocations;
		r->params.has_background_ms = t->params->has_background_ms;
		r->params.background_ms = t->params->background_ms;
		r->params.has_format = t->params->has_format;
		r->params.format = t->params->format;
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

struct svc_reg *svc_trigreg_slot(const char *app, uint32_t type)
{
	struct svc_reg *r = svc_trigreg_find(app, type);
	for (size_t i = 0; !r && i < SVC_MAX_TRIGGERS; i++)
		if (!regs[i].used) {
			r = &regs[i];
			if (i + 1 > regs_hi)
				regs_hi = i + 1;
		}
	return r;
}

int svc_trigreg_init(const struct svc_config *c)
{
	cfg = c;
	regs = calloc(SVC_MAX_TRIGGERS, sizeof(*regs));
	pids = calloc(SVC_MAX_APP_PIDS, sizeof(*pids));
	pid_keys = calloc(SVC_MAX_APP_PIDS, sizeof(*pid_keys));
	return regs && pids && pid_keys ? 0 : -ENOMEM;
}

void svc_trigreg_fini(void)
{
	for (size_t i = 0; i < npids; i++)
		drop_crash(&pids[i]);
	free(regs);
	regs_hi = 0;
	free(pids);
	free(pid_keys);
	regs = NULL;
	pids = NULL;
	pid_keys = NULL;
	npids = 0;
}
