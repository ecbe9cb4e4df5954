/*
 * jvm_cancel PID: as root, ask profilingd for a 20 s stack capture of a JVM
 * running the JVMTI agent, cancel it after 500 ms, and check that the
 * result says CANCELLED; then ask for a 1 s capture, which must be
 * delivered (the agent is not stuck in the cancelled one). Prints the
 * second result's path.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <profiling/profiling.h>

struct outcome {
	int done, error;
	char path[4096];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->path, sizeof(o->path), "%s", r->path);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: jvm_cancel PID\n");
		return 2;
	}
	int err;
	setenv("PROFILING_NO_AGENT", "1", 1);
	prof_client *cl = prof_connect(NULL, &err);
	if (!cl) {
		fprintf(stderr, "jvm_cancel: connect: %s\n", strerror(-err));
		return 1;
	}
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 20000, .frequency_hz = 100,
				 .target_pid = (uint32_t)strtoul(argv[1], NULL, 10));
	struct outcome a = { 0 }, b = { 0 };
	uint64_t id = 0;
	int r = prof_request(cl, PROF_STACK_SAMPLING, &p, "cancel", on_result, &a, &id);
	if (r < 0) {
		fprintf(stderr, "jvm_cancel: refused: %s\n", prof_strerror(r));
		return 1;
	}
	prof_dispatch(cl, 500);
	if (a.done || prof_cancel(cl, id) < 0) {
		fprintf(stderr, "jvm_cancel: could not cancel (done %d)\n", a.done);
		return 1;
	}
	for (int i = 0; i < 30 && !a.done; i++)
		prof_dispatch(cl, 1000);
	if (!a.done || a.error != PROF_E_CANCELLED) {
		fprintf(stderr, "jvm_cancel: cancelled capture ended with %s\n",
			a.done ? prof_strerror(a.error) : "nothing");
		return 1;
	}
	/* The daemon may still be waiting for the agent's CaptureDone: retry.
	 * 3 s, as the first capture of jvm_stack.sh: the caller checks a 3:1
	 * ratio, and 1 s at 100 Hz (~25 cold samples) swung past its band in
	 * the sanitizer build (86/13). */
	p.duration_ms = 3000;
	for (int tries = 0; tries < 50; tries++) {
		r = prof_request(cl, PROF_STACK_SAMPLING, &p, "after", on_result, &b, NULL);
		if (r != -PROF_E_PROFILING_IN_PROGRESS)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 100000000 }, NULL);
	}
	if (r < 0) {
		fprintf(stderr, "jvm_cancel: second request refused: %s\n", prof_strerror(r));
		return 1;
	}
	for (int i = 0; i < 60 && !b.done; i++)
		prof_dispatch(cl, 1000);
	prof_close(cl);
	if (!b.done || b.error) {
		fprintf(stderr, "jvm_cancel: capture after the cancel failed: %s\n",
			b.done ? prof_strerror(b.error) : "no result");
		return 1;
	}
	printf("%s\n", b.path);
	return 0;
}
