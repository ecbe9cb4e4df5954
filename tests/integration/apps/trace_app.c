/*
 * trace_app: three threads emit nested slices (outer > inner > instant)
 * and a counter into the flight recorder while burning some CPU; the app
 * asks for a system trace of itself and prints the delivered path.
 *
 *   trace_app [BACKGROUND_MS PRE_MS [trigger]]
 *
 * With arguments (trace_bg.sh) the threads run PRE_MS first, the request
 * asks for the last BACKGROUND_MS of the background trace, and the line
 * printed is "<T> <B> <tids> <path>": B this process's start in
 * CLOCK_BOOTTIME ns (/proc/self/stat, to the tick), T the CLOCK_BOOTTIME ns when the
 * request's synchronous answer came (so after its admission), tids the
 * comma-separated /proc/self/task just before the request. With
 * "trigger" an ANOMALY trigger capturing a system trace with those params
 * is registered first, and PRE_MS later the app reports an anomaly and
 * then makes a request the daemon refuses at once (an unknown type): the
 * daemon reads a connection's messages in order, so its answer comes
 * after the trigger fired, and T is taken then.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

static atomic_int stop;
static volatile unsigned long sink;

static void burn_us(long us)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i * 2654435761u;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < us);
}

static void *worker(void *arg)
{
	int id = (int)(long)arg;
	char name[16], outer[32], inner[32];
	snprintf(name, sizeof(name), "trace-w%d", id);
	snprintf(outer, sizeof(outer), "outer-%d", id);
	snprintf(inner, sizeof(inner), "inner-%d", id);
	pthread_setname_np(pthread_self(), name);
	for (long i = 0; !atomic_load(&stop); i++) {
		prof_trace_begin(outer);
		burn_us(1000);
		prof_trace_begin(inner);
		burn_us(500);
		prof_trace_instant("tick");
		prof_trace_end();
		prof_trace_end();
		prof_trace_counter("iterations", i);
		usleep(2000);
	}
	return NULL;
}

struct outcome {
	int done, error;
	char path[4096], msg[256];
};

/* The listener of trigger mode: the anomaly's result, not the refusal's copy. */
static void on_trigger_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	if (r->trigger != PROF_TRIGGER_ANOMALY)
		return;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
}

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
}

int main(int argc, char **argv)
{
	pthread_t th[3];
	int err;
	unsigned bg_ms = argc > 2 ? (unsigned)strtoul(argv[1], NULL, 10) : 0;
	unsigned pre_ms = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 0;
	struct timespec t;
	for (long i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, worker, (void *)(i + 1));
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "trace_app: connect: %s\n", strerror(-err));
		return 1;
	}
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 1000, .buffer_kb = 2048,
						.background_ms = bg_ms);
	bool trigger = argc > 3 && !strcmp(argv[3], "trigger");
	if (trigger) {
		struct prof_trigger tr = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_ANOMALY,
							   .capture = PROF_SYSTEM_TRACE, .params = &p);
		prof_set_result_listener(c, on_trigger_result, &o);
		int r = prof_add_trigger(c, &tr);
		if (r < 0) {
			fprintf(stderr, "trace_app: trigger refused: %s\n", prof_strerror(r));
			return 1;
		}
	}
	if (pre_ms)
		usleep(pre_ms * 1000u);
	char tids[1024] = "";
	DIR *d = argc > 2 ? opendir("/proc/self/task") : NULL;
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] != '.' && strlen(tids) + strlen(e->d_name) + 2 < sizeof(tids))
			snprintf(tids + strlen(tids), sizeof(tids) - strlen(tids), "%s%s",
				 tids[0] ? "," : "", e->d_name);
	if (d)
		closedir(d);
	int r;
	if (trigger) {
		prof_report_anomaly("bg-trace");
		r = prof_request(c, (enum prof_type)99, NULL, "sync", NULL, NULL, NULL);
		clock_gettime(CLOCK_BOOTTIME, &t);
		r = r == -PROF_E_INVALID_REQUEST ? 0 : -PROF_E_UNKNOWN;
	} else {
		r = prof_request(c, PROF_SYSTEM_TRACE, &p, "trace", on_result, &o, NULL);
		/* The daemon answers after admission, which is where the
		 * background part ends: T is no earlier than that. */
		clock_gettime(CLOCK_BOOTTIME, &t);
	}
	if (r < 0) {
		fprintf(stderr, "trace_app: refused: %s\n", prof_strerror(r));
		return 1;
	}
	while (!o.done && prof_dispatch(c, 1000) >= 0)
		;
	atomic_store(&stop, 1);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	prof_close(c);
	if (!o.done || o.error) {
		fprintf(stderr, "trace_app: capture failed: %s: %s\n", prof_strerror(o.error), o.msg);
		return 1;
	}
	if (argc > 2) {
		/* Field 22 of /proc/self/stat, after the ")" that ends comm. */
		char st[1024] = "";
		unsigned long long began = 0;
		FILE *f = fopen("/proc/self/stat", "re");
		if (f && fgets(st, sizeof(st), f) && strrchr(st, ')')) {
			char *q = strrchr(st, ')') + 2;
			for (int i = 3; i < 22 && q; i++)
				q = strchr(q, ' ') ? strchr(q, ' ') + 1 : NULL;
			if (q)
				began = strtoull(q, NULL, 10) * (1000000000ull / sysconf(_SC_CLK_TCK));
		}
		if (f)
			fclose(f);
		printf("%llu %llu %s ", (unsigned long long)t.tv_sec * 1000000000ull +
		       (unsigned long long)t.tv_nsec, began, tids);
	}
	printf("%s\n", o.path);
	return 0;
}
