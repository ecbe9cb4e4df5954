/*
 * One thread's sampling signal, for the two in-process samplers
 * (libprofiling's client/sampler.c and the JVMTI agent's jv_async.c).
 *
 * Why not always a POSIX timer on the thread's CPU clock: the kernel
 * checks CPU-clock timers only at the scheduler tick, so their signals fall
 * on the tick grid. A loop whose round takes a whole number of ticks is
 * then seen at the same few phases of its round for seconds at a time:
 * it_jvm_stack's HotCold (6 ms hot + 2 ms cold per round, two 4 ms ticks)
 * read 57:43 for a whole 3 s capture, and a C loop of the same shape read
 * anything from 50:50 to 100:0 per 2 s. A perf task-clock event samples
 * from an hrtimer in CPU time and read 74-76 % hot in
 * every window. Its periods are drawn at random around the asked one
 * (tt_sample): at an exact period, a loop whose round divides it aliases
 * the same way.
 *
 * So for CPU time: a perf task-clock event per thread (TT_PERF) where the
 * kernel lets this process open one for its own threads, with the
 * overflow delivered as the sampler's signal to that thread (F_SETOWN_EX,
 * F_SETSIG). At perf_event_paranoid 2 only user mode may be sampled: a
 * period that ends in the kernel raises no signal, and its CPU time weighs
 * the thread's next sample in user mode instead (tt_sample; tt_describe
 * says so). Root's events sample in the kernel too, and the signal lands
 * at the return to user mode, at the call's site, as a timer's does.
 * Otherwise, and under any seccomp filter (one that kills on an unknown system call
 * would kill the app at perf_event_open), the POSIX CPU-clock timer
 * (TT_TIMER), which also stands for kernel time. Wall clock is always a
 * CLOCK_MONOTONIC POSIX timer, which is an hrtimer already.
 *
 * The signal must be a classic one (SIGPROF): with a real-time signal the
 * kernel falls back to SIGIO, which kills, when its queue is full.
 *
 * Each event is an fd in the app's table. Caps: TT_MAX_PERF threads at
 * once on perf events (the handler's fd table), and no more than an
 * eighth of the app's soft RLIMIT_NOFILE, so that its own open() keeps
 * working; their numbers start at FD_SETSIZE where the limit leaves room,
 * so that the app's select() is not pushed past 1023. A thread past a
 * cap, or one whose event cannot be opened, gets the POSIX timer instead,
 * so no thread goes unsampled. The events are O_CLOEXEC; a child forked
 * during a capture holds them until it execs, harmless since each is
 * disabled before it is closed. An fd the app closed and reused is told
 * from ours by the event's id and left alone.
 */
#ifndef PD_THREAD_TIMER_H
#define PD_THREAD_TIMER_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#define TT_MAX_PERF 4096

enum tt_source { TT_TIMER = 0, TT_PERF = 1 };

struct tt_timer {
	int source; /* enum tt_source, of this thread */
	int fd;     /* TT_PERF: the event */
	int index;  /* TT_PERF: its slot's index */
	uint64_t id; /* its PERF_EVENT_IOC_ID, to know it is still ours */
	uint64_t period_ns, last_ns; /* TT_PERF: the thread's CPU clock at the last sample */
	uint64_t rng;                /* TT_PERF: xorshift64 state for the next period */
	timer_t timer;
	bool armed;
};

/*
 * Which source CPU-time captures of this process use, from now until the
 * next call. Call with nothing armed (it clears the fd table). Opens and
 * closes one event.
 */
int tt_choose(void);
/*
 * How CPU time is sampled since tt_choose, for the profile's comment: the
 * source, why, and how many threads fell back to timers. NUL-terminated,
 * cut to n.
 */
void tt_describe(char *out, size_t n);
/*
 * Arm t: signal sig to thread tid every period_ns of its CPU time (with
 * wall, of the monotonic clock). index comes back from tt_index in the
 * handler. 0 or -errno (the thread exited, ...).
 */
int tt_arm(struct tt_timer *t, pid_t tid, int sig, uint64_t period_ns, bool wall, int index);
/* Disarm; NULL and an unarmed t are fine. A signal already sent may still come. */
void tt_disarm(struct tt_timer *t);
/*
 * In the handler (async-signal-safe): the index given to tt_arm, or -1 if
 * si came from neither kind of source (kill, sigqueue, another timer).
 */
int tt_index(const siginfo_t *si);
/*
 * In the handler, on the signalled thread, with t its tt_timer (from
 * tt_index): the periods this signal stands for, at most cap. A timer's:
 * 1 + its overrun (a CPU-clock timer fires on ticks, so above the tick
 * rate one signal stands for several). A perf event's: the whole periods
 * of the thread's CPU clock since its last sample, remainder carried.
 * One perf signal may stand for many: a second SIGPROF raised while one
 * is pending is lost, and a signal waits for the return to user mode, so
 * a long page-faulting mmap or a pread from the page cache (the kernel
 * time a root app's events count) is one signal. Once per signal: for a
 * perf event it also draws the next period at random from [P/2, 3P/2),
 * so that an exact period cannot alias with a loop (one more ioctl).
 */
uint32_t tt_sample(const siginfo_t *si, struct tt_timer *t, uint32_t cap);

#endif
