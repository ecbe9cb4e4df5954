/*
 * hostile_pid_reuse: the attacker (and its victim) of the pid reuse test
 * (pid_reuse.sh). A connection's identity must be the process that
 * connected, not its pid: once that process is gone, whoever holds the
 * socket must not get captures of the pid's next owner.
 *
 *   client PIDFILE GOFILE
 *       connect to client.sock and say hello; fork; the parent writes its
 *       pid to PIDFILE and exits. The child waits for GOFILE (the harness
 *       makes another user's process take the pid meanwhile), then asks
 *       for a stack capture "of myself" on the inherited socket.
 *   runtime PIDFILE
 *       say RuntimeHello on runtime.sock as this pid; fork; the parent
 *       writes its pid and exits. The child waits 30 s for a
 *       CaptureRequest, i.e. for the next owner's captures.
 *   victim SECONDS
 *       the other user's program: libprofiling connected (its agent says
 *       hello for this pid), spinning in victim_secret_work().
 *   victim-request
 *       as victim, and it asks for a stack capture of itself; prints
 *       "victim result error=E".
 *
 * Exit 0 when the attack failed, 1 with a line "ATTACK-WORKED: ..." when
 * it worked, 2 when the test itself could not run.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define DIE(...) do { fprintf(stderr, "hostile_pid_reuse: " __VA_ARGS__); \
	fputc('\n', stderr); exit(2); } while (0)

static int sock_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	/* No CLOEXEC: the socket is meant to outlive its first owner. */
	int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		DIE("connect %s: %s", path, strerror(errno));
	return s;
}

/* One packet within ms, unpacked by fn; NULL on EOF or timeout. */
static void *recv_msg(int s, int ms, int *fd, void *(*fn)(ProtobufCAllocator *, size_t,
							  const uint8_t *))
{
	static uint8_t buf[WIRE_CLIENT_MAX_MSG];
	struct pollfd pf = { .fd = s, .events = POLLIN };
	if (fd)
		*fd = -1;
	if (poll(&pf, 1, ms) != 1)
		return NULL;
	ssize_t n = wire_recv(s, buf, sizeof(buf), fd);
	if (n <= 0)
		return NULL;
	return fn(NULL, (size_t)n, buf);
}

static void *unpack_daemon(ProtobufCAllocator *a, size_t n, const uint8_t *b)
{
	return pd__daemon_msg__unpack(a, n, b);
}

static void *unpack_rt(ProtobufCAllocator *a, size_t n, const uint8_t *b)
{
	return pd__daemon_to_runtime__unpack(a, n, b);
}

static void write_pid(const char *path)
{
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0)
		DIE("cannot write %s", path);
}

static void wait_file(const char *path, int seconds)
{
	struct stat st;
	for (int i = 0; i < seconds * 20; i++) {
		if (stat(path, &st) == 0)
			return;
		usleep(50000);
	}
	DIE("%s did not appear", path);
}

static int attack_client(const char *pidfile, const char *gofile)
{
	const char *path = getenv("PROFILINGD_SOCKET");
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	Pd__DaemonMsg *in;

	if (!path)
		DIE("PROFILINGD_SOCKET is not set");
	int s = sock_connect(path);
	h.version = PROF_API_VERSION;
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	if (wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1) < 0)
		DIE("hello");
	in = recv_msg(s, 5000, NULL, unpack_daemon);
	if (!in || in->msg_case != PD__DAEMON_MSG__MSG_WELCOME)
		DIE("no welcome");
	pd__daemon_msg__free_unpacked(in, NULL);
	pid_t child = fork();
	if (child < 0)
		DIE("fork");
	if (child > 0) {
		write_pid(pidfile);
		_exit(0);
	}
	wait_file(gofile, 60);

	Pd__Request rq = PD__REQUEST__INIT;
	Pd__Params p = PD__PARAMS__INIT;
	p.has_duration_ms = 1;
	p.duration_ms = 500;
	rq.token = 1;
	rq.type = PROF_STACK_SAMPLING;
	rq.params = &p;
	rq.tag = "of-myself";
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	if (wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1) < 0) {
		printf("request not sent: the daemon closed the connection\n");
		return 0;
	}
	/* The reply, then (unless refused) the result: 20 s covers a loaded machine. */
	uint64_t end = util_mono_ms() + 20000;
	while (util_mono_ms() < end) {
		int fd;
		in = recv_msg(s, 500, &fd, unpack_daemon);
		if (!in) {
			struct pollfd pf = { .fd = s, .events = POLLIN };
			if (poll(&pf, 1, 0) == 1 && recv(s, &pf, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
				printf("connection closed by the daemon\n");
				return 0;
			}
			continue;
		}
		if (in->msg_case == PD__DAEMON_MSG__MSG_REPLY) {
			printf("reply error=%u message=%s\n", in->reply->error,
			       in->reply->message ? in->reply->message : "");
		} else if (in->msg_case == PD__DAEMON_MSG__MSG_RESULT) {
			const Pd__Result *r = in->result;
			printf("result error=%u size=%llu message=%s\n", r->error,
			       (unsigned long long)r->size, r->error_message ? r->error_message : "");
			int worked = r->error == 0 && fd >= 0;
			if (worked)
				printf("ATTACK-WORKED: a capture of pid %s's new owner was delivered "
				       "(%llu bytes)\n", pidfile, (unsigned long long)r->size);
			if (fd >= 0)
				close(fd);
			pd__daemon_msg__free_unpacked(in, NULL);
			return worked;
		}
		if (fd >= 0)
			close(fd);
		pd__daemon_msg__free_unpacked(in, NULL);
	}
	printf("no result within 20 s\n");
	return 0;
}

static int attack_runtime(const char *pidfile)
{
	const char *path = getenv("PROFILING_RUNTIME_SOCKET");
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	char *caps[] = { "stack_sampling", "heap_profile", "trace_ring" };

	if (!path)
		DIE("PROFILING_RUNTIME_SOCKET is not set");
	int s = sock_connect(path);
	h.pid = (uint32_t)getpid();
	h.runtime = "native";
	h.capabilities = caps;
	h.n_capabilities = 3;
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	if (wire_send_msg(s, &m.base, WIRE_RUNTIME_MAX_MSG, -1) < 0)
		DIE("runtime hello");
	Pd__DaemonToRuntime *in = recv_msg(s, 5000, NULL, unpack_rt);
	if (!in || in->msg_case != PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK)
		DIE("no HelloAck");
	pd__daemon_to_runtime__free_unpacked(in, NULL);
	pid_t child = fork();
	if (child < 0)
		DIE("fork");
	if (child > 0) {
		write_pid(pidfile);
		_exit(0);
	}
	uint64_t end = util_mono_ms() + 30000;
	while (util_mono_ms() < end) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 500) != 1)
			continue;
		int fd;
		uint8_t buf[WIRE_RUNTIME_MAX_MSG];
		ssize_t n = wire_recv(s, buf, sizeof(buf), &fd);
		if (n <= 0) {
			printf("stale runtime connection closed by the daemon\n");
			return 0;
		}
		in = pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf);
		if (fd >= 0)
			close(fd);
		if (in && in->msg_case == PD__DAEMON_TO_RUNTIME__MSG_CAPTURE) {
			printf("ATTACK-WORKED: the stale runtime got CaptureRequest of session %llu\n",
			       (unsigned long long)in->capture->session_id);
			pd__daemon_to_runtime__free_unpacked(in, NULL);
			return 1;
		}
		if (in)
			pd__daemon_to_runtime__free_unpacked(in, NULL);
	}
	printf("no CaptureRequest within 30 s\n");
	return 0;
}

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t victim_secret_work(uint64_t x)
{
	for (int i = 0; i < 1000000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

struct outcome {
	int done, error;
};

static void on_result(const struct prof_result *r, void *ud)
{
	struct outcome *o = ud;
	o->done = 1;
	o->error = r->error;
}

static int victim(int seconds, int request)
{
	int e = 0;
	prof_client *c = prof_connect(NULL, &e);
	if (!c)
		DIE("victim: prof_connect: %d", e);
	struct outcome o = { 0 };
	if (request) {
		struct prof_params p = PROF_PARAMS_INIT(.duration_ms = 1500); /* a few samples even when loaded */
		/* Let the agent's hello land first. */
		usleep(300000);
		uint64_t rid;
		e = prof_request(c, PROF_STACK_SAMPLING, &p, "victim", on_result, &o, &rid);
		if (e < 0) {
			printf("victim result error=%d (refused)\n", -e);
			return 0;
		}
	}
	uint64_t end = util_mono_ms() + (uint64_t)seconds * 1000;
	while (util_mono_ms() < end && !(request && o.done)) {
		uint64_t until = util_mono_ms() + 50;
		while (util_mono_ms() < until)
			sink = victim_secret_work(sink);
		prof_dispatch(c, 0);
	}
	if (request)
		printf("victim result error=%d%s\n", o.done ? o.error : -1,
		       o.done ? "" : " (no result)");
	prof_close(c);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	/* Only the child that plays the attack gets here; "attacker-done"
	 * tells the harness it has finished. */
	if (argc == 4 && !strcmp(argv[1], "client")) {
		int rc = attack_client(argv[2], argv[3]);
		printf("attacker-done rc=%d\n", rc);
		return rc;
	}
	if (argc == 3 && !strcmp(argv[1], "runtime")) {
		int rc = attack_runtime(argv[2]);
		printf("attacker-done rc=%d\n", rc);
		return rc;
	}
	if (argc == 3 && !strcmp(argv[1], "victim"))
		return victim(atoi(argv[2]), 0);
	if (argc == 2 && !strcmp(argv[1], "victim-request"))
		return victim(60, 1);
	fprintf(stderr, "usage: hostile_pid_reuse client PIDFILE GOFILE | runtime PIDFILE | "
		"victim SECONDS | victim-request\n");
	return 2;
}
