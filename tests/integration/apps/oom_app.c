/*
 * oom_app run [BYTES]: registers an OOM trigger (warning at 50 % of its
 * memory cgroup's limit, or at BYTES) and then leaks 2 MiB every 50 ms from leak_here() until
 * the OOM killer ends it; prints the path of the heap capture it was given
 * before that. oom_app collect: the same app later, taking the capture
 * again with the note that links it to the kill. oom_app xattr DIR NAME
 * VALUE: set a user xattr (a cgroup marked as systemd-oomd marks it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "util.h"

static int got;
static char note[256];

static void on_result(const struct prof_result *r, void *ud)
{
	if (r->trigger != PROF_TRIGGER_OOM)
		return;
	if (r->error) {
		fprintf(stderr, "oom_app: OOM capture failed: %s: %s\n", prof_strerror(r->error),
			r->error_message);
		return;
	}
	printf("%s\n", r->path);
	fflush(stdout);
	snprintf(note, sizeof(note), "%s", r->note);
	got = 1;
}

__attribute__((noinline)) static void *leak_here(size_t n)
{
	char *p = malloc(n);
	if (p)
		memset(p, 0x5a, n); /* commit it: the cgroup counts touched pages */
	return p;
}

int main(int argc, char **argv)
{
	int err;
	if (argc > 4 && !strcmp(argv[1], "xattr"))
		return setxattr(argv[2], argv[3], argv[4], strlen(argv[4]), 0) ? 1 : 0;
	prof_client *c = prof_connect(NULL, &err);
	if (!c) {
		fprintf(stderr, "oom_app: connect: %s\n", strerror(-err));
		return 1;
	}
	prof_set_result_listener(c, on_result, NULL);
	if (argc > 1 && !strcmp(argv[1], "collect")) {
		uint64_t end = util_mono_ms() + 3000;
		while (!got && util_mono_ms() < end)
			prof_dispatch(c, 100);
		if (!got)
			return 1;
		fprintf(stderr, "oom_app: note: %s\n", note);
		return strstr(note, "OOM-killed") ? 0 : 3;
	}
	struct prof_trigger t = PROF_TRIGGER_INIT(.type = PROF_TRIGGER_OOM, .memory_percent = 50);
	if (argc > 2)
		t.memory_bytes = strtoull(argv[2], NULL, 10);
	int r = prof_add_trigger(c, &t);
	if (r < 0) {
		fprintf(stderr, "oom_app: add trigger: %s\n", prof_strerror(r));
		return 1;
	}
	for (int i = 0; i < 100000; i++) {
		if (!leak_here(2u << 20))
			fprintf(stderr, "oom_app: malloc failed\n");
		prof_dispatch(c, 50);
	}
	return 2; /* never reached under a limit */
}
