/*
 * it_burst UID N [--pause-after K DIR] [--type T]: N capture requests as
 * app UID, each from a fresh child process (so that the one-session-per-
 * process rule never interferes), one after the other. Every child sets a
 * result listener and checks that a refusal also reaches it, with the same
 * request id. Prints "admitted=A process=P system=S disk=D other=O".
 * With --pause-after K, after K requests it creates DIR/paused and waits
 * for DIR/go (the test kills and restarts the daemon meanwhile).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "util.h"

struct seen {
	int done;
	uint64_t id;
	int error;
};

static void on_listener(const struct prof_result *r, void *ud)
{
	struct seen *s = ud;
	if (r->request_id == s->id) {
		s->done = 1;
		s->error = r->error;
	}
}

/* Child: one request. Exit status = PROF_E_* (0 admitted), or 200+ on a fault. */
static int one_request(uid_t uid, int type)
{
	int err = 0;
	prof_client *c = NULL;

	if (setgid(uid) < 0 || setuid(uid) < 0)
		return 201;
	/* The daemon may be restarting: retry the connection for up to 10 s. */
	for (int i = 0; i < 200 && !c; i++) {
		c = prof_connect(NULL, &err);
		if (!c)
			usleep(50000);
	}
	if (!c)
		return 202;
	struct seen s = { 0 };
	if (prof_set_result_listener(c, on_listener, &s) < 0)
		return 203;
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	int r = prof_request(c, (enum prof_type)type, &p, "burst", NULL, NULL, &s.id);
	if (r == -PROF_E_UNKNOWN)
		return 204;
	if (r < 0) {
		uint64_t end = util_mono_ms() + 3000;
		while (!s.done && util_mono_ms() < end)
			if (prof_dispatch(c, 100) < 0)
				break;
		if (!s.done || s.error != -r) {
			fprintf(stderr, "it_burst: refusal %d (id %llu) did not reach the listener\n", -r,
				(unsigned long long)s.id);
			return 205;
		}
	}
	prof_close(c);
	return -r;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: it_burst UID N [--pause-after K DIR] [--type T]\n");
		return 2;
	}
	uid_t uid = (uid_t)atoi(argv[1]);
	int n = atoi(argv[2]), pause_after = -1, type = PROF_STACK_SAMPLING;
	const char *dir = NULL;
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "--pause-after") && i + 2 < argc) {
			pause_after = atoi(argv[++i]);
			dir = argv[++i];
		} else if (!strcmp(argv[i], "--type") && i + 1 < argc) {
			type = atoi(argv[++i]);
		}
	}
	int admitted = 0, process = 0, system_ = 0, disk = 0, other = 0;
	for (int i = 0; i < n; i++) {
		if (i == pause_after) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/paused", dir);
			fclose(fopen(path, "w"));
			snprintf(path, sizeof(path), "%s/go", dir);
			struct stat st;
			while (stat(path, &st) < 0)
				usleep(20000);
		}
		pid_t pid = fork();
		if (pid == 0)
			_exit(one_request(uid, type));
		int status = 0;
		waitpid(pid, &status, 0);
		int code = WIFEXITED(status) ? WEXITSTATUS(status) : 255;
		switch (code) {
		case 0: admitted++; break;
		case PROF_E_RATE_LIMIT_PROCESS: process++; break;
		case PROF_E_RATE_LIMIT_SYSTEM: system_++; break;
		case PROF_E_NO_DISK_SPACE: disk++; break;
		default:
			fprintf(stderr, "it_burst: request %d ended with %d\n", i, code);
			other++;
		}
	}
	printf("admitted=%d process=%d system=%d disk=%d other=%d\n", admitted, process, system_,
	       disk, other);
	return other ? 1 : 0;
}
