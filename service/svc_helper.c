/*
 * The helper programs and their runs (svc_helper.h): the table the spawner
 * is forked with, the handle of each run (found by id when the spawner
 * reports its exit), its time cap, and its end as one code for the caller.
 */
#include "svc_helper.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "svc_config.h"
#include "svc_sandbox.h"
#include "svc_spawn.h"
#include "util.h"

#define MSG_MAX 256

struct svc_helper {
	struct svc_helper *next;  /* running helpers, found by id on exit */
	uint64_t id;
	pid_t pid;
	int errfd;
	struct event *ev_timer;
	svc_helper_cb cb;
	void *ud;
	bool timed_out;
	uint32_t timeout_ms;
};

static struct event_base *base;
static const struct svc_config *cfg;
/* The spawner's fixed table: a helper is named by its index. "" = not
 * installed. */
static char paths[SVC_HELPER_COUNT][SVC_PATH_MAX];
static char jvmti_agent[SVC_PATH_MAX];
static uid_t run_uid;
static gid_t run_gid;
static bool drop_privs;
static struct svc_helper *running;
static uint64_t next_id = 1;
_Static_assert(SVC_HELPER_COUNT <= SVC_SPAWN_HELPERS_MAX, "the spawner table is capped");

/* Release a helper's handle (its process is reaped by the spawner). */
static void handle_free(struct svc_helper *h)
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
		.nhelpers = SVC_HELPER_COUNT, .drop_privs = drop_privs, .uid = run_uid, .gid = run_gid,
		.redact_as_bytes = cfg->redact_max_memory,
		.redact_cpu_s = (cfg->redact_timeout_ms + 999) / 1000 + 1,
	};
	for (unsigned i = 0; i < SVC_HELPER_COUNT; i++)
		s.helpers[i] = paths[i];
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

static void background_done(void *ud, int code, const char *msg)
{
	(void)ud;
	if (code == 0)
		LOG_I("background trace: %s", msg);
	else
		LOG_W("background trace: %s", msg && *msg ? msg : "profilingd-ftrace failed");
}

/* Set up the ring, or take down one left by a run with it on. */
static void ftrace_background(void)
{
	static const char *const bg[] = { "/sys/kernel/tracing/instances/profilingd-bg",
					   "/sys/kernel/debug/tracing/instances/profilingd-bg" };
	char kb[16];
	bool left = access(bg[0], F_OK) == 0 || access(bg[1], F_OK) == 0;
	if (!cfg->trace_bg && !left)
		return;
	snprintf(kb, sizeof(kb), "%u", cfg->trace_bg_buffer_kb);
	char *argv[] = { "profilingd-ftrace", "--background", cfg->trace_bg ? "on" : "off",
			 "--buffer-kb", kb, NULL };
	/* It writes nothing but its status line; fd 1 must still be open. */
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int r = null < 0 ? -errno
		: svc_helper_run(SVC_HELPER_FTRACE, argv, -1, null, -1, 30000, background_done,
				 NULL, NULL);
	if (null >= 0)
		close(null);
	if (r < 0)
		LOG_W("background trace: cannot run profilingd-ftrace: %s",
		      r == -ENOENT ? "it is not installed" : strerror(-r));
}

int svc_helper_init(struct event_base *b, const struct svc_config *c)
{
	int r;
	base = b;
	cfg = c;
	r = find_helper(cfg->redactor, "profilingd-redact", "redact", paths[SVC_HELPER_REDACT]);
	if (r < 0)
		return r;
	/* Without it system traces carry the app's own events only (logged then). */
	if (find_helper(NULL, "profilingd-ftrace", "runtime/ftrace", paths[SVC_HELPER_FTRACE]) < 0)
		paths[SVC_HELPER_FTRACE][0] = '\0';
	/* Without it a process with no agent cannot be sampled (logged then). */
	if (find_helper(NULL, "profilingd-perf", "runtime/perf", paths[SVC_HELPER_PERF]) < 0)
		paths[SVC_HELPER_PERF][0] = '\0';
	/* Without it JVMs get no heap dumps and no live agent (logged then). */
	if (find_helper(NULL, "profilingd-jattach", "runtime/jvm", paths[SVC_HELPER_JATTACH]) < 0)
		paths[SVC_HELPER_JATTACH][0] = '\0';
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
	LOG_I("redactor %s, as %s", paths[SVC_HELPER_REDACT],
	      drop_privs ? cfg->redact_user : "this user");
	if ((r = start_spawner()) < 0)
		return r;
	ftrace_background();
	return 0;
}

void svc_helper_fini(void)
{
	while (running) {
		struct svc_helper *h = running;
		running = h->next;
		handle_free(h);
	}
	svc_spawn_fini();
}

/* Kill (through the spawner, which reaps it) and release a helper that
 * must not report: its exit is then ignored. */
static void kill_and_free(struct svc_helper *h)
{
	for (struct svc_helper **p = &running; *p; p = &(*p)->next) {
		if (*p == h) {
			*p = h->next;
			break;
		}
	}
	svc_spawn_kill(h->id);
	handle_free(h);
}

static void finish(struct svc_helper *h, int status)
{
	char msg[MSG_MAX];
	ssize_t n = read(h->errfd, msg, sizeof(msg) - 1);
	msg[n > 0 ? n : 0] = '\0';
	char *nl = strchr(msg, '\n');
	if (nl)
		*nl = '\0';
	int code;
	if (h->timed_out) {
		code = SVC_HELPER_TIMEOUT;
		util_fmt(msg, sizeof(msg), "helper killed after %u ms", h->timeout_ms);
	} else if (WIFEXITED(status)) {
		code = WEXITSTATUS(status);
		/* The spawner's own exits (a failed exec, say) come with no line. */
		if (code != 0 && !msg[0])
			util_fmt(msg, sizeof(msg), "%s (exit %d)", names_exit_str(code), code);
	} else {
		code = SVC_HELPER_CRASHED;
		util_fmt(msg, sizeof(msg), "helper died of signal %d%s", WTERMSIG(status),
			 WTERMSIG(status) == SIGSYS ? " (seccomp)" :
			 WTERMSIG(status) == SIGKILL ? " (memory or CPU limit)" : "");
	}
	svc_helper_cb cb = h->cb;
	void *ud = h->ud;
	handle_free(h);
	cb(ud, code, msg);
}

/* The spawner reaped helper id (an aborted helper is no longer listed). */
static void exit_cb(uint64_t id, int status)
{
	for (struct svc_helper **p = &running; *p; p = &(*p)->next) {
		struct svc_helper *h = *p;
		if (h->id == id) {
			*p = h->next;
			finish(h, status);
			return;
		}
	}
}

static void timeout_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_helper *h = arg;
	h->timed_out = true;
	svc_spawn_kill(h->id);
	/* exit_cb finishes it when the spawner reports the exit. */
}

int svc_helper_run(enum svc_helper_id which, char **argv, int in_fd, int out_fd, int fd3,
		   uint32_t timeout_ms, svc_helper_cb cb, void *ud, struct svc_helper **out)
{
	int pipefd[2], r;

	if ((unsigned)which >= SVC_HELPER_COUNT)
		return -EINVAL;
	if (!paths[which][0])
		return -ENOENT;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return -errno;
	struct svc_helper *h = calloc(1, sizeof(*h));
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
	char *dargv[SVC_SPAWN_ARGS_MAX + 2];
	if (cfg->seccomp_mode == SVC_SECCOMP_DEBUG) {
		size_t n = 0;
		dargv[n++] = argv[0];
		dargv[n++] = "--debug-seccomp";
		for (size_t i = 1; argv[i] && n < SVC_SPAWN_ARGS_MAX + 1; i++)
			dargv[n++] = argv[i];
		dargv[n] = NULL;
		argv = dargv;
	}
	/* Only the redactor is sandboxed: the others need root's privileges. */
	r = svc_spawn_start((unsigned)which, argv, in_fd, out_fd, pipefd[1], fd3,
			    which == SVC_HELPER_REDACT ? SVC_SPAWN_F_REDACT : 0, h->id, &h->pid);
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

int svc_ftrace_start(uint64_t session_id, uint32_t duration_ms, uint32_t buffer_kb, bool discard,
		     uint64_t background_from, bool lead, int out_fd, svc_helper_cb cb, void *ud,
		     struct svc_helper **out)
{
	char dur[16], kb[16], inst[48], bg[24];
	snprintf(dur, sizeof(dur), "%u", duration_ms);
	snprintf(kb, sizeof(kb), "%u", buffer_kb);
	snprintf(inst, sizeof(inst), "profilingd-%llu", (unsigned long long)session_id);
	snprintf(bg, sizeof(bg), "%llu", (unsigned long long)background_from);
	char *argv[] = { "profilingd-ftrace", "--duration-ms", dur, "--buffer-kb", kb,
			 "--fill", discard ? "discard" : "ring", "--instance", inst,
			 background_from ? "--background-from" : NULL, bg, lead ? NULL : "--no-lead", NULL };
	/* It stops on its own after the duration; the cap covers reading out. */
	return svc_helper_run(SVC_HELPER_FTRACE, argv, -1, out_fd, -1, duration_ms + 30000, cb, ud,
			      out);
}

int svc_perf_start(pid_t pid, uint64_t start, uint32_t hz, uint32_t duration_ms, int out_fd,
		   svc_helper_cb cb, void *ud, struct svc_helper **out)
{
	char p[16], st[24], f[16], d[16];
	if (!paths[SVC_HELPER_PERF][0])
		return -ENOENT;
	if (!start)
		return -EINVAL; /* the helper must know which process pid is */
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(st, sizeof(st), "%llu", (unsigned long long)start);
	snprintf(f, sizeof(f), "%u", hz);
	snprintf(d, sizeof(d), "%u", duration_ms);
	char *argv[] = { "profilingd-perf", "--pid", p, "--start-time", st, "--hz", f,
			 "--duration-ms", d, NULL };
	return svc_helper_run(SVC_HELPER_PERF, argv, -1, out_fd, -1,
			      duration_ms + cfg->deadline_grace_ms, cb, ud, out);
}

int svc_perf_methods_start(pid_t pid, uint64_t start, const char *const *methods, unsigned n,
			   uint32_t every, uint32_t max_hits, bool perfetto, uint32_t budget_us,
			   uint32_t duration_ms,
			   int out_fd,
			   svc_helper_cb cb, void *ud, struct svc_helper **out)
{
	char p[16], st[24], d[16], e[16], x[16], b[16];
	/* 8 fixed words, 2 per target, 8 for the options, the NULL. */
	char *argv[8 + 2 * SVC_METHOD_TARGETS_MAX + 8 + 1];
	size_t k = 0;
	if (!paths[SVC_HELPER_PERF][0])
		return -ENOENT;
	if (!start || !methods || n == 0 || n > SVC_METHOD_TARGETS_MAX)
		return -EINVAL;
	snprintf(p, sizeof(p), "%d", (int)pid);
	snprintf(st, sizeof(st), "%llu", (unsigned long long)start);
	snprintf(d, sizeof(d), "%u", duration_ms);
	snprintf(e, sizeof(e), "%u", every ? every : 1);
	snprintf(x, sizeof(x), "%u", max_hits ? max_hits : SVC_METHOD_MAX_HITS);
	argv[k++] = "profilingd-perf";
	argv[k++] = "--pid";
	argv[k++] = p;
	argv[k++] = "--start-time";
	argv[k++] = st;
	argv[k++] = "--duration-ms";
	argv[k++] = d;
	for (unsigned i = 0; i < n; i++) {
		argv[k++] = "--method";
		argv[k++] = (char *)methods[i];
	}
	argv[k++] = "--every";
	argv[k++] = e;
	argv[k++] = "--max-hits";
	argv[k++] = x;
	if (perfetto) {
		argv[k++] = "--format";
		argv[k++] = "perfetto";
	}
	snprintf(b, sizeof(b), "%u", budget_us);
	argv[k++] = "--budget-us";
	argv[k++] = b;
	argv[k] = NULL;
	return svc_helper_run(SVC_HELPER_PERF, argv, -1, out_fd, -1,
			      duration_ms + cfg->deadline_grace_ms, cb, ud, out);
}

int svc_jattach_start(pid_t pid, uint64_t start, enum svc_jattach_op op, uint32_t timeout_ms,
		      int out_fd, svc_helper_cb cb, void *ud, struct svc_helper **out)
{
	char p[16], st[24], t[16], opts[SVC_SUN_MAX + 16];
	if (!paths[SVC_HELPER_JATTACH][0] || (op == SVC_JATTACH_LOAD && !jvmti_agent[0]))
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
	char **argv = op == SVC_JATTACH_LOAD ? load : op == SVC_JATTACH_LISTEN ? listen : dump;
	return svc_helper_run(SVC_HELPER_JATTACH, argv, -1, out_fd, -1, timeout_ms + 5000, cb, ud,
			      out);
}

bool svc_jvm_agent_available(void)
{
	return paths[SVC_HELPER_JATTACH][0] && jvmti_agent[0];
}

void svc_helper_abort(struct svc_helper *h)
{
	if (h)
		kill_and_free(h);
}

bool svc_helper_redact_as_daemon(void)
{
	return !drop_privs;
}
