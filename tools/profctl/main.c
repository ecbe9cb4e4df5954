/*
 * profctl: look at and drive profilingd from a shell (control.sock,
 * proto/control.proto). Every subcommand prints a readable table, or
 * JSON with --json. Exit codes (docs/man/profctl.1):
 *   0 ok, 1 the daemon refused or reported an error, 2 usage,
 *   3 cannot reach the daemon (or it hung up), 4 the capture failed
 *   (request --wait), 5 a local error (writing the output, reading a result).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "duration.h"
#include "names.h"
#include "pctl.h"
#include "profiling/profiling.h"
#include "util.h"
#include "wire.h"

#define CTL_VERSION 1
#define CTL_MAX_REPLY (64 * 1024)
#define DEFAULT_SOCKET "/var/lib/profilingd/control.sock"
#define REPLY_TIMEOUT_MS 30000

enum { EX_OK = 0, EX_DAEMON = 1, EX_USAGE = 2, EX_CONNECT = 3, EX_CAPTURE = 4, EX_LOCAL = 5 };

static struct {
	const char *socket;
	bool json;
	const char *output;
	uint32_t pid, type, duration_ms, hz;
	const char *tag;
	uint32_t format; /* heap formats (issue #20): enum prof_format */
	bool wait;
	const char *app;   /* budget --app */
	uint32_t fill, java_allocs; /* abi21: enum prof_fill_policy, prof_switch */
	uint32_t background_ms;  /* request --background: the running background trace */
	/* methods add (issue #19) */
	const char *exe, *methods[8];
	unsigned nmethods;
	uint32_t version, canary, expiry_s, every, max_hits;
	uint32_t budget_us;              /* methods add --budget-us */
} opt;

/* A direct request's "none" is a dash in the tables. */
static const char *trigger_name(uint32_t t)
{
	return t == PROF_TRIGGER_NONE ? "-" : names_trigger_str(t);
}

static void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("profctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static void usage(FILE *f);

/* ------------------------------------------------------------ JSON */

static void json_str(FILE *f, const char *s)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	fputc('"', f);
	for (; *u; u++) {
		if (*u == '"' || *u == '\\')
			fprintf(f, "\\%c", *u);
		else if (*u < 0x20)
			fprintf(f, "\\u%04x", *u);
		else if (*u < 0x80)
			fputc(*u, f);
		else {
			/* Valid UTF-8 as is, anything else as U+FFFD. */
			size_t len = (*u & 0xe0) == 0xc0 ? 2 : (*u & 0xf0) == 0xe0 ? 3
				   : (*u & 0xf8) == 0xf0 ? 4 : 0;
			size_t k = 1;
			while (len && k < len && (u[k] & 0xc0) == 0x80)
				k++;
			if (len && k == len) {
				fwrite(u, 1, len, f);
				u += len - 1;
			} else {
				fputs("\\ufffd", f);
			}
		}
	}
	fputc('"', f);
}

/* key":value helpers; first says whether a comma is needed. */
static void jk(FILE *f, bool *first, const char *k)
{
	if (!*first)
		fputc(',', f);
	*first = false;
	json_str(f, k);
	fputc(':', f);
}
static void jstr(FILE *f, bool *first, const char *k, const char *v) { jk(f, first, k); json_str(f, v); }
static void jnum(FILE *f, bool *first, const char *k, uint64_t v) { jk(f, first, k); fprintf(f, "%" PRIu64, v); }
static void jbool(FILE *f, bool *first, const char *k, bool v) { jk(f, first, k); fputs(v ? "true" : "false", f); }

/* ------------------------------------------------------------ talking */

static int ctl_connect(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = opt.socket;
	if (strlen(path) >= sizeof(sa.sun_path))
		die(EX_USAGE, "socket path too long: %s", path);
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die(EX_CONNECT, "cannot create a socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		die(EX_CONNECT, "cannot connect to %s: %s (%s)", path, strerror(e),
		    e == EACCES ? "the socket's directory or mode keeps this user out"
		    : e == ECONNREFUSED ? "profilingd is not listening there; is it running?"
		    : "is profilingd running? see --socket");
	}
	return fd;
}

static void ctl_send(int fd, const Pdctl__CtlRequest *rq)
{
	int r = wire_send_msg(fd, &rq->base, 4096, -1);
	if (r < 0)
		die(EX_CONNECT, "cannot send to profilingd at %s: %s", opt.socket, strerror(-r));
}

/* One reply (and its fd, if fd_out). timeout_ms < 0: wait forever. NULL on timeout. */
static Pdctl__CtlReply *ctl_recv(int fd, int *fd_out, int timeout_ms)
{
	static uint8_t buf[CTL_MAX_REPLY];
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	int r;
	do
		r = poll(&pfd, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return NULL;
	ssize_t n = wire_recv(fd, buf, sizeof(buf), fd_out);
	if (n == -EAGAIN)
		return NULL;
	if (n == 0)
		die(EX_CONNECT, "profilingd closed the connection (see its log; a version mismatch?)");
	if (n < 0)
		die(EX_CONNECT, "reading from profilingd: %s", strerror((int)-n));
	Pdctl__CtlReply *rep = pdctl__ctl_reply__unpack(NULL, (size_t)n, buf);
	if (!rep)
		die(EX_CONNECT, "undecodable reply from profilingd (is profctl from the same release?)");
	return rep;
}

/* Send rq, wait for its reply; a daemon error exits 1 with its message. */
static Pdctl__CtlReply *call(int fd, Pdctl__CtlRequest *rq, int *fd_out)
{
	rq->version = CTL_VERSION;
	ctl_send(fd, rq);
	Pdctl__CtlReply *rep = ctl_recv(fd, fd_out, REPLY_TIMEOUT_MS);
	if (!rep)
		die(EX_CONNECT, "no reply from profilingd within %d s", REPLY_TIMEOUT_MS / 1000);
	if (rep->error)
		die(EX_DAEMON, "%s (%s)", rep->message && *rep->message ? rep->message
		    : "the daemon refused", prof_strerror((int)rep->error));
	return rep;
}

static Pdctl__CtlReply *simple(Pdctl__CtlRequest__CmdCase which, const char *app, uint64_t id,
			       int *fd_out)
{
	Pdctl__CtlRequest rq = PDCTL__CTL_REQUEST__INIT;
	Pdctl__AppFilter f = PDCTL__APP_FILTER__INIT;
	Pdctl__ResultId rid = PDCTL__RESULT_ID__INIT;
	static char key[300];

	/* A bare uid is that uid's app. */
	if (app && app[0] >= '0' && app[0] <= '9' && strspn(app, "0123456789") == strlen(app)) {
		snprintf(key, sizeof(key), "uid:%s", app);
		app = key;
	}
	f.app = (char *)app;
	rid.id = id;
	rq.cmd_case = which;
	switch (which) {
	case PDCTL__CTL_REQUEST__CMD_STATUS: rq.status = 1; break;
	case PDCTL__CTL_REQUEST__CMD_APPS: rq.apps = 1; break;
	case PDCTL__CTL_REQUEST__CMD_TRIGGERS: rq.triggers = &f; break;
	case PDCTL__CTL_REQUEST__CMD_RATELIMIT: rq.ratelimit = &f; break;
	case PDCTL__CTL_REQUEST__CMD_RESULTS: rq.results = &f; break;
	case PDCTL__CTL_REQUEST__CMD_SHOW: rq.show = &rid; break;
	case PDCTL__CTL_REQUEST__CMD_OPEN: rq.open = &rid; break;
	default: break;
	}
	int fd = ctl_connect();
	Pdctl__CtlReply *rep = call(fd, &rq, fd_out);
	close(fd);
	return rep;
}

/* ------------------------------------------------------------ formatting */

static void fmt_dur(uint64_t ms, char *out, size_t n)
{
	uint64_t s = ms / 1000;
	if (s >= 86400)
		snprintf(out, n, "%" PRIu64 "d %02" PRIu64 "h %02" PRIu64 "m", s / 86400, s / 3600 % 24,
			 s / 60 % 60);
	else if (s >= 3600)
		snprintf(out, n, "%" PRIu64 "h %02" PRIu64 "m %02" PRIu64 "s", s / 3600, s / 60 % 60,
			 s % 60);
	else if (s >= 60)
		snprintf(out, n, "%" PRIu64 "m %02" PRIu64 "s", s / 60, s % 60);
	else
		snprintf(out, n, "%.1fs", (double)ms / 1000);
}

static void fmt_bytes(uint64_t b, char *out, size_t n)
{
	if (b >= 1ull << 30)
		snprintf(out, n, "%.1fG", (double)b / (1ull << 30));
	else if (b >= 1 << 20)
		snprintf(out, n, "%.1fM", (double)b / (1 << 20));
	else if (b >= 1 << 10)
		snprintf(out, n, "%.1fK", (double)b / (1 << 10));
	else
		snprintf(out, n, "%" PRIu64 "B", b);
}

static void fmt_time(uint64_t ns, char *out, size_t n)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;
	if (!ns) {
		snprintf(out, n, "-");
		return;
	}
	gmtime_r(&t, &tm);
	strftime(out, n, "%Y-%m-%d %H:%M:%SZ", &tm);
}

static const char *win_name(uint64_t ms, char *buf, size_t n)
{
	if (ms % 86400000 == 0)
		snprintf(buf, n, "%" PRIu64 "d", ms / 86400000);
	else if (ms % 3600000 == 0)
		snprintf(buf, n, "%" PRIu64 "h", ms / 3600000);
	else
		snprintf(buf, n, "%" PRIu64 "s", ms / 1000);
	return buf;
}

static void budgets_json(FILE *f, Pdctl__Budget **b, size_t n)
{
	fputc('[', f);
	for (size_t i = 0; i < n; i++) {
		bool first = true;
		fputs(i ? ",{" : "{", f);
		jk(f, &first, "app");
		if (b[i]->app)
			json_str(f, b[i]->app);
		else
			fputs("null", f);
		if (b[i]->error)
			jstr(f, &first, "error", b[i]->error);
		jk(f, &first, "windows");
		fputc('[', f);
		for (size_t w = 0; w < b[i]->n_window; w++) {
			const Pdctl__Window *x = b[i]->window[w];
			bool f2 = true;
			fputs(w ? ",{" : "{", f);
			jnum(f, &f2, "length_s", x->length_ms / 1000);
			jnum(f, &f2, "used", x->used);
			jnum(f, &f2, "cap", x->cap);
			jnum(f, &f2, "left", x->used < x->cap ? x->cap - x->used : 0);
			fputc('}', f);
		}
		fputs("]}", f);
	}
	fputc(']', f);
}

static void budgets_table(Pdctl__Budget **b, size_t n)
{
	char name[32];
	if (!n)
		return;
	printf("%-28s", "BUDGET (used/cap, left)");
	for (size_t w = 0; w < b[0]->n_window; w++)
		printf(" %-18s", win_name(b[0]->window[w]->length_ms, name, sizeof(name)));
	putchar('\n');
	for (size_t i = 0; i < n; i++) {
		printf("%-28s", b[i]->app ? b[i]->app : "system");
		if (b[i]->error) {
			printf(" %s\n", b[i]->error);
			continue;
		}
		for (size_t w = 0; w < b[i]->n_window; w++) {
			const Pdctl__Window *x = b[i]->window[w];
			char cell[48];
			snprintf(cell, sizeof(cell), "%" PRIu64 "/%" PRIu64 " (%" PRIu64 ")", x->used,
				 x->cap, x->used < x->cap ? x->cap - x->used : 0);
			printf(" %-18s", cell);
		}
		putchar('\n');
	}
}

/* ------------------------------------------------------------ status */

static int cmd_status(void)
{
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_STATUS, NULL, 0, NULL);
	const Pdctl__Status *s = rep->status;
	char buf[64];
	if (!s)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		bool first = true;
		fputc('{', stdout);
		jstr(stdout, &first, "version", s->version);
		jnum(stdout, &first, "uptime_ms", s->uptime_ms);
		jnum(stdout, &first, "pid", s->daemon_pid);
		jnum(stdout, &first, "clients", s->clients);
		jbool(stdout, &first, "truncated", s->truncated);
		jk(stdout, &first, "watchers");
		fputc('[', stdout);
		for (size_t i = 0; i < s->n_watcher; i++) {
			bool f2 = true;
			fputs(i ? ",{" : "{", stdout);
			jstr(stdout, &f2, "name", s->watcher[i]->name);
			jstr(stdout, &f2, "status", s->watcher[i]->status);
			fputc('}', stdout);
		}
		fputs("]", stdout);
		jk(stdout, &first, "runtimes");
		fputc('[', stdout);
		for (size_t i = 0; i < s->n_runtime; i++) {
			const Pdctl__Runtime *r = s->runtime[i];
			bool f2 = true;
			fputs(i ? ",{" : "{", stdout);
			jnum(stdout, &f2, "pid", r->pid);
			jnum(stdout, &f2, "uid", r->uid);
			jstr(stdout, &f2, "kind", r->kind);
			jk(stdout, &f2, "caps");
			fputc('[', stdout);
			for (size_t k = 0; k < r->n_caps; k++) {
				if (k)
					fputc(',', stdout);
				json_str(stdout, r->caps[k]);
			}
			fputs("]}", stdout);
		}
		fputs("]", stdout);
		jk(stdout, &first, "sessions");
		fputc('[', stdout);
		for (size_t i = 0; i < s->n_session; i++) {
			const Pdctl__Session *x = s->session[i];
			bool f2 = true;
			fputs(i ? ",{" : "{", stdout);
			jnum(stdout, &f2, "id", x->id);
			jnum(stdout, &f2, "pid", x->pid);
			jnum(stdout, &f2, "uid", x->uid);
			jstr(stdout, &f2, "app", x->app);
			jstr(stdout, &f2, "type", names_type_str(x->type));
			jstr(stdout, &f2, "trigger", trigger_name(x->trigger));
			jstr(stdout, &f2, "phase", x->phase);
			jnum(stdout, &f2, "elapsed_ms", x->elapsed_ms);
			jnum(stdout, &f2, "duration_ms", x->duration_ms);
			jstr(stdout, &f2, "tag", x->tag);
			fputc('}', stdout);
		}
		fputs("]", stdout);
		jk(stdout, &first, "ratelimit");
		budgets_json(stdout, s->budget, s->n_budget);
		fputs("}\n", stdout);
		pdctl__ctl_reply__free_unpacked(rep, NULL);
		return EX_OK;
	}
	fmt_dur(s->uptime_ms, buf, sizeof(buf));
	printf("profilingd %s, pid %u, up %s, %u client connection(s)\n\n", s->version,
	       s->daemon_pid, buf, s->clients);
	printf("%-16s %s\n", "WATCHER", "STATUS");
	for (size_t i = 0; i < s->n_watcher; i++)
		printf("%-16s %s\n", s->watcher[i]->name, s->watcher[i]->status);
	printf("\n%-8s %-6s %-8s %s\n", "RUNTIME", "UID", "KIND", "CAPABILITIES");
	for (size_t i = 0; i < s->n_runtime; i++) {
		const Pdctl__Runtime *r = s->runtime[i];
		printf("%-8u %-6u %-8s ", r->pid, r->uid, r->kind && *r->kind ? r->kind : "?");
		for (size_t k = 0; k < r->n_caps; k++)
			printf("%s%s", k ? "," : "", r->caps[k]);
		printf("%s\n", r->n_caps ? "" : "-");
	}
	if (!s->n_runtime)
		printf("(no runtime connected)\n");
	printf("\n%-8s %-8s %-16s %-13s %-14s %-20s %s\n", "SESSION", "PID", "APP", "TYPE",
	       "TRIGGER", "PHASE", "ELAPSED");
	for (size_t i = 0; i < s->n_session; i++) {
		const Pdctl__Session *x = s->session[i];
		char el[32], du[32];
		fmt_dur(x->elapsed_ms, el, sizeof(el));
		fmt_dur(x->duration_ms, du, sizeof(du));
		printf("%-8" PRIu64 " %-8u %-16s %-13s %-14s %-20s %s/%s\n", x->id, x->pid, x->app,
		       names_type_str(x->type), trigger_name(x->trigger), x->phase, el, du);
	}
	if (!s->n_session)
		printf("(no capture running)\n");
	putchar('\n');
	budgets_table(s->budget, s->n_budget);
	if (s->truncated)
		printf("(lists cut to fit one reply)\n");
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

/* ------------------------------------------------------------ apps, triggers, ratelimit */

static int cmd_apps(void)
{
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_APPS, NULL, 0, NULL);
	const Pdctl__AppList *l = rep->apps;
	if (!l)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		fputc('[', stdout);
		for (size_t i = 0; i < l->n_app; i++) {
			const Pdctl__App *a = l->app[i];
			bool f = true;
			fputs(i ? ",{" : "{", stdout);
			jstr(stdout, &f, "app", a->app);
			jnum(stdout, &f, "uid", a->uid);
			jnum(stdout, &f, "clients", a->clients);
			jnum(stdout, &f, "triggers", a->triggers);
			jnum(stdout, &f, "results", a->results);
			jnum(stdout, &f, "result_bytes", a->result_bytes);
			fputc('}', stdout);
		}
		fputs("]\n", stdout);
	} else {
		printf("%-28s %-7s %-8s %-9s %-8s %s\n", "APP", "UID", "CLIENTS", "TRIGGERS", "RESULTS",
		       "BYTES");
		for (size_t i = 0; i < l->n_app; i++) {
			const Pdctl__App *a = l->app[i];
			char b[32];
			fmt_bytes(a->result_bytes, b, sizeof(b));
			printf("%-28s %-7u %-8u %-9u %-8u %s\n", a->app, a->uid, a->clients, a->triggers,
			       a->results, b);
		}
		if (!l->n_app)
			printf("(no apps)\n");
		if (l->truncated)
			printf("(list cut to fit one reply)\n");
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static int cmd_triggers(const char *app)
{
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_TRIGGERS, app, 0, NULL);
	const Pdctl__TriggerList *l = rep->triggers;
	if (!l)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		fputc('[', stdout);
		for (size_t i = 0; i < l->n_trigger; i++) {
			const Pdctl__TriggerInfo *t = l->trigger[i];
			bool f = true;
			fputs(i ? ",{" : "{", stdout);
			jstr(stdout, &f, "app", t->app);
			jnum(stdout, &f, "uid", t->uid);
			jstr(stdout, &f, "trigger", trigger_name(t->type));
			jstr(stdout, &f, "capture", names_type_str(t->capture));
			jnum(stdout, &f, "period_s", t->period_s);
			jnum(stdout, &f, "fired", t->fired);
			jnum(stdout, &f, "coalesced", t->coalesced);
			jnum(stdout, &f, "refused", t->refused);
			jnum(stdout, &f, "last_ns", t->last_ns);
			jnum(stdout, &f, "active_session", t->active_session);
			if (t->system_name)
				jstr(stdout, &f, "system_trigger", t->system_name);
			jstr(stdout, &f, "detail", t->detail);
			fputc('}', stdout);
		}
		fputs("]\n", stdout);
	} else {
		printf("%-24s %-15s %-13s %-7s %-6s %-21s %s\n", "APP", "TRIGGER", "CAPTURE", "PERIOD",
		       "FIRED", "LAST", "DETAIL");
		for (size_t i = 0; i < l->n_trigger; i++) {
			const Pdctl__TriggerInfo *t = l->trigger[i];
			char last[40], per[24];
			fmt_time(t->last_ns, last, sizeof(last));
			snprintf(per, sizeof(per), "%us", t->period_s);
			printf("%-24s %-15s %-13s %-7s %-6" PRIu64 " %-21s %s\n", t->app,
			       trigger_name(t->type), names_type_str(t->capture), per, t->fired, last,
			       t->detail ? t->detail : "");
		}
		if (!l->n_trigger)
			printf("(no triggers)\n");
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static int cmd_ratelimit(const char *app)
{
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_RATELIMIT, app, 0, NULL);
	if (!rep->ratelimit)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		budgets_json(stdout, rep->ratelimit->budget, rep->ratelimit->n_budget);
		fputc('\n', stdout);
	} else {
		budgets_table(rep->ratelimit->budget, rep->ratelimit->n_budget);
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

/* ------------------------------------------------------------ results */

static void result_json(const Pdctl__ResultInfo *r)
{
	bool f = true;
	fputc('{', stdout);
	jnum(stdout, &f, "id", r->id);
	jnum(stdout, &f, "request_id", r->session_id);
	jstr(stdout, &f, "app", r->app);
	jnum(stdout, &f, "uid", r->uid);
	jnum(stdout, &f, "pid", r->pid);
	jstr(stdout, &f, "type", names_type_str(r->type));
	jstr(stdout, &f, "trigger", trigger_name(r->trigger));
	jstr(stdout, &f, "format", r->format);
	jstr(stdout, &f, "path", r->path);
	jnum(stdout, &f, "size", r->size);
	jnum(stdout, &f, "start_ns", r->start_ns);
	jnum(stdout, &f, "end_ns", r->end_ns);
	jbool(stdout, &f, "delivered", r->delivered);
	jnum(stdout, &f, "attempts", r->attempts);
	jstr(stdout, &f, "tag", r->tag);
	jstr(stdout, &f, "note", r->note);
	fputc('}', stdout);
}

static int cmd_results(const char *app)
{
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_RESULTS, app, 0, NULL);
	const Pdctl__ResultList *l = rep->results;
	if (!l)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		fputc('[', stdout);
		for (size_t i = 0; i < l->n_result; i++) {
			if (i)
				fputc(',', stdout);
			result_json(l->result[i]);
		}
		fputs("]\n", stdout);
	} else {
		printf("%-7s %-21s %-20s %-13s %-14s %-8s %-10s %s\n", "ID", "CREATED", "APP", "TYPE",
		       "TRIGGER", "SIZE", "DELIVERED", "TAG");
		for (size_t i = 0; i < l->n_result; i++) {
			const Pdctl__ResultInfo *r = l->result[i];
			char t[40], b[32];
			fmt_time(r->end_ns, t, sizeof(t));
			fmt_bytes(r->size, b, sizeof(b));
			printf("%-7" PRIu64 " %-21s %-20s %-13s %-14s %-8s %-10s %s\n", r->id, t, r->app,
			       names_type_str(r->type), trigger_name(r->trigger), b,
			       r->delivered ? "yes" : "no", r->tag ? r->tag : "");
		}
		if (!l->n_result)
			printf("(no results)\n");
		else if (l->truncated)
			printf("(%zu of %u shown)\n", l->n_result, l->total);
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static uint64_t parse_id(const char *s)
{
	char *end;
	errno = 0;
	unsigned long long v = s ? strtoull(s, &end, 10) : 0;
	if (!s || errno || *end || v == 0 || *s == '-')
		die(EX_USAGE, "'%s' is not a result id (see profctl results)", s ? s : "");
	return v;
}

static int cmd_show(const char *ids)
{
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_SHOW, NULL, parse_id(ids), NULL);
	const Pdctl__ResultInfo *r = rep->result;
	char a[40], b[40], sz[32];
	if (!r)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		result_json(r);
		fputc('\n', stdout);
	} else {
		fmt_time(r->start_ns, a, sizeof(a));
		fmt_time(r->end_ns, b, sizeof(b));
		fmt_bytes(r->size, sz, sizeof(sz));
		printf("Result:     %" PRIu64 "\nRequest:    %" PRIu64 "\nApp:        %s (uid %u)\n"
		       "PID:        %u\nType:       %s\nTrigger:    %s\nFormat:     %s\n"
		       "Size:       %s (%" PRIu64 " bytes)\nStarted:    %s\nEnded:      %s\n"
		       "Delivered:  %s (%u attempt(s))\nTag:        %s\nPath:       %s\n",
		       r->id, r->session_id, r->app, r->uid, r->pid, names_type_str(r->type),
		       trigger_name(r->trigger), r->format, sz, r->size, a, b,
		       r->delivered ? "yes" : "no", r->attempts, r->tag ? r->tag : "", r->path);
		if (r->note && *r->note)
			printf("Note:       %s\n", r->note);
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

/* The result's bytes through the fd the daemon opened for us. */
static Pdctl__CtlReply *open_result(const char *ids, uint8_t **buf, size_t *len)
{
	int fd = -1;
	Pdctl__CtlReply *rep = simple(PDCTL__CTL_REQUEST__CMD_OPEN, NULL, parse_id(ids), &fd);
	if (!rep->result || fd < 0)
		die(EX_CONNECT, "profilingd sent no file for result %s", ids);
	if (buf) {
		int r = pctl_read_fd(fd, buf, len);
		if (r < 0)
			die(EX_LOCAL, "cannot read result %s: %s", ids, strerror(-r));
		close(fd);
	} else {
		*len = (size_t)fd; /* export: the caller copies from the fd */
	}
	return rep;
}

static struct pctl_profile *load_profile(const char *ids, Pdctl__CtlReply **rep_out)
{
	uint8_t *buf;
	size_t len;
	char err[200];
	struct pctl_profile *p;
	Pdctl__CtlReply *rep = open_result(ids, &buf, &len);
	const char *fmt = rep->result->format;
	int r;

	if (!strcmp(fmt, "pprof"))
		r = pctl_pprof_read(buf, len, &p, err, sizeof(err));
	else if (!strcmp(fmt, "perfetto"))
		r = pctl_trace_read(buf, len, &p, err, sizeof(err));
	else
		die(EX_USAGE, "result %s is a %s file: stacks come from pprof results and traces "
		    "(see profctl export)", ids, fmt);
	free(buf);
	if (r < 0)
		die(EX_LOCAL, "result %s (%s): %s", ids, rep->result->path, err);
	*rep_out = rep;
	return p;
}

static int cmd_top(const char *ids)
{
	Pdctl__CtlReply *rep;
	struct pctl_profile *p = load_profile(ids, &rep);
	struct pctl_top_row *rows;
	size_t n;
	if (pctl_top(p, &rows, &n) < 0)
		die(EX_LOCAL, "out of memory");
	double tot = p->total ? (double)p->total : 1;
	if (opt.json) {
		bool f = true;
		fputc('{', stdout);
		jnum(stdout, &f, "result", rep->result->id);
		jstr(stdout, &f, "sample_type", p->sample_type);
		jstr(stdout, &f, "unit", p->unit);
		jk(stdout, &f, "total");
		fprintf(stdout, "%" PRId64, p->total);
		jk(stdout, &f, "functions");
		fputc('[', stdout);
		for (size_t i = 0; i < n; i++) {
			bool f2 = true;
			fputs(i ? ",{" : "{", stdout);
			jstr(stdout, &f2, "name", p->names[rows[i].name]);
			jk(stdout, &f2, "flat");
			fprintf(stdout, "%" PRId64, rows[i].flat);
			jk(stdout, &f2, "flat_pct");
			fprintf(stdout, "%.2f", 100.0 * (double)rows[i].flat / tot);
			jk(stdout, &f2, "cum");
			fprintf(stdout, "%" PRId64, rows[i].cum);
			jk(stdout, &f2, "cum_pct");
			fprintf(stdout, "%.2f", 100.0 * (double)rows[i].cum / tot);
			fputc('}', stdout);
		}
		fputs("]}\n", stdout);
	} else {
		char t[48];
		pctl_fmt_value(p, p->total, t, sizeof(t));
		printf("Result %" PRIu64 " (%s of pid %u): %s %s, total %s\n", rep->result->id,
		       names_type_str(rep->result->type), rep->result->pid, p->sample_type, p->unit, t);
		printf("%10s %7s %7s %10s %7s  %s\n", "flat", "flat%", "sum%", "cum", "cum%", "function");
		double sum = 0;
		for (size_t i = 0; i < n; i++) {
			char fl[48], cu[48];
			pctl_fmt_value(p, rows[i].flat, fl, sizeof(fl));
			pctl_fmt_value(p, rows[i].cum, cu, sizeof(cu));
			sum += (double)rows[i].flat;
			printf("%10s %6.2f%% %6.2f%% %10s %6.2f%%  %s\n", fl,
			       100.0 * (double)rows[i].flat / tot, 100.0 * sum / tot, cu,
			       100.0 * (double)rows[i].cum / tot, p->names[rows[i].name]);
		}
		if (p->truncated)
			printf("(%" PRIu64 " stacks deeper than %d frames were cut)\n", p->truncated,
			       PCTL_MAX_DEPTH);
	}
	free(rows);
	pctl_profile_free(p);
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static int cmd_collapsed(const char *ids)
{
	Pdctl__CtlReply *rep;
	struct pctl_profile *p = load_profile(ids, &rep);
	if (opt.json) {
		fputc('[', stdout);
		bool firsts = true;
		for (size_t i = 0; i < p->nstacks; i++) {
			const struct pctl_stack *s = &p->stacks[i];
			if (!s->n || s->value <= 0)
				continue;
			bool f = true;
			fputs(firsts ? "{" : ",{", stdout);
			firsts = false;
			jk(stdout, &f, "stack");
			fputc('[', stdout);
			for (uint32_t j = 0; j < s->n; j++) {
				if (j)
					fputc(',', stdout);
				json_str(stdout, p->names[p->frames[s->off + j]]);
			}
			fputc(']', stdout);
			jk(stdout, &f, "value");
			fprintf(stdout, "%" PRId64 "}", s->value);
		}
		fputs("]\n", stdout);
	} else if (pctl_collapsed(p, stdout) < 0) {
		die(EX_LOCAL, "cannot write the stacks: %s", strerror(errno));
	}
	pctl_profile_free(p);
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static int cmd_flame(const char *ids)
{
	Pdctl__CtlReply *rep;
	char title[512], tmp[4096];
	size_t nframes = 0;
	if (!opt.output)
		die(EX_USAGE, "flame needs -o OUT.svg (or -o - for stdout)");
	struct pctl_profile *p = load_profile(ids, &rep);
	const Pdctl__ResultInfo *r = rep->result;
	snprintf(title, sizeof(title), "%s of pid %u (%s), result %" PRIu64,
		 names_type_str(r->type), r->pid, r->app, r->id);
	bool to_stdout = !strcmp(opt.output, "-");
	FILE *f = stdout;
	if (!to_stdout) {
		/* Written beside the target and renamed: never a half-written SVG. */
		snprintf(tmp, sizeof(tmp), "%s.tmp-%d", opt.output, (int)getpid());
		f = fopen(tmp, "wex");
		if (!f)
			die(EX_LOCAL, "cannot write %s: %s", tmp, strerror(errno));
	}
	int e = pctl_flame_svg(p, title, f, &nframes);
	if (!to_stdout) {
		if (fclose(f) != 0 && e == 0)
			e = -errno;
		if (e == 0 && rename(tmp, opt.output) < 0)
			e = -errno;
		if (e < 0)
			unlink(tmp);
	}
	if (e < 0)
		die(EX_LOCAL, "cannot write the flame graph to %s: %s", opt.output, strerror(-e));
	if (!to_stdout) {
		if (opt.json) {
			bool fj = true;
			fputc('{', stdout);
			jstr(stdout, &fj, "path", opt.output);
			jnum(stdout, &fj, "result", r->id);
			jnum(stdout, &fj, "frames", nframes);
			jk(stdout, &fj, "total");
			fprintf(stdout, "%" PRId64 "}\n", p->total);
		} else {
			printf("wrote %s: %zu frames, %s %s\n", opt.output, nframes, p->sample_type,
			       p->unit);
		}
	}
	pctl_profile_free(p);
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static int cmd_export(const char *ids, const char *dest)
{
	size_t fdz;
	char path[4096], tmp[4200];
	struct stat st;
	if (!dest)
		die(EX_USAGE, "export needs a destination: profctl export ID DEST");
	Pdctl__CtlReply *rep = open_result(ids, NULL, &fdz);
	int in = (int)fdz;
	const char *base = strrchr(rep->result->path, '/');
	base = base ? base + 1 : rep->result->path;
	if (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))
		snprintf(path, sizeof(path), "%s%s%s", dest,
			 dest[strlen(dest) - 1] == '/' ? "" : "/", base);
	else
		snprintf(path, sizeof(path), "%s", dest);
	snprintf(tmp, sizeof(tmp), "%s.tmp-%d", path, (int)getpid());
	int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0)
		die(EX_LOCAL, "cannot create %s: %s", tmp, strerror(errno));
	uint64_t total = 0;
	char buf[65536];
	for (;;) {
		ssize_t n = read(in, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 || (n > 0 && util_write_all(out, buf, (size_t)n) < 0)) {
			int e = errno;
			unlink(tmp);
			die(EX_LOCAL, "copying result %s to %s: %s", ids, path, strerror(e));
		}
		if (n == 0)
			break;
		total += (uint64_t)n;
	}
	if (fsync(out) < 0 || close(out) < 0 || rename(tmp, path) < 0) {
		int e = errno;
		unlink(tmp);
		die(EX_LOCAL, "cannot finish %s: %s", path, strerror(e));
	}
	close(in);
	if (opt.json) {
		bool f = true;
		fputc('{', stdout);
		jnum(stdout, &f, "result", rep->result->id);
		jstr(stdout, &f, "path", path);
		jnum(stdout, &f, "bytes", total);
		jstr(stdout, &f, "format", rep->result->format);
		fputs("}\n", stdout);
	} else {
		printf("exported result %" PRIu64 " (%s, %" PRIu64 " bytes) to %s\n", rep->result->id,
		       rep->result->format, total, path);
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

/* ------------------------------------------------------------ request */

static void bar(const char *phase, uint64_t elapsed_ms, uint32_t duration_ms)
{
	const int width = 30;
	double frac = duration_ms ? (double)elapsed_ms / duration_ms : 0;
	int fill;
	if (frac > 1 || strcmp(phase, "capturing") != 0)
		frac = strcmp(phase, "waiting-for-runtime") == 0 ? 0 : 1;
	fill = (int)(frac * width);
	printf("\r[");
	for (int i = 0; i < width; i++)
		putchar(i < fill ? '#' : '.');
	printf("] %5.1fs/%.1fs %-20s", (double)elapsed_ms / 1000, (double)duration_ms / 1000, phase);
	fflush(stdout);
}

static int cmd_request(void)
{
	Pdctl__CtlRequest rq = PDCTL__CTL_REQUEST__INIT;
	Pdctl__Capture cp = PDCTL__CAPTURE__INIT;
	if (!opt.pid || !opt.type)
		die(EX_USAGE, "request needs --pid N and --type TYPE (%s)", names_type_list());
	/* issue #21: a request carries no targets, so it can name only the
	 * listed types; method events are `profctl methods add`. */
	if (opt.type == PROF_METHOD_EVENTS)
		die(EX_USAGE, "request --type %s: method events need targets (profctl methods add); "
		    "request takes one of %s", names_type_str(opt.type), names_type_list());
	cp.pid = opt.pid;
	cp.type = opt.type;
	cp.has_duration_ms = opt.duration_ms != 0;
	cp.duration_ms = opt.duration_ms;
	cp.has_frequency_hz = opt.hz != 0;
	cp.frequency_hz = opt.hz;
	cp.has_buffer_fill_policy = opt.fill != 0;
	cp.buffer_fill_policy = opt.fill;
	cp.has_track_java_allocations = opt.java_allocs != 0;
	cp.track_java_allocations = opt.java_allocs;
	cp.has_background_ms = opt.background_ms != 0;
	cp.background_ms = opt.background_ms;
	cp.tag = (char *)opt.tag;
	/* Heap formats (issue #20). */
	cp.has_format = opt.format != 0;
	cp.format = opt.format;
	cp.has_wait = 1;
	cp.wait = opt.wait;
	rq.cmd_case = PDCTL__CTL_REQUEST__CMD_REQUEST;
	rq.request = &cp;
	int fd = ctl_connect();
	Pdctl__CtlReply *rep = call(fd, &rq, NULL);
	if (!rep->progress)
		die(EX_CONNECT, "unexpected reply from profilingd");
	uint64_t sid = rep->progress->session_id;
	uint32_t dur = rep->progress->duration_ms;
	bool tty = !opt.json && isatty(STDOUT_FILENO);
	if (!opt.wait) {
		if (opt.json) {
			bool f = true;
			fputc('{', stdout);
			jnum(stdout, &f, "request_id", sid);
			jstr(stdout, &f, "phase", rep->progress->phase);
			fputs("}\n", stdout);
		} else {
			printf("request %" PRIu64 " accepted: %s of pid %u for %.1fs; the result goes to "
			       "the app (see profctl results)\n", sid, names_type_str(opt.type), opt.pid,
			       dur / 1000.0);
		}
		pdctl__ctl_reply__free_unpacked(rep, NULL);
		close(fd);
		return EX_OK;
	}
	char phase[32];
	snprintf(phase, sizeof(phase), "%s", rep->progress->phase);
	if (!opt.json && !tty)
		printf("request %" PRIu64 ": %s (0.0s of %.1fs)\n", sid, phase, dur / 1000.0);
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	/* The phase's start on our clock; the bar ticks between messages. */
	uint64_t since = util_mono_ms(), base_ms = 0;
	char phases_json[1024] = "";
	size_t pj = 0;
	pj += (size_t)snprintf(phases_json + pj, sizeof(phases_json) - pj, "\"%s\"", phase);
	for (;;) {
		if (tty)
			bar(phase, base_ms + (util_mono_ms() - since), dur);
		Pdctl__CtlReply *ev = ctl_recv(fd, NULL, tty ? 100 : -1);
		if (!ev)
			continue;
		const Pdctl__Progress *p = ev->progress;
		if (!p) {
			pdctl__ctl_reply__free_unpacked(ev, NULL);
			continue;
		}
		snprintf(phase, sizeof(phase), "%s", p->phase);
		base_ms = p->elapsed_ms;
		since = util_mono_ms();
		if (pj < sizeof(phases_json) - 40)
			pj += (size_t)snprintf(phases_json + pj, sizeof(phases_json) - pj, ",\"%s\"",
					       phase);
		if (!p->final) {
			if (!opt.json && !tty)
				printf("request %" PRIu64 ": %s (%.1fs of %.1fs)\n", sid, phase,
				       p->elapsed_ms / 1000.0, dur / 1000.0);
			fflush(stdout);
			pdctl__ctl_reply__free_unpacked(ev, NULL);
			continue;
		}
		if (tty) {
			bar(phase, p->elapsed_ms, dur);
			putchar('\n');
		}
		int rc = p->error ? EX_CAPTURE : EX_OK;
		if (opt.json) {
			bool f = true;
			fputc('{', stdout);
			jnum(stdout, &f, "request_id", sid);
			jk(stdout, &f, "phases");
			printf("[%s]", phases_json);
			jstr(stdout, &f, "phase", p->phase);
			jnum(stdout, &f, "error", p->error);
			if (p->error)
				jstr(stdout, &f, "error_name", prof_strerror((int)p->error));
			jstr(stdout, &f, "message", p->message);
			jnum(stdout, &f, "result_id", p->result_id);
			jstr(stdout, &f, "path", p->path);
			fputs("}\n", stdout);
		} else if (p->error) {
			fprintf(stderr, "profctl: request %" PRIu64 " failed: %s: %s\n", sid,
				prof_strerror((int)p->error), p->message ? p->message : "");
		} else {
			printf("request %" PRIu64 ": done: result %" PRIu64 " at %s\n", sid, p->result_id,
			       p->path ? p->path : "?");
		}
		pdctl__ctl_reply__free_unpacked(ev, NULL);
		close(fd);
		return rc;
	}
}

/* ------------------------------------------------------------ main */

/* common/duration.h's syntax; a bare number is seconds, as it always was
 * here. The daemon checks the capture's own range. */
static uint32_t parse_duration(const char *s)
{
	uint64_t ms;
	int r = dur_parse_ms(s, 1000, &ms);
	if (r == -EINVAL)
		die(EX_USAGE, "bad --duration '%s' (e.g. 5s, 500ms, 2m; a bare number is seconds)",
		    s);
	if (r < 0 || ms < 1 || ms > 3600000)
		die(EX_USAGE, "--duration '%s' is out of range (1ms..60m)", s);
	return (uint32_t)ms;
}

/* request --background T: common/duration.h's syntax, a bare number in
 * seconds as for --duration. The daemon holds it to [trace]
 * background_max_s. */
static uint32_t parse_background(const char *s)
{
	uint64_t ms;
	int r = dur_parse_ms(s, 1000, &ms);
	if (r == -EINVAL)
		die(EX_USAGE, "bad --background '%s' (e.g. 10s, 500ms, 1m)", s);
	if (r < 0 || ms < 1 || ms > 3600000)
		die(EX_USAGE, "--background '%s' is out of range (1ms..1h)", s);
	return (uint32_t)ms;
}

/* --expiry: 90s, 30m, 2h (seconds); the daemon checks the 24 h bound. */
static uint32_t parse_expiry(const char *s)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	unsigned long mul = !strcmp(end, "s") || !*end ? 1 : !strcmp(end, "m") ? 60
			    : !strcmp(end, "h") ? 3600 : 0;
	if (errno || end == s || *s == '-' || !mul || v == 0 || v > UINT32_MAX / mul)
		die(EX_USAGE, "bad --expiry '%s' (e.g. 90s, 30m, 2h)", s);
	return (uint32_t)(v * mul);
}

static uint32_t parse_u32(const char *name, const char *s)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || !*s || *s == '-' || v > UINT32_MAX)
		die(EX_USAGE, "bad %s '%s'", name, s);
	return (uint32_t)v;
}

/* ------------------------------------------------------------ budget (issue #21) */

/* A CLOCK_REALTIME ms as UTC, and how far from the daemon's now. */
static void fmt_when(uint64_t ms, uint64_t now_ms, char *out, size_t n)
{
	char t[40], d[32];
	fmt_time(ms * 1000000u, t, sizeof(t));
	fmt_dur(ms > now_ms ? ms - now_ms : 0, d, sizeof(d));
	snprintf(out, n, "%s (in %s)", t, d);
}

/*
 * What a request of --type (default stack) by the app would get now,
 * asked without spending anything. Exits 0 whatever the answer: the
 * answer is the output (JSON "error"); 1 when the daemon refused the
 * query itself (another uid's app without root).
 */
static int cmd_budget(void)
{
	Pdctl__CtlRequest rq = PDCTL__CTL_REQUEST__INIT;
	Pdctl__BudgetAsk ask = PDCTL__BUDGET_ASK__INIT;
	static char key[300];
	const char *app = opt.app;

	if (app && app[0] >= '0' && app[0] <= '9' && strspn(app, "0123456789") == strlen(app)) {
		snprintf(key, sizeof(key), "uid:%s", app);
		app = key;
	}
	ask.app = (char *)app;
	ask.type = opt.type ? opt.type : PROF_STACK_SAMPLING;
	rq.cmd_case = PDCTL__CTL_REQUEST__CMD_BUDGET;
	rq.budget = &ask;
	int fd = ctl_connect();
	Pdctl__CtlReply *rep = call(fd, &rq, NULL);
	close(fd);
	const Pdctl__BudgetAnswer *b = rep->budget;
	if (!b)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (opt.json) {
		bool f = true;
		fputc('{', stdout);
		jstr(stdout, &f, "app", b->app);
		jstr(stdout, &f, "type", names_type_str(b->type));
		jbool(stdout, &f, "admitted", b->error == 0);
		jnum(stdout, &f, "error", b->error);
		jstr(stdout, &f, "error_name", b->error ? prof_strerror((int)b->error) : "");
		jstr(stdout, &f, "message", b->message);
		if (b->has_cost)
			jnum(stdout, &f, "cost", b->cost);
		jk(stdout, &f, "admit_ms");
		if (b->has_admit_ms)
			printf("%" PRIu64, b->admit_ms);
		else
			fputs("null", stdout);
		jnum(stdout, &f, "now_ms", b->now_ms);
		jk(stdout, &f, "budgets");
		budgets_json(stdout, b->budget, b->n_budget);
		jk(stdout, &f, "triggers");
		fputc('[', stdout);
		for (size_t i = 0; i < b->n_trigger; i++) {
			const Pdctl__BudgetCooldown *t = b->trigger[i];
			bool f2 = true;
			fputs(i ? ",{" : "{", stdout);
			jstr(stdout, &f2, "trigger", trigger_name(t->type));
			jstr(stdout, &f2, "capture", names_type_str(t->capture));
			jnum(stdout, &f2, "period_s", t->period_s);
			jbool(stdout, &f2, "cooling_down", t->has_ready_ms);
			jnum(stdout, &f2, "ready_ms", t->has_ready_ms ? t->ready_ms : 0);
			fputc('}', stdout);
		}
		fputs("]}\n", stdout);
	} else {
		char when[96];
		printf("app %s, %s: ", b->app, names_type_str(b->type));
		if (b->error)
			printf("would be refused: %s (%s)\n", prof_strerror((int)b->error),
			       b->message ? b->message : "");
		else
			printf("would be admitted\n");
		if (b->has_cost)
			printf("cost %u in each window\n", b->cost);
		if (!b->has_admit_ms)
			printf("earliest admission: unknown (no time alone will admit it)\n");
		else if (b->admit_ms <= b->now_ms)
			printf("earliest admission: now\n");
		else {
			fmt_when(b->admit_ms, b->now_ms, when, sizeof(when));
			printf("earliest admission: %s\n", when);
		}
		budgets_table(b->budget, b->n_budget);
		if (b->n_trigger)
			printf("%-15s %-13s %-7s %s\n", "TRIGGER", "CAPTURE", "PERIOD", "READY");
		for (size_t i = 0; i < b->n_trigger; i++) {
			const Pdctl__BudgetCooldown *t = b->trigger[i];
			char per[24];
			snprintf(per, sizeof(per), "%us", t->period_s);
			if (t->has_ready_ms)
				fmt_when(t->ready_ms, b->now_ms, when, sizeof(when));
			printf("%-15s %-13s %-7s %s\n", trigger_name(t->type), names_type_str(t->capture),
			       per, t->has_ready_ms ? when : "now");
		}
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

/* ------------------------------------------------------------ commands */

/* One row per command: its arguments, a line for the list, a paragraph for
 * "profctl COMMAND --help"; dispatch goes through the same row. */
struct command {
	const char *name;
	int min, max;      /* positional arguments */
	const char *args;  /* as in the usage line */
	const char *line;  /* the list in --help */
	const char *text;  /* profctl COMMAND --help */
	int (*run)(const char *a1, const char *a2);
};

static int run_status(const char *a1, const char *a2) { (void)a1, (void)a2; return cmd_status(); }
static int run_apps(const char *a1, const char *a2) { (void)a1, (void)a2; return cmd_apps(); }
static int run_triggers(const char *a1, const char *a2) { (void)a2; return cmd_triggers(a1); }
static int run_ratelimit(const char *a1, const char *a2) { (void)a2; return cmd_ratelimit(a1); }
static int run_results(const char *a1, const char *a2) { (void)a2; return cmd_results(a1); }
static int run_show(const char *a1, const char *a2) { (void)a2; return cmd_show(a1); }
static int run_top(const char *a1, const char *a2) { (void)a2; return cmd_top(a1); }
static int run_flame(const char *a1, const char *a2) { (void)a2; return cmd_flame(a1); }
static int run_collapsed(const char *a1, const char *a2) { (void)a2; return cmd_collapsed(a1); }
static int run_export(const char *a1, const char *a2) { return cmd_export(a1, a2); }

/* ------------------------------------------------------------ methods (issue #19) */

static int cmd_methods(const char *sub, const char *id)
{
	Pdctl__CtlRequest rq = PDCTL__CTL_REQUEST__INIT;
	Pdctl__MethodsAdd add = PDCTL__METHODS_ADD__INIT;
	Pdctl__MethodsDisable dis = PDCTL__METHODS_DISABLE__INIT;

	if (!strcmp(sub, "list") && !id) {
		rq.cmd_case = PDCTL__CTL_REQUEST__CMD_METHODS_LIST;
		rq.methods_list = 1;
	} else if (!strcmp(sub, "add") && id) {
		if (!opt.exe || !opt.nmethods)
			die(EX_USAGE, "methods add ID needs --exe PATH and at least one --method");
		add.id = (char *)id;
		add.exe = (char *)opt.exe;
		add.n_targets = opt.nmethods;
		add.targets = (char **)opt.methods;
		add.has_version = opt.version != 0;
		add.version = opt.version;
		add.has_canary_percent = opt.canary != 0;
		add.canary_percent = opt.canary;
		add.has_expiry_s = opt.expiry_s != 0;
		add.expiry_s = opt.expiry_s;
		add.has_every = opt.every != 0;
		add.every = opt.every;
		add.has_max_hits = opt.max_hits != 0;
		add.max_hits = opt.max_hits;
		/* methods add --budget-us (issue #19's overhead budget) */
		add.has_budget_us = opt.budget_us != 0;
		add.budget_us = opt.budget_us;
		rq.cmd_case = PDCTL__CTL_REQUEST__CMD_METHODS_ADD;
		rq.methods_add = &add;
	} else if (!strcmp(sub, "disable") && id) {
		dis.id = (char *)id;
		rq.cmd_case = PDCTL__CTL_REQUEST__CMD_METHODS_DISABLE;
		rq.methods_disable = &dis;
	} else {
		die(EX_USAGE, "methods list | methods add ID --exe PATH --method T... | "
		    "methods disable ID|all");
	}
	int fd = ctl_connect();
	Pdctl__CtlReply *rep = call(fd, &rq, NULL);
	close(fd);
	const Pdctl__MethodsList *l = rep->methods;
	if (!l)
		die(EX_CONNECT, "unexpected reply from profilingd");
	if (l->has_stopped)
		printf("disabled %s: %u captures stopped, their probes removed\n", id, l->stopped);
	if (opt.json) {
		fputc('[', stdout);
		for (size_t i = 0; i < l->n_configs; i++) {
			const Pdctl__MethodsConfig *m = l->configs[i];
			bool f = true;
			fputs(i ? ",{" : "{", stdout);
			jstr(stdout, &f, "id", m->id);
			jnum(stdout, &f, "version", m->version);
			jstr(stdout, &f, "exe", m->exe ? m->exe : "");
			jnum(stdout, &f, "canary_percent", m->canary_percent);
			jnum(stdout, &f, "budget_us", m->budget_us); /* 0: the daemon's default */
			jnum(stdout, &f, "expires_unix_ms", (uint64_t)m->expires_unix_ms);
			jnum(stdout, &f, "disabled", m->disabled);
			jnum(stdout, &f, "matched", m->matched);
			jnum(stdout, &f, "selected", m->selected);
			jnum(stdout, &f, "hooked", m->hooked);
			fputs(",\"sessions\":[", stdout);
			for (size_t k = 0; k < m->n_sessions; k++)
				printf("%s%" PRIu64, k ? "," : "", m->sessions[k]);
			fputs("]}", stdout);
		}
		fputs("]\n", stdout);
	} else {
		printf("%-20s %-4s %-7s %-8s %-8s %-7s %-9s %s\n", "ID", "VER", "CANARY", "MATCHED",
		       "SELECTED", "HOOKED", "STATE", "EXE");
		for (size_t i = 0; i < l->n_configs; i++) {
			const Pdctl__MethodsConfig *m = l->configs[i];
			printf("%-20s %-4u %5u %% %-8u %-8u %-7u %-9s %s\n", m->id, m->version,
			       m->canary_percent, m->matched, m->selected, m->hooked,
			       m->disabled ? "disabled" : "on", m->exe ? m->exe : "");
			for (size_t k = 0; k < m->n_targets; k++)
				printf("    target %s\n", m->targets[k]);
		}
		if (!l->n_configs)
			printf("(no method-event configs)\n");
	}
	pdctl__ctl_reply__free_unpacked(rep, NULL);
	return EX_OK;
}

static int run_methods(const char *a1, const char *a2) { return cmd_methods(a1, a2); }
static int run_request(const char *a1, const char *a2) { (void)a1, (void)a2; return cmd_request(); }
static int run_budget(const char *a1, const char *a2) { (void)a1, (void)a2; return cmd_budget(); }

static const struct command commands[] = {
	{ "status", 0, 0, "", "version, uptime, watchers, runtimes, sessions, budgets",
	  "The daemon's version, pid and uptime; each watcher and its health (what\n"
	  "runs, what fell back, what is missing); connected runtimes (pid, uid, kind,\n"
	  "missing capabilities); running captures with their phase and elapsed time;\n"
	  "the rate-limit budget used, its cap and what is left per window.\n", run_status },
	{ "apps", 0, 0, "", "apps with clients, triggers or results",
	  "Apps known to the daemon: connected, with registered triggers, or with\n"
	  "stored results; with their counts and result bytes.\n", run_apps },
	{ "triggers", 0, 1, "[APP]", "registered triggers",
	  "Registered triggers, of APP or of every app you may see, and the config's\n"
	  "system triggers (sys:NAME, root only): capture type, cooldown, fire count,\n"
	  "last fire and thresholds.\n", run_triggers },
	{ "ratelimit", 0, 1, "[APP]", "rate-limit budget used and left per window",
	  "Cost units used, the cap and what is left in each window (1 h, 24 h, 7 d by\n"
	  "default), system-wide and per app.\n", run_ratelimit },
	{ "results", 0, 1, "[APP]", "stored results, newest first",
	  "Stored results, newest first (at most 200), with the ID the other commands\n"
	  "take.\n", run_results },
	{ "show", 1, 1, "ID", "a result's metadata",
	  "A result's metadata: request id, app, pid, type, trigger, format, size,\n"
	  "times, delivery, tag, note and path.\n", run_show },
	{ "top", 1, 1, "ID", "pprof-style flat/cum table of a result",
	  "A pprof-style table (flat, flat%, sum%, cum, cum%) by function of a stack\n"
	  "sample or heap profile result, of its default sample type; for a trace,\n"
	  "of its slices' self time.\n", run_top },
	{ "flame", 1, 1, "ID -o OUT.svg", "interactive SVG flame graph of a result",
	  "A self-contained interactive SVG flame graph (click to zoom, hover for the\n"
	  "value and share) of a pprof result or of a trace's slices per thread,\n"
	  "written to OUT.svg (-o - for standard output). Widths are shares of the\n"
	  "total.\n", run_flame },
	{ "collapsed", 1, 1, "ID", "collapsed stacks (\"a;b;c N\") of a result",
	  "Brendan Gregg's collapsed stacks of a result, one line per distinct stack:\n"
	  "root;...;leaf count (for flamegraph.pl, speedscope and the like).\n", run_collapsed },
	{ "export", 2, 2, "ID DEST", "copy a result to DEST (a file or a directory)",
	  "Copy a result to DEST, a file or a directory (the result keeps its name).\n"
	  "The daemon passes the open file over the socket: root and the owning app's\n"
	  "user can export without read access to the state directory.\n", run_export },
	{ "request", 0, 0,
	  "--pid N --type stack|heap-profile|heap-dump|trace [--duration 5s]\n"
	  "          [--hz N] [--fill ring|discard] [--java-allocs on|off] [--tag T] [--format F] [--wait]\n"
	  "          [--background T]",
	  "capture a process (root only)",
	  "Root only. Capture process N; the result belongs to N's app and is\n"
	  "delivered to it like any system capture (admitted and charged as one).\n"
	  "  --pid N          the process\n"
	  "  --type TYPE      stack, heap-profile, heap-dump or trace; the API's names\n"
	  "                   (STACK_SAMPLING...) and the config's (heap) work too\n"
	  "  --duration T     how long: 5s, 500ms, 2m (default: the daemon's)\n"
	  "  --hz N           stack sampling rate\n"
	  "  --fill ring|discard  trace: kernel buffer fill policy (default ring)\n"
	  "  --java-allocs on|off heap-profile of a JVM: its Java allocations\n"
	  "                   (default on; docs/ANDROID.md)\n"
	  "  --tag T          a label stored with the result\n"
	  "  --format F       heap-dump: hprof (default) or perfetto (a heap graph);\n"
	  "                   heap-profile: pprof (default) or perfetto\n"
	  "  --wait           follow the phases (progress bar on a terminal, one line\n"
	  "                   per phase otherwise) and print the result's id and path;\n"
	  "                   exit 4 when the capture fails\n"
	  "  --background T   a trace: start T before the request, from the daemon's\n"
	  "                   running background trace ([trace] background)\n", run_request },
	{ "budget", 0, 0, "[--app APP] [--type TYPE]", "would a request be admitted now",
	  "What a request of TYPE (default stack) by APP (default your own, uid:<you>)\n"
	  "would get now, asked without spending anything: admitted or the error,\n"
	  "its cost, the earliest time it would be admitted, what is left in each\n"
	  "window for the app and the system, and the cooldown of each of the app's\n"
	  "triggers. Another uid's app: root only. Exits 0 whatever the answer.\n",
	  run_budget },
	{ "methods", 1, 2, "list | add ID --exe PATH --method T... | disable ID|all",
	  "method-event configs (root only)",
	  "Root only. Method events (docs/METHOD_EVENTS.md): uprobes on chosen\n"
	  "functions of every running process of an executable.\n"
	  "  list             the configs, what they matched and hooked\n"
	  "  add ID           add config ID (or replace it with a higher --config-version):\n"
	  "    --exe PATH       the processes' executable\n"
	  "    --method T       /PATH:SYMBOL or /PATH:+0xOFFSET, 1..8 times\n"
	  "                     (a JVM: java:CLASS.METHOD[(DESCRIPTOR)][@LOADER])\n"
	  "    --canary PCT     the share of those processes hooked (stable hash of\n"
	  "                     the id and the process), default 100\n"
	  "    --expiry T       how long: 30m, 2h (default 1h, at most 24h)\n"
	  "    --config-version V, --every N (stack of every Nth hit), --max-hits M\n"
	  "    --budget-us B    overhead budget per recorded hit (default: the\n"
	  "                     daemon's [capture] method_budget_us)\n"
	  "  disable ID|all   the kill switch: stops the captures, removing every\n"
	  "                   probe at once (their results say \"cancelled\")\n", run_methods },
};
#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: profctl [--socket PATH] [--json] COMMAND [ARGS]\n"
		   "Look at and drive profilingd (see profctl(1)).\n\nCommands:\n");
	for (size_t i = 0; i < NCOMMANDS; i++) {
		const struct command *c = &commands[i];
		int w = (int)(strlen(c->name) + 1 + strlen(c->args));
		if (strchr(c->args, '\n') || w > 22)
			fprintf(f, "  %s %s   %s\n", c->name, c->args, c->line);
		else
			fprintf(f, "  %s %s%*s %s\n", c->name, c->args, 22 - w, "", c->line);
	}
	fprintf(f,
		"\nOptions:\n"
		"  -s, --socket PATH      control socket (default $PROFCTL_SOCKET, else\n"
		"                         " DEFAULT_SOCKET ")\n"
		"  -j, --json             JSON output for scripts\n"
		"  -o, --output FILE      flame: where to write the SVG\n"
		"  -h, --help             this text; after a COMMAND, that command's help\n\n"
		"APP is an app key (uid:1000, uid:1000/com.example) or a bare uid.\n"
		"Exit codes: 0 ok, 1 refused or failed in the daemon, 2 usage, 3 cannot\n"
		"connect, 4 the capture failed (request --wait), 5 local error.\n");
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < NCOMMANDS; i++)
		if (!strcmp(name, commands[i].name))
			return &commands[i];
	return NULL;
}

int main(int argc, char **argv)
{
	enum { O_PID = 256, O_TYPE, O_DURATION, O_HZ, O_WAIT, O_TAG, O_APP, O_FILL, O_JAVA_ALLOCS,
	       O_BACKGROUND, O_FORMAT, O_EXE, O_METHOD, O_VERSION, O_CANARY, O_EXPIRY, O_EVERY,
	       O_MAXHITS, O_BUDGETUS };
	static const struct option opts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ "pid", required_argument, NULL, O_PID },
		{ "type", required_argument, NULL, O_TYPE },
		{ "duration", required_argument, NULL, O_DURATION },
		{ "hz", required_argument, NULL, O_HZ },
		{ "fill", required_argument, NULL, O_FILL },
		{ "java-allocs", required_argument, NULL, O_JAVA_ALLOCS },
		{ "wait", no_argument, NULL, O_WAIT },
		{ "tag", required_argument, NULL, O_TAG },
		{ "app", required_argument, NULL, O_APP },
		{ "background", required_argument, NULL, O_BACKGROUND },
		/* Heap formats (issue #20). */
		{ "format", required_argument, NULL, O_FORMAT },
		{ "exe", required_argument, NULL, O_EXE },
		{ "method", required_argument, NULL, O_METHOD },
		{ "config-version", required_argument, NULL, O_VERSION },
		{ "canary", required_argument, NULL, O_CANARY },
		{ "expiry", required_argument, NULL, O_EXPIRY },
		{ "every", required_argument, NULL, O_EVERY },
		{ "max-hits", required_argument, NULL, O_MAXHITS },
		{ "budget-us", required_argument, NULL, O_BUDGETUS },
		{ 0 }
	};
	int c;
	bool help = false;

	opt.socket = getenv("PROFCTL_SOCKET");
	if (!opt.socket || !*opt.socket)
		opt.socket = DEFAULT_SOCKET;
	while ((c = getopt_long(argc, argv, "s:jo:hV", opts, NULL)) != -1) {
		switch (c) {
		case 's': opt.socket = optarg; break;
		case 'j': opt.json = true; break;
		case 'o': opt.output = optarg; break;
		case 'h': help = true; break;
		case 'V': printf("profctl %s\n", PROFILINGD_VERSION); return EX_OK;
		case O_PID: opt.pid = parse_u32("--pid", optarg); break;
		case O_TYPE: {
			int t = names_type_parse(optarg);
			if (t < 0)
				die(EX_USAGE, "bad --type '%s': one of %s", optarg, names_type_list());
			opt.type = (uint32_t)t;
			break;
		}
		case O_DURATION: opt.duration_ms = parse_duration(optarg); break;
		case O_HZ: opt.hz = parse_u32("--hz", optarg); break;
		/* abi21: Android-parity parameters (docs/ANDROID.md) */
		case O_FILL:
			if (!strcmp(optarg, "ring"))
				opt.fill = PROF_FILL_RING_BUFFER;
			else if (!strcmp(optarg, "discard"))
				opt.fill = PROF_FILL_DISCARD;
			else
				die(EX_USAGE, "bad --fill '%s': ring or discard", optarg);
			break;
		case O_JAVA_ALLOCS:
			if (!strcmp(optarg, "on"))
				opt.java_allocs = PROF_SWITCH_ON;
			else if (!strcmp(optarg, "off"))
				opt.java_allocs = PROF_SWITCH_OFF;
			else
				die(EX_USAGE, "bad --java-allocs '%s': on or off", optarg);
			break;
		case O_WAIT: opt.wait = true; break;
		case O_TAG: opt.tag = optarg; break;
		case O_APP: opt.app = optarg; break;
		case O_BACKGROUND: opt.background_ms = parse_background(optarg); break;
		case O_FORMAT: {
			/* Heap formats (issue #20). */
			int f = names_format_parse(optarg);
			if (f < 0)
				die(EX_USAGE, "bad --format '%s': hprof, pprof or perfetto", optarg);
			opt.format = (uint32_t)f;
			break;
		}
		case O_EXE: opt.exe = optarg; break;
		case O_METHOD:
			if (opt.nmethods >= 8)
				die(EX_USAGE, "--method: at most 8");
			opt.methods[opt.nmethods++] = optarg;
			break;
		case O_VERSION: opt.version = parse_u32("--config-version", optarg); break;
		case O_CANARY: opt.canary = parse_u32("--canary", optarg); break;
		case O_EXPIRY: opt.expiry_s = parse_expiry(optarg); break;
		case O_EVERY: opt.every = parse_u32("--every", optarg); break;
		case O_MAXHITS: opt.max_hits = parse_u32("--max-hits", optarg); break;
		case O_BUDGETUS: opt.budget_us = parse_u32("--budget-us", optarg); break;
		default:
			fprintf(stderr, "profctl: see profctl --help\n");
			return EX_USAGE;
		}
	}
	const struct command *cmd = optind < argc ? find_command(argv[optind]) : NULL;
	if (help && cmd) {
		printf("usage: profctl [--socket PATH] [--json] %s%s%s\n%s", cmd->name,
		       cmd->args[0] ? " " : "", cmd->args, cmd->text);
		return EX_OK;
	}
	if (help || optind >= argc) {
		usage(help ? stdout : stderr);
		return help ? EX_OK : EX_USAGE;
	}
	if (!cmd)
		die(EX_USAGE, "unknown command '%s' (see profctl --help)", argv[optind]);
	const char *a1 = optind + 1 < argc ? argv[optind + 1] : NULL;
	const char *a2 = optind + 2 < argc ? argv[optind + 2] : NULL;
	int nargs = argc - optind - 1;
	if (nargs < cmd->min || nargs > cmd->max)
		die(EX_USAGE, "%s takes %s (see profctl %s --help)", cmd->name,
		    cmd->max == 0 ? "no arguments" : cmd->min == 2 ? "ID DEST"
		    : cmd->min == 1 ? "one ID" : "at most one APP", cmd->name);
	return cmd->run(a1, a2);
}
