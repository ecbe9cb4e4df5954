/*
 * Runs profilingd-redact for a finished capture: fork, drop the child to
 * the redact user (no groups, no capabilities, no_new_privs), cap its
 * address space and CPU time, exec the redactor with the raw artifact on
 * fd 0, the result file on fd 1 and a pipe on fd 2. Its exit is watched
 * through a pidfd in the event loop; past redact_timeout_ms it is killed.
 */
#include "svc.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "util.h"

#define MAX_ARGS (16 + 2 * SVC_MAX_DLP)
#define MSG_MAX 256

struct svc_redact {
	pid_t pid;
	int pidfd, errfd;
	struct event *ev_exit, *ev_timer;
	svc_redact_cb cb;
	void *ud;
	bool timed_out;
};

static struct event_base *base;
static const struct svc_config *cfg;
static char redactor[SVC_PATH_MAX];
static uid_t run_uid;
static gid_t run_gid;
static bool drop_privs;

/* "tid,tid,..." of pid's threads, at most SVC_REDACT_TIDS_MAX of them. */
static void list_tids(pid_t pid, char *out, size_t n)
{
	char dir[64];
	size_t pos = 0;
	int count = 0;
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	struct dirent *de;
	out[0] = '\0';
	if (!d)
		return;
	while ((de = readdir(d)) && count < SVC_REDACT_TIDS_MAX) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		int w = snprintf(out + pos, n - pos, "%s%s", pos ? "," : "", de->d_name);
		if (w < 0 || (size_t)w >= n - pos)
			break;
		pos += (size_t)w;
		count++;
	}
	closedir(d);
}

static int find_redactor(void)
{
	char self[SVC_PATH_MAX];
	const char *cand[3];
	char c0[SVC_PATH_MAX + 32], c1[SVC_PATH_MAX + 48];
	int n = 0;

	if (cfg->redactor[0]) {
		cand[n++] = cfg->redactor;
	} else {
		/* Beside the daemon (installed), or the build tree's redact/. */
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (len > 0) {
			self[len] = '\0';
			char *slash = strrchr(self, '/');
			if (slash)
				*slash = '\0';
			util_fmt(c0, sizeof(c0), "%s/profilingd-redact", self);
			util_fmt(c1, sizeof(c1), "%s/../redact/profilingd-redact", self);
			cand[n++] = c0;
			cand[n++] = c1;
		}
		cand[n++] = PROFILINGD_LIBEXECDIR "/profilingd-redact";
	}
	for (int i = 0; i < n; i++) {
		if (access(cand[i], X_OK) == 0) {
			if (!realpath(cand[i], redactor))
				util_strlcpy(redactor, cand[i], sizeof(redactor));
			return 0;
		}
	}
	LOG_E("profilingd-redact not found (tried %s%s%s); set [redact] redactor", cand[0],
	      n > 1 ? " and others" : "", "");
	return -ENOENT;
}

int svc_redact_init(struct event_base *b, const struct svc_config *c)
{
	int r;
	base = b;
	cfg = c;
	if ((r = find_redactor()) < 0)
		return r;
	if (geteuid() == 0) {
		struct passwd *pw = getpwnam(cfg->redact_user);
		if (!pw) {
			LOG_E("redact user '%s' does not exist", cfg->redact_user);
			return -ENOENT;
		}
		if (pw->pw_uid == 0) {
			LOG_E("redact user '%s' is root; pick an unprivileged one", cfg->redact_user);
			return -EINVAL;
		}
		run_uid = pw->pw_uid;
		run_gid = pw->pw_gid;
		drop_privs = true;
	} else {
		LOG_W("not running as root: the redactor runs as uid %u without a user switch",
		      (unsigned)geteuid());
	}
	LOG_I("redactor %s, as %s", redactor, drop_privs ? cfg->redact_user : "this user");
	return 0;
}

void svc_redact_fini(void)
{
}

static void finish(struct svc_redact *h, int status)
{
	char msg[MSG_MAX];
	ssize_t n = read(h->errfd, msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	char *nl = strchr(msg, '\n');
	if (nl)
		*nl = '\0';
	int code;
	if (h->timed_out) {
		code = SVC_REDACT_TIMEOUT;
		util_fmt(msg, sizeof(msg), "redactor killed after %u ms", cfg->redact_timeout_ms);
	} else if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
	} else {
		code = SVC_REDACT_CRASHED;
		util_fmt(msg, sizeof(msg), "redactor died of signal %d%s", WTERMSIG(status),
			 WTERMSIG(status) == SIGSYS ? " (seccomp)" :
			 WTERMSIG(status) == SIGKILL ? " (memory or CPU limit)" : "");
	}
	svc_redact_cb cb = h->cb;
	void *ud = h->ud;
	event_free(h->ev_exit);
	event_free(h->ev_timer);
	close(h->pidfd);
	close(h->errfd);
	free(h);
	cb(ud, code, msg);
}

static void exit_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_redact *h = arg;
	int status = 0;
	if (waitpid(h->pid, &status, WNOHANG) != h->pid)
		return;
	finish(h, status);
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_redact *h = arg;
	h->timed_out = true;
	kill(h->pid, SIGKILL);
	/* exit_cb reaps it when the pidfd turns readable. */
}

/* In the child, before exec: only async-signal-safe calls. */
static void child(int in_fd, int out_fd, int err_w, char **argv)
{
	struct rlimit as = { cfg->redact_max_memory, cfg->redact_max_memory };
	rlim_t secs = (cfg->redact_timeout_ms + 999) / 1000 + 1;
	struct rlimit cpu = { secs, secs + 1 };

	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_w, 2) < 0)
		_exit(71);
#ifndef PROFILINGD_SANITIZE_BUILD
	/* Sanitizer runtimes reserve terabytes of shadow: no address-space cap there. */
	setrlimit(RLIMIT_AS, &as);
#else
	(void)as;
#endif
	setrlimit(RLIMIT_CPU, &cpu);
	if (drop_privs) {
		if (setgroups(0, NULL) < 0 || setresgid(run_gid, run_gid, run_gid) < 0 ||
		    setresuid(run_uid, run_uid, run_uid) < 0)
			_exit(72);
	}
	/* The redactor sets no_new_privs too; doing it here covers exec. */
	syscall(SYS_prctl, 38 /* PR_SET_NO_NEW_PRIVS */, 1, 0, 0, 0);
	char *envp[] = { NULL };
	execve(redactor, argv, envp);
	_exit(73);
}

int svc_redact_start(int in_fd, int out_fd, const char *format, pid_t app_pid,
		     svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char pids[16], tids[SVC_REDACT_TIDS_MAX * 12];
	char *argv[MAX_ARGS];
	int n = 0, pipefd[2];

	/* The app's threads now; a trace names them by tid. */
	snprintf(pids, sizeof(pids), "%d", (int)app_pid);
	tids[0] = '\0';
	list_tids(app_pid, tids, sizeof(tids));
	argv[n++] = "profilingd-redact";
	argv[n++] = "--format";
	argv[n++] = (char *)format;
	argv[n++] = "--pids";
	argv[n++] = pids;
	if (tids[0]) {
		argv[n++] = "--tids";
		argv[n++] = tids;
	}
	if (!drop_privs)
		argv[n++] = "--allow-root";
	if (cfg->dlp_builtin)
		argv[n++] = "--dlp-builtin";
	for (unsigned i = 0; i < cfg->ndlp; i++) {
		argv[n++] = "--dlp";
		argv[n++] = (char *)cfg->dlp[i];
	}
	argv[n] = NULL;

	if (lseek(in_fd, 0, SEEK_SET) < 0)
		return -errno;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	struct svc_redact *h = calloc(1, sizeof(*h));
	if (!h)
		goto nomem;
	h->cb = cb;
	h->ud = ud;
	h->pidfd = -1;
	h->errfd = pipefd[0];
	h->pid = fork();
	if (h->pid < 0) {
		int e = errno;
		free(h);
		close(pipefd[0]);
		close(pipefd[1]);
		return -e;
	}
	if (h->pid == 0)
		child(in_fd, out_fd, pipefd[1], argv);
	close(pipefd[1]);
	fcntl(h->errfd, F_SETFL, O_NONBLOCK);
	h->pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
	h->ev_exit = h->pidfd >= 0 ? event_new(base, h->pidfd, EV_READ, exit_cb, h) : NULL;
	h->ev_timer = evtimer_new(base, timeout_cb, h);
	if (!h->ev_exit || !h->ev_timer) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, NULL, 0);
		if (h->ev_exit)
			event_free(h->ev_exit);
		if (h->ev_timer)
			event_free(h->ev_timer);
		if (h->pidfd >= 0)
			close(h->pidfd);
		close(h->errfd);
		free(h);
		return -ENOMEM;
	}
	struct timeval tv = { .tv_sec = cfg->redact_timeout_ms / 1000,
			      .tv_usec = (cfg->redact_timeout_ms % 1000) * 1000 };
	event_add(h->ev_exit, NULL);
	evtimer_add(h->ev_timer, &tv);
	if (out)
		*out = h;
	return 0;
nomem:
	close(pipefd[0]);
	close(pipefd[1]);
	return -ENOMEM;
}

void svc_redact_abort(struct svc_redact *h)
{
	if (!h)
		return;
	kill(h->pid, SIGKILL);
	waitpid(h->pid, NULL, 0);
	event_free(h->ev_exit);
	event_free(h->ev_timer);
	close(h->pidfd);
	close(h->errfd);
	free(h);
}
