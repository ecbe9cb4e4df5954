#define UNW_LOCAL_ONLY
#include "sampler.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "pprof.h"
#include "symbolize.h"
#include "thread_timer.h"
#include "util.h"

#define SMP_SIGNAL SIGPROF
#define SMP_COMM_LEN 16
/* One sample stands for at most this many periods (10 s at 100 Hz). */
#define SMP_MAX_WEIGHT 1000u

struct smp_record {
	_Atomic uint32_t ready;
	int32_t tid;
	uint32_t nframes;
	uint32_t weight; /* periods this sample stands for: 1 + the timer's overrun */
	uint64_t ips[SMP_MAX_FRAMES];
};

struct smp_thread {
	pid_t tid;
	struct tt_timer tt;
	char comm[SMP_COMM_LEN];
};

/*
 * Shared with the signal handler: only the atomics and the record array,
 * which is mmap'd before any timer is armed and unmapped after the last
 * handler has left.
 */
static struct smp_record *recs;
static _Atomic uint32_t rec_next;
static _Atomic uint64_t rec_dropped;
static _Atomic int running;
static _Atomic int inflight;

static struct smp_thread *threads;
static uint32_t nthreads, threads_skipped;
static pid_t self_tid;
static uint64_t interval_ns;
static bool wall_clock;
static struct sigaction old_action;

static pid_t smp_gettid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

static void smp_handler(int sig, siginfo_t *si, void *ucv)
{
	int saved_errno = errno;

	/* seq_cst pairs with smp_stop(): either it sees us inside, or we see !running. */
	atomic_fetch_add(&inflight, 1);
	int ix = atomic_load(&running) ? tt_index(si) : -1;
	if (ix < 0 || ix >= SMP_MAX_THREADS)
		goto out;
	uint32_t i = atomic_fetch_add_explicit(&rec_next, 1, memory_order_relaxed);
	if (i >= SMP_MAX_RECORDS) {
		atomic_fetch_add_explicit(&rec_dropped, 1, memory_order_relaxed);
		goto out;
	}
	struct smp_record *r = &recs[i];
	unw_cursor_t cur;
	uint32_t n = 0;
#if defined(__x86_64__)
	/* libunwind's x86_64 context is a ucontext_t: start at the interrupted pc. */
	int ok = unw_init_local2(&cur, (unw_context_t *)ucv, UNW_INIT_SIGNAL_FRAME) == 0;
#else
	unw_context_t uc;
	unw_getcontext(&uc);
	int ok = unw_init_local(&cur, &uc) == 0;
#endif
	while (ok && n < SMP_MAX_FRAMES) {
		unw_word_t ip = 0;
		if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || ip == 0)
			break;
		r->ips[n++] = ip;
		if (unw_step(&cur) <= 0)
			break;
	}
	r->tid = (int32_t)smp_gettid();
	r->nframes = n;
	r->weight = tt_sample(si, &threads[ix].tt, SMP_MAX_WEIGHT);
	atomic_store_explicit(&r->ready, 1, memory_order_release);
out:
	atomic_fetch_sub(&inflight, 1);
	errno = saved_errno;
}

static int smp_known(pid_t tid)
{
	for (uint32_t i = 0; i < nthreads; i++)
		if (threads[i].tid == tid)
			return 1;
	return 0;
}

static void smp_read_comm(pid_t tid, char *comm)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	if (util_read_file(path, comm, SMP_COMM_LEN) < 0)
		comm[0] = '\0';
	comm[strcspn(comm, "\n")] = '\0';
}

static int smp_arm(pid_t tid)
{
	struct smp_thread *t;
	int r;

	if (nthreads >= SMP_MAX_THREADS) {
		threads_skipped++;
		return -ENOSPC;
	}
	t = &threads[nthreads];
	r = tt_arm(&t->tt, tid, SMP_SIGNAL, interval_ns, wall_clock, (int)nthreads);
	if (r < 0)
		return r; /* the thread exited meanwhile */
	t->tid = tid;
	smp_read_comm(tid, t->comm);
	nthreads++;
	return 0;
}

int smp_rescan(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;

	if (!d)
		return -errno;
	/* An exited thread's event is an fd of the app's, and a slot of the
	 * cap (thread_timer.h): give both back. A timer dies with its thread. */
	for (uint32_t i = 0; i < nthreads; i++)
		if (threads[i].tt.armed && threads[i].tt.source == TT_PERF &&
		    syscall(SYS_tgkill, getpid(), threads[i].tid, 0) < 0 && errno == ESRCH)
			tt_disarm(&threads[i].tt);
	while ((de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		if (tid <= 0 || tid == self_tid || smp_known(tid))
			continue;
		smp_arm(tid);
	}
	closedir(d);
	return 0;
}

static void smp_free_buffers(void)
{
	if (recs)
		munmap(recs, SMP_MAX_RECORDS * sizeof(*recs));
	recs = NULL;
	free(threads);
	threads = NULL;
	nthreads = 0;
}

int smp_start(uint32_t hz, bool wall)
{
	struct sigaction sa;

	if (recs)
		return -EBUSY;
	if (hz == 0 || hz > 10000)
		return -EINVAL;
	interval_ns = 1000000000ull / hz;
	wall_clock = wall;
	if (!wall)
		tt_choose();
	/* MAP_NORESERVE: only the pages that samples touch are committed. */
	recs = mmap(NULL, SMP_MAX_RECORDS * sizeof(*recs), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (recs == MAP_FAILED) {
		recs = NULL;
		return -ENOMEM;
	}
	threads = calloc(SMP_MAX_THREADS, sizeof(*threads));
	if (!threads) {
		smp_free_buffers();
		return -ENOMEM;
	}
	atomic_store(&rec_next, 0);
	atomic_store(&rec_dropped, 0);
	threads_skipped = 0;
	self_tid = smp_gettid();

	/*
	 * Warm libunwind up on this thread: its first use initialises global
	 * state under a lock, which must not happen inside the handler.
	 */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	unw_context_t uc;
	unw_cursor_t cur;
	unw_getcontext(&uc);
	if (unw_init_local(&cur, &uc) == 0)
		unw_step(&cur);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = smp_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SMP_SIGNAL, &sa, &old_action) < 0) {
		int r = -errno;
		smp_free_buffers();
		return r;
	}
	atomic_store(&running, 1);
	return smp_rescan();
}

void smp_stop(void)
{
	if (!recs)
		return;
	for (uint32_t i = 0; i < nthreads; i++)
		tt_disarm(&threads[i].tt);
	atomic_store(&running, 0);
	/* A signal already queued may still run: wait until none is inside. */
	while (atomic_load(&inflight))
		sched_yield();
	/* A SIGPROF still pending must not meet SIG_DFL, which would kill the
	 * app (util_sig_restore). */
	util_sig_restore(SMP_SIGNAL, &old_action);
}

void smp_discard(void)
{
	smp_stop();
	smp_free_buffers();
}

/* ---- aggregation: identical (tid, stack) records become one pprof sample */

struct smp_agg {
	uint32_t rec;    /* index of the first record with this key */
	uint32_t count;  /* signals taken with this key */
	uint64_t weight; /* timer periods they stand for (overruns included) */
};

static uint64_t smp_hash(const struct smp_record *r)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)(uint32_t)r->tid;
	for (uint32_t i = 0; i < r->nframes; i++) {
		h ^= r->ips[i];
		h *= 1099511628211ull;
	}
	return h ? h : 1;
}

static int smp_same(const struct smp_record *a, const struct smp_record *b)
{
	return a->tid == b->tid && a->nframes == b->nframes &&
	       memcmp(a->ips, b->ips, a->nframes * sizeof(a->ips[0])) == 0;
}

static const char *smp_comm_of(pid_t tid)
{
	for (uint32_t i = 0; i < nthreads; i++)
		if (threads[i].tid == tid)
			return threads[i].comm;
	return "";
}

int smp_write_pprof(int fd, int64_t start_ns, int64_t duration_ns,
		    struct smp_stats *stats, uint64_t *bytes)
{
	struct pp_builder *b = NULL;
	struct sym_ctx *sym = NULL;
	struct smp_agg *tab = NULL;
	uint64_t *mapids = NULL;
	uint32_t n, cap;
	int r;

	if (!recs)
		return -EINVAL;
	smp_stop();
	n = atomic_load(&rec_next);
	if (n > SMP_MAX_RECORDS)
		n = SMP_MAX_RECORDS;
	memset(stats, 0, sizeof(*stats));
	stats->dropped = atomic_load(&rec_dropped);
	stats->threads = nthreads;
	stats->threads_skipped = threads_skipped;

	for (cap = 64; cap < 2 * n; cap *= 2)
		;
	tab = calloc(cap, sizeof(*tab));
	mapids = calloc(SYM_MAX_MODULES, sizeof(*mapids));
	r = -ENOMEM;
	if (!tab || !mapids)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		struct smp_record *rec = &recs[i];
		if (!atomic_load_explicit(&rec->ready, memory_order_acquire) || rec->nframes == 0)
			continue;
		stats->samples++;
		uint64_t h = smp_hash(rec);
		for (uint32_t j = (uint32_t)h & (cap - 1);; j = (j + 1) & (cap - 1)) {
			uint32_t w = rec->weight ? rec->weight : 1;
			if (tab[j].count == 0) {
				tab[j].rec = i;
				tab[j].count = 1;
				tab[j].weight = w;
				break;
			}
			if (smp_same(&recs[tab[j].rec], rec)) {
				tab[j].count++;
				tab[j].weight += w;
				break;
			}
		}
	}

	if ((r = pp_new(&b)) < 0)
		goto out;
	const char *kind = wall_clock ? "wall" : "cpu";
	if ((r = pp_add_sample_type(b, "samples", "count")) < 0 ||
	    (r = pp_add_sample_type(b, kind, "nanoseconds")) < 0 ||
	    (r = pp_set_period(b, kind, "nanoseconds", (int64_t)interval_ns)) < 0 ||
	    (r = pp_set_default_sample_type(b, kind)) < 0)
		goto out;
	pp_set_time(b, start_ns, duration_ns);
	char src[256], comment[320];
	if (wall_clock)
		util_strlcpy(src, "wall-clock timers", sizeof(src));
	else
		tt_describe(src, sizeof(src));
	snprintf(comment, sizeof(comment), "profilingd native agent: per-thread %s, libunwind", src);
	pp_add_comment(b, comment);
	if ((r = sym_open(getpid(), &sym)) < 0)
		goto out;

	for (uint32_t j = 0; j < cap; j++) {
		if (!tab[j].count)
			continue;
		struct smp_record *rec = &recs[tab[j].rec];
		uint64_t locs[SMP_MAX_FRAMES];
		for (uint32_t k = 0; k < rec->nframes; k++) {
			/* Callers' pcs are return addresses: look up the call itself. */
			uint64_t pc = k == 0 ? rec->ips[k] : rec->ips[k] - 1;
			if ((r = sym_pprof_location(b, sym, mapids, pc, &locs[k])) < 0)
				goto out;
		}
		int64_t vals[2] = { tab[j].count, (int64_t)(tab[j].weight * interval_ns) };
		/* The redactor keeps a sample by its pid label. */
		struct pp_label labels[3] = {
			{ .key = "pid", .num = getpid() },
			{ .key = "thread_id", .num = rec->tid },
			{ .key = "thread_name", .str = smp_comm_of(rec->tid) },
		};
		if ((r = pp_add_sample(b, locs, rec->nframes, vals, 2, labels, 3)) < 0)
			goto out;
	}
	r = pp_write_gz_level(b, fd, PP_GZ_HOP, bytes);
out:
	pp_free(b);
	sym_close(sym);
	free(tab);
	free(mapids);
	smp_free_buffers();
	return r;
}
