/*
 * it_flood_admit UID CLIENTS DIR: CLIENTS processes as app UID, each with
 * one connection and no runtime agent, send heap-profile requests back to
 * back (without an agent each fails at once, so the one-session-per-
 * process rule frees quickly) until the daemon goes away. Each appends
 * the id of every request whose reply said "admitted" to DIR/<i>.ids,
 * written before the next request, so that a test can kill -9 the daemon
 * under the flood and check that every admitted id is on its disk.
 * Each failure result a client receives (its listener) appends its id to
 * DIR/<i>.failed, so that a test can check that the session's end it
 * reports was on disk before it left (session ends share the loop turn's
 * group commit, svc_db.c).
 * DIR/started appears once every client has had a reply. Exit 0 when
 * every client ended on a lost daemon, 1 on another fault.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <profiling/profiling.h>

/* The listener: the id of each failure result, appended to <i>.failed. */
static void on_result(const struct prof_result *r, void *ud)
{
	char line[32];
	int fd = *(int *)ud;
	if (!r->error)
		return;
	int len = snprintf(line, sizeof(line), "%llu\n", (unsigned long long)r->request_id);
	if (write(fd, line, (size_t)len) != len)
		_exit(15);
}

static int client(uid_t uid, int i, const char *dir, int ready_fd)
{
	char path[4096], line[32];
	int err = 0;

	if (setgid(uid) < 0 || setuid(uid) < 0)
		return 10;
	snprintf(path, sizeof(path), "%s/%d.ids", dir, i);
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	snprintf(path, sizeof(path), "%s/%d.failed", dir, i);
	int ffd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	prof_client *c = fd >= 0 && ffd >= 0 ? prof_connect(NULL, &err) : NULL;
	if (!c || prof_set_result_listener(c, on_result, &ffd) < 0)
		return 11;
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	for (unsigned n = 0;; n++) {
		uint64_t id = 0;
		int r = prof_request(c, PROF_HEAP_PROFILE, &p, "flood", NULL, NULL, &id);
		if (n == 0 && write(ready_fd, "r", 1) != 1)
			return 12;
		if (r == 0) {
			int len = snprintf(line, sizeof(line), "%llu\n", (unsigned long long)id);
			if (write(fd, line, (size_t)len) != len)
				return 13;
		} else if (r != -PROF_E_PROFILING_IN_PROGRESS) {
			/* The daemon is gone (or refused for another reason: the
			 * test's caps cannot run out, so that is a fault too). */
			return r == -PROF_E_UNKNOWN || r == -PROF_E_EXECUTING ? 0 : 14;
		}
		/* The failure results (no runtime): drain them, or they pile up. */
		if (prof_dispatch(c, 0) < 0)
			return 0;
	}
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: it_flood_admit UID CLIENTS DIR\n");
		return 2;
	}
	uid_t uid = (uid_t)atoi(argv[1]);
	int n = atoi(argv[2]), pfd[2];
	if (n < 1 || n > 256 || pipe(pfd) < 0)
		return 2;
	setenv("PROFILING_NO_AGENT", "1", 1);
	for (int i = 0; i < n; i++)
		if (fork() == 0) {
			close(pfd[0]);
			_exit(client(uid, i, argv[3], pfd[1]));
		}
	close(pfd[1]);
	/* Every client's first reply, then "started" for the test. */
	char b;
	int got = 0;
	while (got < n && read(pfd[0], &b, 1) == 1)
		got++;
	char path[4096];
	snprintf(path, sizeof(path), "%s/started", argv[3]);
	int sfd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (sfd >= 0)
		close(sfd);
	int bad = 0, status;
	while (wait(&status) > 0)
		if (!WIFEXITED(status) || WEXITSTATUS(status)) {
			fprintf(stderr, "it_flood_admit: a client ended with %d\n",
				WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
			bad = 1;
		}
	return bad;
}
