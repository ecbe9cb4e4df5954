/*
 * hostile_setuid_exec: the attacker of the setuid exec test
 * (setuid_exec.sh). It connects to client.sock as an unprivileged user,
 * then execs a setuid-root copy of itself that keeps the socket, and asks
 * for a capture "of myself": the process is now root's, and must not be
 * sampled (as root, by profilingd-perf) for the unprivileged caller.
 *
 *   exec-then-request COPY   connect, exec COPY, which requests on the socket
 *   request-then-exec COPY   connect and request (admitted: the process is
 *                            still the caller's), then exec COPY, which
 *                            waits for the result while the daemon waits
 *                            for a runtime that never comes
 *   friendly                 connect and request a capture of itself, no exec
 *   spin SECONDS             (run as the setuid copy) spin, for root's capture
 *                            of a setuid process by pid
 *
 * The copy runs "request FD" or "wait FD". Every mode spins in
 * setuid_secret_work() so that there is something to sample. Output:
 * "reply error=E ..." and "result error=E ..."; exit 1 with a line
 * "ATTACK-WORKED: ..." when a capture of the setuid process was delivered,
 * 0 otherwise, 2 when the test could not run.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <profiling/profiling.h>

#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define DIE(...) do { fprintf(stderr, "hostile_setuid_exec: " __VA_ARGS__); \
	fputc('\n', stderr); exit(2); } while (0)

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t setuid_secret_work(uint64_t x)
{
	for (int i = 0; i < 1000000; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return x;
}

static int connect_hello(void)
{
	const char *path = getenv("PROFILINGD_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	uint8_t buf[WIRE_CLIENT_MAX_MSG];

	if (!path)
		DIE("PROFILINGD_SOCKET is not set");
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	/* No CLOEXEC: the setuid image inherits it. */
	int s = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		DIE("connect %s: %s", path, strerror(errno));
	h.version = PROF_API_VERSION;
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	struct pollfd pf = { .fd = s, .events = POLLIN };
	if (wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1) < 0 || poll(&pf, 1, 5000) != 1 ||
	    wire_recv(s, buf, sizeof(buf), NULL) <= 0)
		DIE("no welcome");
	return s;
}

/* A stack capture of the calling process for ms. */
static void send_request(int s, uint32_t ms)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	Pd__Params p = PD__PARAMS__INIT;
	p.has_duration_ms = 1;
	p.duration_ms = ms;
	rq.token = 7;
	rq.type = PROF_STACK_SAMPLING;
	rq.params = &p;
	rq.tag = "setuid";
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	if (wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1) < 0)
		printf("request not sent: the daemon closed the connection\n");
}

/*
 * Spin and read what the daemon says, until the result (or a refusal when
 * until_reply). 1 when a capture was delivered, else 0.
 */
static int spin_and_read(int s, int until_reply, const char *who)
{
	uint64_t end = util_mono_ms() + 25000;
	while (util_mono_ms() < end) {
		uint64_t until = util_mono_ms() + 30;
		while (util_mono_ms() < until)
			sink = setuid_secret_work(sink);
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 0) != 1)
			continue;
		uint8_t buf[WIRE_CLIENT_MAX_MSG];
		int fd = -1;
		ssize_t n = wire_recv(s, buf, sizeof(buf), &fd);
		if (n <= 0) {
			printf("%s: connection closed by the daemon\n", who);
			return 0;
		}
		Pd__DaemonMsg *in = pd__daemon_msg__unpack(NULL, (size_t)n, buf);
		if (fd >= 0 && (!in || in->msg_case != PD__DAEMON_MSG__MSG_RESULT))
			close(fd);
		if (!in)
			DIE("undecodable message");
		if (in->msg_case == PD__DAEMON_MSG__MSG_REPLY) {
			unsigned e = in->reply->error;
			printf("%s: reply error=%u message=%s\n", who, e,
			       in->reply->message ? in->reply->message : "");
			pd__daemon_msg__free_unpacked(in, NULL);
			if (until_reply || e)
				return 0;
			continue;
		}
		if (in->msg_case == PD__DAEMON_MSG__MSG_RESULT) {
			const Pd__Result *r = in->result;
			int got = r->error == 0 && fd >= 0;
			printf("%s: result error=%u size=%llu message=%s\n", who, r->error,
			       (unsigned long long)r->size, r->error_message ? r->error_message : "");
			if (fd >= 0)
				close(fd);
			pd__daemon_msg__free_unpacked(in, NULL);
			return got;
		}
		pd__daemon_msg__free_unpacked(in, NULL);
	}
	printf("%s: nothing within 25 s\n", who);
	return 0;
}

static void exec_copy(const char *copy, int s, const char *mode)
{
	char fd[16];
	snprintf(fd, sizeof(fd), "%d", s);
	fflush(stdout);
	execl(copy, copy, mode, fd, (char *)NULL);
	DIE("exec %s: %s", copy, strerror(errno));
}

/* In the setuid image: check that it is one, then play its part. */
static int as_setuid(const char *mode, const char *fdarg)
{
	int s = atoi(fdarg);
	if (geteuid() != 0 || getuid() == 0)
		DIE("not running setuid root (euid %u uid %u): nosuid mount?", (unsigned)geteuid(),
		    (unsigned)getuid());
	int got;
	if (!strcmp(mode, "request")) {
		send_request(s, 500);
		got = spin_and_read(s, 0, "setuid");
	} else {
		got = spin_and_read(s, 0, "setuid");
	}
	if (got)
		printf("ATTACK-WORKED: a capture of the setuid-root process was delivered to uid %u\n",
		       (unsigned)getuid());
	return got;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && (!strcmp(argv[1], "request") || !strcmp(argv[1], "wait")))
		return as_setuid(argv[1], argv[2]);
	if (argc == 3 && !strcmp(argv[1], "spin")) {
		if (geteuid() != 0 || getuid() == 0)
			DIE("not running setuid root (euid %u uid %u): nosuid mount?",
			    (unsigned)geteuid(), (unsigned)getuid());
		uint64_t end = util_mono_ms() + (uint64_t)atoi(argv[2]) * 1000;
		while (util_mono_ms() < end)
			sink = setuid_secret_work(sink);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "exec-then-request")) {
		int s = connect_hello();
		exec_copy(argv[2], s, "request");
	}
	if (argc == 3 && !strcmp(argv[1], "request-then-exec")) {
		int s = connect_hello();
		send_request(s, 500);
		/* The reply: admitted, since the process is still the caller's. */
		if (spin_and_read(s, 1, "before exec") != 0)
			return 1;
		exec_copy(argv[2], s, "wait");
	}
	if (argc == 2 && !strcmp(argv[1], "friendly")) {
		int s = connect_hello();
		/* Long enough for a few samples on a loaded machine. */
		send_request(s, 2000);
		int got = spin_and_read(s, 0, "friendly");
		printf("friendly capture %s\n", got ? "delivered" : "NOT delivered");
		return got ? 0 : 2;
	}
	fprintf(stderr, "usage: hostile_setuid_exec exec-then-request COPY | request-then-exec COPY"
		" | friendly\n");
	return 2;
}
