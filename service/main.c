/* profilingd: the on-device profiling trigger service. */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef PROFILINGD_TEST_HOOKS
#include <pwd.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#endif

#include "log.h"
#include "svc.h"
#include "util.h"

#define DEFAULT_CONFIG "/etc/profilingd/profilingd.conf"


static void usage(FILE *f)
{
	fprintf(f,
		"usage: profilingd [options]\n"
		"On-device profiling trigger service: apps (libprofiling) request captures\n"
		"of themselves; profilingd asks their runtime for them, stores and delivers\n"
		"the results.\n\n"
		"  -c, --config FILE         config file (default " DEFAULT_CONFIG ";\n"
		"                            a missing default file means built-in defaults)\n"
		"  -S, --state-dir DIR       state directory (database, results)\n"
		"      --client-socket PATH  app socket (overrides the config)\n"
		"      --runtime-socket PATH runtime agent socket (overrides the config)\n"
		"  -f, --foreground          log readable lines to stderr (the daemon never forks;\n"
		"                            under systemd it logs with journald priority prefixes)\n"
		"  -d, --debug               log at debug level\n"
		"      --seccomp-debug       a forbidden syscall is trapped and named in the log\n"
		"                            (then the daemon exits 75) instead of killing it\n"
		"      --reset-ratelimit     repair an unreadable rate-limit store: move\n"
		"                            <state>/ratelimit.db aside and start an empty one,\n"
		"                            then exit (the daemon must be stopped)\n"
		"  -h, --help                this text\n"
		"  -V, --version             print the version\n\n"
		"Signals: SIGTERM and SIGINT stop it cleanly. See profilingd(8).\n");
}

/*
 * One daemon per state dir: an flock on <state>/profilingd.lock, held for
 * the daemon's life. --reset-ratelimit takes it too, so it cannot run
 * under a live daemon. Returns the fd, or -errno (-EBUSY when held).
 */
static int lock_state(const char *state_dir)
{
	char path[SVC_PATH_MAX + 32];
	if (util_fmt(path, sizeof(path), "%s/profilingd.lock", state_dir) < 0)
		return -ENAMETOOLONG;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int r = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return r;
	}
	return fd;
}

#ifdef PROFILINGD_TEST_HOOKS
/*
 * Test builds only (profilingd-testhooks, never installed): with
 * PROFILINGD_TEST_FORBIDDEN_SYSCALL set, try a call the sandbox must refuse
 * right after it is on. Surviving it is a failure (exit 70).
 */
static void test_forbidden_syscall(void)
{
	const char *what = getenv("PROFILINGD_TEST_FORBIDDEN_SYSCALL");
	long r;
	if (!what)
		return;
	LOG_N("test hook: trying forbidden %s", what);
	if (!strcmp(what, "ptrace"))
		r = syscall(SYS_ptrace, PTRACE_TRACEME, 0, 0, 0);
	else if (!strcmp(what, "socket-inet")) /* socket() is not listed at all */
		r = syscall(SYS_socket, AF_INET, SOCK_STREAM, 0);
	else if (!strcmp(what, "kill-signal")) /* kill is, with signal 0 only */
		r = syscall(SYS_kill, getpid(), SIGCONT);
	else if (!strcmp(what, "mmap-exec")) /* mmap is, without PROT_EXEC */
		r = (long)mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	else if (!strcmp(what, "execve"))
		r = syscall(SYS_execve, "/bin/true", (char *[]){ "true", NULL }, (char *[]){ NULL });
	else if (!strcmp(what, "connect")) { /* refused softly: EACCES, the daemon lives */
		int fd = (int)syscall(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		struct sockaddr_un sa = { .sun_family = AF_UNIX, .sun_path = "/run/pd-test-none" };
		r = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof(sa));
		int e = errno;
		if (fd >= 0)
			close(fd);
		if (r < 0 && e == EACCES) {
			LOG_N("test hook: connect refused with EACCES");
			return;
		}
	} else if (!strcmp(what, "getpwuid")) { /* NSS past /etc/passwd under the filter */
		struct passwd *pw = getpwuid((uid_t)0x7ffffffd);
		LOG_N("test hook: getpwuid of an unknown uid survived (%s)", pw ? pw->pw_name : "none");
		return;
	} else
		r = -1;
	LOG_E("test hook: %s was not refused (%ld)", what, r);
	exit(70);
}
#endif

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct event_base *base = arg;
	LOG_N("signal %d: shutting down", (int)sig);
	event_base_loopexit(base, NULL);
}

int main(int argc, char **argv)
{
	enum { OPT_CLIENT = 256, OPT_RUNTIME, OPT_RESET_RL, OPT_SECCOMP_DEBUG };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "client-socket", required_argument, NULL, OPT_CLIENT },
		{ "runtime-socket", required_argument, NULL, OPT_RUNTIME },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "reset-ratelimit", no_argument, NULL, OPT_RESET_RL },
		{ "seccomp-debug", no_argument, NULL, OPT_SECCOMP_DEBUG },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *config = NULL, *state = NULL, *csock = NULL, *rsock = NULL;
	int debug = 0, foreground = 0, reset_rl = 0, seccomp_debug = 0, c, r, line = 0, rc = 1;
	struct svc_config cfg;
	struct event_base *base = NULL;
	struct event *ev_term = NULL, *ev_int = NULL;
	char dbpath[SVC_PATH_MAX + 32];

	while ((c = getopt_long(argc, argv, "c:S:fdhV", opts, NULL)) != -1) {
		switch (c) {
		case 'c': config = optarg; break;
		case 'S': state = optarg; break;
		case OPT_CLIENT: csock = optarg; break;
		case OPT_RUNTIME: rsock = optarg; break;
		case 'f': foreground = 1; break;
		case 'd': debug = 1; break;
		case OPT_RESET_RL: reset_rl = 1; break;
		case OPT_SECCOMP_DEBUG: seccomp_debug = 1; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("profilingd %s\n", PROFILINGD_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "profilingd: unexpected argument '%s' (see --help)\n", argv[optind]);
		return 2;
	}

	enum log_sink sink = foreground ? LOG_SINK_STDERR : log_sink_auto();
	log_init(sink, debug ? LOG_DEBUG : LOG_INFO, "profilingd");
	svc_config_defaults(&cfg);
	if (config || access(DEFAULT_CONFIG, F_OK) == 0) {
		const char *path = config ? config : DEFAULT_CONFIG;
		if ((r = svc_config_load(&cfg, path, &line)) < 0) {
			if (line > 0)
				fprintf(stderr, "profilingd: %s:%d: invalid config line\n", path, line);
			else
				fprintf(stderr, "profilingd: cannot read %s: %s\n", path, strerror(-r));
			return 1;
		}
	}
	if (state && util_strlcpy(cfg.state_dir, state, sizeof(cfg.state_dir)) >= sizeof(cfg.state_dir))
		goto toolong;
	if (csock && util_strlcpy(cfg.client_socket, csock, sizeof(cfg.client_socket)) >= sizeof(cfg.client_socket))
		goto toolong;
	if (rsock && util_strlcpy(cfg.runtime_socket, rsock, sizeof(cfg.runtime_socket)) >= sizeof(cfg.runtime_socket))
		goto toolong;
	if (svc_config_finish(&cfg) < 0)
		return 1;
	log_init(sink, debug ? LOG_DEBUG : cfg.log_level, "profilingd");
	if ((r = util_mkdir_p(cfg.state_dir, 0755)) < 0) {
		LOG_E("cannot create state dir %s: %s", cfg.state_dir, strerror(-r));
		svc_config_free(&cfg);
		return 1;
	}
	int lockfd = lock_state(cfg.state_dir);
	if (lockfd < 0) {
		fprintf(stderr, "profilingd: %s: %s\n", cfg.state_dir, lockfd == -EBUSY
			? "another profilingd is running on this state directory; stop it first"
			: strerror(-lockfd));
		svc_config_free(&cfg);
		return 1;
	}
	if (reset_rl) {
		char rlpath[SVC_PATH_MAX + 32];
		snprintf(rlpath, sizeof(rlpath), "%s/ratelimit.db", cfg.state_dir);
		r = rl_reset(rlpath, (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000ull));
		if (r < 0) {
			fprintf(stderr, "profilingd: cannot reset %s: %s%s\n", rlpath, strerror(-r),
				r == -EBUSY ? " (stop the running profilingd first)" : "");
			svc_config_free(&cfg);
			return 1;
		}
		printf("profilingd: %s reset; the old file was moved aside as %s.broken-*\n",
		       rlpath, rlpath);
		svc_config_free(&cfg);
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	if (!base) {
		LOG_E("cannot create the event loop");
		goto out;
	}
	snprintf(dbpath, sizeof(dbpath), "%s/profilingd.db", cfg.state_dir);
	if (svc_db_init(dbpath) < 0)
		goto out;
	if ((r = svc_db_recover()) > 0)
		LOG_N("%d capture(s) were cut short by the previous run and are marked failed", r);
	if (svc_admit_init(&cfg) < 0 || svc_redact_init(base, &cfg) < 0 ||
	    svc_session_init(base, &cfg) < 0 || svc_trigger_init(base, &cfg) < 0 ||
	    svc_conn_init(base, &cfg) < 0)
		goto out;
	ev_term = evsignal_new(base, SIGTERM, on_signal, base);
	ev_int = evsignal_new(base, SIGINT, on_signal, base);
	if (!ev_term || !ev_int || evsignal_add(ev_term, NULL) < 0 || evsignal_add(ev_int, NULL) < 0) {
		LOG_E("cannot install signal handlers");
		goto out;
	}
	/* Last step of init, never skipped on failure (docs/SANDBOX.md). */
	if (seccomp_debug && cfg.seccomp_mode == SVC_SECCOMP_ENFORCE)
		cfg.seccomp_mode = SVC_SECCOMP_DEBUG;
	if (svc_sandbox_apply(cfg.seccomp_mode) < 0)
		goto out;
#ifdef PROFILINGD_TEST_HOOKS
	test_forbidden_syscall();
#endif
	LOG_N("profilingd %s ready (state %s)", PROFILINGD_VERSION, cfg.state_dir);
	if (event_base_dispatch(base) < 0)
		LOG_E("event loop failed");
	else
		rc = svc_spawn_lost() ? 1 : 0;
out:
	svc_session_fini();
	svc_conn_fini();
	svc_trigger_fini();
	svc_redact_fini();
	svc_admit_fini();
	svc_db_fini();
	svc_config_free(&cfg);
	if (ev_term)
		event_free(ev_term);
	if (ev_int)
		event_free(ev_int);
	event_base_free(base);
	if (rc == 0)
		LOG_N("stopped");
	return rc;
toolong:
	fprintf(stderr, "profilingd: path too long\n");
	return 2;
}
