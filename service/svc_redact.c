/*
 * The daemon's helper processes, one module for both kinds:
 * - profilingd-redact for a finished capture: the child is dropped to the
 *   redact user (no groups, no capabilities, no_new_privs), its address
 *   space and CPU time are capped, and it gets the raw artifact on fd 0;
 * - profilingd-ftrace for a system trace: it stays root (tracefs).
 * Each gets its output file on fd 1 and a pipe on fd 2 for its status
 * line, and an empty environment. Exits are watched through a pidfd in the
 * event loop; past its time cap a helper is killed.
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
	uint32_t timeout_ms;
};

static struct event_base *base;
static const struct svc_config *cfg;
static char redactor[SVC_PATH_MAX], ftracer[SVC_PATH_MAX], perfer[SVC_PATH_MAX];
static char jattacher[SVC_PATH_MAX], jvmti_agent[SVC_PATH_MAX];
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

/*
 * A helper binary: the configured path, else beside the daemon
 * (installed), the build tree's <subdir>/, then libexec.
 */
static int find_helper(const char *configured, const char *name, const char *subdir, char *out)
{
	char self[SVC_PATH_MAX];
	const char *cand[4];
	char c0[SVC_PATH_MAX + 64], c1[SVC_PATH_MAX + 96], c2[SVC_PATH_MAX];
	char c3[SVC_PATH_MAX + 160];
	int n = 0;

	if (configured && configured[0]) {
		cand[n++] = configured;
	} else {
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (len > 0) {
			self[len] = '\0';
			char *slash = strrchr(self, '/');
			if (slash)
				*slash = '\0';
			util_fmt(c0, sizeof(c0), "%s/%s", self, name);
			util_fmt(c1, sizeof(c1), "%s/../%s/%s", self, subdir, name);
			/* An installed tree moved or installed with --prefix:
			 * <prefix>/sbin/../libexec/profilingd. */
			util_fmt(c3, sizeof(c3), "%s/%s/%s", self, PROFILINGD_LIBEXEC_REL, name);
			cand[n++] = c0;
			cand[n++] = c1;
			cand[n++] = c3;
		}
		util_fmt(c2, sizeof(c2), "%s/%s", PROFILINGD_LIBEXECDIR, name);
		cand[n++] = c2;
	}
	for (int i = 0; i < n; i++) {
		if (access(cand[i], X_OK) == 0) {
			if (!realpath(cand[i], out))
				util_strlcpy(out, cand[i], SVC_PATH_MAX);
			return 0;
		}
	}
	LOG_E("%s not found (tried %s%s)", name, cand[0], n > 1 ? " and others" : "");
	return -ENOENT;
}

/*
 * The JVMTI agent a running JVM is asked to load: [jvm] agent, else the
 * build tree's runtime/jvmti/ beside the daemon, then the library dir.
 * It must be absolute and readable by the JVM's user.
 */
static void find_agent(void)
{
	static const char name[] = "libprofiling_jvmti.so";
	char self[SVC_PATH_MAX], c0[SVC_PATH_MAX + 64], c1[SVC_PATH_MAX];
	const char *cand[3];
	int n = 0;
	if (cfg->jvm_agent[0]) {
		cand[n++] = cfg->jvm_agent;
	} else {
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (len > 0) {
			self[len] = '\0';
			char *slash = strrchr(self, '/');
			if (slash)
				*slash = '\0';
			util_fmt(c0, sizeof(c0), "%s/../runtime/jvmti/%s", self, name);
			cand[n++] = c0;
		}
		util_fmt(c1, sizeof(c1), "%s/%s", PROFILINGD_LIBDIR, name);
		cand[n++] = c1;
	}
	jvmti_agent[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (access(cand[i], R_OK) == 0 && realpath(cand[i], jvmti_agent))
			break;
		jvmti_agent[0] = '\0';
	}
	if (!jvmti_agent[0])
		LOG_I("no JVMTI agent (%s): running JVMs get heap dumps only", name);
}

int svc_redact_init(struct event_base *b, const struct svc_config *c)
{
	int r;
	base = b;
	cfg = c;
	if ((r = find_helper(cfg->redactor, "profilingd-redact", "redact", redactor)) < 0)
		return r;
	/* Without it system traces carry the app's own events only (logged then). */
	if (find_helper(NULL, "profilingd-ftrace", "runtime/ftrace", ftracer) < 0)
		ftracer[0] = '\0';
	/* Without it a process with no agent cannot be sampled (logged then). */
	if (find_helper(NULL, "profilingd-perf", "runtime/perf", perfer) < 0)
		perfer[0] = '\0';
	/* Without it JVMs get no heap dumps and no live agent (logged then). */
	if (find_helper(NULL, "profilingd-jattach", "runtime/jvm", jattacher) < 0)
		jattacher[0] = '\0';
	find_agent();
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

/* Release a helper's handle (its process already reaped). */
static void handle_free(struct svc_redact *h)
{
	if (h->ev_exit)
		event_free(h->ev_exit);
	if (h->ev_timer)
		event_free(h->ev_timer);
	if (h->pidfd >= 0)
		close(h->pidfd);
	close(h->errfd);
	free(h);
}

/* Kill, reap and release a helper that must not report. */
static void kill_and_free(struct svc_redact *h)
{
	kill(h->pid, SIGKILL);
	waitpid(h->pid, NULL, 0);
	handle_free(h);
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
		util_fmt(msg, sizeof(msg), "helper killed after %u ms", h->timeout_ms);
	} else if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
	} else {
		code = SVC_REDACT_CRASHED;
		util_fmt(msg, sizeof(msg), "helper died of signal %d%s", WTERMSIG(status),
			 WTERMSIG(status) == SIGSYS ? " (seccomp)" :
			 WTERMSIG(status) == SIGKILL ? " (memory or CPU limit)" : "");
	}
	svc_redact_cb cb = h->cb;
	void *ud = h->ud;
	handle_free(h);
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
static void child(const char *path, int in_fd, int out_fd, int err_w, char **argv, bool redact)
{
	struct rlimit as = { cfg->redact_max_memory, cfg->redact_max_memory };
	rlim_t secs = (cfg->redact_timeout_ms + 999) / 1000 + 1;
	struct rlimit cpu = { secs, secs + 1 };

	if (in_fd < 0)
		in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_w, 2) < 0)
		_exit(71);
	if (!redact) {
		execve(path, argv, (char *[]){ NULL });
		_exit(73);
	}
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
	execve(path, argv, envp);
	_exit(73);
}

static int spawn(const char *path, char **argv, int in_fd, int out_fd, bool redact,
		 uint32_t timeout_ms, svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	int pipefd[2];

	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	struct svc_redact *h = calloc(1, sizeof(*h));
	if (!h) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -ENOMEM;
	}
	h->cb = cb;
	h->ud = ud;
	h->pidfd = -1;
	h->errfd = pipefd[0];
	h->timeout_ms = timeout_ms;
	h->pid = fork();
	if (h->pid < 0) {
		int e = errno;
		free(h);
		close(pipefd[0]);
		close(pipefd[1]);
		return -e;
	}
	if (h->pid == 0)
		child(path, in_fd, out_fd, pipefd[1], argv, redact);
	close(pipefd[1]);
	fcntl(h->errfd, F_SETFL, O_NONBLOCK);
	h->pidfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
	h->ev_exit = h->pidfd >= 0 ? event_new(base, h->pidfd, EV_READ, exit_cb, h) : NULL;
	h->ev_timer = evtimer_new(base, timeout_cb, h);
	if (!h->ev_exit || !h->ev_timer) {
		kill_and_free(h);
		return -ENOMEM;
	}
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	event_add(h->ev_exit, NULL);
	evtimer_add(h->ev_timer, &tv);
	if (out)
		*out = h;
	return 0;
}

int svc_redact_start(int in_fd, int out_fd, const char *format, pid_t app_pid,
		     svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char pids[16], tids[SVC_REDACT_TIDS_MAX * 12];
	char *argv[MAX_ARGS];
	int n = 0;

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
	return spawn(redactor, argv, in_fd, out_fd, true, cfg->redact_timeout_ms, cb, ud, out);
}

int svc_ftrace_start(uint64_t session_id, uint32_t duration_ms, uint32_t buffer_kb, int out_fd,
		     svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char dur[16], kb[16], inst[48];
	if (!ftracer[0])
		return -ENOENT;
	snprintf(dur, sizeof(dur), "%u", duration_ms);
	snprintf(kb, sizeof(kb), "%u", buffer_kb);
	snprintf(inst, sizeof(inst), "profilingd-%llu", (unsigned long long)session_id);
	char *argv[] = { "profilingd-ftrace", "--duration-ms", dur, "--buffer-kb", kb,
			 "--instance", inst, NULL };
	/* It stops on its own after the duration; the cap covers reading out. */
	return spawn(ftracer, argv, -1, out_fd, false, duration_ms + 30000, cb, ud, out);
}

int svc_perf_start(pid_t pid, uint32_t hz, uint32_t duration_ms, int out_fd, svc_redact_cb cb,
		   void *ud, struct svc_redact **out)
{
	char p[16], f[16], d[16];
	if (!perfer[0])
		return -ENOENT;
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(f, sizeof(f), "%u", hz);
	snprintf(d, sizeof(d), "%u", duration_ms);
	char *argv[] = { "profilingd-perf", "--pid", p, "--hz", f, "--duration-ms", d, NULL };
	return spawn(perfer, argv, -1, out_fd, false, duration_ms + cfg->deadline_grace_ms, cb, ud, out);
}

int svc_jattach_start(pid_t pid, enum svc_jattach_op op, uint32_t timeout_ms, int out_fd,
		      svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char p[16], t[16], opts[SVC_SUN_MAX + 16];
	if (!jattacher[0] || (op == SVC_JATTACH_LOAD && !jvmti_agent[0]))
		return -ENOENT;
	if (op != SVC_JATTACH_HEAPDUMP && op != SVC_JATTACH_LOAD && op != SVC_JATTACH_LISTEN)
		return -ENOENT;
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(t, sizeof(t), "%u", timeout_ms);
	/* The agent finds the daemon through its options, not the JVM's environment. */
	util_fmt(opts, sizeof(opts), "socket=%s", cfg->runtime_socket);
	char *dump[] = { "profilingd-jattach", "--pid", p, "--timeout-ms", t, "heapdump", NULL };
	char *load[] = { "profilingd-jattach", "--pid", p, "--timeout-ms", t, "load", jvmti_agent,
			 opts, NULL };
	char *listen[] = { "profilingd-jattach", "--pid", p, "--timeout-ms", t, "listen", NULL };
	if (out_fd < 0)
		out_fd = STDERR_FILENO; /* load and listen write nothing to fd 1 */
	/* The helper enforces the limit itself; this cap covers a stuck VM. */
	return spawn(jattacher, op == SVC_JATTACH_LOAD ? load : op == SVC_JATTACH_LISTEN ? listen
										: dump,
		     -1, out_fd, false, timeout_ms + 5000, cb, ud, out);
}

bool svc_jvm_agent_available(void)
{
	return jattacher[0] && jvmti_agent[0];
}

void svc_redact_abort(struct svc_redact *h)
{
	if (h)
		kill_and_free(h);
}
