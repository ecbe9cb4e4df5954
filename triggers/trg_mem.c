/*
 * OOM warning signs, before the kill. For a process in a cgroup v1 memory
 * group with a limit: an eventfd threshold on memory.usage_in_bytes at the
 * configured share of memory.limit_in_bytes, and an eventfd on
 * memory.oom_control whose oom_kill count tells an actual kill (both
 * through cgroup.event_control, so nothing polls). Anywhere else (no v1
 * memory controller, no limit, a v2-only system): RSS from
 * /proc/<pid>/statm against the threshold on a 250 ms timer, and the
 * status says so.
 *
 * Caps: TRG_MAX_PIDS watched processes; past it trg_mem_watch gives -ENOSPC.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define V1_ROOT "/sys/fs/cgroup/memory"
#define POLL_MS 250

struct mwatch {
	pid_t pid;
	uint64_t threshold;       /* bytes */
	unsigned percent;         /* the rule it was set up with */
	uint64_t bytes;
	bool warned;              /* RSS fallback: fired, until it drops again */
	/* cgroup v1 */
	int thr_efd, oom_efd;
	struct event *thr_ev, *oom_ev;
	uint64_t oom_kills;
	char dir[512];
};

static const struct trg_ops *ops;
static struct event_base *base;
static struct mwatch *w;
static size_t nw;
static struct event *timer;
static char status[192];
static long page;

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
		ops->mem_kill(pid);
	x->oom_kills = kills;
}

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
}

/* RSS fallback for processes without a v1 limit. */
static void poll_rss(evutil_socket_t fd, short what, void *arg)
{
	for (size_t i = 0; i < nw; i++) {
		struct mwatch *x = &w[i];
		char path[64], buf[128];
		if (x->thr_efd >= 0)
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

int trg_mem_init(struct event_base *b, const struct trg_ops *o)
{
	base = b;
	ops = o;
	page = sysconf(_SC_PAGESIZE);
	w = calloc(TRG_MAX_PIDS, sizeof(*w));
	timer = event_new(base, -1, EV_PERSIST, poll_rss, NULL);
	struct timeval tv = { 0, POLL_MS * 1000 };
	if (!w || !timer || event_add(timer, &tv) < 0)
		return -ENOMEM;
	bool v1 = access(V1_ROOT "/cgroup.event_control", W_OK) == 0;
	uint64_t has_v2 = 0;
	char ctl[256] = "";
	if (util_read_file("/sys/fs/cgroup/unified/cgroup.controllers", ctl, sizeof(ctl)) >= 0 ||
	    util_read_file("/sys/fs/cgroup/cgroup.controllers", ctl, sizeof(ctl)) >= 0)
		has_v2 = strstr(ctl, "memory") != NULL;
	snprintf(status, sizeof(status),
		 "cgroup v1 memory thresholds and oom_control: %s; cgroup v2 memory: %s; "
		 "elsewhere RSS every %d ms", v1 ? "yes" : "no (no v1 memory controller)",
		 has_v2 ? "present, watched through RSS only" : "no memory controller in v2",
		 POLL_MS);
	return 0;
}

void trg_mem_fini(void)
{
	for (size_t i = 0; i < nw; i++)
		release(&w[i]);
	if (timer)
		event_free(timer);
	timer = NULL;
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
	x->percent = percent;
	x->bytes = bytes;
	uint64_t limit = 0;
	char path[600];
	if (v1_dir(pid, x->dir, sizeof(x->dir)) == 0) {
		snprintf(path, sizeof(path), "%s/memory.limit_in_bytes", x->dir);
		/* "No limit" reads as a huge number: treat it as none. */
		if (read_u64(path, &limit) < 0 || limit >= (1ull << 62))
			limit = 0;
	}
	x->threshold = bytes ? bytes : limit ? limit / 100 * percent : 0;
	if (!x->threshold) {
		/* No limit and no byte threshold: a share of the machine's memory. */
		long pages = sysconf(_SC_PHYS_PAGES);
		x->threshold = (uint64_t)pages * (uint64_t)page / 100 * percent;
	}
	if (limit) {
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
	      (unsigned long long)x->threshold, x->thr_efd >= 0 ? x->dir : "RSS");
	nw++;
	return 0;
}

void trg_mem_unwatch(pid_t pid)
{
	for (size_t i = 0; i < nw; i++)
		if (w[i].pid == pid) {
			/* The exit event can beat the oom_control one: look at the
			 * count before the eventfd goes. */
			if (w[i].oom_efd >= 0 && oom_kill_count(w[i].dir) > w[i].oom_kills &&
			    ops->mem_kill)
				ops->mem_kill(pid);
			release(&w[i]);
			w[i] = w[--nw];
			return;
		}
}

const char *trg_mem_status(void)
{
	return status[0] ? status : "not started";
}
