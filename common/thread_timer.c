/* One thread's sampling signal: a perf task-clock event or a POSIX timer. */
#include "thread_timer.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/*
 * The handler learns which event fired only from si_fd: an open-addressed
 * table from fd to the caller's index, twice the cap so probes stay short.
 * A slot is one word, (fd + 1) << 32 | index, so that the handler never
 * reads a key with another entry's index: 0 never used, TT_FREED freed.
 * Written only by tt_arm and tt_disarm, which the samplers call under
 * their own lock or from their one agent thread; an event is enabled only
 * after its slot is published.
 */
#define TT_TAB (2 * TT_MAX_PERF)
#define TT_FREED (UINT64_C(0xffffffff) << 32)

static _Atomic uint64_t tab[TT_TAB];
static uint32_t live, max_live, fallbacks;
static int source = TT_TIMER;
static bool user_only;
static const char *why = "thread CPU-time timers, on scheduler ticks"; /* tt_describe */
static int fd_floor; /* events' fds go at or above it, when it is not 0 */

static uint32_t slot_of(int fd)
{
	return ((uint32_t)fd * 2654435761u) & (TT_TAB - 1);
}

/* The slot holding fd, or -1; *word: what it held when read. */
static int tab_slot(int fd, uint64_t *word)
{
	uint64_t key = (uint64_t)(uint32_t)(fd + 1) << 32;
	if (fd < 0)
		return -1;
	for (uint32_t i = slot_of(fd), n = 0; n < TT_TAB; i = (i + 1) & (TT_TAB - 1), n++) {
		uint64_t w = atomic_load_explicit(&tab[i], memory_order_acquire);
		if (w == 0)
			return -1;
		if (w != TT_FREED && (w & TT_FREED) == key) {
			*word = w;
			return (int)i;
		}
	}
	return -1;
}

/* Free fd's slot; with index >= 0 only if it is that index's (a stale
 * timer must not free the slot of the event that took its number). */
static void tab_del(int fd, int index)
{
	uint64_t w;
	int i = tab_slot(fd, &w);
	if (i >= 0 && (index < 0 || (uint32_t)w == (uint32_t)index)) {
		atomic_store_explicit(&tab[i], TT_FREED, memory_order_release);
		live--;
	}
}

static int tab_put(int fd, int index)
{
	/* The app closed an earlier event of ours and the kernel gave its
	 * number to this one: the old entry must not answer for it. */
	tab_del(fd, -1);
	if (live >= max_live)
		return -ENOSPC;
	for (uint32_t i = slot_of(fd), n = 0; n < TT_TAB; i = (i + 1) & (TT_TAB - 1), n++) {
		uint64_t w = atomic_load_explicit(&tab[i], memory_order_relaxed);
		if (w == 0 || w == TT_FREED) {
			atomic_store_explicit(&tab[i],
					      (uint64_t)(uint32_t)(fd + 1) << 32 | (uint32_t)index,
					      memory_order_release);
			live++;
			return 0;
		}
	}
	return -ENOSPC;
}

/* The kernel's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED). */
static clockid_t thread_clock(pid_t tid)
{
	return (clockid_t)((~(unsigned)tid << 3) | 6);
}

static int perf_open(pid_t tid, uint64_t period_ns, bool user)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = period_ns;
	a.disabled = 1;
	a.exclude_kernel = user;
	a.exclude_hv = 1;
	long fd = syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

/* "Seccomp:\t0" for the calling thread (a filter may be on some threads
 * only): no filter. No such line: a kernel without seccomp. Unreadable
 * counts as a filter. */
static bool seccomp_filtered(void)
{
	char v[32];
	int r = util_proc_status_line((int)syscall(SYS_gettid), "Seccomp:", v, sizeof(v));
	if (r == -ENOENT)
		return false;
	return r < 0 || v[strspn(v, " \t")] != '0';
}

/*
 * The events' fds are the app's: at most an eighth of its soft
 * RLIMIT_NOFILE, so its own open() keeps working, and above FD_SETSIZE
 * where the limit leaves room, so that its select() does not meet a
 * number past 1023 because we took the low ones.
 */
static void fd_budget(void)
{
	struct rlimit rl;
	rlim_t cur = getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
	if (cur == RLIM_INFINITY || cur > 8 * (rlim_t)TT_MAX_PERF)
		cur = 8 * (rlim_t)TT_MAX_PERF;
	max_live = (uint32_t)(cur / 8);
	fd_floor = cur >= FD_SETSIZE + 2 * (rlim_t)max_live ? FD_SETSIZE : 0;
}

int tt_choose(void)
{
	for (uint32_t i = 0; i < TT_TAB; i++)
		atomic_store_explicit(&tab[i], 0, memory_order_relaxed);
	live = fallbacks = 0;
	source = TT_TIMER;
	user_only = false;
	fd_budget();
	if (seccomp_filtered()) {
		why = "thread CPU-time timers, on scheduler ticks (a seccomp filter is on: "
		      "no perf_event_open)";
		return source;
	}
	pid_t self = (pid_t)syscall(SYS_gettid);
	int fd = perf_open(self, 10000000, false);
	if (fd == -EACCES || fd == -EPERM) {
		fd = perf_open(self, 10000000, true);
		user_only = true;
	}
	if (fd < 0) {
		user_only = false;
		why = fd == -EACCES || fd == -EPERM ?
			      "thread CPU-time timers, on scheduler ticks (perf events not "
			      "permitted: perf_event_paranoid)" :
			      "thread CPU-time timers, on scheduler ticks (no perf task-clock "
			      "events)";
		return source;
	}
	close(fd);
	source = TT_PERF;
	why = user_only ? "perf task-clock events, user mode only (perf_event_paranoid 2: "
			  "time in the kernel weighs the next user-mode sample)" :
			  "perf task-clock events";
	return source;
}

void tt_describe(char *out, size_t n)
{
	if (!n)
		return;
	int o = snprintf(out, n, "%s", why);
	if (fallbacks && o >= 0 && (size_t)o < n)
		snprintf(out + o, n - (size_t)o,
			 "; %u threads on CPU-clock timers (no perf event for them)", fallbacks);
}

static int arm_perf(struct tt_timer *t, pid_t tid, int sig, uint64_t period_ns, int index)
{
	if (live >= max_live)
		return -ENOSPC;
	int fd = perf_open(tid, period_ns, user_only);
	if (fd < 0)
		return fd;
	if (fd_floor && fd < fd_floor) {
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, fd_floor);
		if (hi >= 0) {
			close(fd);
			fd = hi;
		}
	}
	struct f_owner_ex o = { .type = F_OWNER_TID, .pid = tid };
	int fl = fcntl(fd, F_GETFL);
	int r = 0;
	if (fl < 0 || fcntl(fd, F_SETOWN_EX, &o) < 0 || fcntl(fd, F_SETSIG, sig) < 0 ||
	    fcntl(fd, F_SETFL, fl | O_ASYNC) < 0 || ioctl(fd, PERF_EVENT_IOC_ID, &t->id) < 0)
		r = -errno;
	if (r == 0)
		r = tab_put(fd, index);
	/* The weights count from here (tt_sample); its draws start here. */
	t->period_ns = period_ns;
	t->last_ns = util_now_ns(thread_clock(tid));
	t->rng = ((uint64_t)tid * 0x9e3779b97f4a7c15u) ^ util_now_ns(CLOCK_MONOTONIC) ^ 1u;
	if (r == 0 && ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) < 0) {
		r = -errno;
		tab_del(fd, index);
	}
	if (r < 0) {
		close(fd);
		return r;
	}
	t->source = TT_PERF;
	t->fd = fd;
	t->index = index;
	t->armed = true;
	return 0;
}

static int arm_timer(struct tt_timer *t, pid_t tid, int sig, uint64_t period_ns, bool wall,
		     int index)
{
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = sig;
	sev.sigev_notify_thread_id = tid;
	sev.sigev_value.sival_int = index;
	clockid_t c = wall ? CLOCK_MONOTONIC : thread_clock(tid);
	if (timer_create(c, &sev, &t->timer) < 0)
		return -errno; /* the thread exited meanwhile */
	struct itimerspec its;
	its.it_interval.tv_sec = (time_t)(period_ns / 1000000000ull);
	its.it_interval.tv_nsec = (long)(period_ns % 1000000000ull);
	its.it_value = its.it_interval;
	if (timer_settime(t->timer, 0, &its, NULL) < 0) {
		int r = -errno;
		timer_delete(t->timer);
		return r;
	}
	t->source = TT_TIMER;
	t->fd = -1;
	t->armed = true;
	return 0;
}

int tt_arm(struct tt_timer *t, pid_t tid, int sig, uint64_t period_ns, bool wall, int index)
{
	if (!t || tid <= 0 || index < 0 || period_ns == 0)
		return -EINVAL;
	t->armed = false;
	/* A thread whose event cannot be had (EMFILE, the cap) gets a timer. */
	if (!wall && source == TT_PERF) {
		if (arm_perf(t, tid, sig, period_ns, index) == 0)
			return 0;
		int r = arm_timer(t, tid, sig, period_ns, wall, index);
		if (r == 0)
			fallbacks++;
		return r;
	}
	return arm_timer(t, tid, sig, period_ns, wall, index);
}

void tt_disarm(struct tt_timer *t)
{
	if (!t || !t->armed)
		return;
	if (t->source == TT_PERF) {
		/* The app may have closed our fd and reused its number (a
		 * daemon closing every fd): only our event is closed. */
		uint64_t id = 0;
		tab_del(t->fd, t->index);
		if (ioctl(t->fd, PERF_EVENT_IOC_ID, &id) == 0 && id == t->id) {
			/* Disabled, not only closed: a child forked meanwhile
			 * holds the same event until it execs, and would keep it
			 * signalling us. */
			ioctl(t->fd, PERF_EVENT_IOC_DISABLE, 0);
			close(t->fd);
		}
		t->fd = -1;
	} else {
		timer_delete(t->timer);
	}
	t->armed = false;
}

int tt_index(const siginfo_t *si)
{
	if (!si)
		return -1;
	if (si->si_code == SI_TIMER)
		return si->si_value.sival_int >= 0 ? si->si_value.sival_int : -1;
	/* An event's signal carries its fd (fs/fcntl.c send_sigio_to_task);
	 * another process cannot queue a positive si_code. */
	if (si->si_code == POLL_IN || si->si_code == POLL_HUP) {
		uint64_t w;
		return tab_slot(si->si_fd, &w) < 0 ? -1 : (int)(uint32_t)w;
	}
	return -1;
}

uint32_t tt_sample(const siginfo_t *si, struct tt_timer *t, uint32_t cap)
{
	if (!si || cap == 0)
		return 1;
	if (si->si_code == SI_TIMER)
		return si->si_overrun <= 0 ? 1 : (uint32_t)si->si_overrun >= cap ?
						 cap : 1u + (uint32_t)si->si_overrun;
	if (!t || t->source != TT_PERF || !t->period_ns)
		return 1;
	/*
	 * The thread's CPU clock, not the event's count: reading the fd here
	 * could read an app's file that took a closed event's number. Whole
	 * periods since the last sample; the remainder is carried, so the
	 * sums stay the thread's CPU time. A signal early by the handler's
	 * jitter borrows its period from the next.
	 */
	uint64_t now = util_now_ns(CLOCK_THREAD_CPUTIME_ID);
	uint64_t w = now > t->last_ns ? (now - t->last_ns) / t->period_ns : 0;
	if (w == 0)
		w = 1;
	if (w > cap)
		w = cap;
	t->last_ns = w == cap && now > t->last_ns ? now : t->last_ns + w * t->period_ns;
	/*
	 * The next period drawn from [P/2, 3P/2): at an exact period a loop
	 * whose round divides a few periods is seen at the same few phases
	 * (a 8.57 ms round at 10 ms: 6 phases, 5/6 hot for a 3:1 loop). The
	 * hrtimer starts the drawn period from now; the weights above keep
	 * the sums to the CPU clock whatever the draws.
	 */
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	uint64_t next = t->period_ns / 2 + t->rng % (t->period_ns | 1);
	ioctl(t->fd, PERF_EVENT_IOC_PERIOD, &next);
	return (uint32_t)w;
}
