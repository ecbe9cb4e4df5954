/*
 * Attack: name another process's thread, or a made-up one, as the thread
 * whose allocation failed (issue #20). The daemon passes an OOM event's
 * tid to the redactor, which marks that thread's stack in a heap graph as
 * the OOM's; a runtime that could make it pick a thread that is not its
 * own would steer the daemon's reading of /proc at another process.
 *
 *   hostile_oom_tid TID    register an OOM trigger (heap profile), send
 *                          RuntimeEvent{kind 1, hold, tid TID}, serve the
 *                          capture it starts, wait for the result
 *   hostile_oom_tid self   the same with the tid of a second thread of its
 *                          own (the friendly case: it must be kept)
 *
 * Prints "pid P tid T"; the driver reads the daemon's log for what it
 * kept. Exit 0 when the capture was delivered, 2 when the test could not
 * run.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "hrt.h"
#include "profilingd.pb-c.h"
#include "wire.h"

static void *idle(void *arg)
{
	(void)arg;
	pause();
	return NULL;
}

int main(int argc, char **argv)
{
	const char *caps[] = { "heap_profile" };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_OOM,
						  .capture = PROF_HEAP_PROFILE, .params = &p);
	struct hrt_outcome o = { 0 };
	uint32_t tid;
	uint64_t sid;
	int fd, which;

	signal(SIGPIPE, SIG_IGN);
	HCHECK(argc == 2, "usage: hostile_oom_tid TID|self");
	if (!strcmp(argv[1], "self")) {
		pthread_t th;
		HCHECK(pthread_create(&th, NULL, idle, NULL) == 0, "pthread_create");
		/* The new thread's tid, found by its name. */
		HCHECK(pthread_setname_np(th, "oom-victim") == 0, "setname");
		tid = 0;
		for (uint32_t cand = (uint32_t)getpid() + 1; cand < (uint32_t)getpid() + 4096 && !tid;
		     cand++) {
			char path[64], comm[32] = "";
			snprintf(path, sizeof(path), "/proc/self/task/%u/comm", cand);
			FILE *f = fopen(path, "r");
			if (!f)
				continue;
			if (fgets(comm, sizeof(comm), f) && !strncmp(comm, "oom-victim", 10))
				tid = cand;
			fclose(f);
		}
		HCHECK(tid, "cannot find the second thread's tid");
	} else {
		char *end;
		unsigned long long v = strtoull(argv[1], &end, 10);
		HCHECK(*argv[1] && !*end && v <= UINT32_MAX, "bad tid %s", argv[1]);
		tid = (uint32_t)v;
	}
	prof_client *c = hrt_client();
	int rt = hrt_runtime(caps, 1);
	HCHECK(prof_set_result_listener(c, hrt_on_result, &o) == 0, "result listener");
	int r = prof_add_trigger(c, &t);
	HCHECK(r == 0, "OOM trigger refused: %s", prof_strerror(-r));

	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeEvent ev = PD__RUNTIME_EVENT__INIT;
	ev.kind = 1;
	ev.has_value = 1;
	ev.value = 4096;
	ev.has_hold = 1;
	ev.hold = 1;
	ev.has_tid = 1;
	ev.tid = tid;
	m.msg_case = PD__RUNTIME_MSG__MSG_EVENT;
	m.event = &ev;
	HCHECK(wire_send_msg(rt, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send RuntimeEvent");
	printf("pid %d tid %u\n", (int)getpid(), (unsigned)tid);
	fflush(stdout);

	/* Serve the capture the OOM started (a heap arm may come first). */
	while ((which = hrt_read(rt, &fd, &sid, 20000)) != PD__DAEMON_TO_RUNTIME__MSG_CAPTURE)
		if (fd >= 0)
			close(fd);
	HCHECK(fd >= 0, "a capture without its fd");
	uint64_t n = hrt_write_pprof(fd);
	close(fd);
	hrt_done(rt, sid, n);
	hrt_wait(c, &o, 20000);
	HCHECK(o.done && o.error == 0, "the OOM capture failed: %d %s", o.error, o.msg);
	prof_clear_triggers(c);
	close(rt);
	prof_close(c);
	return 0;
}
