/*
 * The daemon's helper processes, one module for both kinds:
 * - profilingd-redact for a finished capture: the child is dropped to the
 *   redact user (no groups, no capabilities, no_new_privs), its address
 *   space and CPU time are capped, and it gets the raw artifact on fd 0
 *   and, for a system trace, profilingd-ftrace's kernel stream on fd 3;
 * - profilingd-ftrace for a system trace: it stays root (tracefs).
 * Each gets its output file on fd 1 and a pipe on fd 2 for its status
 * line, and an empty environment. The spawner process (svc_spawn.c)
 * forks and execs them from its fixed table and reports their exits to
 * the event loop; past its time cap a helper is killed through it.
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
#include "names.h"
#include "util.h"

#define MAX_ARGS (16 + 2 * SVC_MAX_DLP)
#define MSG_MAX 256

struct svc_redact {
	struct svc_redact *next;  /* running helpers, found by id on exit */
	uint64_t id;
	pid_t pid;
	int errfd;
	struct event *ev_timer;
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
static struct svc_redact *running;
static uint64_t next_id = 1;

/* The spawner's fixed table: a helper is named by its index. A new helper
 * adds its path buffer here (empty = not installed). */
static const char *const helper_table[] = { redactor, ftracer, perfer, jattacher };
#define NHELPERS (sizeof(helper_table) / sizeof(helper_table[0]))
_Static_assert(NHELPERS <= SVC_SPAWN_HELPERS_MAX, "the spawner table is capped");

/*
 * "tid,tid,..." of pid's threads, at most SVC_REDACT_TIDS_MAX of them, when
 * pid is still the process that started at start (before and after the
 * listing): the threads of a later owner of the pid are not the app's.
 */
static void list_tids(pid_t pid, uint64_t start, char *out, size_t n)
{
	char dir[64];
	size_t pos = 0;
	int count = 0;
	uint64_t now = 0;
	out[0] = '\0';
	if (!start || util_proc_start_time((int)pid, &now) < 0 || now != start)
		return;
	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	DIR *d = opendir(dir);
	struct dirent *de;
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
	if (util_proc_start_time((int)pid, &now) < 0 || now != start)
		out[0] = '\0';
}

/* Release a helper's handle (its process is reaped by the spawner). */
static void handle_free(struct svc_redact *h)
{
	if (h->ev_timer)
		event_free(h->ev_timer);
	close(h->errfd);
	free(h);
}

static void exit_cb(uint64_t id, int status);

/* Fork the spawner with the helper table and the redactor's limits. */
static int start_spawner(void)
{
	struct svc_spawn_setup s = {
		.nhelpers = NHELPERS, .drop_privs = drop_privs, .uid = run_uid, .gid = run_gid,
		.redact_as_bytes = cfg->redact_max_memory,
		.redact_cpu_s = (cfg->redact_timeout_ms + 999) / 1000 + 1,
	};
	for (unsigned i = 0; i < NHELPERS; i++)
		s.helpers[i] = helper_table[i];
	int r = svc_spawn_init(base, &s, exit_cb);
	if (r < 0)
		LOG_E("cannot start the spawner: %s", strerror(-r));
	return r;
}

/* The directory of the daemon's executable into out. false if unknown. */
static bool self_dir(char *out, size_t n)
{
	ssize_t len = readlink("/proc/self/exe", out, n - 1);
	if (len <= 0)
		return false;
	out[len] = '\0';
	char *slash = strrchr(out, '/');
	if (slash)
		*slash = '\0';
	return true;
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
		if (self_dir(self, sizeof(self))) {
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
		if (self_dir(self, sizeof(self))) {
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
			LOG_E("redact user '%s' does not exist: the redactor needs a system user of "
			      "its own. Create it with 'useradd --system --no-create-home --shell "
			      "/usr/sbin/nologin %s' (the .deb and quickstart.sh do), or set [redact] "
			      "user to another unprivileged user that nothing else runs as",
			      cfg->redact_user, cfg->redact_user);
			return -ENOENT;
		}
		if (pw->pw_uid == 0) {
			LOG_E("redact user '%s' is root; pick an unprivileged one", cfg->redact_user);
			return -EINVAL;
		}
		/* A uid shared with other programs could ptrace or signal the
		 * redactor while it holds another app's data. */
		if (!strcmp(pw->pw_name, "nobody") || pw->pw_uid == 65534)
			LOG_W("redact user '%s' is shared with other programs; a user of its own "
			      "(default %s) keeps them away from the redactor", cfg->redact_user,
			      SVC_REDACT_USER);
		run_uid = pw->pw_uid;
		run_gid = pw->pw_gid;
		drop_privs = true;
	} else {
		LOG_W("not running as root: the redactor runs as uid %u without a user switch",
		      (unsigned)geteuid());
	}
	LOG_I("redactor %s, as %s", redactor, drop_privs ? cfg->redact_user : "this user");
	return start_spawner();
}

void svc_redact_fini(void)
{
	while (running) {
		struct svc_redact *h = running;
		running = h->next;
		handle_free(h);
	}
	svc_spawn_fini();
}

/* Kill (through the spawner, which reaps it) and release a helper that
 * must not report: its exit is then ignored. */
static void kill_and_free(struct svc_redact *h)
{
	for (struct svc_redact **p = &running; *p; p = &(*p)->next) {
		if (*p == h) {
			*p = h->next;
			break;
		}
	}
	svc_spawn_kill(h->id);
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
		/* The spawner's own exits (a failed exec, say) come with no line. */
		if (code != 0 && !msg[0])
			util_fmt(msg, sizeof(msg), "%s (exit %d)", names_exit_str(code), code);
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

/* The spawner reaped helper id (an aborted helper is no longer listed). */
static void exit_cb(uint64_t id, int status)
{
	for (struct svc_redact **p = &running; *p; p = &(*p)->next) {
		struct svc_redact *h = *p;
		if (h->id == id) {
			*p = h->next;
			finish(h, status);
			return;
		}
	}
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_redact *h = arg;
	h->timed_out = true;
	svc_spawn_kill(h->id);
	/* exit_cb finishes it when the spawner reports the exit. */
}

static int spawn(const char *path, char **argv, int in_fd, int out_fd, int fd3, bool redact,
		 uint32_t timeout_ms, svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	int pipefd[2], r;
	unsigned helper;

	for (helper = 0; helper < NHELPERS; helper++)
		if (path == helper_table[helper] || !strcmp(path, helper_table[helper]))
			break;
	if (helper == NHELPERS || !path[0])
		return -EPERM; /* not in the spawner's table */
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
	h->id = next_id++;
	h->errfd = pipefd[0];
	h->timeout_ms = timeout_ms;
	h->ev_timer = evtimer_new(base, timeout_cb, h);
	if (!h->ev_timer) {
		close(pipefd[1]);
		handle_free(h);
		return -ENOMEM;
	}
	/* Every helper takes --debug-seccomp (after argv[0]: options first). */
	char *dargv[MAX_ARGS + 2];
	if (cfg->seccomp_mode == SVC_SECCOMP_DEBUG) {
		size_t n = 0;
		dargv[n++] = argv[0];
		dargv[n++] = "--debug-seccomp";
		for (size_t i = 1; argv[i] && n < MAX_ARGS + 1; i++)
			dargv[n++] = argv[i];
		dargv[n] = NULL;
		argv = dargv;
	}
	r = svc_spawn_start(helper, argv, in_fd, out_fd, pipefd[1], fd3,
			    redact ? SVC_SPAWN_F_REDACT : 0, h->id, &h->pid);
	close(pipefd[1]);
	if (r < 0) {
		handle_free(h);
		return r;
	}
	fcntl(h->errfd, F_SETFL, O_NONBLOCK);
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	evtimer_add(h->ev_timer, &tv);
	h->next = running;
	running = h;
	if (out)
		*out = h;
	return 0;
}

int svc_redact_start(int in_fd, int kernel_fd, int out_fd, const char *format, pid_t app_pid,
		     uint64_t app_start, svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char pids[16], tids[SVC_REDACT_TIDS_MAX * 12];
	char *argv[MAX_ARGS];
	int n = 0;

	/* The app's threads now; a trace names them by tid. */
	snprintf(pids, sizeof(pids), "%d", (int)app_pid);
	tids[0] = '\0';
	list_tids(app_pid, app_start, tids, sizeof(tids));
	argv[n++] = "profilingd-redact";
	argv[n++] = "--format";
	argv[n++] = (char *)format;
	argv[n++] = "--pids";
	argv[n++] = pids;
	if (tids[0]) {
		argv[n++] = "--tids";
		argv[n++] = tids;
	}
	/* The spawner puts it at fd 3 (SVC_SPAWN_F_FD3). */
	if (kernel_fd >= 0) {
		argv[n++] = "--kernel-fd";
		argv[n++] = "3";
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
	if (lseek(in_fd, 0, SEEK_SET) < 0 || (kernel_fd >= 0 && lseek(kernel_fd, 0, SEEK_SET) < 0))
		return -errno;
	return spawn(redactor, argv, in_fd, out_fd, kernel_fd, true, cfg->redact_timeout_ms, cb,
		     ud, out);
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
	return spawn(ftracer, argv, -1, out_fd, -1, false, duration_ms + 30000, cb, ud, out);
}

int svc_perf_start(pid_t pid, uint64_t start, uint32_t hz, uint32_t duration_ms, int out_fd,
		   svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char p[16], st[24], f[16], d[16];
	if (!perfer[0])
		return -ENOENT;
	if (!start)
		return -EINVAL; /* the helper must know which process pid is */
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(st, sizeof(st), "%llu", (unsigned long long)start);
	snprintf(f, sizeof(f), "%u", hz);
	snprintf(d, sizeof(d), "%u", duration_ms);
	char *argv[] = { "profilingd-perf", "--pid", p, "--start-time", st, "--hz", f,
			 "--duration-ms", d, NULL };
	return spawn(perfer, argv, -1, out_fd, -1, false, duration_ms + cfg->deadline_grace_ms, cb,
		     ud, out);
}

int svc_jattach_start(pid_t pid, uint64_t start, enum svc_jattach_op op, uint32_t timeout_ms,
		      int out_fd, svc_redact_cb cb, void *ud, struct svc_redact **out)
{
	char p[16], st[24], t[16], opts[SVC_SUN_MAX + 16];
	if (!jattacher[0] || (op == SVC_JATTACH_LOAD && !jvmti_agent[0]))
		return -ENOENT;
	if (op != SVC_JATTACH_HEAPDUMP && op != SVC_JATTACH_LOAD && op != SVC_JATTACH_LISTEN)
		return -ENOENT;
	if (!start)
		return -EINVAL; /* the helper must know which process pid is */
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(st, sizeof(st), "%llu", (unsigned long long)start);
	snprintf(t, sizeof(t), "%u", timeout_ms);
	/* The agent finds the daemon through its options, not the JVM's environment. */
	util_fmt(opts, sizeof(opts), "socket=%s", cfg->runtime_socket);
	char *dump[] = { "profilingd-jattach", "--pid", p, "--start-time", st, "--timeout-ms", t,
			 "heapdump", NULL };
	char *load[] = { "profilingd-jattach", "--pid", p, "--start-time", st, "--timeout-ms", t,
			 "load", jvmti_agent, opts, NULL };
	char *listen[] = { "profilingd-jattach", "--pid", p, "--start-time", st, "--timeout-ms", t,
			   "listen", NULL };
	if (out_fd < 0)
		out_fd = STDERR_FILENO; /* load and listen write nothing to fd 1 */
	/* The helper enforces the limit itself; this cap covers a stuck VM. */
	return spawn(jattacher, op == SVC_JATTACH_LOAD ? load : op == SVC_JATTACH_LISTEN ? listen
										: dump,
		     -1, out_fd, -1, false, timeout_ms + 5000, cb, ud, out);
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
