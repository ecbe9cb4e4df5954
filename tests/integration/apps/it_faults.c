/*
 * Fault cases against the real daemon. Each subcommand is one scenario;
 * faults.sh starts the daemon and runs them. Where a runtime is needed this
 * program plays one itself on runtime.sock (PROFILING_NO_AGENT=1), so that
 * it can misbehave on purpose: vanish mid-capture, miss its deadline, or lie
 * about its pid.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <profiling/profiling.h>

#include "pprof.h"
#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

static const char *runtime_path;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)

struct outcome {
	int done, error;
	char msg[256];
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
	snprintf(o->msg, sizeof(o->msg), "%s", r->error_message);
}

static void wait_result(prof_client *c, struct outcome *o, int max_ms)
{
	uint64_t end = util_mono_ms() + (uint64_t)max_ms;
	while (!o->done && util_mono_ms() < end)
		CHECK(prof_dispatch(c, 100) >= 0, "lost the daemon");
	CHECK(o->done, "no result within %d ms", max_ms);
}

static int raw_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(s >= 0, "socket");
	CHECK(connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect %s: %s", path, strerror(errno));
	return s;
}

/* True when the daemon closes s within ms. */
static int closed_by_peer(int s, int ms)
{
	struct pollfd pf = { .fd = s, .events = POLLIN };
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	uint64_t end = util_mono_ms() + (uint64_t)ms;
	while (util_mono_ms() < end) {
		if (poll(&pf, 1, 50) == 1) {
			ssize_t n = recv(s, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno == ECONNRESET))
				return 1;
		}
	}
	return 0;
}

/* A hand-made runtime: hello with the given pid; returns the socket. */
static int fake_runtime(uint32_t pid, int expect_ack)
{
	int s = raw_connect(runtime_path);
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	char *caps[] = { "stack_sampling" };
	h.pid = pid;
	h.runtime = "native";
	h.capabilities = caps;
	h.n_capabilities = 1;
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	CHECK(wire_send_msg(s, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send hello");
	if (!expect_ack)
		return s;
	struct pollfd pf = { .fd = s, .events = POLLIN };
	CHECK(poll(&pf, 1, 2000) == 1, "no HelloAck");
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	ssize_t n = wire_recv(s, buf, sizeof(buf), NULL);
	CHECK(n > 0, "HelloAck recv: %zd", n);
	Pd__DaemonToRuntime *d = pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
	CHECK(d && d->msg_case == PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK, "not a HelloAck");
	pd__daemon_to_runtime__free_unpacked(d, NULL);
	return s;
}

/* Read the next daemon->runtime message; returns its case. */
static int runtime_read(int s, int *fd, uint64_t *sid, int ms)
{
	struct pollfd pf = { .fd = s, .events = POLLIN };
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	CHECK(poll(&pf, 1, ms) == 1, "runtime got nothing within %d ms", ms);
	ssize_t n = wire_recv(s, buf, sizeof(buf), fd);
	CHECK(n > 0, "runtime recv: %zd", n);
	Pd__DaemonToRuntime *d = pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
	CHECK(d, "undecodable daemon message");
	int which = d->msg_case;
	if (sid)
		*sid = which == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE ? d->capture->session_id
		       : which == PD__DAEMON_TO_RUNTIME__MSG_CANCEL ? d->cancel->session_id : 0;
	pd__daemon_to_runtime__free_unpacked(d, NULL);
	return which;
}

static prof_client *connect_app(void)
{
	int err;
	prof_client *c = prof_connect(NULL, &err);
	CHECK(c, "prof_connect: %s", strerror(-err));
	return c;
}

static int t_invalid(void)
{
	prof_client *c = connect_app();
	struct prof_params p = PROF_PARAMS_INIT();
	CHECK(prof_request(c, (enum prof_type)99, NULL, NULL, NULL, NULL, NULL) == -PROF_E_INVALID_REQUEST,
	      "unknown type accepted");
	CHECK(prof_request(c, (enum prof_type)0, NULL, NULL, NULL, NULL, NULL) == -PROF_E_INVALID_REQUEST,
	      "type 0 accepted");
	p.duration_ms = 99;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, NULL, NULL, NULL) == -PROF_E_INVALID_REQUEST,
	      "duration 99 ms accepted");
	p.duration_ms = 120001;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, NULL, NULL, NULL) == -PROF_E_INVALID_REQUEST,
	      "duration 120001 ms accepted");
	p.duration_ms = 500;
	p.frequency_hz = 1001;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, NULL, NULL, NULL) == -PROF_E_INVALID_REQUEST,
	      "1001 Hz accepted");
	char tag[80];
	memset(tag, 'x', sizeof(tag) - 1);
	tag[sizeof(tag) - 1] = '\0';
	CHECK(prof_request(c, PROF_STACK_SAMPLING, NULL, tag, NULL, NULL, NULL) == -PROF_E_INVALID_REQUEST,
	      "over-long tag accepted");
	prof_close(c);
	printf("invalid requests refused synchronously\n");
	return 0;
}

static int t_badpeer(void)
{
	/* A well-behaved app with the real agent, connected throughout. */
	prof_client *good = connect_app();

	uint8_t big[WIRE_CLIENT_MAX_MSG + 1];
	memset(big, 0x08, sizeof(big));
	int s = raw_connect(getenv("PROFILINGD_SOCKET"));
	CHECK(send(s, big, sizeof(big), 0) == (ssize_t)sizeof(big), "send oversize");
	CHECK(closed_by_peer(s, 2000), "oversize message did not close the peer");
	close(s);

	s = raw_connect(getenv("PROFILINGD_SOCKET"));
	CHECK(send(s, "\xff\xff\xff\xff\xff\xff", 6, 0) == 6, "send junk");
	CHECK(closed_by_peer(s, 2000), "undecodable message did not close the peer");
	close(s);

	/* A valid request before the hello. */
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	rq.token = 1;
	rq.type = PROF_STACK_SAMPLING;
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	s = raw_connect(getenv("PROFILINGD_SOCKET"));
	CHECK(wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1) == 0, "send");
	CHECK(closed_by_peer(s, 2000), "request before hello did not close the peer");
	close(s);

	/* An fd where none is expected. */
	s = raw_connect(getenv("PROFILINGD_SOCKET"));
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	CHECK(wire_send(s, "\x0a\x02\x08\x01", 4, devnull) == 0, "send with fd");
	close(devnull);
	CHECK(closed_by_peer(s, 2000), "stray fd did not close the peer");
	close(s);

	/* Oversize on runtime.sock too. */
	s = raw_connect(runtime_path);
	CHECK(send(s, big, sizeof(big), 0) == (ssize_t)sizeof(big), "send oversize");
	CHECK(closed_by_peer(s, 2000), "oversize runtime message did not close the peer");
	close(s);

	/* The daemon still serves the good app end to end. */
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 300);
	CHECK(prof_request(good, PROF_STACK_SAMPLING, &p, "after-bad", on_result, &o, NULL) == 0,
	      "good request refused");
	wait_result(good, &o, 10000);
	/* An idle app burns no CPU, so the profile may be empty: both outcomes mean served. */
	CHECK(o.error == 0 || o.error == PROF_E_POST_PROCESSING, "good request failed: %d %s", o.error, o.msg);
	prof_close(good);
	printf("bad peers closed; good app served (result %d)\n", o.error);
	return 0;
}

static int t_runtime_gone(int hang)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 200);
	uint64_t id, sid;
	int fd = -1;

	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, on_result, &o, &id) == 0, "refused");
	CHECK(runtime_read(rt, &fd, &sid, 2000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE, "no CaptureRequest");
	CHECK(fd >= 0, "CaptureRequest carried no fd");
	CHECK(sid == id, "session id %llu != request id %llu", (unsigned long long)sid,
	      (unsigned long long)id);
	/* While it runs, a second request for this process is refused at once. */
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, NULL, NULL, NULL) ==
	      -PROF_E_PROFILING_IN_PROGRESS, "second concurrent session accepted");
	if (!hang)
		close(rt);
	wait_result(c, &o, 10000);
	int want = hang ? PROF_E_TIMEOUT : PROF_E_EXECUTING;
	CHECK(o.error == want, "result %d (%s), want %d", o.error, o.msg, want);
	if (hang) {
		/* The daemon also tells the runtime to stop. */
		CHECK(runtime_read(rt, NULL, &sid, 2000) == PD__DAEMON_TO_RUNTIME__MSG_CANCEL, "no cancel");
		close(rt);
	}
	close(fd);
	prof_close(c);
	printf("runtime %s: app told %s\n", hang ? "hung" : "vanished", prof_strerror(o.error));
	return 0;
}

/*
 * The runtime is another process that dies by SIGKILL mid-capture (the
 * kernel closes its socket, nothing is said): root asks for a capture of
 * it by target_pid, and is told EXECUTING.
 */
static int t_runtime_killed(void)
{
	int pfd[2];
	char b;
	if (geteuid() != 0) {
		printf("skipped: target_pid captures need root\n");
		return 0;
	}
	CHECK(pipe(pfd) == 0, "pipe");
	pid_t child = fork();
	CHECK(child >= 0, "fork");
	if (child == 0) {
		close(pfd[0]);
		int rt = fake_runtime((uint32_t)getpid(), 1);
		CHECK(write(pfd[1], "h", 1) == 1, "pipe");
		int fd = -1;
		CHECK(runtime_read(rt, &fd, NULL, 10000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE,
		      "no CaptureRequest");
		CHECK(write(pfd[1], "c", 1) == 1, "pipe");
		for (;;)
			pause(); /* mid-capture until killed */
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &b, 1) == 1 && b == 'h', "the runtime child did not say hello");
	prof_client *c = connect_app();
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 10000, .target_pid = (uint32_t)child);
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, on_result, &o, NULL) == 0, "refused");
	CHECK(read(pfd[0], &b, 1) == 1 && b == 'c', "the runtime child got no capture");
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	wait_result(c, &o, 10000);
	CHECK(o.error == PROF_E_EXECUTING, "result %d (%s), want EXECUTING", o.error, o.msg);
	prof_close(c);
	printf("runtime killed mid-capture: app told %s (%s)\n", prof_strerror(o.error), o.msg);
	return 0;
}

/*
 * Write what fill() makes into the capture fd, a pipe: fill a memfd first
 * (the fills write blindly), then copy it over. Returns the bytes written,
 * what CaptureDone declares.
 */
static uint64_t fill_counted(int fd, void (*fill)(int fd))
{
	static char buf[1 << 16];
	int m = memfd_create("it_faults", MFD_CLOEXEC);
	uint64_t total = 0;
	ssize_t n;
	CHECK(m >= 0, "memfd_create: %s", strerror(errno));
	fill(m);
	CHECK(lseek(m, 0, SEEK_SET) == 0, "lseek");
	while ((n = read(m, buf, sizeof(buf))) > 0) {
		CHECK(util_write_all(fd, buf, (size_t)n) == 0, "write to the capture fd: %s",
		      strerror(errno));
		total += (uint64_t)n;
	}
	CHECK(n == 0, "read memfd");
	close(m);
	return total;
}

/* Runtime side of a capture: wait for the request, write what fill() makes. */
static void serve_capture(int rt, uint64_t *sid_out, void (*fill)(int fd))
{
	int fd = -1;
	uint64_t sid;
	CHECK(runtime_read(rt, &fd, &sid, 2000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE, "no CaptureRequest");
	uint64_t size = fill_counted(fd, fill);
	close(fd);
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;
	d.session_id = sid;
	d.status = 0;
	d.has_bytes = 1;
	d.bytes = (uint64_t)size;
	m.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	m.done = &d;
	CHECK(wire_send_msg(rt, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send CaptureDone");
	if (sid_out)
		*sid_out = sid;
}

static void fill_garbage(int fd)
{
	/* gzip magic, then nonsense: passes the daemon's format sniff only. */
	CHECK(write(fd, "\x1f\x8b\x08\x00garbage-not-deflate", 24) == 24, "write");
}

/*
 * A gzip bomb that the streaming redactor must read to its end: 600,000
 * locations with distinct ids (a table of ~30 MiB that doubles to 52, past
 * a 32 MiB address-space cap), then 512 MiB of empty samples, which take
 * far longer than 100 ms to inflate and walk. A few MiB compressed.
 */
static void bomb_put(z_stream *z, const uint8_t *in, size_t n, int flush, int fd)
{
	static uint8_t out[1 << 16];
	z->next_in = (uint8_t *)in;
	z->avail_in = (uInt)n;
	do {
		z->next_out = out;
		z->avail_out = sizeof(out);
		deflate(z, flush);
		CHECK(write(fd, out, sizeof(out) - z->avail_out) >= 0, "write");
	} while (z->avail_out == 0);
}

static void fill_bomb(int fd)
{
	static uint8_t buf[1 << 20];
	z_stream z;
	size_t n = 0;
	memset(&z, 0, sizeof(z));
	CHECK(deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK, "deflateInit");
	for (uint32_t id = 1; id <= 600000; id++) {
		uint8_t loc[8], *e = loc + 2;
		*e++ = 0x08; /* Location.id, a varint */
		for (uint32_t v = id; ; v >>= 7) {
			*e++ = (uint8_t)(v < 0x80 ? v : (v & 0x7f) | 0x80);
			if (v < 0x80)
				break;
		}
		loc[0] = 0x22; /* Profile.location, length-delimited */
		loc[1] = (uint8_t)(e - loc - 2);
		if (n + (size_t)(e - loc) > sizeof(buf)) {
			bomb_put(&z, buf, n, Z_NO_FLUSH, fd);
			n = 0;
		}
		memcpy(buf + n, loc, (size_t)(e - loc));
		n += (size_t)(e - loc);
	}
	bomb_put(&z, buf, n, Z_NO_FLUSH, fd);
	for (size_t i = 0; i < sizeof(buf); i += 2) {
		buf[i] = 0x12; /* Profile.sample, empty */
		buf[i + 1] = 0x00;
	}
	for (int i = 0; i < 512; i++)
		bomb_put(&z, buf, sizeof(buf), i == 511 ? Z_FINISH : Z_NO_FLUSH, fd);
	deflateEnd(&z);
}

/* A well-formed pprof of one sample labelled with this process's pid. */
static void fill_pprof(int fd)
{
	struct pp_builder *b;
	uint64_t f, l;
	CHECK(pp_new(&b) == 0, "pp_new");
	pp_add_sample_type(b, "samples", "count");
	pp_add_function(b, "queued_fn", NULL, NULL, 0, &f);
	pp_add_location(b, 0, 0x1000, f, 0, &l);
	int64_t v = 1;
	struct pp_label lab = { .key = "pid", .num = getpid() };
	CHECK(pp_add_sample(b, &l, 1, &v, 1, &lab, 1) == 0, "pp_add_sample");
	CHECK(pp_write_gz(b, fd, NULL) == 0, "pp_write_gz");
	pp_free(b);
}

/* The runtime hands over an artifact the redactor must refuse. */
static int t_bad_artifact(void (*fill)(int), const char *want)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, on_result, &o, NULL) == 0, "refused");
	serve_capture(rt, NULL, fill);
	wait_result(c, &o, 150000);
	CHECK(o.error == PROF_E_POST_PROCESSING, "result %d (%s), want POST_PROCESSING", o.error, o.msg);
	CHECK(!want || strstr(o.msg, want), "message '%s' lacks '%s'", o.msg, want);
	close(rt);
	prof_close(c);
	printf("bad artifact refused: %s\n", o.msg);
	return 0;
}

struct got {
	int n;
	uint64_t id;
	char path[4096];
};

static void on_listener(const struct prof_result *r, void *ud)
{
	struct got *g = ud;
	g->n++;
	g->id = r->request_id;
	snprintf(g->path, sizeof(g->path), "%s", r->path);
}

/* The app is gone when its result is ready; it gets it on return, once. */
static int t_queued(void)
{
	uint64_t sid = 0;
	int pfd[2];
	CHECK(pipe(pfd) == 0, "pipe");
	pid_t child = fork();
	if (child == 0) {
		prof_client *c = connect_app();
		int rt = fake_runtime((uint32_t)getpid(), 1);
		struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
		CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "queued", NULL, NULL, NULL) == 0, "refused");
		serve_capture(rt, &sid, fill_pprof);
		CHECK(write(pfd[1], &sid, sizeof(sid)) == sizeof(sid), "pipe write");
		_exit(0); /* before the result is redacted and delivered */
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &sid, sizeof(sid)) == sizeof(sid), "child failed");
	int status;
	waitpid(child, &status, 0);
	usleep(500000); /* let the redactor finish while nobody listens */

	struct got g = { 0 };
	prof_client *c = connect_app();
	CHECK(prof_set_result_listener(c, on_listener, &g) == 0, "listener");
	uint64_t end = util_mono_ms() + 3000;
	while (g.n == 0 && util_mono_ms() < end)
		prof_dispatch(c, 100);
	CHECK(g.n == 1 && g.id == sid, "queued result not redelivered (n=%d id=%llu want %llu)", g.n,
	      (unsigned long long)g.id, (unsigned long long)sid);
	CHECK(access(g.path, F_OK) == 0, "redelivered path %s missing", g.path);
	prof_dispatch(c, 300);
	prof_close(c);

	/* Acknowledged: a new listener gets nothing. */
	struct got g2 = { 0 };
	c = connect_app();
	CHECK(prof_set_result_listener(c, on_listener, &g2) == 0, "listener");
	end = util_mono_ms() + 1000;
	while (util_mono_ms() < end)
		prof_dispatch(c, 100);
	CHECK(g.n == 1 && g2.n == 0, "delivered %d more time(s) after the ack", g2.n + g.n - 1);
	prof_close(c);
	printf("queued result delivered once, on reconnect (%s)\n", g.path);
	return 0;
}

static int t_wrong_pid(void)
{
	int rt = fake_runtime((uint32_t)getpid() + 1, 0);
	CHECK(closed_by_peer(rt, 2000), "runtime with a wrong pid was not closed");
	close(rt);
	printf("runtime hello with a wrong pid refused\n");
	return 0;
}

static int t_no_runtime(void)
{
	prof_client *c = connect_app();
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 200);
	/* A heap profile needs the agent (stack samples would go agentless). */
	CHECK(prof_request(c, PROF_HEAP_PROFILE, &p, NULL, on_result, &o, NULL) == 0, "refused");
	wait_result(c, &o, 10000);
	CHECK(o.error == PROF_E_RUNTIME_UNAVAILABLE, "result %d (%s)", o.error, o.msg);
	prof_close(c);
	printf("no runtime: %s\n", o.msg);
	return 0;
}

static int t_cancel(void)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 5000);
	uint64_t id, sid;
	int fd = -1;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, NULL, on_result, &o, &id) == 0, "refused");
	CHECK(runtime_read(rt, &fd, &sid, 2000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE, "no CaptureRequest");
	CHECK(prof_cancel(c, id) == 0, "cancel");
	wait_result(c, &o, 3000);
	CHECK(o.error == PROF_E_CANCELLED, "result %d (%s)", o.error, o.msg);
	CHECK(runtime_read(rt, NULL, &sid, 2000) == PD__DAEMON_TO_RUNTIME__MSG_CANCEL, "runtime not told");
	CHECK(sid == id, "cancel for the wrong session");
	close(fd);
	close(rt);
	prof_close(c);
	printf("cancel delivered to the app and the runtime\n");
	return 0;
}

/* ---- kill -9 of the daemon mid-capture (restart.sh drives these). */

/* A synchronous round trip: everything sent before it (an Ack) is handled. */
static void sync_daemon(prof_client *c)
{
	CHECK(prof_request(c, (enum prof_type)99, NULL, NULL, NULL, NULL, NULL) ==
	      -PROF_E_INVALID_REQUEST, "round trip");
}

/* One capture delivered to its requester, whose callback acks it. */
static int t_capture_acked(void)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	uint64_t id;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "acked", on_result, &o, &id) == 0, "refused");
	serve_capture(rt, NULL, fill_pprof);
	wait_result(c, &o, 60000);
	CHECK(o.error == 0, "result %d (%s)", o.error, o.msg);
	sync_daemon(c);
	close(rt);
	prof_close(c);
	printf("acked %llu\n", (unsigned long long)id);
	return 0;
}

/* True once a result file of session id is in dir (<...>_<id>.<ext>). */
static int result_file_of(const char *dir, uint64_t id)
{
	char cmd[4200];
	snprintf(cmd, sizeof(cmd), "ls '%s' 2>/dev/null | grep -q '_%llu\\.'", dir,
		 (unsigned long long)id);
	return system(cmd) == 0;
}

/* One capture stored while its app is gone: queued for the listener. */
static int t_capture_queued(void)
{
	const char *state = getenv("IT_STATE");
	char dir[4096];
	uint64_t sid = 0;
	int pfd[2];
	CHECK(state, "IT_STATE unset");
	snprintf(dir, sizeof(dir), "%s/results/%u", state, (unsigned)getuid());
	CHECK(pipe(pfd) == 0, "pipe");
	pid_t child = fork();
	if (child == 0) {
		prof_client *c = connect_app();
		int rt = fake_runtime((uint32_t)getpid(), 1);
		struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
		CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "queued", NULL, NULL, NULL) == 0, "refused");
		serve_capture(rt, &sid, fill_pprof);
		CHECK(write(pfd[1], &sid, sizeof(sid)) == sizeof(sid), "pipe write");
		_exit(0);
	}
	close(pfd[1]);
	CHECK(read(pfd[0], &sid, sizeof(sid)) == sizeof(sid), "child failed");
	waitpid(child, NULL, 0);
	uint64_t end = util_mono_ms() + 60000;
	while (!result_file_of(dir, sid) && util_mono_ms() < end)
		usleep(50000);
	CHECK(result_file_of(dir, sid), "result %llu never stored", (unsigned long long)sid);
	printf("queued %llu\n", (unsigned long long)sid);
	return 0;
}

/* A capture that never ends: stays connected until the daemon is gone. */
static int t_inflight(void)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 60000);
	uint64_t id, sid;
	int fd = -1;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "inflight", NULL, NULL, &id) == 0, "refused");
	CHECK(runtime_read(rt, &fd, &sid, 5000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE,
	      "no CaptureRequest");
	/* Half an artifact, as a real runtime would have when the daemon dies. */
	CHECK(write(fd, "\x1f\x8b\x08\x00", 4) == 4, "write");
	printf("inflight %llu\n", (unsigned long long)id);
	fflush(stdout);
	CHECK(closed_by_peer(rt, 120000), "the daemon never went away");
	close(fd);
	close(rt);
	prof_close(c);
	return 0;
}

struct seen_all {
	int n;
	struct { uint64_t id, result_id; int error; char msg[256], path[4096]; } r[16];
};

static void on_any(const struct prof_result *r, void *ud)
{
	struct seen_all *s = ud;
	if (s->n < 16) {
		s->r[s->n].id = r->request_id;
		s->r[s->n].error = r->error;
		snprintf(s->r[s->n].msg, sizeof(s->r[0].msg), "%s", r->error_message);
		snprintf(s->r[s->n].path, sizeof(s->r[0].path), "%s", r->path);
	}
	s->n++;
}

static void listen_for(struct seen_all *s, int want, int max_ms, int settle_ms)
{
	prof_client *c = connect_app();
	CHECK(prof_set_result_listener(c, on_any, s) == 0, "listener");
	uint64_t end = util_mono_ms() + (uint64_t)max_ms;
	while (s->n < want && util_mono_ms() < end)
		CHECK(prof_dispatch(c, 100) >= 0, "lost the daemon");
	/* Anything more (a duplicate) would come right behind. */
	end = util_mono_ms() + (uint64_t)settle_ms;
	while (util_mono_ms() < end)
		prof_dispatch(c, 100);
	sync_daemon(c); /* the acks are in before we leave */
	prof_close(c);
}

/* After the restart: the queued result and the cut capture's failure, once each. */
static int t_restart_check(uint64_t acked, uint64_t queued, uint64_t inflight)
{
	struct seen_all s = { 0 };
	int got_q = 0, got_f = 0;
	listen_for(&s, 2, 20000, 1000);
	for (int i = 0; i < s.n && i < 16; i++) {
		CHECK(s.r[i].id != acked, "the acknowledged result %llu came again",
		      (unsigned long long)acked);
		if (s.r[i].id == queued) {
			got_q++;
			CHECK(s.r[i].error == 0, "queued result failed: %d", s.r[i].error);
			CHECK(access(s.r[i].path, R_OK) == 0, "queued result %s missing", s.r[i].path);
		} else if (s.r[i].id == inflight) {
			got_f++;
			CHECK(s.r[i].error == PROF_E_UNKNOWN, "cut capture: error %d, want UNKNOWN",
			      s.r[i].error);
			CHECK(!strcmp(s.r[i].msg, "profilingd restarted during the capture"),
			      "cut capture: message '%s'", s.r[i].msg);
			CHECK(!s.r[i].path[0], "a failure with a path: %s", s.r[i].path);
		} else {
			CHECK(0, "unexpected result %llu", (unsigned long long)s.r[i].id);
		}
	}
	CHECK(got_q == 1 && got_f == 1 && s.n == 2,
	      "queued result %d time(s), failure %d time(s), %d results in all (want 1, 1, 2)", got_q,
	      got_f, s.n);
	/* Both acknowledged: a new listener gets nothing. */
	struct seen_all again = { 0 };
	listen_for(&again, 1, 1500, 0);
	CHECK(again.n == 0, "%d result(s) delivered again after the acks (first %llu)", again.n,
	      (unsigned long long)again.r[0].id);
	printf("after the restart: queued result %llu and the failure of %llu, once each\n",
	       (unsigned long long)queued, (unsigned long long)inflight);
	return 0;
}

/* After a stop with a capture running: its failure, once, with message. */
static int t_cut_check(uint64_t id, const char *message)
{
	struct seen_all s = { 0 };
	listen_for(&s, 1, 20000, 1000);
	CHECK(s.n == 1 && s.r[0].id == id, "%d result(s), first %llu, want one for %llu", s.n,
	      (unsigned long long)s.r[0].id, (unsigned long long)id);
	CHECK(s.r[0].error == PROF_E_UNKNOWN && !strcmp(s.r[0].msg, message),
	      "failure %d '%s', want UNKNOWN '%s'", s.r[0].error, s.r[0].msg, message);
	struct seen_all again = { 0 };
	listen_for(&again, 1, 1500, 0);
	CHECK(again.n == 0, "delivered again after the ack");
	printf("session %llu reported once: %s\n", (unsigned long long)id, message);
	return 0;
}

/* ---- Disk full (diskfull.sh mounts a small tmpfs as the state dir). */

static char filler[4200];
static volatile uint64_t spin_sink;

/* Fill the state filesystem to the last byte. */
static void fill_disk(void)
{
	static char buf[1 << 16];
	const char *state = getenv("IT_STATE");
	CHECK(state, "IT_STATE unset");
	snprintf(filler, sizeof(filler), "%s/filler", state);
	int fd = open(filler, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	CHECK(fd >= 0, "open %s: %s", filler, strerror(errno));
	memset(buf, 0x5a, sizeof(buf));
	for (size_t chunk = sizeof(buf); chunk; chunk /= 2) {
		ssize_t n;
		while ((n = write(fd, buf, chunk)) > 0)
			;
		CHECK(n < 0 && (errno == ENOSPC || errno == EDQUOT), "filling: %s", strerror(errno));
	}
	close(fd);
}

static void unfill_disk(void)
{
	CHECK(unlink(filler) == 0, "unlink %s", filler);
}

/* With the default min_free_bytes a small filesystem refuses at admission. */
static int t_nospace_refused(void)
{
	prof_client *c = connect_app();
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	int r = prof_request(c, PROF_STACK_SAMPLING, &p, NULL, NULL, NULL, NULL);
	CHECK(r == -PROF_E_NO_DISK_SPACE, "request on a small disk: %d, want NO_DISK_SPACE", r);
	prof_close(c);
	printf("under min_free_bytes: refused with NO_DISK_SPACE at once\n");
	return 0;
}

/* A capture that succeeds: the disk is usable again. */
static void capture_ok(prof_client *c, int rt)
{
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "ok", on_result, &o, NULL) == 0, "refused");
	serve_capture(rt, NULL, fill_pprof);
	wait_result(c, &o, 60000);
	CHECK(o.error == 0, "capture after the disk was freed: %d (%s)", o.error, o.msg);
}

/* The raw artifact fits; the disk fills before the redacted result is written. */
static int t_diskfull_redact(void)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	capture_ok(c, rt); /* the app's result dir exists, the databases are warm */
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	uint64_t id, sid;
	int fd = -1;
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "full", on_result, &o, &id) == 0, "refused");
	CHECK(runtime_read(rt, &fd, &sid, 5000) == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE, "no capture");
	uint64_t size = fill_counted(fd, fill_pprof);
	close(fd);
	fill_disk();
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;
	d.session_id = sid;
	d.has_bytes = 1;
	d.bytes = (uint64_t)size;
	m.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	m.done = &d;
	CHECK(wire_send_msg(rt, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "send CaptureDone");
	wait_result(c, &o, 60000);
	unfill_disk();
	CHECK(o.error == PROF_E_NO_DISK_SPACE, "result %d (%s), want NO_DISK_SPACE", o.error, o.msg);
	printf("result did not fit: %s (%s); session %llu\n", prof_strerror(o.error), o.msg,
	       (unsigned long long)id);
	capture_ok(c, rt);
	close(rt);
	prof_close(c);
	return 0;
}

/* The disk is full before the request: refused, or failed, with NO_DISK_SPACE. */
static int t_diskfull_before(void)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	fill_disk();
	int r = prof_request(c, PROF_STACK_SAMPLING, &p, "before", on_result, &o, NULL);
	if (r == 0) {
		serve_capture(rt, NULL, fill_pprof);
		wait_result(c, &o, 60000);
		r = -o.error;
	}
	unfill_disk();
	CHECK(r == -PROF_E_NO_DISK_SPACE, "request on a full disk: %d (%s), want NO_DISK_SPACE", -r,
	      o.msg);
	capture_ok(c, rt);
	close(rt);
	prof_close(c);
	printf("full disk before the request: NO_DISK_SPACE%s\n", o.done ? " (result)" : " (refused)");
	return 0;
}

/* The real agent's write into the raw file fails: it reports NO_DISK_SPACE. */
static int t_diskfull_agent(void)
{
	prof_client *c = connect_app();
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 3000);
	/* The session waits for the agent's hello (runtime_wait_ms, long in diskfull.sh). */
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "agent", on_result, &o, NULL) == 0, "refused");
	fill_disk();
	uint64_t end = util_mono_ms() + 60000;
	while (!o.done && util_mono_ms() < end) {
		for (int i = 0; i < 1000000; i++)
			spin_sink += (uint64_t)i; /* something to sample */
		CHECK(prof_dispatch(c, 10) >= 0, "lost the daemon");
	}
	unfill_disk();
	CHECK(o.done, "no result");
	CHECK(o.error == PROF_E_NO_DISK_SPACE, "result %d (%s), want NO_DISK_SPACE", o.error, o.msg);
	prof_close(c);
	printf("the agent's write did not fit: %s (%s)\n", prof_strerror(o.error), o.msg);
	return 0;
}

/* ---- the client library's reply wait (client.c, PROF_BLOCK). */

/*
 * An app's event loop may make prof_fd non-blocking: the library's wait in
 * the receive then returns at once, and the poll after it must wait
 * instead. Replies and a result still come, each in its call.
 */
static int t_nonblock_app(void)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	int fl = fcntl(prof_fd(c), F_GETFL);
	CHECK(fl >= 0 && fcntl(prof_fd(c), F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK");
	for (int i = 0; i < 20; i++)
		CHECK(prof_request(c, (enum prof_type)99, NULL, NULL, NULL, NULL, NULL) ==
		      -PROF_E_INVALID_REQUEST, "round trip %d on a non-blocking socket", i);
	CHECK(prof_request(c, PROF_STACK_SAMPLING, &p, "nonblock", on_result, &o, NULL) == 0,
	      "refused");
	serve_capture(rt, NULL, fill_pprof);
	wait_result(c, &o, 60000);
	CHECK(o.error == 0, "result %d (%s)", o.error, o.msg);
	close(rt);
	prof_close(c);
	printf("a non-blocking prof_fd: 20 replies and a result\n");
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

/*
 * A daemon that never answers (here: a socket nobody accepts on, whose
 * backlog takes the connection): prof_connect gives up with -ETIMEDOUT
 * after its reply timeout, though signals keep ending its blocking
 * receives (SO_RCVTIMEO'd receives are not restarted, SA_RESTART or not).
 */
static int t_hung_daemon(const char *dir)
{
	char path[108];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct sigaction sact = { .sa_handler = on_alarm, .sa_flags = SA_RESTART };
	struct itimerval it = { { 0, 50 * 1000 }, { 0, 50 * 1000 } };
	int err = 0;

	snprintf(path, sizeof(path), "%s/hung.sock", dir);
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	unlink(path);
	int l = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	CHECK(l >= 0 && bind(l, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(l, 4) == 0,
	      "listen on %s: %s", path, strerror(errno));
	CHECK(sigaction(SIGALRM, &sact, NULL) == 0 && setitimer(ITIMER_REAL, &it, NULL) == 0,
	      "timer");
	prof_client *c = prof_connect(path, &err);
	memset(&it, 0, sizeof(it));
	setitimer(ITIMER_REAL, &it, NULL);
	CHECK(!c, "a handshake with nobody succeeded");
	CHECK(err == -ETIMEDOUT, "prof_connect: %s, want a timeout", strerror(-err));
	close(l);
	unlink(path);
	printf("a daemon that never answers: prof_connect timed out\n");
	return 0;
}

/* One stack capture: want 0 means served and stored, else refused with want. */
static int t_request_expect(int want)
{
	prof_client *c = connect_app();
	int rt = fake_runtime((uint32_t)getpid(), 1);
	struct outcome o = { 0 };
	struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 100);
	uint64_t id = 0;
	int r = prof_request(c, PROF_STACK_SAMPLING, &p, "db", on_result, &o, &id);
	if (want == 0) {
		CHECK(r == 0, "refused: %d", r);
		serve_capture(rt, NULL, fill_pprof);
		wait_result(c, &o, 60000);
		CHECK(o.error == 0, "result %d (%s)", o.error, o.msg);
	} else {
		CHECK(r == -want, "request: %d, want -%d", r, want);
	}
	close(rt);
	prof_close(c);
	printf("request %llu: %s\n", (unsigned long long)id, want ? prof_strerror(want) : "served");
	return 0;
}

int main(int argc, char **argv)
{
	runtime_path = getenv("PROFILINGD_RUNTIME_SOCKET");
	if (argc < 2 || !runtime_path) {
		fprintf(stderr, "usage: PROFILINGD_SOCKET=.. PROFILINGD_RUNTIME_SOCKET=.. it_faults "
			"invalid|badpeer|runtime-gone|runtime-hang|runtime-killed|wrong-pid|no-runtime|cancel|garbage|bomb|queued|\n"
			"capture-acked|capture-queued|inflight|restart-check ACKED QUEUED INFLIGHT|cut-check ID MSG|\n"
			"nospace-refused|diskfull-redact|diskfull-before|diskfull-agent|request-expect CODE|\n"
			"nonblock-app|hung-daemon DIR\n");
		return 2;
	}
	const char *t = argv[1];
	if (!strcmp(t, "invalid")) return t_invalid();
	if (!strcmp(t, "badpeer")) return t_badpeer();
	if (!strcmp(t, "runtime-gone")) return t_runtime_gone(0);
	if (!strcmp(t, "runtime-hang")) return t_runtime_gone(1);
	if (!strcmp(t, "runtime-killed")) return t_runtime_killed();
	if (!strcmp(t, "wrong-pid")) return t_wrong_pid();
	if (!strcmp(t, "no-runtime")) return t_no_runtime();
	if (!strcmp(t, "cancel")) return t_cancel();
	if (!strcmp(t, "garbage")) return t_bad_artifact(fill_garbage, "malformed");
	if (!strcmp(t, "bomb")) return t_bad_artifact(fill_bomb, getenv("IT_WANT"));
	if (!strcmp(t, "queued")) return t_queued();
	if (!strcmp(t, "capture-acked")) return t_capture_acked();
	if (!strcmp(t, "capture-queued")) return t_capture_queued();
	if (!strcmp(t, "inflight")) return t_inflight();
	if (!strcmp(t, "cut-check") && argc == 4) return t_cut_check(strtoull(argv[2], NULL, 10), argv[3]);
	if (!strcmp(t, "nospace-refused")) return t_nospace_refused();
	if (!strcmp(t, "request-expect") && argc == 3) return t_request_expect(atoi(argv[2]));
	if (!strcmp(t, "nonblock-app")) return t_nonblock_app();
	if (!strcmp(t, "hung-daemon") && argc == 3) return t_hung_daemon(argv[2]);
	if (!strcmp(t, "diskfull-redact")) return t_diskfull_redact();
	if (!strcmp(t, "diskfull-before")) return t_diskfull_before();
	if (!strcmp(t, "diskfull-agent")) return t_diskfull_agent();
	if (!strcmp(t, "restart-check") && argc == 5)
		return t_restart_check(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
				       strtoull(argv[4], NULL, 10));
	fprintf(stderr, "unknown scenario %s\n", t);
	return 2;
}
