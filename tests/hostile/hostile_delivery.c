/*
 * hostile_delivery: the attacker of ht_delivery. Its results sit in its own
 * directory, and the daemon opens them again (with CAP_DAC_OVERRIDE) to
 * deliver them later; between the two the app may put anything at the path.
 *
 *   hostile_delivery queue N DIR   make N stack captures of itself and leave
 *                                  them unacknowledged (DIR is its result
 *                                  directory, watched for each new file);
 *                                  prints one path per line
 *   hostile_delivery listen MS     set a result listener for MS ms; prints
 *                                  "got <path> uid=<owner> nlink=<links>"
 *                                  for each result delivered with an fd
 *
 * Exit 0, 1 on a local error.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

static volatile uint64_t sink;

static int count_files(const char *dir, char *newest, size_t n)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int k = 0;
	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "stack_", 6) != 0)
			continue;
		k++;
		if (newest && strcmp(e->d_name, newest) > 0)
			snprintf(newest, n, "%s", e->d_name);
	}
	closedir(d);
	return k;
}

static void spin_ms(unsigned ms)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	uint64_t x = 1;
	do {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < ms);
	sink = x;
}

/* Never dispatches: the results reach the socket and stay unread, unacked. */
static int queue(int n, const char *dir)
{
	int err;
	prof_client *cl = prof_connect(NULL, &err);
	if (!cl) {
		fprintf(stderr, "hostile_delivery: connect: %d\n", err);
		return 1;
	}
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 200, .frequency_hz = 100);
	for (int i = 0; i < n; i++) {
		char newest[256] = "";
		int before = count_files(dir, NULL, 0);
		int r = prof_request(cl, PROF_STACK_SAMPLING, &p, "queued", NULL, NULL, NULL);
		if (r < 0) {
			fprintf(stderr, "hostile_delivery: refused: %s\n", prof_strerror(r));
			return 1;
		}
		time_t until = time(NULL) + 60;
		while (count_files(dir, newest, sizeof(newest)) == before && time(NULL) < until)
			spin_ms(20);
		if (!newest[0]) {
			fprintf(stderr, "hostile_delivery: capture %d never arrived\n", i);
			return 1;
		}
		printf("%s/%s\n", dir, newest);
		/* one session per process: let this one end before the next */
		usleep(300000);
	}
	fflush(stdout);
	_exit(0); /* no prof_close: nothing is read or acknowledged */
}

static void on_result(const struct prof_result *r, void *ud)
{
	struct stat st;
	(void)ud;
	if (r->fd < 0 || fstat(r->fd, &st) < 0) {
		printf("result %llu without a file (error %d)\n", (unsigned long long)r->request_id,
		       r->error);
		return;
	}
	printf("got %s uid=%u nlink=%lu\n", r->path, (unsigned)st.st_uid, (unsigned long)st.st_nlink);
}

static int listen_ms(unsigned ms)
{
	int err;
	setenv("PROFILING_NO_AGENT", "1", 1);
	prof_client *cl = prof_connect(NULL, &err);
	if (!cl) {
		fprintf(stderr, "hostile_delivery: connect: %d\n", err);
		return 1;
	}
	if (prof_set_result_listener(cl, on_result, NULL) < 0) {
		fprintf(stderr, "hostile_delivery: no listener\n");
		return 1;
	}
	time_t until = time(NULL) + (time_t)(ms + 999) / 1000;
	while (time(NULL) < until)
		prof_dispatch(cl, 100);
	prof_close(cl);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 4 && !strcmp(argv[1], "queue"))
		return queue(atoi(argv[2]), argv[3]);
	if (argc == 3 && !strcmp(argv[1], "listen"))
		return listen_ms((unsigned)atoi(argv[2]));
	fprintf(stderr, "usage: hostile_delivery queue N DIR | listen MS\n");
	return 2;
}
