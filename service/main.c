/* profilingd: the on-device profiling trigger service. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <event2/event.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "svc_sd.h"
#include <time.h>
#include <unistd.h>
#ifdef PROFILINGD_TEST_HOOKS
#include <pwd.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sysexits.h>
#endif

#include "log.h"
#include "svc_config.h"
#include "svc_db.h"
#include "svc_conn.h"
#include "svc_client.h"
#include "svc_runtime.h"
#include "svc_admit.h"
#include "svc_redact.h"
#include "svc_spawn.h"
#include "svc_sandbox.h"
#include "svc_trim.h"
#include "svc_request.h"
#include "svc_session.h"
#include "svc_trigger.h"
#include "svc_ctl.h"
#include "svc_methods.h"
#include "svc_jvm.h"
#include "util.h"

/* /etc/profilingd/profilingd.conf for an install prefix of /usr. */
#define DEFAULT_CONFIG PROFILINGD_SYSCONFDIR "/profilingd/profilingd.conf"


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
		"      --check-config FILE   validate FILE, print every effective value as a\n"
		"                            config file; exit 0, or 1 with FILE:LINE: reason\n"
		"      --seccomp-debug       a forbidden syscall is trapped and named in the log\n"
		"                            (then the daemon exits 75) instead of killing it\n"
		"      --reset-ratelimit     repair an unreadable rate-limit store: move\n"
		"                            <state>/ratelimit.db aside and start an empty one,\n"
		"                            then exit (the daemon must be stopped)\n"
		"      --reset-db            repair a corrupt state database: move\n"
		"                            <state>/profilingd.db aside and start an empty one,\n"
		"                            then exit (the daemon must be stopped)\n"
		"  -h, --help                this text\n"
		"  -V, --version             print the version\n\n"
		"Signals: SIGTERM and SIGINT stop it cleanly; SIGHUP reloads the config\n"
		"(keys that need a restart keep their running values). See profilingd(8).\n");
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

/*
 * What the daemon keeps at the top of its state dir (the databases and
 * their -wal/-shm, the lock, files --reset-* moved aside) names every app's
 * result paths, tags, pids and trigger executables, which control.sock
 * shows only to their owners: it is root's alone. Files are created 0600;
 * this fixes what an older run left with a looser mode, before anything is
 * opened. results/ belongs to the apps and keeps its modes; raw/ is root's.
 * Each entry is opened without following links and changed through its fd,
 * so a name swapped meanwhile is never chmod'ed. Returns the number fixed.
 */
static int secure_state_dir(const char *state_dir)
{
	int fixed = 0;
	DIR *d = opendir(state_dir);
	if (!d) {
		LOG_W("cannot list %s to check its modes: %s", state_dir, strerror(errno));
		return 0;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])))
			continue;
		bool raw = !strcmp(n, "raw");
		if (e->d_type != DT_REG && e->d_type != DT_UNKNOWN && !(raw && e->d_type == DT_DIR))
			continue;
		int fd = openat(dirfd(d), n, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
		if (fd < 0)
			continue;
		struct stat st;
		mode_t want = raw ? 0700 : 0600;
		if (fstat(fd, &st) == 0 && (S_ISREG(st.st_mode) || (raw && S_ISDIR(st.st_mode))) &&
		    (st.st_mode & 07777 & ~want)) {
			if (fchmod(fd, want) == 0) {
				LOG_N("%s/%s was mode %04o, now %04o: state files are root's alone",
				      state_dir, n, (unsigned)(st.st_mode & 07777), (unsigned)want);
				fixed++;
			} else
				LOG_W("cannot chmod %s/%s (mode %04o): %s", state_dir, n,
				      (unsigned)(st.st_mode & 07777), strerror(errno));
		}
		close(fd);
	}
	closedir(d);
	return fixed;
}

/*
 * The config as given on the command line: the file, then the options that
 * override it. Used at start, by --check-config and on SIGHUP. 0, or 1
 * with "FILE:LINE: reason" on stderr (or in the log when reloading).
 */
struct cfg_src {
	const char *path;      /* NULL: the default file if it exists */
	const char *state, *csock, *rsock;
};

static int load_config(const struct cfg_src *src, struct svc_config *cfg, bool to_log)
{
	char msg[512];
	int line = 0, r = 0;
	const char *path = src->path;

	svc_config_defaults(cfg);
	if (!path && access(DEFAULT_CONFIG, F_OK) == 0)
		path = DEFAULT_CONFIG;
	if (path && svc_config_load_msg(cfg, path, &line, msg, sizeof(msg)) < 0)
		goto bad;
	if ((src->state && util_strlcpy(cfg->state_dir, src->state, sizeof(cfg->state_dir)) >=
	     sizeof(cfg->state_dir)) ||
	    (src->csock && util_strlcpy(cfg->client_socket, src->csock, sizeof(cfg->client_socket)) >=
	     sizeof(cfg->client_socket)) ||
	    (src->rsock && util_strlcpy(cfg->runtime_socket, src->rsock, sizeof(cfg->runtime_socket)) >=
	     sizeof(cfg->runtime_socket))) {
		snprintf(msg, sizeof(msg), "a path given on the command line is too long");
		line = 0;
		path = NULL;
		goto bad;
	}
	if (svc_config_check(cfg, msg, sizeof(msg)) < 0) {
		line = 0;
		goto bad;
	}
	return 0;
bad:
	r = 1;
	char where[SVC_PATH_MAX + 32] = "";
	if (path && line > 0)
		snprintf(where, sizeof(where), "%s:%d: ", path, line);
	else if (path)
		snprintf(where, sizeof(where), "%s: ", path);
	if (to_log)
		LOG_E("%s%s", where, msg);
	else
		fprintf(stderr, "profilingd: %s%s\n", where, msg);
	svc_config_free(cfg);
	return r;
}

static int check_config(const struct cfg_src *src)
{
	struct svc_config cfg;
	if (load_config(src, &cfg, false))
		return 1;
	printf("# profilingd %s: effective configuration of %s\n", PROFILINGD_VERSION,
	       src->path ? src->path : "the built-in defaults");
	int r = svc_config_print(&cfg, stdout);
	svc_config_free(&cfg);
	return r < 0 || fflush(stdout) != 0 ? 1 : 0;
}

/*
 * Give back the pages of [p, p + len) that hold only zeros: a later read
 * maps the kernel's zero page, a write a fresh one, so the contents stay
 * as they are. For the config, whose cap-sized tables are mostly empty
 * but were all written by its memset (issue #18).
 */
static void release_zero_pages(void *p, size_t len)
{
	static const unsigned char zero[4096];
	uintptr_t pg = sizeof(zero);
	uintptr_t a = ((uintptr_t)p + pg - 1) & ~(pg - 1);
	uintptr_t end = ((uintptr_t)p + len) & ~(pg - 1);
	if ((uintptr_t)sysconf(_SC_PAGESIZE) != pg)
		return;
	while (a < end) {
		uintptr_t run = a;
		while (run < end && !memcmp((const void *)run, zero, pg))
			run += pg;
		if (run > a)
			(void)madvise((void *)a, run - a, MADV_DONTNEED);
		a = run + pg;
	}
}

static struct svc_config *live_cfg;
static struct cfg_src live_src;
static bool debug_log;

/* SIGHUP: re-read the config; apply what is safe, keep the rest. */
static void on_hup(evutil_socket_t sig, short what, void *arg)
{
	/* Not on the stack: 220 KiB that would stay resident after the reload. */
	struct svc_config *next = calloc(1, sizeof(*next));
	unsigned refused = 0;

	svc_sd_notify("RELOADING=1");
	LOG_N("SIGHUP: reloading %s", live_src.path ? live_src.path : DEFAULT_CONFIG);
	if (!next || load_config(&live_src, next, true)) {
		LOG_E("reload failed%s: the running config is unchanged", next ? "" : " (out of memory)");
		free(next);
		svc_sd_notify("READY=1");
		return;
	}
	bool methods_were = live_cfg->method_events;
	int changed = svc_config_reload(live_cfg, next, &refused);
	/* The method events' kill switch: every probe goes now. */
	if (methods_were && !live_cfg->method_events) {
		int k = svc_methods_switch_off();
		LOG_N("method_events = false: %d method-event captures stopped, their probes removed", k);
	}
	svc_config_free(next);
	free(next);
	release_zero_pages(live_cfg, sizeof(*live_cfg));
	if (!debug_log)
		log_set_level(live_cfg->log_level);
	svc_admit_reconfigure(&live_cfg->rl);
	/* A user renamed since: its hsperfdata directory is named anew. */
	svc_jvm_forget();
	LOG_N("reload done: %d change(s) applied, %u refused (restart needed)", changed, refused);
	svc_sd_notify("READY=1");
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
	exit(EX_SOFTWARE);
}
#endif

/*
 * glibc's malloc, tuned for a daemon that idles for days (issue #18):
 * - fixed thresholds: by default the mmap threshold climbs to the size of
 *   the largest block freed (SQLite frees ~0.5 MiB after its quick_check),
 *   and after that the big tables allocated for a cap (svc_trigreg's
 *   SVC_MAX_TRIGGERS registrations, trg_mem's TRG_MAX_PIDS) came from the
 *   heap instead of their own mappings; set, both stay at 128 KiB and a
 *   big block's untouched pages stay unbacked.
 * - one arena: the daemon is single-threaded; a library thread must not
 *   get a 64 MiB arena of its own.
 */
static void malloc_tune(void)
{
	(void)mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	(void)mallopt(M_TRIM_THRESHOLD, 128 * 1024);
	(void)mallopt(M_ARENA_MAX, 1);
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct event_base *base = arg;
	LOG_N("signal %d: shutting down", (int)sig);
	event_base_loopexit(base, NULL);
}

int main(int argc, char **argv)
{
	enum { OPT_CLIENT = 256, OPT_RUNTIME, OPT_RESET_RL, OPT_CHECK, OPT_RESET_DB,
	       OPT_SECCOMP_DEBUG };
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "state-dir", required_argument, NULL, 'S' },
		{ "client-socket", required_argument, NULL, OPT_CLIENT },
		{ "runtime-socket", required_argument, NULL, OPT_RUNTIME },
		{ "foreground", no_argument, NULL, 'f' },
		{ "debug", no_argument, NULL, 'd' },
		{ "reset-ratelimit", no_argument, NULL, OPT_RESET_RL },
		{ "check-config", required_argument, NULL, OPT_CHECK },
		{ "reset-db", no_argument, NULL, OPT_RESET_DB },
		{ "seccomp-debug", no_argument, NULL, OPT_SECCOMP_DEBUG },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ 0 }
	};
	const char *config = NULL, *state = NULL, *csock = NULL, *rsock = NULL, *check = NULL;
	int debug = 0, foreground = 0, reset_rl = 0, reset_db = 0, seccomp_debug = 0, c, r, rc = 1;
	struct svc_config *cfg = NULL;
	struct event_base *base = NULL;
	struct event *ev_term = NULL, *ev_int = NULL, *ev_hup = NULL;
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
		case OPT_CHECK: check = optarg; break;
		case OPT_RESET_DB: reset_db = 1; break;
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

	malloc_tune();
	enum log_sink sink = foreground ? LOG_SINK_STDERR : log_sink_auto();
	log_init(sink, debug ? LOG_DEBUG : LOG_INFO, "profilingd");
	live_src = (struct cfg_src){ config, state, csock, rsock };
	if (check) {
		live_src.path = check;
		return check_config(&live_src);
	}
	/*
	 * The config is ~220 KiB (its tables are sized for their caps), and
	 * svc_config_defaults zeroes all of it: on main's stack that stayed
	 * resident for the daemon's life. Its own mapping instead, whose
	 * pages that stay zero are given back once init is done.
	 */
	if (!(cfg = calloc(1, sizeof(*cfg)))) {
		fprintf(stderr, "profilingd: out of memory\n");
		return 1;
	}
	if (load_config(&live_src, cfg, false)) {
		free(cfg);
		return 1;
	}
	live_cfg = cfg;
	debug_log = debug;
	log_init(sink, debug ? LOG_DEBUG : cfg->log_level, "profilingd");
	if ((r = util_mkdir_p(cfg->state_dir, 0755)) < 0) {
		LOG_E("cannot create state dir %s: %s", cfg->state_dir, strerror(-r));
		svc_config_free(cfg);
		free(cfg);
		return 1;
	}
	int lockfd = lock_state(cfg->state_dir);
	if (lockfd < 0) {
		fprintf(stderr, "profilingd: %s: %s\n", cfg->state_dir, lockfd == -EBUSY
			? "another profilingd is running on this state directory; stop it first"
			: strerror(-lockfd));
		svc_config_free(cfg);
		free(cfg);
		return 1;
	}
	secure_state_dir(cfg->state_dir);
	if (reset_rl) {
		char rlpath[SVC_PATH_MAX + 32];
		snprintf(rlpath, sizeof(rlpath), "%s/ratelimit.db", cfg->state_dir);
		r = rl_reset(rlpath, (int64_t)(util_now_ns(CLOCK_REALTIME) / 1000000ull));
		if (r < 0) {
			fprintf(stderr, "profilingd: cannot reset %s: %s%s\n", rlpath, strerror(-r),
				r == -EBUSY ? " (stop the running profilingd first)" : "");
			svc_config_free(cfg);
			free(cfg);
			return 1;
		}
		printf("profilingd: %s reset; the old file was moved aside as %s.broken-*\n",
		       rlpath, rlpath);
		svc_config_free(cfg);
		free(cfg);
		return 0;
	}

	if (reset_db) {
		char dbp[SVC_PATH_MAX + 32], res[SVC_PATH_MAX + 32], moved[SVC_PATH_MAX + 64];
		snprintf(dbp, sizeof(dbp), "%s/profilingd.db", cfg->state_dir);
		snprintf(res, sizeof(res), "%s/results", cfg->state_dir);
		r = svc_db_reset(dbp, res, moved, sizeof(moved));
		svc_config_free(cfg);
		free(cfg);
		if (r < 0) {
			fprintf(stderr, "profilingd: cannot reset %s: %s\n", dbp, strerror(-r));
			return 1;
		}
		printf("profilingd: %s reset%s%s\n", dbp, moved[0] ? "; the old file is " : "", moved);
		return 0;
	}

	signal(SIGPIPE, SIG_IGN);
	base = event_base_new();
	if (!base) {
		LOG_E("cannot create the event loop");
		goto out;
	}
	snprintf(dbpath, sizeof(dbpath), "%s/profilingd.db", cfg->state_dir);
	if (svc_db_init(dbpath) < 0)
		goto out;
	if ((r = svc_db_recover()) > 0)
		LOG_N("%d capture(s) were cut short by the previous run and are marked failed", r);
	/* Lower modules first (docs/ARCHITECTURE.md, "The daemon's modules");
	 * the stop sequence below is this one backwards. */
	if (svc_admit_init(cfg) < 0 || svc_helper_init(base, cfg) < 0 ||
	    svc_redact_init(cfg) < 0 || svc_conn_init(base, cfg) < 0 ||
	    svc_client_init(cfg) < 0 || svc_runtime_init() < 0 ||
	    svc_session_init(base, cfg) < 0 || svc_trigger_init(base, cfg) < 0 ||
	    svc_ctl_init(cfg) < 0)
		goto out;
	ev_term = evsignal_new(base, SIGTERM, on_signal, base);
	ev_int = evsignal_new(base, SIGINT, on_signal, base);
	ev_hup = evsignal_new(base, SIGHUP, on_hup, NULL);
	if (!ev_term || !ev_int || !ev_hup || evsignal_add(ev_term, NULL) < 0 ||
	    evsignal_add(ev_int, NULL) < 0 || evsignal_add(ev_hup, NULL) < 0) {
		LOG_E("cannot install signal handlers");
		goto out;
	}
	/* Last step of init, never skipped on failure (docs/SANDBOX.md). */
	if (seccomp_debug && cfg->seccomp_mode == SVC_SECCOMP_ENFORCE)
		cfg->seccomp_mode = SVC_SECCOMP_DEBUG;
	if (svc_sandbox_apply(cfg->seccomp_mode) < 0)
		goto out;
#ifdef PROFILINGD_TEST_HOOKS
	test_forbidden_syscall();
#endif
	/* [methods.ID] of the config: their captures start with the loop. */
	svc_methods_load(cfg);
	/* Init's garbage (config parsing, SQLite's schema checks and
	 * migrations, the seccomp filter's build) goes back to the kernel:
	 * free pages inside the heap are released too (madvise), not only
	 * its top. */
	(void)malloc_trim(0);
	release_zero_pages(cfg, sizeof(*cfg));
	/* And the text that start-up ran, now and after later bursts
	 * (svc_trim.h); the daemon runs the same without it. */
	if ((r = svc_trim_init(base)) < 0)
		LOG_W("text trimming off: %s", strerror(-r));
	LOG_N("profilingd %s ready (state %s)", PROFILINGD_VERSION, cfg->state_dir);
	svc_sd_notify("READY=1"); /* Type=notify under systemd; a no-op otherwise */
	if (event_base_dispatch(base) < 0)
		LOG_E("event loop failed");
	else
		rc = svc_spawn_lost() ? 1 : 0;
out:
	/*
	 * The reverse of init: each module stops while what it uses still
	 * runs. A fini must leave its module safe to call (empty tables), as
	 * svc_trigger_fini does: until the circle between svc_conn,
	 * svc_session and svc_trigger is gone, svc_session_fini still reports
	 * its sessions' ends to svc_trigger, and svc_conn_fini its peers'
	 * closes to svc_session and svc_trigger; by then those have nothing
	 * left to act on (a session abandoned here is reported at the next
	 * start, not as a runtime that went away).
	 */
	svc_sd_notify("STOPPING=1");
	if (ev_hup)
		event_free(ev_hup);
	if (ev_int)
		event_free(ev_int);
	if (ev_term)
		event_free(ev_term);
	svc_trim_fini();
	svc_ctl_fini();
	svc_methods_fini(); /* its configs only: the captures end with the sessions */
	svc_trigger_fini();
	svc_request_fini();
	svc_session_fini();
	svc_runtime_fini();
	svc_client_fini();
	svc_conn_fini();
	svc_helper_fini();
	svc_admit_fini();
	svc_db_fini();
	event_base_free(base);
	svc_config_free(cfg);
	free(cfg);
	/* Suppressed peer lines are counted, never lost silently. */
	log_peer_flush();
	if (rc == 0)
		LOG_N("stopped");
	return rc;
}
