/*
 * Excessive CPU: per-process CPU% over a sliding window, from
 * /proc/<pid>/stat utime+stime deltas (not ProcDump's lifetime average).
 * One timer serves every watched process. A process fires when every tick
 * of a full window was at or over its threshold, then must fill a new
 * window before it can fire again.
 *
 * Each watch keeps its /proc/<pid>/stat open and re-reads it with pread:
 * about a third of the cost of open+read+close per tick, and the fd stays
 * bound to that process (a reused pid cannot be mistaken for it). Out of
 * fds, a watch falls back to opening the path each tick.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

#define TICK_MS 250

struct watch {
	pid_t pid;
	int fd;                   /* /proc/<pid>/stat, or -1: open it each tick */
	unsigned percent, window_ms;
	uint64_t last_ticks, last_ms;
	uint64_t over_since_ms;   /* 0: the last tick was under the threshold */
};

static const struct trg_ops *ops;
static struct event *timer;
static struct watch *w;
static size_t nw;
static long hz;
static char status[96];

static int read_ticks(const struct watch *x, uint64_t *ticks)
{
	char buf[1024];
	ssize_t n;
	if (x->fd >= 0) {
		n = pread(x->fd, buf, sizeof(buf) - 1, 0);
		if (n < 0)
			return -errno;
		buf[n] = '\0';
	} else {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)x->pid);
		if ((n = util_read_file(path, buf, sizeof(buf))) < 0)
			return (int)n;
	}
	char *p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	/* Fields after ')': 3 state ... 14 utime 15 stime. */
	unsigned long long ut, st;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -EINVAL;
	*ticks = ut + st;
	return 0;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_mono_ms();
	for (size_t i = 0; i < nw; i++) {
		struct watch *x = &w[i];
		uint64_t t;
		if (read_ticks(x, &t) < 0)
			continue; /* gone: the exit event unwatches it */
		uint64_t dms = now - x->last_ms;
		if (dms == 0)
			continue;
		unsigned pct = (unsigned)((t - x->last_ticks) * 1000ull * 100ull / (uint64_t)hz / dms);
		x->last_ticks = t;
		x->last_ms = now;
		if (pct < x->percent) {
			x->over_since_ms = 0;
			continue;
		}
		if (!x->over_since_ms)
			x->over_since_ms = now - dms;
		if (now - x->over_since_ms >= x->window_ms) {
			x->over_since_ms = 0;
			ops->cpu(x->pid, pct);
		}
	}
}

int trg_cpu_init(struct event_base *base, const struct trg_ops *o)
{
	ops = o;
	hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	w = calloc(TRG_MAX_PIDS, sizeof(*w));
	timer = event_new(base, -1, EV_PERSIST, tick, NULL);
	struct timeval tv = { 0, TICK_MS * 1000 };
	if (!w || !timer || event_add(timer, &tv) < 0)
		return -ENOMEM;
	snprintf(status, sizeof(status), "/proc/<pid>/stat every %d ms", TICK_MS);
	return 0;
}

void trg_cpu_fini(void)
{
	if (timer)
		event_free(timer);
	timer = NULL;
	for (size_t i = 0; i < nw; i++)
		if (w[i].fd >= 0)
			close(w[i].fd);
	free(w);
	w = NULL;
	nw = 0;
}

int trg_cpu_watch(pid_t pid, unsigned percent, unsigned window_ms)
{
	size_t i;
	for (i = 0; i < nw && w[i].pid != pid; i++)
		;
	if (i == nw) {
		if (nw == TRG_MAX_PIDS)
			return -ENOSPC;
		nw++;
	} else if (w[i].fd >= 0) {
		close(w[i].fd); /* re-armed: bind to the process that has the pid now */
	}
	struct watch *x = &w[i];
	char path[64];
	memset(x, 0, sizeof(*x));
	x->pid = pid;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	x->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (x->fd < 0 && errno == ENOENT)
		return trg_cpu_unwatch(pid), -ESRCH;
	x->percent = percent;
	x->window_ms = window_ms;
	x->last_ms = util_mono_ms();
	return read_ticks(x, &x->last_ticks) < 0 ? (trg_cpu_unwatch(pid), -ESRCH) : 0;
}

void trg_cpu_unwatch(pid_t pid)
{
	for (size_t i = 0; i < nw; i++)
		if (w[i].pid == pid) {
			if (w[i].fd >= 0)
				close(w[i].fd);
			w[i] = w[--nw];
			return;
		}
}

const char *trg_cpu_status(void)
{
	return status[0] ? status : "not started";
}
