/*
 * native_total: a target for the in-process sampler's totals (it_native_total).
 * N threads spin (N may be 0: an idle process) while the app asks profilingd
 * for a CPU stack sample of itself. A recorder thread logs
 * (CLOCK_REALTIME, CLOCK_PROCESS_CPUTIME_ID, utime+stime of /proc/self/stat)
 * every 2 ms: the process CPU clock is the kernel's own sum at nanosecond
 * resolution, /proc/<pid>/stat the figure tools read (in clock ticks). When the result comes, the app reads the
 * delivered pprof, takes its window (time_nanos, duration_nanos) and
 * interpolates its log at both ends, so the CPU it compares with is that of
 * the capture's own window, whatever the machine's load.
 *
 * Prints one line on stdout:
 *   samples=N profile_cpu_ms=X process_cpu_ms=Y ratio=X/Y duration_ms=D
 *   has_cpu_type=0|1 proc_stat_cpu_ms=Z proc_stat_ratio=X/Z note=<note>
 *
 * With --phases[=ROUND_US], one more thread loops phase_hot() for 3/4 of
 * a round of its CPU time (default 8000 us), then phase_cold() for 1/4:
 * 3:1. At 8 ms, a round of exactly two 4 ms
 * scheduler ticks, the shape that CPU-clock timers (checked on the tick)
 * see at the same few phases for seconds; at 10 ms, the round of a 100 Hz
 * sampler's exact period. The line then ends with
 *   phase_hot_share=H phase_samples=S comment=<the profile's comment>
 * where H is phase_hot's share of the cpu value of the samples in either.
 * and exits 0 when a result was delivered and parsed, 1 otherwise. The
 * script decides what is good enough.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <profiling/profiling.h>

#include "profile.pb-c.h"

#define LOG_MAX 65536            /* 131 s at one entry per 2 ms */
#define FILE_MAX (64u << 20)     /* the gunzipped profile */

struct cpu_point {
	int64_t rt_ns;
	int64_t cpu_ns;
	int64_t stat_ns; /* utime + stime from /proc/self/stat */
};

static struct cpu_point cpu_log[LOG_MAX];
static _Atomic uint32_t cpu_n;
static atomic_int stop;
static volatile uint64_t sink;

static int64_t now_ns(clockid_t c)
{
	struct timespec ts;
	clock_gettime(c, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((noinline)) static uint64_t burn(uint64_t x)
{
	for (int i = 0; i < 100000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

/* The phase loop's work: user-mode arithmetic until the thread's CPU clock
 * reaches end, read only every 20000 steps so that little of the time is
 * in the kernel. The ends are absolute (6, 8, 14, 16 ... ms from the
 * start), so the round is 8 ms on average and does not drift against the
 * tick by the few microseconds each phase overshoots. */
static uint64_t phase_spin(uint64_t x, int64_t end)
{
	do {
		for (int i = 0; i < 20000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	} while (now_ns(CLOCK_THREAD_CPUTIME_ID) < end);
	return x;
}

/* Not static: the samples must name them whatever the symbol table keeps. */
uint64_t phase_hot(uint64_t x, int64_t end);
uint64_t phase_cold(uint64_t x, int64_t end);

__attribute__((noinline)) uint64_t phase_hot(uint64_t x, int64_t end)
{
	return phase_spin(x, end);
}

__attribute__((noinline)) uint64_t phase_cold(uint64_t x, int64_t end)
{
	return phase_spin(x, end);
}

static int64_t round_ns = 8000000;

static void *phaser(void *arg)
{
	uint64_t x = (uintptr_t)arg;
	int64_t t = now_ns(CLOCK_THREAD_CPUTIME_ID);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		x = phase_hot(x, t += round_ns / 4 * 3);
		x = phase_cold(x, t += round_ns / 4);
	}
	sink = x;
	return NULL;
}

static const char *pstr(const Perftools__Profiles__Profile *p, int64_t i)
{
	return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* The function a location's innermost line names, or "". */
static const char *loc_func(const Perftools__Profiles__Profile *p, uint64_t id)
{
	for (size_t i = 0; i < p->n_location; i++) {
		const Perftools__Profiles__Location *l = p->location[i];
		if (l->id != id || !l->n_line)
			continue;
		for (size_t j = 0; j < p->n_function; j++)
			if (p->function[j]->id == l->line[0]->function_id)
				return pstr(p, p->function[j]->name);
	}
	return "";
}

/* phase_hot's share of the cpu value (index vi) of the samples in either
 * phase; *n: the signals they stand for (value index 0, "samples"). */
static double phase_share(const Perftools__Profiles__Profile *p, size_t vi, uint64_t *n)
{
	double hot = 0, cold = 0;
	*n = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		const Perftools__Profiles__Sample *s = p->sample[i];
		if (vi >= s->n_value || s->n_value < 1)
			continue;
		for (size_t k = 0; k < s->n_location_id; k++) {
			const char *f = loc_func(p, s->location_id[k]);
			if (strcmp(f, "phase_hot") == 0 || strcmp(f, "phase_cold") == 0) {
				*(f[6] == 'h' ? &hot : &cold) += (double)s->value[vi];
				*n += (uint64_t)s->value[0];
				break;
			}
		}
	}
	return hot + cold > 0 ? hot / (hot + cold) : 0.0;
}

static void *spinner(void *arg)
{
	uint64_t x = (uintptr_t)arg;
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		x = burn(x);
	sink = x;
	return NULL;
}

/* utime + stime of /proc/self/stat (fields 14 and 15), in ns; -1 on error. */
static int64_t proc_stat_ns(void)
{
	static long tck;
	char buf[1024], *p;
	unsigned long ut, st;
	FILE *f = fopen("/proc/self/stat", "re");
	if (!tck)
		tck = sysconf(_SC_CLK_TCK);
	if (!f)
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The name (field 2) may hold anything: count fields after its ')'. */
	if (!(p = strrchr(buf, ')')) ||
	    sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	return (int64_t)(ut + st) * (1000000000 / tck);
}

/* One point of the CPU log (the recorder's, and main's at both ends). */
static void log_point(void)
{
	uint32_t i = atomic_load(&cpu_n);
	if (i < LOG_MAX) {
		cpu_log[i].rt_ns = now_ns(CLOCK_REALTIME);
		cpu_log[i].cpu_ns = now_ns(CLOCK_PROCESS_CPUTIME_ID);
		cpu_log[i].stat_ns = proc_stat_ns();
		atomic_store(&cpu_n, i + 1);
	}
}

static void *recorder(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		log_point();
		struct timespec ts = { 0, 2000000 };
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* The process CPU time at realtime t, interpolated in the log (the /proc
 * figure with stat); -1 outside it. */
static double cpu_at(int64_t t, bool stat)
{
	uint32_t n = atomic_load(&cpu_n);
	for (uint32_t i = 1; i < n; i++) {
		const struct cpu_point *a = &cpu_log[i - 1], *b = &cpu_log[i];
		if (t < a->rt_ns || t > b->rt_ns)
			continue;
		if (stat && (a->stat_ns < 0 || b->stat_ns < 0))
			return -1;
		double ca = (double)(stat ? a->stat_ns : a->cpu_ns);
		double cb = (double)(stat ? b->stat_ns : b->cpu_ns);
		if (b->rt_ns == a->rt_ns)
			return ca;
		double f = (double)(t - a->rt_ns) / (double)(b->rt_ns - a->rt_ns);
		return ca + f * (cb - ca);
	}
	return -1;
}

struct outcome {
	int done;
	int error;
	int fd;
	char message[256];
	char note[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	o->fd = r->fd >= 0 ? dup(r->fd) : -1;
	snprintf(o->message, sizeof(o->message), "%s", r->error_message);
	snprintf(o->note, sizeof(o->note), "%s", r->note);
}

/* Read and gunzip fd into a malloc'd buffer. */
static int gunzip_fd(int fd, uint8_t **out, size_t *outlen)
{
	uint8_t in[65536];
	z_stream z;
	size_t cap = 1 << 20, len = 0;
	uint8_t *buf = malloc(cap);
	int r = -1;

	memset(&z, 0, sizeof(z));
	if (!buf || inflateInit2(&z, 15 + 32) != Z_OK) {
		free(buf);
		return -1;
	}
	for (;;) {
		ssize_t n = read(fd, in, sizeof(in));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		z.next_in = in;
		z.avail_in = (uInt)n;
		while (z.avail_in) {
			if (len == cap) {
				if (cap >= FILE_MAX)
					goto out;
				uint8_t *nb = realloc(buf, cap * 2);
				if (!nb)
					goto out;
				buf = nb;
				cap *= 2;
			}
			z.next_out = buf + len;
			z.avail_out = (uInt)(cap - len);
			int zr = inflate(&z, Z_NO_FLUSH);
			len = cap - z.avail_out;
			if (zr == Z_STREAM_END) {
				r = 0;
				goto out;
			}
			if (zr != Z_OK && zr != Z_BUF_ERROR)
				goto out;
		}
	}
out:
	inflateEnd(&z);
	if (r < 0) {
		free(buf);
		return -1;
	}
	*out = buf;
	*outlen = len;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "duration-ms", required_argument, NULL, 'd' },
		{ "frequency", required_argument, NULL, 'f' },
		{ "phases", optional_argument, NULL, 'p' },
		{ 0 }
	};
	struct prof_params params = PROF_PARAMS_INIT(.duration_ms = 3000, .frequency_hz = 1000);
	int nthreads = 2, c, err;
	bool phases = false;
	pthread_t th[16], rec, ph;

	while ((c = getopt_long(argc, argv, "t:d:f:", opts, NULL)) != -1) {
		switch (c) {
		case 't': nthreads = atoi(optarg); break;
		case 'd': params.duration_ms = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'f': params.frequency_hz = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'p':
			phases = true;
			if (optarg)
				round_ns = strtoll(optarg, NULL, 10) * 1000;
			break;
		default:
			fprintf(stderr, "usage: native_total [--threads N] [--duration-ms MS] "
				"[--frequency HZ] [--phases[=ROUND_US]]\n");
			return 2;
		}
	}
	if (nthreads < 0 || nthreads > 16 || params.duration_ms > 100000 || round_ns < 4000 ||
	    round_ns > 1000000000) {
		fprintf(stderr, "native_total: --threads 0..16, --duration-ms up to 100000, "
			"--phases 4..1000000 us\n");
		return 2;
	}
	prof_client *pc = prof_connect(NULL, &err);
	if (!pc) {
		fprintf(stderr, "native_total: cannot connect to profilingd: %s\n", strerror(-err));
		return 1;
	}
	/*
	 * An idle process has no window to measure: no recorder to wake it.
	 * The log's first point is taken here, before the request: on a loaded
	 * machine the recorder thread may first run after the capture began,
	 * and the window must lie inside the log.
	 */
	if (nthreads > 0) {
		log_point();
		pthread_create(&rec, NULL, recorder, NULL);
	}
	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, spinner, (void *)(uintptr_t)(i + 1));
	if (phases)
		pthread_create(&ph, NULL, phaser, (void *)(uintptr_t)7);

	struct outcome o = { .fd = -1 };
	uint64_t id;
	int r = prof_request(pc, PROF_STACK_SAMPLING, &params, "total", on_result, &o, &id);
	if (r < 0) {
		fprintf(stderr, "native_total: request refused: %s\n", prof_strerror(r));
		return 1;
	}
	while (!o.done) {
		r = prof_dispatch(pc, 1000);
		if (r < 0) {
			fprintf(stderr, "native_total: lost the daemon: %s\n", prof_strerror(r));
			return 1;
		}
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	if (phases)
		pthread_join(ph, NULL);
	if (nthreads > 0) {
		pthread_join(rec, NULL);
		log_point(); /* after the result: the window's end is inside too */
	}
	prof_close(pc);
	if (o.error) {
		fprintf(stderr, "native_total: capture failed: %s: %s\n", prof_strerror(o.error), o.message);
		return 1;
	}

	uint8_t *buf;
	size_t len;
	if (o.fd < 0 || lseek(o.fd, 0, SEEK_SET) < 0 || gunzip_fd(o.fd, &buf, &len) < 0) {
		fprintf(stderr, "native_total: the delivered result is not gzip\n");
		return 1;
	}
	Perftools__Profiles__Profile *p = perftools__profiles__profile__unpack(NULL, len, buf);
	free(buf);
	if (!p) {
		fprintf(stderr, "native_total: the delivered result is not a pprof Profile\n");
		return 1;
	}
	/* The CPU value: sample type "cpu" (the library's default). */
	size_t vi = SIZE_MAX;
	for (size_t i = 0; i < p->n_sample_type; i++) {
		int64_t s = p->sample_type[i]->type;
		if (s >= 0 && (size_t)s < p->n_string_table && strcmp(p->string_table[s], "cpu") == 0)
			vi = i;
	}
	double prof_ns = 0;
	uint64_t samples = 0;
	for (size_t i = 0; i < p->n_sample; i++) {
		if (vi < p->sample[i]->n_value)
			prof_ns += (double)p->sample[i]->value[vi];
		samples++;
	}
	double c0 = 0, c1 = 0, s0 = 0, s1 = 0;
	int64_t t_end = p->time_nanos + p->duration_nanos;
	if (nthreads > 0 && ((c0 = cpu_at(p->time_nanos, false)) < 0 ||
			     (c1 = cpu_at(t_end, false)) < 0 ||
			     (s0 = cpu_at(p->time_nanos, true)) < 0 ||
			     (s1 = cpu_at(t_end, true)) < 0)) {
		fprintf(stderr, "native_total: the profile's window is outside the CPU log\n");
		perftools__profiles__profile__free_unpacked(p, NULL);
		return 1;
	}
	double proc_ns = c1 - c0, stat_ns = s1 - s0;
	printf("samples=%llu profile_cpu_ms=%.1f process_cpu_ms=%.1f ratio=%.4f duration_ms=%.1f "
	       "has_cpu_type=%d proc_stat_cpu_ms=%.1f proc_stat_ratio=%.4f note=%s",
	       (unsigned long long)samples, prof_ns / 1e6, proc_ns / 1e6,
	       proc_ns > 0 ? prof_ns / proc_ns : 0.0, (double)p->duration_nanos / 1e6,
	       vi != SIZE_MAX, stat_ns / 1e6, stat_ns > 0 ? prof_ns / stat_ns : 0.0, o.note);
	if (phases) {
		uint64_t n;
		double share = phase_share(p, vi, &n);
		printf(" phase_hot_share=%.4f phase_samples=%llu comment=%s", share,
		       (unsigned long long)n, p->n_comment ? pstr(p, p->comment[0]) : "");
	}
	printf("\n");
	perftools__profiles__profile__free_unpacked(p, NULL);
	return 0;
}
