/*
 * bench/admission: admission decisions per second with persistence on,
 * from many connected clients. N client processes, each with its own
 * connection and no runtime agent, send capture requests back to back for
 * D seconds; every admitted request is written to the rate-limit store and
 * the session table before its reply. Prints the decision rate, the split
 * of outcomes, the p50/p99 request->reply latency and the clients' CPU
 * time per decision (user + system of all client processes, from
 * getrusage: what the 32 clients cost the shared cores, whatever the
 * load), and the share of the machine's CPU time left idle while they
 * ran. Asserts nothing. What the server behind the socket does with a
 * request (profilingd persists each admission before its reply;
 * admission_floor decides nothing) is for admission.sh to say.
 *   usage: admission CLIENTS SECONDS  (PROFILINGD_SOCKET names the server)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

#define MAX_LAT 200000

struct worker_out {
	unsigned long admitted, refused_busy, refused_other;
	unsigned nlat;
	float lat_us[MAX_LAT];
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void worker(struct worker_out *o, double secs)
{
	int err;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "admission: connect: %s\n", strerror(-err));
		_exit(1);
	}
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	double end = now_s() + secs;
	while (now_s() < end) {
		double t0 = now_s();
		/* A heap profile: without an agent it fails at once (stack samples
		 * would be taken agentless, which is not what is measured here). */
		int r = prof_request(c, PROF_HEAP_PROFILE, &p, NULL, NULL, NULL, NULL);
		double dt = now_s() - t0;
		if (o->nlat < MAX_LAT)
			o->lat_us[o->nlat++] = (float)(dt * 1e6);
		if (r == 0)
			o->admitted++;
		else if (r == -PROF_E_PROFILING_IN_PROGRESS)
			o->refused_busy++;
		else
			o->refused_other++;
		/* Drain the failure results (no runtime) so nothing piles up. */
		prof_dispatch(c, 0);
	}
	prof_close(c);
	_exit(0);
}

/*
 * The machine's CPU time, idle (idle + iowait) and in all, from /proc/stat
 * in USER_HZ ticks: around the clients' run alone, without their start or
 * the sort below, which run on one CPU. 0, -errno of fopen, or -EIO when
 * the line is not what it should be.
 */
static int cpu_times(unsigned long long *idle, unsigned long long *all)
{
	unsigned long long v[8] = { 0 };
	FILE *f = fopen("/proc/stat", "r");
	if (!f)
		return -errno;
	int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		       &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n != 8)
		return -EIO;
	*idle = v[3] + v[4];
	*all = 0;
	for (int i = 0; i < 8; i++)
		*all += v[i];
	return 0;
}

static int cmpf(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 32;
	double secs = argc > 2 ? atof(argv[2]) : 5;
	if (n < 1 || n > 512 || secs <= 0) {
		fprintf(stderr, "usage: admission CLIENTS(1..512) SECONDS\n");
		return 2;
	}
	setenv("PROFILING_NO_AGENT", "1", 1);
	size_t sz = sizeof(struct worker_out) * (size_t)n;
	struct worker_out *outs = mmap(NULL, sz, PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (outs == MAP_FAILED)
		return 1;
	unsigned long long idle0 = 0, all0 = 0, idle1 = 0, all1 = 0;
	int times = cpu_times(&idle0, &all0);
	double t0 = now_s();
	for (int i = 0; i < n; i++)
		if (fork() == 0)
			worker(&outs[i], secs);
	for (int i = 0; i < n; i++)
		wait(NULL);
	double el = now_s() - t0;
	if (times == 0)
		times = cpu_times(&idle1, &all1);
	unsigned long adm = 0, busy = 0, other = 0, total_lat = 0;
	for (int i = 0; i < n; i++) {
		adm += outs[i].admitted;
		busy += outs[i].refused_busy;
		other += outs[i].refused_other;
		total_lat += outs[i].nlat;
	}
	float *all = malloc(sizeof(float) * (total_lat ? total_lat : 1));
	size_t k = 0;
	for (int i = 0; i < n; i++)
		for (unsigned j = 0; j < outs[i].nlat; j++)
			all[k++] = outs[i].lat_us[j];
	qsort(all, k, sizeof(float), cmpf);
	unsigned long dec = adm + busy + other;
	printf("admission: %d clients, %.1f s\n", n, el);
	printf("  decisions   %lu (%.0f/s)\n", dec, dec / el);
	printf("  admitted    %lu (%.0f/s)\n", adm, adm / el);
	printf("  refused     %lu in progress, %lu other\n", busy, other);
	if (k)
		printf("  latency     p50 %.0f us, p99 %.0f us, max %.0f us\n", all[k / 2],
		       all[(size_t)(k * 0.99)], all[k - 1]);
	struct rusage ru;
	if (dec && getrusage(RUSAGE_CHILDREN, &ru) == 0) {
		double cpu_us = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
				ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
		printf("  clients cpu %.2f us/decision (user %.2f, system %.2f)\n", cpu_us / dec,
		       (ru.ru_utime.tv_sec * 1e6 + ru.ru_utime.tv_usec) / dec,
		       (ru.ru_stime.tv_sec * 1e6 + ru.ru_stime.tv_usec) / dec);
	}
	if (times == 0 && all1 > all0)
		printf("  idle        %.0f %% of the machine's CPU time, while the clients ran\n",
		       100.0 * (double)(idle1 - idle0) / (double)(all1 - all0));
	free(all);
	return 0;
}
