/*
 * Redaction, commit and delivery of a finished capture, the failure result
 * of one that did not finish, and redelivery and acks of stored results
 * (svc_deliver.h has the contract).
 *
 * The redactor's output is fsync'd, handed to the app's uid and renamed
 * into <state>/results/<uid>/, so a result file is either absent or
 * complete; the index row is the commit point.
 */
#include "svc_db.h"
#include "svc_db_result.h"
#include "svc_conn.h"
#include "svc_admit.h"
#include "svc_redact.h"
#include "svc_store.h"
#include "svc_session_priv.h"
#include "svc_deliver.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "util.h"

/* The app's connection for this result: the requester, else a listener. */
static struct svc_conn *result_peer(const struct session *s)
{
	struct svc_conn *c = svc_conn_by_id(s->client_id);
	return c ? c : svc_conn_listener_for(s->uid);
}

static int send_result_to(struct svc_conn *c, uint64_t id, uint32_t type, uint32_t trigger,
			  const char *tag, int error, const char *msg, const char *path,
			  uint64_t size, uint64_t result_id, uint64_t start_ns, int fd,
			  const char *note, const char *fmt)
{
	Pd__DaemonMsg out = PD__DAEMON_MSG__INIT;
	Pd__Result r = PD__RESULT__INIT;

	if (!c)
		return -ENOTCONN;
	r.request_id = id;
	r.type = type;
	r.has_trigger = 1;
	r.trigger = trigger;
	r.error = (uint32_t)error;
	r.error_message = (char *)(msg ? msg : "");
	r.tag = (char *)tag;
	if (path) {
		r.path = (char *)path;
		r.has_size = 1;
		r.size = size;
		/* type comes from the index for a redelivery: not trusted to be known.
		 * fmt: the session's or the index's format word (issue #20). */
		r.format = fmt && *fmt ? (char *)fmt
			: names_type_valid(type) ? (char *)names_type_format(type) : NULL;
	}
	/* A stored result, failure results included: the app acks it by this id. */
	r.has_result_id = result_id != 0;
	r.result_id = result_id;
	r.has_start_ns = 1;
	r.start_ns = start_ns;
	if (note && *note)
		r.note = (char *)note;
	r.has_end_ns = 1;
	r.end_ns = util_now_ns(CLOCK_REALTIME);
	out.msg_case = PD__DAEMON_MSG__MSG_RESULT;
	out.result = &r;
	return svc_conn_send(c, &out.base, fd);
}

/*
 * The failure line. A flood of failing sessions (bench/admission.sh: every
 * admitted heap profile fails at once, no runtime) wrote one INFO line
 * each, 3 % of the daemon's time and a write(2) per session. Per error
 * code (FAIL_LOG_SLOTS slots, one per code modulo the table; at the cap a
 * code takes its slot from the code that had it, whose count is written
 * first): the first failure of a window is logged whole and opens a
 * window of FAIL_LOG_WINDOW_MS; the ones inside it are counted, and one
 * line at its end gives their number and the last of them whole, so the
 * operator sees every kind of failure, and at least one in full per
 * second. Without an event base (no loop yet) every line is written.
 * (A daemon stopped inside a window loses that window's count.)
 */
#define FAIL_LOG_SLOTS 16
#define FAIL_LOG_WINDOW_MS 1000

static struct fail_log {
	int error;
	bool armed;            /* its end-of-window timer is pending */
	uint64_t until_ns;     /* CLOCK_MONOTONIC end of its window */
	unsigned long n;       /* counted, not written yet */
	uint64_t last_id;
	pid_t last_pid;
	char last_msg[192];
} fail_log[FAIL_LOG_SLOTS];

static void fail_log_flush(struct fail_log *f)
{
	if (!f->n)
		return;
	LOG_I("%lu more session%s failed with %s in %d ms; the last, session %llu (pid %d), "
	      "failed: %s: %s", f->n, f->n == 1 ? "" : "s", prof_strerror(f->error),
	      FAIL_LOG_WINDOW_MS, (unsigned long long)f->last_id, (int)f->last_pid,
	      prof_strerror(f->error), f->last_msg);
	f->n = 0;
}

static void fail_log_cb(evutil_socket_t fd, short what, void *arg)
{
	struct fail_log *f = arg;
	(void)fd;
	(void)what;
	f->armed = false;
	f->until_ns = 0; /* the window ends with its line: the next failure is whole */
	fail_log_flush(f);
}

static void fail_log_line(const struct session *s, int error, const char *msg)
{
	struct fail_log *f = &fail_log[(unsigned)error % FAIL_LOG_SLOTS];
	struct event_base *base = svc_session_base();
	uint64_t now = util_now_ns(CLOCK_MONOTONIC);

	if (base && f->error == error && now < f->until_ns) {
		struct timeval tv = { 0, (long)((f->until_ns - now) / 1000) };
		tv.tv_sec = tv.tv_usec / 1000000;
		tv.tv_usec %= 1000000;
		if (f->armed ||
		    event_base_once(base, -1, EV_TIMEOUT, fail_log_cb, f, &tv) == 0) {
			f->armed = true;
			f->n++;
			f->last_id = s->id;
			f->last_pid = s->pid;
			util_strlcpy(f->last_msg, msg ? msg : "", sizeof(f->last_msg));
			return;
		}
	}
	fail_log_flush(f); /* another code's, or a window whose timer is late */
	f->error = error;
	f->until_ns = now + FAIL_LOG_WINDOW_MS * 1000000ull;
	LOG_I("session %llu (pid %d) failed: %s: %s", (unsigned long long)s->id, (int)s->pid,
	      prof_strerror(error), msg);
}

void svc_deliver_fail(struct session *s, int error, const char *msg)
{
	fail_log_line(s, error, msg);
	svc_db_session_end(s->id, "failed", error, msg, util_now_ns(CLOCK_REALTIME));
	svc_session_release_files(s);
	svc_session_notify(s, "failed", error, msg, 0, NULL);
	if (send_result_to(result_peer(s), s->id, s->type, s->trigger, s->tag, error, msg, NULL, 0,
			   0, s->start_ns, -1, NULL, NULL) < 0)
		LOG_D("session %llu: app not connected for its failure result",
		      (unsigned long long)s->id);
	svc_session_free(s);
}

static void fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/*
 * Send result r (fd and metadata) to the app's connection c; counts an
 * attempt. The file is opened as svc_store_open checks it: uid's own
 * regular file with one link, whatever the app has put at path since. A
 * file that fails the check is not delivered and is logged; -ENOENT, or
 * -ELOOP/-EINVAL/-EPERM/-EMLINK for one that is not the result any more.
 */
static int deliver_to(struct svc_conn *c, uint64_t request_id, uint32_t type, uint32_t trigger,
		      const char *tag, const char *path, uid_t uid, uint64_t size,
		      uint64_t result_id, uint64_t start_ns, const char *note, const char *fmt)
{
	char what[96];
	int fd = svc_store_open(path, uid, what, sizeof(what));
	if (fd < 0) {
		if (fd != -ENOENT)
			LOG_W("result %llu: %s is %s: not delivered", (unsigned long long)result_id,
			      path, what);
		return fd;
	}
	int r = send_result_to(c, request_id, type, trigger, tag, PROF_E_NONE, NULL, path, size,
			       result_id, start_ns, fd, note, fmt);
	close(fd);
	if (r == 0)
		svc_db_result_attempt(result_id);
	return r;
}

/*
 * Heap formats (issue #20): a result in another format than its type's
 * gets that format's extension (name's ".<ext>" is the type's, written by
 * svc_store_result_name). 0, or -ENAMETOOLONG.
 */
static int with_format_ext(const struct session *s, char *name, size_t n)
{
	const char *ext = names_format_ext(s->type, s->format);
	char *dot = strchr(name, '.');
	if (!s->format)
		return 0;
	if (!ext || !dot)
		return -EINVAL;
	size_t head = (size_t)(dot - name) + 1;
	return util_fmt(dot + 1, n - head, "%s", ext) < 0 ? -ENAMETOOLONG : 0;
}

/* keep_failed_raw: what the redactor read stays in raw/ as failed-<id>.*. */
static void keep_failed(struct session *s)
{
	const char *raw_dir = svc_store_raw_dir();
	char keep[SVC_PATH_MAX + 32];
	struct sess_files *f = s->files;
	if (!f)
		return; /* no file made */
	if (f->raw_path[0] &&
	    util_fmt(keep, sizeof(keep), "%s/failed-%llu.raw", raw_dir,
		     (unsigned long long)s->id) == 0 && rename(f->raw_path, keep) == 0) {
		f->raw_path[0] = '\0';
		LOG_N("session %llu: raw artifact kept as %s (keep_failed_raw)",
		      (unsigned long long)s->id, keep);
	}
	/* A trace's kernel half is the other input the redactor read. */
	if (f->ft_path[0] &&
	    util_fmt(keep, sizeof(keep), "%s/failed-%llu.ftrace", raw_dir,
		     (unsigned long long)s->id) == 0 && rename(f->ft_path, keep) == 0) {
		f->ft_path[0] = '\0';
		LOG_N("session %llu: kernel trace kept as %s (keep_failed_raw)",
		      (unsigned long long)s->id, keep);
	}
}

/* The redactor is done: move its output into place and hand it over. */
static void redact_done(void *ud, int code, const char *rmsg)
{
	const struct svc_config *cfg = svc_session_config();
	struct session *s = ud;
	char dir[SVC_PATH_MAX], name[256], path[SVC_PATH_MAX + 256], msg[320];
	struct stat st;
	uint64_t result_id = 0;
	int r;

	s->rd = NULL;
	if (code != 0) {
		if (cfg->keep_failed_raw)
			keep_failed(s);
		if (names_exit_error(code, PROF_E_POST_PROCESSING) == PROF_E_NO_DISK_SPACE) {
			util_fmt(msg, sizeof(msg), "no space left for the result: %s",
				 rmsg && *rmsg ? rmsg : "?");
			svc_deliver_fail(s, PROF_E_NO_DISK_SPACE, msg);
			return;
		}
		util_fmt(msg, sizeof(msg), "redaction failed: %s", rmsg && *rmsg ? rmsg : "?");
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	if (fstat(s->out_fd, &st) < 0 || st.st_size <= 0) {
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, "the redactor wrote nothing");
		return;
	}
	if ((r = svc_admit_result_reserve(s->app, (uint64_t)st.st_size, msg, sizeof(msg))) != 0) {
		svc_deliver_fail(s, r, msg);
		return;
	}
	if ((fchown(s->out_fd, s->uid, s->gid) < 0 && errno != EPERM) ||
	    fchmod(s->out_fd, 0600) < 0 || fsync(s->out_fd) < 0) {
		int e = errno;
		util_fmt(msg, sizeof(msg), "cannot finish the result file: %s", strerror(e));
		svc_deliver_fail(s, names_errno_error(e, PROF_E_UNKNOWN), msg);
		return;
	}
	if ((r = svc_store_app_dir(s->uid, s->gid, dir, sizeof(dir))) < 0) {
		svc_deliver_fail(s, PROF_E_UNKNOWN, "cannot prepare the result directory");
		return;
	}
	if (svc_store_result_name(s->type, s->tag, s->id, time(NULL), name, sizeof(name)) < 0 ||
	    with_format_ext(s, name, sizeof(name)) < 0 ||
	    util_fmt(path, sizeof(path), "%s/%s", dir, name) < 0) {
		svc_deliver_fail(s, PROF_E_UNKNOWN, "result path too long");
		return;
	}
	/* out_fd is open: s->files holds its path (svc_deliver_start). */
	if (rename(s->files->out_path, path) < 0) {
		int e = errno;
		util_fmt(msg, sizeof(msg), "cannot move the result into place: %s", strerror(e));
		svc_deliver_fail(s, names_errno_error(e, PROF_E_UNKNOWN), msg);
		return;
	}
	s->files->out_path[0] = '\0';
	fsync_dir(dir);
	/*
	 * The commit point: the index row and the session's "done" in one
	 * transaction. A crash before it leaves the session active, and the
	 * next start removes this file and reports the failure instead
	 * (svc_store_init), so the app gets the file or a failure, once.
	 */
	uint64_t end_ns = util_now_ns(CLOCK_REALTIME);
	if ((r = svc_db_result_commit(s->id, s->app, s->uid, s->type, s->trigger, path,
				      (uint64_t)st.st_size, names_format_str(s->type, s->format),
				      s->start_ns, end_ns, &result_id)) < 0) {
		unlink(path);
		svc_admit_recount(); /* give back what svc_admit_result_reserve took */
		util_fmt(msg, sizeof(msg), "cannot index the result: %s", strerror(-r));
		svc_deliver_fail(s, names_errno_error(r, PROF_E_UNKNOWN), msg);
		return;
	}
	svc_session_release_files(s);

	/*
	 * The result's note: the session's own (an agent library that did not
	 * register), else, for a stack capture the redactor kept no sample of
	 * ("ok ... kept=0", its status line; samples that are all foreign are
	 * refused), why the profile is empty. Stored with the result (on a
	 * fresh result requeue only sets the note) and sent with it.
	 */
	const char *note = s->note[0] ? s->note : NULL;
	if (!note && s->type == PROF_STACK_SAMPLING && rmsg && strstr(rmsg, " kept=0 "))
		note = s->clock ? "no samples: no thread of the process was sampled in the window"
				: "no samples: the process used no CPU in the window";
	if (note)
		svc_db_result_requeue(s->id, note);
	svc_session_notify(s, "delivering", 0, NULL, 0, NULL);
	struct svc_conn *c = result_peer(s);
	r = c ? deliver_to(c, s->id, s->type, s->trigger, s->tag, path, s->uid,
			   (uint64_t)st.st_size, result_id, s->start_ns, note,
			   names_format_str(s->type, s->format)) : -ENOTCONN;
	LOG_I("session %llu: %llu samples (%llu dropped by the runtime); redacted (%s) "
	      "-> %s, %lld bytes%s", (unsigned long long)s->id, (unsigned long long)s->samples,
	      (unsigned long long)s->dropped, rmsg, path, (long long)st.st_size,
	      r == 0 ? "" : " (app not connected; queued)");
	if (note)
		LOG_I("session %llu: %s", (unsigned long long)s->id, note);
	svc_session_notify(s, "done", 0, NULL, result_id, path);
	svc_session_free(s);
}

/*
 * The kernel half of a system trace, for the redactor's own fd: the file
 * profilingd-ftrace wrote (root-only, in raw/, never the runtime's), opened
 * again read-only. It is never merged into the runtime's file: the
 * redactor takes kernel data from this fd alone, and drops kernel-looking
 * packets from the runtime's stream. -1 when there is none (no helper, it
 * failed, or it recorded nothing): the trace then has the app's own events.
 */
static int kernel_stream(struct session *s, const char *format)
{
	struct stat st, st2;
	/* A trace's, or a heap capture's kernel context (issue #20). */
	if ((strcmp(format, "perfetto") && strcmp(format, "heapgraph") &&
	     strcmp(format, "heapprofile")) || s->ft_fd < 0 || !s->files || !s->files->ft_path[0] ||
	    fstat(s->ft_fd, &st) < 0 || st.st_size == 0)
		return -1;
	int fd = open(s->files->ft_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && (fstat(fd, &st2) < 0 || st2.st_ino != st.st_ino || st2.st_dev != st.st_dev)) {
		close(fd);
		fd = -1;
		errno = ESTALE;
	}
	if (fd < 0)
		LOG_W("session %llu: kernel sched data left out: %s", (unsigned long long)s->id,
		      strerror(errno));
	return fd;
}

void svc_deliver_start(struct session *s)
{
	const struct svc_config *cfg = svc_session_config();
	char dir[SVC_PATH_MAX], msg[160];
	unsigned char magic[2];
	struct stat st;
	int r;

	if (fstat(s->raw_fd, &st) < 0 || st.st_size <= 0) {
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, "the runtime wrote no data");
		return;
	}
	if ((uint64_t)st.st_size > cfg->max_result_bytes) {
		util_fmt(msg, sizeof(msg), "artifact of %lld bytes exceeds max_result_bytes",
			 (long long)st.st_size);
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	/* pprof is gzip'd: anything else is not what was asked for. Method
	 * events in Perfetto format (redacted as a trace, not converted) come
	 * from profilingd-perf or the JVM agent as a trace already. */
	const char *rf = names_format_redact(s->type, s->format);
	if (!strcmp(names_type_format(s->type), "pprof") && (!rf || strcmp(rf, "perfetto")) &&
	    (pread(s->raw_fd, magic, 2, 0) != 2 || magic[0] != 0x1f || magic[1] != 0x8b)) {
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, "artifact is not a gzip'd pprof");
		return;
	}
	if ((r = svc_session_files(s)) < 0 ||
	    (r = svc_store_app_dir(s->uid, s->gid, dir, sizeof(dir))) < 0 ||
	    util_fmt(s->files->out_path, sizeof(s->files->out_path), "%s/.tmp-%llu", dir,
		     (unsigned long long)s->id) < 0) {
		if (s->files)
			s->files->out_path[0] = '\0';
		svc_deliver_fail(s, names_errno_error(r, PROF_E_UNKNOWN),
				 "cannot prepare the result directory");
		return;
	}
	/* Root-owned until it is complete; the app cannot see a partial file. */
	s->out_fd = open(s->files->out_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (s->out_fd < 0) {
		int e = errno;
		s->files->out_path[0] = '\0';
		util_fmt(msg, sizeof(msg), "cannot create the result file: %s", strerror(e));
		svc_deliver_fail(s, names_errno_error(e, PROF_E_UNKNOWN), msg);
		return;
	}
	s->state = S_REDACTING;
	svc_session_notify(s, "redacting", 0, NULL, 0, NULL);
	/* Heap formats (issue #20): the runtime wrote the type's own format;
	 * the redactor converts when another was asked for. */
	const char *format = s->redact_format ? s->redact_format
					      : names_format_redact(s->type, s->format);
	int kfd = kernel_stream(s, format);
	struct stat kst;
	/* The cap is on what the redactor reads: both halves, as when they
	 * were one file. */
	if (kfd >= 0 && fstat(kfd, &kst) == 0 &&
	    (uint64_t)st.st_size + (uint64_t)kst.st_size > cfg->max_result_bytes) {
		close(kfd);
		util_fmt(msg, sizeof(msg), "trace of %lld bytes with its kernel half exceeds "
			 "max_result_bytes", (long long)(st.st_size + kst.st_size));
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
		return;
	}
	r = svc_redact_start(s->raw_fd, kfd, s->out_fd, format, s->pid, s->ident.start, &s->proc,
			     redact_done, s, &s->rd);
	if (kfd >= 0)
		close(kfd); /* the redactor has its own copy */
	if (r < 0) {
		util_fmt(msg, sizeof(msg), "cannot start the redactor: %s", strerror(-r));
		svc_deliver_fail(s, PROF_E_POST_PROCESSING, msg);
	}
}

void svc_deliver_refused(struct svc_conn *client, uint64_t id, const Pd__Request *rq,
			 int error, const char *why)
{
	struct svc_conn *l = NULL;

	/* The app's listener gets every result, refusals included. */
	if (!id || !names_type_valid(rq->type))
		return;
	if (svc_conn_is_listener(client))
		l = client;
	else
		l = svc_conn_listener_for(svc_conn_uid(client));
	if (l)
		send_result_to(l, id, rq->type, PROF_TRIGGER_NONE, rq->tag ? rq->tag : "", error, why,
			       NULL, 0, 0, util_now_ns(CLOCK_REALTIME), -1, NULL, NULL);
}

struct redeliver_ctx {
	struct svc_conn *c;
	int sent;
};

static void redeliver_one(const struct svc_db_result *r, void *ud)
{
	struct redeliver_ctx *rc = ud;
	if (r->error) {
		/* A failure result (the capture was cut short): no file. */
		if (send_result_to(rc->c, r->session_id, r->type, r->trigger, r->tag, r->error,
				   r->message, NULL, 0, r->id, r->start_ns, -1, r->note, NULL) == 0) {
			svc_db_result_attempt(r->id);
			rc->sent++;
		}
		return;
	}
	int e = deliver_to(rc->c, r->session_id, r->type, r->trigger, r->tag, r->path, r->uid,
			   r->size, r->id, r->start_ns, r->note, r->format);
	if (e == -ENOENT || e == -ELOOP || e == -EINVAL || e == -EPERM || e == -EMLINK) {
		/*
		 * The file is gone (removed by hand), or what is at its path is
		 * not the result any more (a link, another user's file): nothing
		 * left to deliver. The row goes; the name is the app's to remove.
		 */
		svc_db_result_delete(r->id);
		return;
	}
	if (e == 0)
		rc->sent++;
}

void svc_deliver_redeliver(struct svc_conn *client)
{
	const struct svc_config *cfg = svc_session_config();
	struct redeliver_ctx rc = { .c = client };
	uint64_t now = util_now_ns(CLOCK_REALTIME);
	uint64_t age = (uint64_t)cfg->delivery_max_age_days * 86400ull * 1000000000ull;
	/* A burst fits the peer's queue; the rest goes on its next listener call
	 * or connection. */
	unsigned limit = cfg->max_queued_msgs / 2 < 16 ? cfg->max_queued_msgs / 2 : 16;
	svc_db_pending(svc_conn_app(client), cfg->delivery_attempts, now > age ? now - age : 0,
		       limit, redeliver_one, &rc);
	if (rc.sent)
		LOG_PEER(svc_conn_uid(client), LOG_INFO,
			 "redelivered %d queued result(s) to pid %d (%s)",
			 rc.sent, (int)svc_conn_pid(client), svc_conn_app(client));
}

void svc_deliver_ack(struct svc_conn *client, uint64_t result_id)
{
	/* Root takes results of any app (captures it asked for others). */
	const char *app = svc_conn_uid(client) == 0 ? NULL : svc_conn_app(client);
	if (svc_db_result_delivered(result_id, app) < 0)
		LOG_PEER(svc_conn_uid(client), LOG_DEBUG,
			 "ack for result %llu from pid %d ignored (not its own, or acked)",
			 (unsigned long long)result_id, (int)svc_conn_pid(client));
}
