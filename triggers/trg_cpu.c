/*
 * Excessive CPU: per-process CPU% over a sliding window (not ProcDump's
 * lifetime average). A process fires when it was at or over its threshold
 * a whole window, then must fill a new window before it can fire again.
 * Two ways to count, chosen per process:
 *
 * Kernel counting (the default): a task-clock perf counter per thread of
 * the process (inherit: threads started later count in their creator's
 * counter), whose overflow period is the CPU the threshold allows in a
 * 32nd of the window. The kernel counts; an idle process costs the
 * daemon nothing at all. An overflow sends a queued real-time signal
 * (F_SETSIG, fasync) that the daemon reads from a signalfd in its event
 * loop, so only a process that has used that much CPU wakes it. That
 * process then gets a timer of its own, every 32nd of its window,
 * which reads its counters (read(2) on each fd, no /proc parsing) and
 * fires when the CPU over the last whole window (the readings since the
 * overflow, a ring of 34) and over each quarter of it is at or over the
 * threshold: averages, so a spinner that a busy machine holds at 85-95 %
 * of a core for a 31 ms tick now and then still fires at 90 %, while a
 * burst shorter than the window does not. The timer stops once a whole
 * window and its last tick are under the line. From a spike's start the fire
 * comes after at most one period (1/32 of the window at 100 % threshold)
 * plus the window: within 10 % of it.
 *
 * Why a signal and not poll(2) on the perf fd: a perf fd only polls
 * readable through a mmap'd ring buffer (two pages per counter, locked
 * memory); the fasync signal needs none. A full real-time queue makes the
 * kernel send SIGIO instead, which reads every counter once.
 *
 * The counters are opened after the seccomp filter is on, so the daemon's
 * policy allows perf_event_open for pid >= 0; with the capabilities
 * dropped (no CAP_PERFMON) the kernel allows task-clock only with
 * exclude_kernel under perf_event_paranoid <= 2. The count still includes
 * the time in the kernel; only the overflow that lands in kernel mode is
 * skipped to the next period, so a process spinning in system calls is
 * seen a few periods later.
 *
 * Polling (fallback): /proc/<pid>/stat utime+stime deltas on one 250 ms
 * timer for every polled process, which fires when every tick of a whole
 * window was over the line (as before), each keeping its stat file open and
 * re-reading it with pread (bound to that process: a reused pid cannot be
 * mistaken for it; out of fds, the path is opened each tick). Used when
 * perf events are off in the config, when the kernel refuses them
 * (perf_event_paranoid 3, no perf support, EACCES after the sandbox), and
 * for a process with more than THREADS_MAX threads when it is watched.
 * trg_cpu_status() says which is in use and how many use each.
 *
 * Caps: TRG_MAX_PIDS watches; fds held for them (counters and stat files)
 * at most TRG_MAX_PIDS in all, the share of the fd limit svc_conn reserves
 * for the watchers; a watch that would pass it is polled by path. One
 * uid's counters at most TRG_CPU_FDS_PER_UID (a quarter of that share:
 * one uid's many-threaded processes cannot push every other uid's
 * watches to polling); past it that uid's new watches are polled.
 * The table grows with use (pointers, doubled), not to the cap at start.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <dirent.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define POLL_TICK_MS 250
#define EV_DIV 32          /* event mode: tick and overflow period, window / 32 */
#define EV_TICK_MIN_MS 10
#define THREADS_MAX 64     /* counters per process; more threads at watch time: polled */
#define SIG_BATCH 16       /* siginfos per read of the signalfd */
#define SIG_ROUNDS 16      /* reads per wake: the rest on the next loop turn */

struct sample {
	uint64_t ms, ns;       /* when, and the CPU used until then */
};

#define RING (EV_DIV + 2)  /* a window of ticks, and its start */

struct watch {
	pid_t pid;
	uid_t uid;
	unsigned percent, window_ms;
	int *fds;              /* kernel counting: one counter per thread */
	unsigned nfd;          /* 0: polled */
	int statfd;            /* polled: /proc/<pid>/stat, or -1: open it each tick */
	struct event *tick;    /* kernel counting: created at the first overflow */
	struct sample *ring;   /* kernel counting: readings since the overflow, RING */
	unsigned r0, rn;       /* the oldest reading, how many */
	bool active;           /* kernel counting: the tick runs */
	bool polled;           /* on the poll timer */
	uint64_t last_ns, last_ms;
	uint64_t over_since_ms; /* 0: the last tick was under the threshold */
};

static const struct trg_ops *ops;
static struct event_base *evbase;
static struct event *poll_timer, *sig_ev;
static struct watch **w;
static size_t nw, wcap;
static size_t npolled;     /* watches on the poll timer */
static unsigned nheld;     /* fds held: counters and stat files */
static int sigfd = -1, signo;
static sigset_t sigs;
static bool perf_on;
static char perf_off[96];  /* why the kernel does not count, "" when it does */
static long hz;
static char status[192];

static int perf_open(pid_t tid, uint64_t period)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = period;
	a.inherit = 1;
	a.exclude_kernel = 1; /* see the head comment: the count still has it */
	a.exclude_hv = 1;
	a.wakeup_events = 1;
	int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* The overflow queues signo with si_fd = fd, to the daemon. */
	if (fcntl(fd, F_SETSIG, signo) < 0 || fcntl(fd, F_SETOWN, getpid()) < 0 ||
	    fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

static void close_counters(struct watch *x)
{
	for (unsigned i = 0; i < x->nfd; i++)
		close(x->fds[i]);
	nheld -= x->nfd;
	free(x->fds);
	x->fds = NULL;
	x->nfd = 0;
}

/*
 * One counter per thread the process has now. 0, -ESRCH when it is gone,
 * or another negative errno: poll it instead.
 */
static int open_counters(struct watch *x)
{
	char path[64];
	uint64_t period = (uint64_t)x->percent * x->window_ms * 10000ull / EV_DIV;
	int fd, e = 0;

	if (period < 10000)
		period = 10000; /* the kernel's own floor for a timer-driven counter */
	x->fds = calloc(THREADS_MAX, sizeof(*x->fds));
	if (!x->fds)
		return -ENOMEM;
	/* This uid's share: counters its other watches hold. */
	unsigned room = TRG_CPU_FDS_PER_UID;
	for (size_t i = 0; i < nw; i++)
		if (w[i] != x && w[i]->uid == x->uid)
			room = w[i]->nfd >= room ? 0 : room - w[i]->nfd;
	if (room > THREADS_MAX)
		room = THREADS_MAX;
	/* The main thread first: what it starts from now on is inherited. */
	if (nheld >= TRG_MAX_PIDS || room == 0)
		return close_counters(x), -EMFILE;
	if ((fd = perf_open(x->pid, period)) < 0)
		return close_counters(x), fd;
	x->fds[x->nfd++] = fd;
	nheld++;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)x->pid);
	DIR *d = opendir(path);
	if (!d)
		return close_counters(x), -ESRCH;
	struct dirent *de;
	while (!e && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0 || tid == x->pid)
			continue;
		if (x->nfd == room || nheld >= TRG_MAX_PIDS) {
			e = -EMFILE;
			break;
		}
		fd = perf_open(tid, period);
		if (fd == -ESRCH)
			continue; /* the thread ended meanwhile */
		if (fd < 0) {
			e = fd;
			break;
		}
		x->fds[x->nfd++] = fd;
		nheld++;
	}
	closedir(d);
	if (e) {
		close_counters(x);
		return e;
	}
	/* Sized by use: most processes have a few threads, not THREADS_MAX. */
	int *fit = realloc(x->fds, x->nfd * sizeof(*x->fds));
	if (fit)
		x->fds = fit;
	return 0;
}

/* CPU time of x so far, ns. */
static int read_cpu(struct watch *x, uint64_t *ns)
{
	char buf[1024];
	ssize_t n;
	uint64_t sum = 0, v;

	if (x->nfd) {
		/* An ended thread's counter keeps its final count. */
		for (unsigned i = 0; i < x->nfd; i++) {
			if (read(x->fds[i], &v, sizeof(v)) != (ssize_t)sizeof(v))
				return -EIO;
			sum += v;
		}
		*ns = sum;
		return 0;
	}
	if (x->statfd >= 0) {
		n = pread(x->statfd, buf, sizeof(buf) - 1, 0);
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
	if (!p || !p[1])
		return -EINVAL;
	/* Fields after ')': 3 state ... 14 utime 15 stime. */
	unsigned long long ut, st;
	if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -EINVAL;
	*ns = (ut + st) * 1000000000ull / (uint64_t)hz;
	return 0;
}

/* One poll tick of x: false when x is under its threshold. */
static bool tick_one(struct watch *x, uint64_t now)
{
	uint64_t t;
	if (read_cpu(x, &t) < 0)
		return false; /* gone: the exit event unwatches it */
	uint64_t dms = now - x->last_ms;
	if (dms == 0)
		return true;
	/* percent = ns / (ms * 1e6) * 100 */
	uint64_t pct = (t - x->last_ns) / (dms * 10000ull);
	x->last_ns = t;
	x->last_ms = now;
	if (pct < x->percent) {
		x->over_since_ms = 0;
		return false;
	}
	if (!x->over_since_ms)
		x->over_since_ms = now - dms;
	if (now - x->over_since_ms >= x->window_ms) {
		x->over_since_ms = 0;
		ops->cpu(x->pid, pct > 100000 ? 100000 : (unsigned)pct);
	}
	return true;
}

static void poll_tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_mono_ms();
	(void)fd, (void)what, (void)arg;
	for (size_t i = 0; i < nw; i++)
		if (w[i]->polled)
			tick_one(w[i], now);
}

static struct sample *at(const struct watch *x, unsigned i)
{
	return &x->ring[(x->r0 + i) % RING];
}

static void ring_reset(struct watch *x, uint64_t ms, uint64_t ns)
{
	x->r0 = 0;
	x->rn = 1;
	x->ring[0].ms = ms;
	x->ring[0].ns = ns;
}

/*
 * Each quarter of the window in the ring (from the reading that starts it
 * to the first at or after its end) at or over the line: a burst shorter
 * than the window does not fire however hot it was, as with the polled
 * ticks, while a tick of 31 ms under it on a busy machine does not break
 * a quarter that is over it.
 */
static bool quarters_over(const struct watch *x)
{
	const struct sample *s0 = at(x, 0), *last = at(x, x->rn - 1);
	uint64_t span = last->ms - s0->ms;
	unsigned j = 0;
	for (unsigned q = 1; q <= 4; q++) {
		uint64_t end = s0->ms + span * q / 4;
		unsigned e = j;
		while (e < x->rn - 1 && at(x, e)->ms < end)
			e++;
		if (e == j)
			continue;
		const struct sample *a = at(x, j), *b = at(x, e);
		if (b->ms == a->ms || (b->ns - a->ns) / ((b->ms - a->ms) * 10000ull) < x->percent)
			return false;
		j = e;
	}
	return true;
}

/*
 * Kernel counting: the CPU over the last whole window, from the readings
 * of the ticks since the overflow (the newest one at least a window old is
 * the start). A whole window at or over the line fires, and the next must
 * fill a window of its own. Under it, with the last tick under it too,
 * back to waiting for the kernel's next overflow.
 */
static void ev_tick(evutil_socket_t fd, short what, void *arg)
{
	struct watch *x = arg;
	uint64_t now = util_mono_ms(), c;
	(void)fd, (void)what;
	if (read_cpu(x, &c) < 0)
		goto idle; /* gone: the exit event unwatches it */
	const struct sample *prev = at(x, x->rn - 1);
	bool last_under = now == prev->ms ||
			  (c - prev->ns) / ((now - prev->ms) * 10000ull) < x->percent;
	if (x->rn == RING) {
		x->r0 = (x->r0 + 1) % RING;
		x->rn--;
	}
	at(x, x->rn)->ms = now;
	at(x, x->rn)->ns = c;
	x->rn++;
	unsigned k = 0;
	bool whole = false;
	for (unsigned i = 0; i < x->rn; i++)
		if (now - at(x, i)->ms >= x->window_ms) {
			k = i;
			whole = true;
		}
	if (!whole)
		return;
	x->r0 = (x->r0 + k) % RING;
	x->rn -= k;
	uint64_t pct = (c - at(x, 0)->ns) / ((now - at(x, 0)->ms) * 10000ull);
	if (pct >= x->percent && quarters_over(x)) {
		ring_reset(x, now, c);
		ops->cpu(x->pid, pct > 100000 ? 100000 : (unsigned)pct);
		return;
	}
	if (!last_under)
		return;
idle:
	event_del(x->tick);
	x->active = false;
}

static void wake(struct watch *x)
{
	if (x->polled || x->active)
		return;
	if (!x->ring && !(x->ring = malloc(RING * sizeof(*x->ring))))
		return; /* no memory: the next overflow tries again */
	if (!x->tick && !(x->tick = event_new(evbase, -1, EV_PERSIST, ev_tick, x)))
		return;
	/* Rounded up: a window never takes more than EV_DIV ticks, so the
	 * ring (EV_DIV + 2) always holds one whole. */
	unsigned ms = (x->window_ms + EV_DIV - 1) / EV_DIV;
	struct timeval tv = { 0, 0 };
	if (ms < EV_TICK_MIN_MS)
		ms = EV_TICK_MIN_MS;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	/* The window is measured from here: the time since the last reading
	 * (maybe long idle) says nothing about when the burst began. */
	uint64_t c;
	if (read_cpu(x, &c) < 0 || event_add(x->tick, &tv) < 0)
		return;
	ring_reset(x, util_mono_ms(), c);
	x->active = true;
}

static struct watch *find_fd(int fd)
{
	for (size_t i = 0; i < nw; i++)
		for (unsigned k = 0; k < w[i]->nfd; k++)
			if (w[i]->fds[k] == fd)
				return w[i];
	return NULL;
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
	struct signalfd_siginfo si[SIG_BATCH];
	(void)what, (void)arg;
	for (int r = 0; r < SIG_ROUNDS; r++) {
		ssize_t n = read(fd, si, sizeof(si));
		if (n <= 0)
			return;
		for (size_t k = 0; k < (size_t)n / sizeof(si[0]); k++) {
			if (si[k].ssi_signo == SIGIO) {
				/* The real-time queue was full: some overflow was lost. */
				for (size_t i = 0; i < nw; i++)
					wake(w[i]);
				continue;
			}
			struct watch *x = find_fd((int)si[k].ssi_fd);
			if (x)
				wake(x);
		}
	}
}

static void set_poll_timer(void)
{
	struct timeval tv = { 0, POLL_TICK_MS * 1000 };
	if (npolled && !event_pending(poll_timer, EV_TIMEOUT, NULL))
		event_add(poll_timer, &tv);
	else if (!npolled)
		event_del(poll_timer);
}

/* The signal and its fd; "" in perf_off when all went well. */
static void perf_setup(void)
{
	/* The highest real-time signal: glibc and libevent use none of them. */
	signo = SIGRTMAX;
	sigemptyset(&sigs);
	sigaddset(&sigs, signo);
	sigaddset(&sigs, SIGIO);
	if (sigprocmask(SIG_BLOCK, &sigs, NULL) < 0 ||
	    (sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK)) < 0) {
		util_fmt(perf_off, sizeof(perf_off), "signalfd: %s", strerror(errno));
		return;
	}
	if (!(sig_ev = event_new(evbase, sigfd, EV_READ | EV_PERSIST, on_signal, NULL)) ||
	    event_add(sig_ev, NULL) < 0) {
		util_fmt(perf_off, sizeof(perf_off), "no memory");
		return;
	}
	/* Can the kernel count at all? A counter on ourselves says. */
	int fd = perf_open(0, 1000000000ull);
	if (fd < 0) {
		util_fmt(perf_off, sizeof(perf_off), "perf_event_open: %s", strerror(-fd));
		return;
	}
	close(fd);
	perf_on = true;
}

int trg_cpu_init(struct event_base *base, const struct trg_ops *o, bool use_perf)
{
	ops = o;
	evbase = base;
	hz = sysconf(_SC_CLK_TCK);
	if (hz <= 0)
		hz = 100;
	if (!(poll_timer = event_new(base, -1, EV_PERSIST, poll_tick, NULL)))
		return -ENOMEM;
	if (use_perf)
		perf_setup();
	else
		util_strlcpy(perf_off, "off in the config ([cpu] perf_events)", sizeof(perf_off));
	return 0;
}

void trg_cpu_fini(void)
{
	while (nw)
		trg_cpu_unwatch(w[0]->pid);
	free(w);
	w = NULL;
	wcap = 0;
	if (poll_timer)
		event_free(poll_timer);
	poll_timer = NULL;
	if (sig_ev)
		event_free(sig_ev);
	sig_ev = NULL;
	if (sigfd >= 0) {
		close(sigfd);
		sigprocmask(SIG_UNBLOCK, &sigs, NULL);
	}
	sigfd = -1;
	perf_on = false;
	perf_off[0] = '\0';
}

static struct watch *find(pid_t pid)
{
	for (size_t i = 0; i < nw; i++)
		if (w[i]->pid == pid)
			return w[i];
	return NULL;
}

/* Polled from now on; a stat fd when the share allows it. */
static void to_poll(struct watch *x)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)x->pid);
	x->statfd = nheld < TRG_MAX_PIDS ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (x->statfd >= 0)
		nheld++;
	x->polled = true;
	npolled++;
}

static void clear(struct watch *x)
{
	if (x->tick)
		event_free(x->tick);
	x->tick = NULL;
	free(x->ring);
	x->ring = NULL;
	x->active = false;
	close_counters(x);
	if (x->statfd >= 0) {
		close(x->statfd);
		nheld--;
	}
	if (x->polled)
		npolled--;
	x->polled = false;
	x->statfd = -1;
}

int trg_cpu_watch(pid_t pid, uid_t uid, unsigned percent, unsigned window_ms)
{
	struct watch *x = find(pid);
	if (!x) {
		if (nw == TRG_MAX_PIDS)
			return -ENOSPC;
		if (nw == wcap) {
			size_t n = wcap ? wcap * 2 : 16;
			struct watch **nwp = realloc(w, n * sizeof(*w));
			if (!nwp)
				return -ENOMEM;
			w = nwp;
			wcap = n;
		}
		if (!(x = calloc(1, sizeof(*x))))
			return -ENOMEM;
		x->statfd = -1;
		w[nw++] = x;
	} else {
		clear(x); /* re-armed: bind to the process that has the pid now */
	}
	x->pid = pid;
	x->uid = uid;
	x->percent = percent ? percent : 1;
	x->window_ms = window_ms;
	int e = perf_on ? open_counters(x) : -ENOTSUP;
	if (e == -ESRCH)
		return trg_cpu_unwatch(pid), -ESRCH;
	if (e == -EACCES || e == -EPERM) {
		/* The probe passed before the sandbox; the kernel says no now. */
		perf_on = false;
		util_fmt(perf_off, sizeof(perf_off), "perf_event_open: %s", strerror(-e));
		LOG_W("cpu watcher: the kernel refuses perf counters (%s): polling /proc",
		      strerror(-e));
	}
	if (e)
		to_poll(x);
	x->last_ms = util_mono_ms();
	if (read_cpu(x, &x->last_ns) < 0)
		return trg_cpu_unwatch(pid), -ESRCH;
	set_poll_timer();
	if (x->nfd)
		LOG_D("cpu watch of pid %d: %u task-clock counters", (int)pid, x->nfd);
	else
		LOG_D("cpu watch of pid %d: /proc polled (%s)", (int)pid,
		      e == -ENOTSUP ? perf_off : strerror(-e));
	return 0;
}

void trg_cpu_unwatch(pid_t pid)
{
	for (size_t i = 0; i < nw; i++)
		if (w[i]->pid == pid) {
			clear(w[i]);
			free(w[i]);
			w[i] = w[--nw];
			set_poll_timer();
			return;
		}
}

const char *trg_cpu_status(void)
{
	if (!poll_timer)
		return "not started";
	if (perf_on)
		util_fmt(status, sizeof(status),
			 "task-clock perf counters, woken by their overflow (%zu processes); "
			 "/proc/<pid>/stat every %d ms for %zu", nw - npolled, POLL_TICK_MS, npolled);
	else
		util_fmt(status, sizeof(status), "/proc/<pid>/stat every %d ms (%zu processes): "
			 "no perf counters: %s", POLL_TICK_MS, nw, perf_off);
	return status;
}
