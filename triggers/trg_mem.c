/*
 * OOM warning signs, before the kill, and the kill itself.
 *
 * cgroup v1, a memory group with a limit: an eventfd threshold on
 * memory.usage_in_bytes at the configured share of memory.limit_in_bytes,
 * and an eventfd on memory.oom_control whose oom_kill count tells an
 * actual kill (both through cgroup.event_control, so nothing polls).
 *
 * cgroup v2, the process's cgroup from the "0::/path" line of
 * /proc/<pid>/cgroup: the line is the smallest memory.max over the cgroup
 * and its ancestors, else the smallest memory.high (the softer line, where
 * the kernel throttles and reclaims but does not kill); the warning is at
 * the configured share of it. Usage is memory.current. What wakes us:
 *  - inotify IN_MODIFY on memory.events.local of the cgroup and of the
 *    ancestors holding the lines (the kernel counts high, max and oom there
 *    before a kill, oom_kill after it);
 *  - a PSI trigger on <cgroup>/memory.pressure: tasks of the cgroup stalled
 *    on reclaim, which is what precedes the OOM killer;
 *  - a memory.current read on a per-cgroup timer whose interval shortens as
 *    usage nears the warning line (500 ms far from it, 5 ms within 5 %, and
 *    at most half the time the last growth would take to reach it):
 *    below a line the kernel counts nothing in memory.events, so this read
 *    is what sees a crossing at less than 100 %.
 * A rising max or oom count, or a stall, warns at once whatever usage says.
 * Kills: oom_kill of the cgroup's memory.events.local (the kernel counts it
 * on the victim's own cgroup, for cgroup and global OOM kills alike);
 * oom_group_kill of the line's holder names a memory.oom.group kill. The
 * count moves for any process of the cgroup: a rise while the watched
 * process still runs, with no SIGKILL pending and not exiting,
 * KILL_RECHECK_MS later was another's kill.
 *
 * systemd-oomd kills with SIGKILL and marks the cgroup with user.oomd_ooms
 * and user.oomd_kill xattrs: a process gone when its watch ends, from a
 * cgroup whose marks rose meanwhile, was its kill.
 *
 * A process no cgroup count covers (the root cgroup, no memory controller):
 * the kernel log's "Killed process PID" line (/dev/kmsg) since the watch
 * began, looked up when the watch ends (the process exited).
 *
 * Anywhere else (no limit, no memory controller): RSS from
 * /proc/<pid>/statm against the threshold on a 250 ms timer.
 *
 * Caps: TRG_MAX_PIDS watched processes (past it -ENOSPC); KMSG_KILLS kills
 * from the kernel log kept for 60 s (the oldest overwritten); per uid
 * MEM_MAX_CG_UID v2 cgroups, MEM_MAX_PSI_UID with PSI (as below); MEM_MAX_CG v2
 * cgroups (one fd each, plus two for the first MEM_MAX_PSI of them with a
 * PSI trigger): past them a process is watched by RSS, or without PSI, and
 * the log says so.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define V1_ROOT "/sys/fs/cgroup/memory"
#define POLL_MS 250
/*
 * MemAvailable alone (no watched process): the next /proc/meminfo read is
 * when the headroom above the line could be gone at AVAIL_RATE_KB_MS
 * (8 GiB/s, faster than one machine's page faults usually go), between
 * POLL_MS and AVAIL_MAX_MS. Up to that rate a crossing is seen within
 * POLL_MS as before; an idle machine far from the line is read once a
 * second instead of four times (the read renders all of meminfo).
 */
#define AVAIL_RATE_KB_MS 8389
#define AVAIL_MAX_MS 1000
#define MEM_MAX_CG 128
#define MEM_MAX_PSI 32
#define MEM_MAX_CG_UID 32         /* v2 cgroups one uid's processes may take */
#define MEM_MAX_PSI_UID 8         /* of them with a PSI trigger */
#define MEM_MAX_DEPTH 64
#define KILL_RECHECK_MS 200
#define PSI_QUIET_MS 10000        /* a stall (or limit hit) episode ends after this */
#define EVENTS_MIN_MS 5           /* memory.events looks per cgroup, at most one per */
#define KILL_RECHECKS 50          /* 10 s for a victim to die */
/* A stall of 100 ms within 1 s: a tenth of the time waiting on reclaim. */
#define PSI_STALL_US 100000
#define PSI_WINDOW_US 1000000

/* The counters of memory.events(.local) we act on. */
struct evc {
	uint64_t high, max, oom, oom_kill, oom_group_kill;
};

/* A v2 cgroup watched for one or more processes. */
struct mcg {
	int refs;                 /* watches using it; 0: a free slot */
	char dir[512];            /* the processes' cgroup */
	char max_dir[512];        /* the cgroup whose memory.max is the line, or "" */
	char high_dir[512];       /* the cgroup whose memory.high is the softer line, or "" */
	uint64_t max, high;       /* the effective lines, 0 for none */
	int cur_fd;               /* memory.current, kept open and pread */
	int wd[3];                /* inotify on dir, max_dir, high_dir; -1 none */
	int psi_fd, psi_ep;
	struct event *psi_ev, *tick;
	struct evc last;          /* high/max/oom of the holders, oom_kill of dir */
	bool stalled;             /* a PSI wake-up not yet handed to the watches */
	bool group_killed;        /* the last kill seen was a memory.oom.group one */
	uint64_t last_usage, last_ms; /* the last read, for the growth rate */
	uint64_t oomd;            /* systemd-oomd's kill marks when watching began */
	uint64_t checked_ms;      /* the last cg_check */
	uint64_t sign_ms;         /* the last stall or limit hit (0: none yet) */
	unsigned uid;             /* of the process that made the slot (per-uid caps) */
};

struct mwatch {
	pid_t pid;
	uint64_t threshold;       /* bytes */
	unsigned percent;         /* the rule it was set up with */
	uint64_t bytes;
	bool warned;              /* fired, until usage drops again */
	/* cgroup v1 */
	int thr_efd, oom_efd;
	struct event *thr_ev, *oom_ev;
	uint64_t oom_kills;
	char dir[512];
	/* cgroup v2 */
	int cg;                   /* index in cgs, or -1 */
	uint64_t kills;           /* the cgroup's oom_kill count this watch accounted for */
	struct event *recheck;
	unsigned rechecks;        /* looks at a dying process so far */
	uint64_t start_ms;        /* when the watch began (kernel log kills after it) */
	bool killed;              /* its kill was reported */
};

static const struct trg_ops *ops;
static struct event_base *base;
static struct mwatch *w;
static size_t nw;
static struct event *timer;      /* poll_rss, one-shot: armed by poll_arm */
static uint64_t timer_due_ms;    /* when it fires (util_mono_ms), if pending */
static uint64_t gl_next_ms = POLL_MS; /* check_available's next interval */
static void poll_arm(void);
static char status[576];
static long page;
static unsigned features;
static char v2root[64];
static bool v2_local;          /* memory.events.local exists (5.2+) */
static struct mcg cgs[MEM_MAX_CG];
static int ino_fd = -1;
static struct event *ino_ev;
static int npsi;
/* the whole machine (trg_mem_global) */
static unsigned gl_avail_pct;
static bool gl_low;            /* MemAvailable under its share: warned this episode */
static uint64_t gl_psi_ms;     /* the last system-wide stall */
static int gl_psi_fd = -1, gl_psi_ep = -1;
static int gl_meminfo = -1; /* /proc/meminfo, kept open for pread */
static struct event *gl_psi_ev;
/* The kernel log's OOM kills, for processes no cgroup count covers (the
 * root cgroup, no memory controller). A ring: the oldest is overwritten. */
#define KMSG_KILLS 64
static int kmsg_fd = -1;
static struct event *kmsg_ev;
static struct {
	pid_t pid;
	bool memcg;               /* "Memory cgroup out of memory" */
	uint64_t ms;
} kk[KMSG_KILLS];
static unsigned kk_next;

static int read_u64(const char *path, uint64_t *v)
{
	char buf[64];
	ssize_t n = util_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	*v = strtoull(buf, NULL, 10);
	return 0;
}

static uint64_t oom_kill_count(const char *dir)
{
	char path[600], buf[256];
	snprintf(path, sizeof(path), "%s/memory.oom_control", dir);
	if (util_read_file(path, buf, sizeof(buf)) < 0)
		return 0;
	char *p = strstr(buf, "oom_kill ");
	return p ? strtoull(p + 9, NULL, 10) : 0;
}

/* The v1 memory cgroup directory of pid, "" when it is the root group. */
static int v1_dir(pid_t pid, char *out, size_t n)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	ssize_t len = util_read_file(path, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		if (strcmp(c1 + 1, "memory"))
			continue;
		if (!strcmp(c2 + 1, "/"))
			return -ENOENT;
		return util_fmt(out, n, "%s%s", V1_ROOT, c2 + 1);
	}
	return -ENOENT;
}

/* "<eventfd> <fd of file> [args]" into cgroup.event_control. */
static int v1_event(const char *dir, const char *file, const char *args)
{
	char path[600], line[128];
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (efd < 0)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int tfd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "%s/cgroup.event_control", dir);
	int cfd = open(path, O_WRONLY | O_CLOEXEC);
	int r = 0;
	if (tfd < 0 || cfd < 0)
		r = -errno;
	else {
		int len = snprintf(line, sizeof(line), "%d %d%s%s", efd, tfd, args ? " " : "",
				   args ? args : "");
		if (write(cfd, line, (size_t)len) != len)
			r = -errno;
	}
	if (tfd >= 0)
		close(tfd);
	if (cfd >= 0)
		close(cfd);
	if (r < 0) {
		close(efd);
		return r;
	}
	return efd;
}

static struct mwatch *by_pid(pid_t pid)
{
	for (size_t i = 0; i < nw; i++)
		if (w[i].pid == pid)
			return &w[i];
	return NULL;
}

static void on_thr(evutil_socket_t fd, short what, void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;
	struct mwatch *x = by_pid(pid);
	char path[600];
	uint64_t n, usage = 0;
	if (read(fd, &n, sizeof(n)) != sizeof(n) || !x)
		return;
	/* The threshold signals crossings both ways: warn going up, once, and
	 * re-arm only after usage fell well below it. The usage read a moment
	 * after the kernel's signal can already be a page or two under the
	 * threshold (a page freed, reclaim near the limit: seen as 4 KiB under
	 * on a loaded machine, and the warning was lost), so 1 % of slack. */
	snprintf(path, sizeof(path), "%s/memory.usage_in_bytes", x->dir);
	if (read_u64(path, &usage) < 0)
		return;
	if (usage + x->threshold / 100 >= x->threshold && !x->warned) {
		x->warned = true;
		if (ops->mem_warn)
			ops->mem_warn(pid);
	} else if (usage < x->threshold / 10 * 9) {
		x->warned = false;
	}
}

static void on_oom(evutil_socket_t fd, short what, void *arg)
{
	pid_t pid = (pid_t)(intptr_t)arg;
	uint64_t n;
	struct mwatch *x = by_pid(pid);
	if (read(fd, &n, sizeof(n)) != sizeof(n) || !x)
		return;
	uint64_t kills = oom_kill_count(x->dir);
	if (kills > x->oom_kills && ops->mem_kill)
		ops->mem_kill(pid, "OOM-killed by the kernel's OOM killer (cgroup v1 memory limit)");
	x->oom_kills = kills;
}

/* ------------------------------------------------------------ cgroup v2 */

/* The counters named in a memory.events(.local) file; absent ones stay 0. */
static int events_read(const char *dir, bool local, struct evc *e)
{
	char path[600], buf[512];
	memset(e, 0, sizeof(*e));
	if (!dir[0])
		return 0;
	snprintf(path, sizeof(path), "%s/memory.events%s", dir, local && v2_local ? ".local" : "");
	ssize_t n = util_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "high ", offsetof(struct evc, high) },
		{ "max ", offsetof(struct evc, max) },
		{ "oom ", offsetof(struct evc, oom) },
		{ "oom_kill ", offsetof(struct evc, oom_kill) },
		{ "oom_group_kill ", offsetof(struct evc, oom_group_kill) },
	};
	for (char *line = buf; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			if (!strncmp(line, keys[k].key, strlen(keys[k].key)))
				*(uint64_t *)((char *)e + keys[k].off) =
					strtoull(line + strlen(keys[k].key), NULL, 10);
	return 0;
}

/*
 * The v2 cgroup directory of pid. The process may name its own cgroup
 * (delegation lets it create them, and a name may hold a newline), so a
 * file with other than exactly one "0::" line, or a path that is not plain,
 * is refused rather than guessed at.
 */
static int v2_dir(pid_t pid, char *out, size_t n)
{
	char path[64], buf[4096];
	const char *found = NULL;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	ssize_t len = util_read_file(path, buf, sizeof(buf));
	if (len < 0)
		return (int)len;
	if ((size_t)len == sizeof(buf) - 1)
		return -E2BIG;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "0::", 3))
			continue;
		if (found)
			return -EINVAL;
		found = line + 3;
	}
	if (!found || found[0] != '/' || strstr(found, "/..") || strstr(found, " (deleted)"))
		return -ENOENT;
	if (!strcmp(found, "/"))
		return -ENOENT; /* the root cgroup: no limit, no memory.events */
	return util_fmt(out, n, "%s%s", v2root, found);
}

/* "max" or a byte count; 0 for none. */
static uint64_t line_read(const char *dir, const char *file)
{
	char path[600], buf[64];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (util_read_file(path, buf, sizeof(buf)) < 0 || !strncmp(buf, "max", 3))
		return 0;
	return strtoull(buf, NULL, 10);
}

/* The smallest memory.max and memory.high from dir up to (not including) the root. */
static void lines_find(struct mcg *c)
{
	char p[512];
	size_t rootlen = strlen(v2root);
	util_strlcpy(p, c->dir, sizeof(p));
	c->max = c->high = 0;
	c->max_dir[0] = c->high_dir[0] = '\0';
	for (int depth = 0; depth < MEM_MAX_DEPTH && strlen(p) > rootlen; depth++) {
		uint64_t m = line_read(p, "memory.max"), h = line_read(p, "memory.high");
		if (m && (!c->max || m < c->max)) {
			c->max = m;
			util_strlcpy(c->max_dir, p, sizeof(c->max_dir));
		}
		if (h && (!c->high || h < c->high)) {
			c->high = h;
			util_strlcpy(c->high_dir, p, sizeof(c->high_dir));
		}
		char *slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
}

static uint64_t cg_line(const struct mcg *c)
{
	return c->max ? c->max : c->high;
}

static const char *cg_line_name(const struct mcg *c)
{
	return c->max ? "memory.max" : c->high ? "memory.high" : "no line";
}

/* A path under the v2 root, for logs and notes. */
static const char *rel(const char *dir)
{
	size_t l = strlen(v2root);
	return !strncmp(dir, v2root, l) && dir[l] ? dir + l : dir;
}

static bool pid_gone(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (util_read_file(path, buf, sizeof(buf)) < 0)
		return true;
	char *p = strrchr(buf, ')');
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/*
 * A SIGKILL pending (the OOM killer signals the whole thread group) or the
 * exit under way (PF_EXITING in the flags of /proc/<pid>/stat, field 9):
 * a big victim can take a second to die on a loaded machine.
 */
static bool pid_dying(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (util_read_file(path, buf, sizeof(buf)) < 0)
		return true;
	char *p = strrchr(buf, ')');
	unsigned long long flags = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %llu", &flags) != 1)
		return true;
	if (flags & 0x4) /* PF_EXITING */
		return true;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (util_read_file(path, buf, sizeof(buf)) < 0)
		return true;
	for (const char *k = buf; (k = strstr(k, "Pnd:")); k += 4) {
		unsigned long long mask = strtoull(k + 4, NULL, 16);
		if (mask & (1ull << (9 - 1))) /* SIGKILL */
			return true;
	}
	return false;
}

/*
 * systemd-oomd's marks from dir up to the root: it sets user.oomd_ooms (its
 * kills of that cgroup so far) and user.oomd_kill (processes it killed) on
 * a cgroup it kills. Their sum only grows, so a rise is a new kill.
 */
static uint64_t oomd_marks(const char *dir)
{
	static const char *const names[] = { "user.oomd_ooms", "user.oomd_kill" };
	char p[512], v[32];
	size_t rootlen = strlen(v2root);
	uint64_t sum = 0;
	util_strlcpy(p, dir, sizeof(p));
	for (int depth = 0; depth < MEM_MAX_DEPTH && strlen(p) > rootlen; depth++) {
		for (size_t k = 0; k < 2; k++) {
			ssize_t n = getxattr(p, names[k], v, sizeof(v) - 1);
			if (n > 0) {
				v[n] = '\0';
				sum += strtoull(v, NULL, 10);
			}
		}
		char *slash = strrchr(p, '/');
		if (!slash)
			break;
		*slash = '\0';
	}
	return sum;
}

static void kill_note(const struct mcg *c, bool group, char *out, size_t n)
{
	if (!cg_line(c))
		util_fmt(out, n, "OOM-killed by the kernel's global OOM killer (no cgroup limit; %s)",
			 rel(c->dir));
	else
		util_fmt(out, n, "OOM-killed by the kernel's cgroup OOM killer%s (%s %llu of %s)",
			 group ? ", with its cgroup (memory.oom.group)" : "", cg_line_name(c),
			 (unsigned long long)cg_line(c), rel(c->max ? c->max_dir : c->high_dir));
}

static void report_kill(struct mwatch *x, bool group)
{
	char how[160];
	kill_note(&cgs[x->cg], group, how, sizeof(how));
	x->killed = true;
	LOG_N("pid %d: %s", (int)x->pid, how);
	if (ops->mem_kill)
		ops->mem_kill(x->pid, how);
}

static void arm_tick(int i, uint64_t usage);

/* A kill counted while the watched process still ran: whose was it? */
static void on_recheck(evutil_socket_t fd, short what, void *arg)
{
	struct mwatch *x = by_pid((pid_t)(intptr_t)arg);
	if (!x || x->cg < 0)
		return;
	struct evc e;
	if (events_read(cgs[x->cg].dir, true, &e) < 0 || e.oom_kill <= x->kills)
		return;
	if (pid_gone(x->pid)) {
		report_kill(x, cgs[x->cg].group_killed);
	} else if (pid_dying(x->pid) && ++x->rechecks < KILL_RECHECKS) {
		/* Still dying: its exit event or the next look reports it. */
		struct timeval tv = { 0, KILL_RECHECK_MS * 1000 };
		evtimer_add(x->recheck, &tv);
		return;
	} else {
		LOG_D("pid %d lives on after an OOM kill in %s: another process's",
		      (int)x->pid, rel(cgs[x->cg].dir));
	}
	x->rechecks = 0;
	x->kills = e.oom_kill;
}

/* Read what the kernel counted and used, then act for every watch of cgroup i. */
static void cg_check(int i, const char *why)
{
	struct mcg *c = &cgs[i];
	struct evc own, mx, hi;
	char buf[32];
	uint64_t usage = 0;
	c->checked_ms = util_mono_ms();
	ssize_t n = pread(c->cur_fd, buf, sizeof(buf) - 1, 0);
	if (n > 0) {
		buf[n] = '\0';
		usage = strtoull(buf, NULL, 10);
	}
	if (events_read(c->dir, true, &own) < 0)
		memset(&own, 0, sizeof(own));
	/* Most often the process's own cgroup holds the line: its file was
	 * just read, and each read is an open, read and close per check. */
	if (!strcmp(c->max_dir, c->dir))
		mx = own;
	else
		events_read(c->max_dir, true, &mx);
	if (!strcmp(c->high_dir, c->dir))
		hi = own;
	else if (!strcmp(c->high_dir, c->max_dir))
		hi = mx;
	else
		events_read(c->high_dir, true, &hi);
	/* The group kill is counted on the memory.oom.group cgroup, which may be
	 * an ancestor: the holder's hierarchical file sees it. */
	struct evc grp;
	events_read(c->max_dir[0] ? c->max_dir : c->dir, false, &grp);
	bool at_max = mx.max > c->last.max || mx.oom > c->last.oom;
	bool over_high = hi.high > c->last.high;
	bool group = grp.oom_group_kill > c->last.oom_group_kill;
	if (own.oom_kill > c->last.oom_kill)
		c->group_killed = group;
	bool stalled = c->stalled;
	c->stalled = false;
	if (stalled || at_max)
		c->sign_ms = c->checked_ms;
	/* A stall or a limit hit warns whatever usage says, and its episode
	 * lasts until PSI_QUIET_MS without one: usage under the line must not
	 * re-arm the warning at each PSI window (a capture a second). */
	bool quiet = !c->sign_ms || c->checked_ms - c->sign_ms > PSI_QUIET_MS;
	c->last.max = mx.max;
	c->last.oom = mx.oom;
	c->last.high = hi.high;
	c->last.oom_group_kill = grp.oom_group_kill;
	c->last.oom_kill = own.oom_kill;
	for (size_t k = 0; k < nw; k++) {
		struct mwatch *x = &w[k];
		if (x->cg != i)
			continue;
		if (own.oom_kill > x->kills) {
			if (pid_gone(x->pid)) {
				report_kill(x, group);
				x->kills = own.oom_kill;
			} else if (!x->recheck) {
				x->rechecks = 0;
				struct timeval tv = { 0, KILL_RECHECK_MS * 1000 };
				x->recheck = evtimer_new(base, on_recheck, (void *)(intptr_t)x->pid);
				if (x->recheck)
					evtimer_add(x->recheck, &tv);
			} else if (!evtimer_pending(x->recheck, NULL)) {
				struct timeval tv = { 0, KILL_RECHECK_MS * 1000 };
				x->rechecks = 0;
				evtimer_add(x->recheck, &tv);
			}
		}
		if (!cg_line(c))
			continue; /* RSS decides (poll_rss); this cgroup only counts kills */
		bool hit = usage >= x->threshold;
		if (!x->warned && (hit || at_max || stalled)) {
			x->warned = true;
			LOG_I("pid %d: OOM warning from %s: %s (usage %llu, warning at %llu, %s %llu of %s)",
			      (int)x->pid, why,
			      hit ? "usage over the warning line" : at_max ? "the cgroup hit its limit" :
			      "memory stalls in the cgroup",
			      (unsigned long long)usage, (unsigned long long)x->threshold,
			      cg_line_name(c), (unsigned long long)cg_line(c),
			      rel(c->max ? c->max_dir : c->high_dir));
			if (ops->mem_warn)
				ops->mem_warn(x->pid);
		} else if (usage < x->threshold / 10 * 9 && quiet) {
			x->warned = false;
		}
	}
	if (over_high)
		LOG_D("%s: over memory.high (%s)", rel(c->dir), why);
	arm_tick(i, usage);
}

/*
 * The next memory.current read: sooner the nearer usage is to a watch's
 * line, and never later than half the time the growth since the last read
 * would take to reach it (a fast leak crosses 50 % to 100 % within one
 * 500 ms interval).
 */
static void arm_tick(int i, uint64_t usage)
{
	struct mcg *c = &cgs[i];
	unsigned ms = 1000;
	if (!c->tick || !cg_line(c))
		return;
	uint64_t now = util_mono_ms();
	uint64_t grew = usage > c->last_usage ? usage - c->last_usage : 0;
	uint64_t dt = now > c->last_ms ? now - c->last_ms : 1;
	for (size_t k = 0; k < nw; k++) {
		const struct mwatch *x = &w[k];
		if (x->cg != i || x->warned || !x->threshold)
			continue;
		uint64_t pct = usage >= x->threshold ? 100 : usage * 100 / x->threshold;
		unsigned m = pct < 50 ? 500 : pct < 80 ? 100 : pct < 95 ? 20 : 5;
		if (grew && usage < x->threshold) {
			uint64_t eta = (x->threshold - usage) / grew * dt / 2;
			if (eta < m)
				m = eta < 5 ? 5 : (unsigned)eta;
		}
		if (m < ms)
			ms = m;
	}
	c->last_usage = usage;
	c->last_ms = now;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(c->tick, &tv);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	cg_check((int)(intptr_t)arg, "memory.current");
}

static void on_cg_psi(evutil_socket_t fd, short what, void *arg)
{
	int i = (int)(intptr_t)arg;
	struct epoll_event e;
	/* Drain the set; its readiness was the event (as in trg_psi.c). */
	epoll_wait(cgs[i].psi_ep, &e, 1, 0);
	cgs[i].stalled = true;
	cg_check(i, "memory.pressure");
}

static void on_inotify(evutil_socket_t fd, short what, void *arg)
{
	char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
	bool hit[MEM_MAX_CG] = { false };
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (char *p = buf; p < buf + n;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			p += sizeof(*ev) + ev->len;
			for (int i = 0; i < MEM_MAX_CG; i++)
				for (int k = 0; cgs[i].refs && k < 3; k++)
					if (cgs[i].wd[k] == ev->wd) {
						hit[i] = true;
						/* The cgroup went away: its watch is gone too. */
						if (ev->mask & IN_IGNORED)
							cgs[i].wd[k] = -1;
					}
		}
	}
	uint64_t now = util_mono_ms();
	for (int i = 0; i < MEM_MAX_CG; i++) {
		if (!hit[i] || !cgs[i].refs)
			continue;
		/* A delegated app can make its cgroup's counters move all the
		 * time (over its own memory.high): one look per EVENTS_MIN_MS,
		 * the timer takes the rest. */
		if (now - cgs[i].checked_ms < EVENTS_MIN_MS && cgs[i].tick) {
			struct timeval tv = { 0, EVENTS_MIN_MS * 1000 };
			evtimer_add(cgs[i].tick, &tv);
			continue;
		}
		cg_check(i, "memory.events");
	}
}

static int add_wd(const char *dir)
{
	char path[600];
	if (ino_fd < 0 || !dir[0])
		return -1;
	snprintf(path, sizeof(path), "%s/memory.events%s", dir, v2_local ? ".local" : "");
	return inotify_add_watch(ino_fd, path, IN_MODIFY);
}

/* The kernel gives one wd per inode: remove it when no other cgroup uses it. */
static void drop_wd(int wd)
{
	if (wd < 0)
		return;
	for (int i = 0; i < MEM_MAX_CG; i++)
		for (int k = 0; cgs[i].refs && k < 3; k++)
			if (cgs[i].wd[k] == wd)
				return;
	inotify_rm_watch(ino_fd, wd);
}

static void cg_release(struct mcg *c)
{
	int wd[3] = { c->wd[0], c->wd[1], c->wd[2] };
	if (c->tick)
		event_free(c->tick);
	if (c->psi_ev) {
		event_free(c->psi_ev);
		npsi--;
	}
	if (c->psi_ep >= 0)
		close(c->psi_ep);
	if (c->psi_fd >= 0)
		close(c->psi_fd);
	if (c->cur_fd >= 0)
		close(c->cur_fd);
	memset(c, 0, sizeof(*c));
	c->cur_fd = c->psi_fd = c->psi_ep = -1;
	c->wd[0] = c->wd[1] = c->wd[2] = -1;
	for (int k = 0; k < 3; k++)
		drop_wd(wd[k]);
}

/* Slots (with_psi: with a PSI trigger) taken by uid's processes. */
static int uid_slots(unsigned uid, bool with_psi)
{
	int n = 0;
	for (int i = 0; i < MEM_MAX_CG; i++)
		if (cgs[i].refs && cgs[i].uid == uid && (!with_psi || cgs[i].psi_ev))
			n++;
	return n;
}

static int psi_arm(struct mcg *c, int i)
{
	char path[600], line[64];
	if (!(features & TRG_MEM_V2_PSI) || npsi >= MEM_MAX_PSI ||
	    uid_slots(c->uid, true) >= MEM_MAX_PSI_UID)
		return -ENOSPC;
	snprintf(path, sizeof(path), "%s/memory.pressure", c->dir);
	c->psi_fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (c->psi_fd < 0)
		return -errno;
	int len = snprintf(line, sizeof(line), "some %u %u", PSI_STALL_US, PSI_WINDOW_US);
	struct epoll_event e = { .events = EPOLLPRI };
	if (write(c->psi_fd, line, (size_t)len + 1) < 0 ||
	    (c->psi_ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    epoll_ctl(c->psi_ep, EPOLL_CTL_ADD, c->psi_fd, &e) < 0)
		return -errno;
	c->psi_ev = event_new(base, c->psi_ep, EV_READ | EV_PERSIST, on_cg_psi, (void *)(intptr_t)i);
	if (!c->psi_ev || event_add(c->psi_ev, NULL) < 0)
		return -ENOMEM;
	npsi++;
	return 0;
}

/*
 * The slot of dir's cgroup, shared with other processes in it; a new one is
 * set up, counted against uid (the process's): the table is shared by every
 * user, so one may not take it all (-EDQUOT past MEM_MAX_CG_UID).
 */
static int cg_get(const char *dir, unsigned uid)
{
	int free_slot = -1;
	char path[600];
	for (int i = 0; i < MEM_MAX_CG; i++) {
		if (cgs[i].refs && !strcmp(cgs[i].dir, dir)) {
			cgs[i].refs++;
			/* A limit may have changed since: look again. */
			lines_find(&cgs[i]);
			return i;
		}
		if (!cgs[i].refs && free_slot < 0)
			free_slot = i;
	}
	if (free_slot < 0)
		return -ENOSPC;
	if (uid_slots(uid, false) >= MEM_MAX_CG_UID)
		return -EDQUOT;
	struct mcg *c = &cgs[free_slot];
	/* Set up when taken, not at init: a slot never used is never touched,
	 * so the table (MEM_MAX_CG slots of 1.7 KiB) costs no RSS until a
	 * cgroup is watched. Free slots are only ever read for refs. */
	memset(c, 0, sizeof(*c));
	c->cur_fd = c->psi_fd = c->psi_ep = -1;
	c->wd[0] = c->wd[1] = c->wd[2] = -1;
	util_strlcpy(c->dir, dir, sizeof(c->dir));
	c->uid = uid;
	snprintf(path, sizeof(path), "%s/memory.current", dir);
	c->cur_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (c->cur_fd < 0) {
		int r = -errno;
		cg_release(c);
		return r; /* no memory controller enabled for this cgroup */
	}
	c->refs = 1;
	lines_find(c);
	c->wd[0] = add_wd(c->dir);
	if (strcmp(c->max_dir, c->dir))
		c->wd[1] = add_wd(c->max_dir);
	if (strcmp(c->high_dir, c->dir) && strcmp(c->high_dir, c->max_dir))
		c->wd[2] = add_wd(c->high_dir);
	int e = psi_arm(c, free_slot);
	if (e < 0 && e != -ENOSPC)
		LOG_N("%s: no PSI trigger on memory.pressure: %s", rel(dir), strerror(-e));
	if (e < 0 && c->psi_ep >= 0) {
		close(c->psi_ep);
		c->psi_ep = -1;
	}
	if (e < 0 && c->psi_fd >= 0) {
		close(c->psi_fd);
		c->psi_fd = -1;
	}
	c->tick = evtimer_new(base, on_tick, (void *)(intptr_t)free_slot);
	/* Counters as they stand: only what moves from now on is news. */
	struct evc own, mx, hi, grp;
	events_read(c->dir, true, &own);
	events_read(c->max_dir, true, &mx);
	events_read(c->high_dir, true, &hi);
	events_read(c->max_dir[0] ? c->max_dir : c->dir, false, &grp);
	c->last.oom_kill = own.oom_kill;
	c->last.max = mx.max;
	c->last.oom = mx.oom;
	c->last.high = hi.high;
	c->last.oom_group_kill = grp.oom_group_kill;
	c->oomd = oomd_marks(c->dir);
	LOG_D("%s: watched (%s %llu in %s; inotify %s; PSI %s)", rel(dir), cg_line_name(c),
	      (unsigned long long)cg_line(c), rel(c->max ? c->max_dir : c->high_dir),
	      c->wd[0] >= 0 ? "yes" : "no", c->psi_ev ? "yes" : "no");
	return free_slot;
}

static void cg_put(int i)
{
	if (i >= 0 && i < MEM_MAX_CG && cgs[i].refs && --cgs[i].refs == 0)
		cg_release(&cgs[i]);
}

/* ------------------------------------------------------------ the watches */

static void release(struct mwatch *x)
{
	if (x->thr_ev)
		event_free(x->thr_ev);
	if (x->oom_ev)
		event_free(x->oom_ev);
	if (x->thr_efd >= 0)
		close(x->thr_efd);
	if (x->oom_efd >= 0)
		close(x->oom_efd);
	if (x->recheck)
		event_free(x->recheck);
	x->recheck = NULL;
	cg_put(x->cg);
	x->cg = -1;
}

/* The machine is short of memory: warn the global OOM killer's first pick
 * among the watches not warned yet. */
static void warn_victim(const char *why)
{
	struct mwatch *best = NULL;
	long best_score = -1;
	for (size_t i = 0; i < nw; i++) {
		char path[64], buf[32];
		/* Warned already by its own line: a second capture now would
		 * replace the one the kill is to be linked to. */
		if (w[i].warned)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/oom_score", (int)w[i].pid);
		if (util_read_file(path, buf, sizeof(buf)) < 0)
			continue;
		long score = strtol(buf, NULL, 10);
		if (score > best_score) {
			best_score = score;
			best = &w[i];
		}
	}
	if (!best)
		return;
	LOG_I("pid %d: OOM warning: %s (the highest oom_score watched: %ld)", (int)best->pid, why,
	      best_score);
	best->warned = true;
	if (ops->mem_warn)
		ops->mem_warn(best->pid);
}

static void check_available(void)
{
	char buf[2048];
	/* Up to four times a second: an open and close of /proc/meminfo (a
	 * path walk in procfs) cost more than the read; pread at 0 renders it
	 * anew. */
	if (gl_meminfo < 0 && (gl_meminfo = open("/proc/meminfo", O_RDONLY | O_CLOEXEC)) < 0)
		return;
	ssize_t n = pread(gl_meminfo, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *t = strstr(buf, "MemTotal:"), *a = strstr(buf, "MemAvailable:");
	if (!t || !a)
		return;
	uint64_t total = strtoull(t + 9, NULL, 10), avail = strtoull(a + 13, NULL, 10);
	uint64_t line = total * gl_avail_pct / 100;
	gl_next_ms = POLL_MS;
	if (!gl_low && avail > line) {
		uint64_t ms = (avail - line) / AVAIL_RATE_KB_MS;
		gl_next_ms = ms < POLL_MS ? POLL_MS : ms > AVAIL_MAX_MS ? AVAIL_MAX_MS : ms;
	}
	if (!gl_low && avail * 100 < total * gl_avail_pct) {
		char why[128];
		gl_low = true;
		util_fmt(why, sizeof(why), "MemAvailable %llu kB, under %u %% of MemTotal %llu kB",
			 (unsigned long long)avail, gl_avail_pct, (unsigned long long)total);
		warn_victim(why);
	} else if (gl_low && avail * 100 > total * gl_avail_pct * 3 / 2) {
		/* Well above again: the next shortage is a new episode. */
		gl_low = false;
	}
}

static void on_sys_psi(evutil_socket_t fd, short what, void *arg)
{
	struct epoll_event e;
	epoll_wait(gl_psi_ep, &e, 1, 0); /* drain: the wake-up was the event */
	/* The trigger fires every window while the stall lasts: one warning
	 * per episode, which ends after PSI_QUIET_MS without a stall. */
	uint64_t now = util_mono_ms();
	bool fresh = now - gl_psi_ms > PSI_QUIET_MS;
	gl_psi_ms = now;
	if (fresh)
		warn_victim("memory stalls system-wide (/proc/pressure/memory)");
}

static int sys_psi_arm(unsigned stall_percent)
{
	char line[64];
	gl_psi_fd = open("/proc/pressure/memory", O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (gl_psi_fd < 0)
		return -errno;
	int len = snprintf(line, sizeof(line), "some %u %u", stall_percent * 10000u, 1000000u);
	struct epoll_event e = { .events = EPOLLPRI };
	if (write(gl_psi_fd, line, (size_t)len + 1) < 0 ||
	    (gl_psi_ep = epoll_create1(EPOLL_CLOEXEC)) < 0 ||
	    epoll_ctl(gl_psi_ep, EPOLL_CTL_ADD, gl_psi_fd, &e) < 0)
		return -errno;
	gl_psi_ev = event_new(base, gl_psi_ep, EV_READ | EV_PERSIST, on_sys_psi, NULL);
	if (!gl_psi_ev || event_add(gl_psi_ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

int trg_mem_global(unsigned avail_percent, unsigned stall_percent)
{
	gl_avail_pct = avail_percent;
	if (avail_percent)
		features |= TRG_MEM_AVAIL;
	poll_arm();
	if (stall_percent) {
		int e = sys_psi_arm(stall_percent);
		if (e == 0)
			features |= TRG_MEM_SYS_PSI;
		else
			LOG_N("no system-wide memory stall trigger: %s", strerror(-e));
	}
	size_t l = strlen(status);
	char a[96] = "", p[64] = "";
	if (features & TRG_MEM_AVAIL)
		util_fmt(a, sizeof(a), " MemAvailable under %u %% (read every %d-%d ms by headroom);",
			 avail_percent, POLL_MS, AVAIL_MAX_MS);
	if (features & TRG_MEM_SYS_PSI)
		util_fmt(p, sizeof(p), " /proc/pressure/memory some %u %% of 1 s;", stall_percent);
	if (a[0] || p[0])
		util_fmt(status + l, sizeof(status) - l,
			 "; whole machine:%s%s warns the top oom_score", a, p);
	else
		util_fmt(status + l, sizeof(status) - l, "; whole machine: off");
	return 0;
}

/*
 * Records of /dev/kmsg: "prio,seq,usec,flags;message". Only the kernel's
 * own (facility 0: prio < 8) are believed: a root process may write the
 * log too. The OOM killer prints "Out of memory: Killed process PID
 * (comm) ..." or "Memory cgroup out of memory: Killed process PID ..."
 * right after its SIGKILL.
 */
static void kmsg_drain(void)
{
	char rec[1024];
	ssize_t n;
	if (kmsg_fd < 0)
		return;
	for (;;) {
		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue; /* records overwritten before we read them */
		if (n <= 0)
			return;
		rec[n] = '\0';
		char *msg = strchr(rec, ';');
		if (!msg || strtol(rec, NULL, 10) >= 8)
			continue;
		char *k = strstr(msg, "Killed process ");
		if (!k)
			continue;
		long pid = strtol(k + 15, NULL, 10);
		if (pid <= 0)
			continue;
		kk[kk_next].pid = (pid_t)pid;
		kk[kk_next].memcg = strstr(msg, "Memory cgroup out of memory") != NULL;
		kk[kk_next].ms = util_mono_ms();
		kk_next = (kk_next + 1) % KMSG_KILLS;
	}
}

static void on_kmsg(evutil_socket_t fd, short what, void *arg)
{
	kmsg_drain();
}

/* The note for pid's OOM kill in the kernel log since since_ms, else NULL. */
static const char *kmsg_kill(pid_t pid, uint64_t since_ms)
{
	kmsg_drain(); /* the exit can be handled before the log's read event */
	uint64_t now = util_mono_ms();
	for (unsigned i = 0; i < KMSG_KILLS; i++)
		if (kk[i].pid == pid && kk[i].ms >= since_ms && now - kk[i].ms < 60000) {
			kk[i].pid = 0;
			return kk[i].memcg ? "OOM-killed by the kernel's cgroup OOM killer (kernel log)" :
					     "OOM-killed by the kernel's global OOM killer (kernel log)";
		}
	return NULL;
}

/* RSS fallback for processes without a cgroup line, and MemAvailable. */
/*
 * (Re)arm poll_rss: every POLL_MS while a process is watched (one may be
 * watched by RSS, or become so when its cgroup's line goes), else at
 * gl_next_ms for MemAvailable, else not at all: an idle daemon with
 * nothing to read takes no wake-up. Only brings a later deadline forward.
 */
static void poll_arm(void)
{
	uint64_t ms = nw ? POLL_MS : gl_avail_pct ? gl_next_ms : 0, now = util_mono_ms();
	if (!ms || !timer)
		return;
	if (evtimer_pending(timer, NULL) && timer_due_ms <= now + ms)
		return;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000) };
	if (evtimer_add(timer, &tv) == 0)
		timer_due_ms = now + ms;
}

static void poll_rss(evutil_socket_t fd, short what, void *arg)
{
	if (gl_avail_pct)
		check_available();
	poll_arm();
	for (size_t i = 0; i < nw; i++) {
		struct mwatch *x = &w[i];
		char path[64], buf[128];
		if (x->thr_efd >= 0 || (x->cg >= 0 && cg_line(&cgs[x->cg])))
			continue;
		snprintf(path, sizeof(path), "/proc/%d/statm", (int)x->pid);
		if (util_read_file(path, buf, sizeof(buf)) < 0)
			continue;
		unsigned long long size, rss;
		if (sscanf(buf, "%llu %llu", &size, &rss) != 2)
			continue;
		uint64_t bytes = rss * (uint64_t)page;
		if (bytes >= x->threshold && !x->warned) {
			x->warned = true;
			if (ops->mem_warn)
				ops->mem_warn(x->pid);
		} else if (bytes < x->threshold * 9 / 10) {
			x->warned = false;
		}
	}
}

/* Does the file of a v2 root name the memory controller? */
static bool has_memory(const char *root)
{
	char path[128], ctl[256];
	snprintf(path, sizeof(path), "%s/cgroup.controllers", root);
	if (util_read_file(path, ctl, sizeof(ctl)) < 0)
		return false;
	for (char *save = NULL, *t = strtok_r(ctl, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
		if (!strcmp(t, "memory"))
			return true;
	return false;
}

int trg_mem_init(struct event_base *b, const struct trg_ops *o)
{
	base = b;
	ops = o;
	page = sysconf(_SC_PAGESIZE);
	features = 0;
	/* cgs[] starts zeroed (static) and cg_release zeroes a slot again:
	 * every slot is free (refs 0) here, set up by cg_get when taken. */
	w = calloc(TRG_MAX_PIDS, sizeof(*w));
	timer = evtimer_new(base, poll_rss, NULL);
	if (!w || !timer)
		return -ENOMEM;
	if (access(V1_ROOT "/cgroup.event_control", W_OK) == 0)
		features |= TRG_MEM_V1;
	v2root[0] = '\0';
	if (has_memory("/sys/fs/cgroup"))
		util_strlcpy(v2root, "/sys/fs/cgroup", sizeof(v2root));
	else if (has_memory("/sys/fs/cgroup/unified"))
		util_strlcpy(v2root, "/sys/fs/cgroup/unified", sizeof(v2root));
	if (v2root[0]) {
		char path[128];
		features |= TRG_MEM_V2 | TRG_MEM_V2_POLL;
		ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		if (ino_fd >= 0) {
			ino_ev = event_new(base, ino_fd, EV_READ | EV_PERSIST, on_inotify, NULL);
			if (ino_ev && event_add(ino_ev, NULL) == 0)
				features |= TRG_MEM_V2_EVENTS;
		} else {
			LOG_W("inotify: %s: cgroup v2 memory.events unwatched", strerror(errno));
		}
		/* The root's memory.pressure shows per-cgroup PSI is on. */
		snprintf(path, sizeof(path), "%s/memory.pressure", v2root);
		if (access(path, R_OK) == 0)
			features |= TRG_MEM_V2_PSI;
		/* memory.events.local came with 5.2, as did this feature word. */
		char feat[256];
		v2_local = util_read_file("/sys/kernel/cgroup/features", feat, sizeof(feat)) > 0 &&
			   strstr(feat, "memory_localevents") != NULL;
	}
	/* From the end: only kills from now on are news. */
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (kmsg_fd >= 0 && lseek(kmsg_fd, 0, SEEK_END) >= 0 &&
	    (kmsg_ev = event_new(base, kmsg_fd, EV_READ | EV_PERSIST, on_kmsg, NULL)) &&
	    event_add(kmsg_ev, NULL) == 0) {
		features |= TRG_MEM_KMSG;
	} else {
		LOG_N("/dev/kmsg: %s: OOM kills outside a memory cgroup are guessed from SIGKILL",
		      strerror(errno));
		if (kmsg_fd >= 0)
			close(kmsg_fd);
		kmsg_fd = -1;
	}
	char v2[320];
	if (features & TRG_MEM_V2)
		util_fmt(v2, sizeof(v2),
			 "cgroup v2 (%s): memory.max/memory.high lines; %s; %s; memory.current "
			 "read every 5-500 ms by distance to the line; kills from %s and "
			 "systemd-oomd's xattrs",
			 v2root, features & TRG_MEM_V2_EVENTS ? "memory.events by inotify" :
			 "no inotify on memory.events",
			 features & TRG_MEM_V2_PSI ? "per-cgroup PSI triggers" : "no per-cgroup PSI",
			 v2_local ? "memory.events.local" : "memory.events");
	else
		util_fmt(v2, sizeof(v2), "cgroup v2: no memory controller");
	util_fmt(status, sizeof(status),
		 "cgroup v1 memory thresholds and oom_control: %s; %s; elsewhere RSS every %d ms; "
		 "kills outside a memory cgroup from %s",
		 features & TRG_MEM_V1 ? "yes" : "no (no v1 memory controller)", v2, POLL_MS,
		 features & TRG_MEM_KMSG ? "/dev/kmsg" : "SIGKILL after a warning (no /dev/kmsg)");
	return 0;
}

void trg_mem_fini(void)
{
	for (size_t i = 0; i < nw; i++)
		release(&w[i]);
	for (int i = 0; i < MEM_MAX_CG; i++)
		if (cgs[i].refs)
			cg_release(&cgs[i]);
	if (timer)
		event_free(timer);
	timer = NULL;
	if (ino_ev)
		event_free(ino_ev);
	ino_ev = NULL;
	if (ino_fd >= 0)
		close(ino_fd);
	ino_fd = -1;
	if (gl_psi_ev)
		event_free(gl_psi_ev);
	gl_psi_ev = NULL;
	if (gl_psi_ep >= 0)
		close(gl_psi_ep);
	if (gl_psi_fd >= 0)
		close(gl_psi_fd);
	gl_psi_ep = gl_psi_fd = -1;
	if (gl_meminfo >= 0)
		close(gl_meminfo);
	gl_meminfo = -1;
	gl_avail_pct = 0;
	gl_next_ms = POLL_MS;
	timer_due_ms = 0;
	gl_low = false;
	gl_psi_ms = 0;
	if (kmsg_ev)
		event_free(kmsg_ev);
	kmsg_ev = NULL;
	if (kmsg_fd >= 0)
		close(kmsg_fd);
	kmsg_fd = -1;
	memset(kk, 0, sizeof(kk));
	free(w);
	w = NULL;
	nw = 0;
}

int trg_mem_watch(pid_t pid, unsigned percent, uint64_t bytes)
{
	struct mwatch *old = by_pid(pid);
	/* Watched already with the same rule: keep its eventfds and state
	 * (re-creating them could miss a crossing). */
	if (old && old->percent == percent && old->bytes == bytes)
		return 0;
	if (old)
		trg_mem_unwatch(pid);
	if (nw == TRG_MAX_PIDS)
		return -ENOSPC;
	struct mwatch *x = &w[nw];
	memset(x, 0, sizeof(*x));
	x->pid = pid;
	x->thr_efd = x->oom_efd = -1;
	x->cg = -1;
	x->percent = percent;
	x->bytes = bytes;
	x->start_ms = util_mono_ms();
	uint64_t limit = 0;
	char path[600], v2[512];
	if ((features & TRG_MEM_V1) && v1_dir(pid, x->dir, sizeof(x->dir)) == 0) {
		snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", x->dir);
		/* "No limit" reads as a huge number: treat it as none. */
		if (read_u64(path, &limit) < 0 || limit >= (1ull << 62))
			limit = 0;
	}
	if (!limit && (features & TRG_MEM_V2) && v2_dir(pid, v2, sizeof(v2)) == 0) {
		unsigned uid = 0, gid;
		int i = util_proc_ids((int)pid, &uid, &gid) < 0 ? -ESRCH : cg_get(v2, uid);
		if (i == -ENOSPC)
			LOG_W("pid %d: %d cgroups watched already: its memory by RSS", (int)pid,
			      MEM_MAX_CG);
		else if (i == -EDQUOT)
			LOG_W("pid %d: uid %u has %d cgroups watched already: its memory by RSS",
			      (int)pid, uid, MEM_MAX_CG_UID);
		if (i >= 0) {
			x->cg = i;
			x->kills = cgs[i].last.oom_kill;
			limit = cg_line(&cgs[i]);
		}
	}
	x->threshold = bytes ? bytes : limit ? limit / 100 * percent : 0;
	if (!x->threshold) {
		/* No limit and no byte threshold: a share of the machine's memory. */
		long pages = sysconf(_SC_PHYS_PAGES);
		x->threshold = (uint64_t)pages * (uint64_t)page / 100 * percent;
	}
	if (limit && x->cg < 0) {
		char arg[32];
		snprintf(arg, sizeof(arg), "%llu", (unsigned long long)x->threshold);
		x->thr_efd = v1_event(x->dir, "memory.usage_in_bytes", arg);
		x->oom_efd = v1_event(x->dir, "memory.oom_control", NULL);
		x->oom_kills = oom_kill_count(x->dir);
		if (x->thr_efd >= 0)
			x->thr_ev = event_new(base, x->thr_efd, EV_READ | EV_PERSIST, on_thr,
					      (void *)(intptr_t)pid);
		if (x->oom_efd >= 0)
			x->oom_ev = event_new(base, x->oom_efd, EV_READ | EV_PERSIST, on_oom,
					      (void *)(intptr_t)pid);
		if (x->thr_ev)
			event_add(x->thr_ev, NULL);
		if (x->oom_ev)
			event_add(x->oom_ev, NULL);
		if (x->thr_efd < 0)
			LOG_W("pid %d: no v1 memory threshold in %s: using RSS", (int)pid, x->dir);
	}
	LOG_D("pid %d: OOM warning at %llu bytes (%s)", (int)pid,
	      (unsigned long long)x->threshold,
	      x->thr_efd >= 0 ? x->dir : x->cg >= 0 && limit ? cgs[x->cg].dir : "RSS");
	nw++;
	poll_arm();
	/* Look now: the process may be over the line already. */
	if (x->cg >= 0)
		cg_check(x->cg, "watch start");
	return 0;
}

void trg_mem_unwatch(pid_t pid)
{
	for (size_t i = 0; i < nw; i++)
		if (w[i].pid == pid) {
			struct mwatch *x = &w[i];
			/* The exit event can beat the kernel's notification: look at
			 * the count before the watch goes. */
			if (x->oom_efd >= 0 && oom_kill_count(x->dir) > x->oom_kills && ops->mem_kill) {
				x->killed = true;
				ops->mem_kill(pid, "OOM-killed by the kernel's OOM killer "
					      "(cgroup v1 memory limit)");
			}
			struct evc e, grp;
			if (x->cg >= 0 && events_read(cgs[x->cg].dir, true, &e) == 0 &&
			    e.oom_kill > x->kills) {
				struct mcg *c = &cgs[x->cg];
				events_read(c->max_dir[0] ? c->max_dir : c->dir, false, &grp);
				report_kill(x, grp.oom_group_kill > c->last.oom_group_kill ||
					       c->group_killed);
			}
			/* No cgroup count covers it: the kernel log's word. A
			 * process gone from a cgroup systemd-oomd marked since. */
			const char *how = !x->killed && x->oom_efd < 0 && x->cg < 0 ?
					  kmsg_kill(pid, x->start_ms) : NULL;
			if (!how && !x->killed && x->cg >= 0 && oomd_marks(cgs[x->cg].dir) > cgs[x->cg].oomd &&
			    pid_gone(pid))
				how = "killed by systemd-oomd (user.oomd_ooms on its cgroup)";
			if (how && ops->mem_kill) {
				LOG_N("pid %d: %s", (int)pid, how);
				ops->mem_kill(pid, how);
			}
			release(x);
			w[i] = w[--nw];
			return;
		}
}

bool trg_mem_counts_kills(pid_t pid)
{
	const struct mwatch *x = by_pid(pid);
	return x && (x->oom_efd >= 0 || x->cg >= 0 || (features & TRG_MEM_KMSG));
}

unsigned trg_mem_features(void)
{
	return features;
}

const char *trg_mem_status(void)
{
	return status[0] ? status : "not started";
}
