/*
 * hostile_log: log injection and log flood (docs/SECURITY.md).
 *
 *   hostile_log inject CLIENT_SOCK RUNTIME_SOCK
 *     Speaks the wire protocol itself: a runtime hello whose runtime name
 *     holds "\n<0>FAKE-runtime", a request tagged "\n<0>FAKE-tag" that
 *     the same process's "runtime" answers with a CaptureDone whose message
 *     holds "\n<0>FAKE-done", a carriage return, an ESC sequence and a byte
 *     that is not UTF-8. Prints "injected" when the daemon took all three.
 *   hostile_log flood CLIENT_SOCK SECONDS CONNS
 *     CONNS client connections send requests of an unknown type (refused
 *     at once) as fast as the daemon answers, for SECONDS. Prints "sent N".
 *   hostile_log refuse CLIENT_SOCK
 *     One refused request (a friendly uid's line). Prints "pid P".
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return s;
	int r = -errno;
	close(s);
	return r;
}

/* Wait up to ms for a packet; its length, 0 at EOF, -ETIMEDOUT. */
static ssize_t recv_within(int s, uint8_t *buf, size_t cap, int ms, int *fd)
{
	struct pollfd pf = { .fd = s, .events = POLLIN };
	if (poll(&pf, 1, ms) <= 0)
		return -ETIMEDOUT;
	return wire_recv(s, buf, cap, fd);
}

static int client_hello(int s)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	if (wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1) < 0)
		return -1;
	return recv_within(s, buf, sizeof(buf), 10000, NULL) > 0 ? 0 : -1;
}

static int send_request(int s, uint32_t type, const char *tag, uint64_t token)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	Pd__Params p = PD__PARAMS__INIT;
	p.has_duration_ms = 1;
	p.duration_ms = 500;
	rq.token = token;
	rq.type = type;
	rq.params = &p;
	rq.tag = (char *)tag;
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	return wire_send_msg(s, &m.base, WIRE_CLIENT_MAX_MSG, -1);
}

static int inject(const char *client_path, const char *runtime_path)
{
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	char *caps[] = { "stack_sampling" };
	int rt = connect_to(runtime_path), cl = connect_to(client_path), fd = -1;
	if (rt < 0 || cl < 0) {
		fprintf(stderr, "hostile_log: connect failed\n");
		return 1;
	}
	Pd__RuntimeMsg rm = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	h.pid = (uint32_t)getpid();
	h.runtime = "native\n<0>FAKE-runtime line";
	h.n_capabilities = 1;
	h.capabilities = caps;
	rm.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	rm.hello = &h;
	if (wire_send_msg(rt, &rm.base, WIRE_RUNTIME_MAX_MSG, -1) < 0 ||
	    recv_within(rt, buf, sizeof(buf), 10000, NULL) <= 0) {
		fprintf(stderr, "hostile_log: no HelloAck\n");
		return 1;
	}
	if (client_hello(cl) < 0 || send_request(cl, 3, "t\n<0>FAKE-tag line", 1) < 0) {
		fprintf(stderr, "hostile_log: request failed\n");
		return 1;
	}
	/* The daemon's CaptureRequest (with the raw file's fd) comes to our "runtime". */
	ssize_t n = recv_within(rt, buf, sizeof(buf), 10000, &fd);
	Pd__DaemonToRuntime *d = n > 0 ? pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf) : NULL;
	if (!d || d->msg_case != PD__DAEMON_TO_RUNTIME__MSG_CAPTURE) {
		fprintf(stderr, "hostile_log: no CaptureRequest\n");
		return 1;
	}
	uint64_t sid = d->capture->session_id;
	pd__daemon_to_runtime__free_unpacked(d, NULL);
	if (fd >= 0)
		close(fd);
	Pd__CaptureDone done = PD__CAPTURE_DONE__INIT;
	done.session_id = sid;
	done.status = 4; /* EXECUTING: the message reaches the log */
	done.message = "boom\n<0>FAKE-done line\r\x1b[31mred\xff\xfe";
	rm.msg_case = PD__RUNTIME_MSG__MSG_DONE;
	rm.done = &done;
	if (wire_send_msg(rt, &rm.base, WIRE_RUNTIME_MAX_MSG, -1) < 0)
		return 1;
	/* The failure result reaches the client: the daemon has logged it. */
	for (int i = 0; i < 4; i++)
		if (recv_within(cl, buf, sizeof(buf), 5000, NULL) <= 0)
			break;
	printf("injected\n");
	close(rt);
	close(cl);
	return 0;
}

/* One connection's share of the flood; returns how many it sent. */
static long flood_one(const char *path, int seconds)
{
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	int s = connect_to(path);
	long sent = 0;
	if (s < 0 || client_hello(s) < 0)
		return 0;
	uint64_t end = util_mono_ms() + (uint64_t)seconds * 1000;
	while (util_mono_ms() < end) {
		/* Keep at most 8 in flight: the daemon closes a peer that does not read. */
		for (int i = 0; i < 8; i++)
			if (send_request(s, 99, "flood", (uint64_t)sent + 1) == 0)
				sent++;
		for (int i = 0; i < 16; i++) {
			struct pollfd pf = { .fd = s, .events = POLLIN };
			if (poll(&pf, 1, i < 8 ? 100 : 0) <= 0)
				break;
			ssize_t n = wire_recv(s, buf, sizeof(buf), NULL);
			if (n <= 0 && n != -EAGAIN) {
				close(s);
				return sent;
			}
		}
	}
	close(s);
	return sent;
}

static int flood(const char *path, int seconds, int conns)
{
	int pfd[2];
	if (pipe(pfd) < 0)
		return 1;
	for (int i = 0; i < conns; i++) {
		if (fork() == 0) {
			long n = flood_one(path, seconds);
			ssize_t w = write(pfd[1], &n, sizeof(n));
			_exit(w == sizeof(n) ? 0 : 1);
		}
	}
	close(pfd[1]);
	long total = 0, n;
	while (read(pfd[0], &n, sizeof(n)) == sizeof(n))
		total += n;
	while (wait(NULL) > 0)
		;
	printf("sent %ld\n", total);
	return 0;
}

static int refuse(const char *path)
{
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	int s = connect_to(path);
	if (s < 0 || client_hello(s) < 0 || send_request(s, 99, "friendly", 1) < 0 ||
	    recv_within(s, buf, sizeof(buf), 10000, NULL) <= 0)
		return 1;
	printf("pid %d\n", (int)getpid());
	close(s);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "inject"))
		return inject(argv[2], argv[3]);
	if (argc == 5 && !strcmp(argv[1], "flood"))
		return flood(argv[2], atoi(argv[3]), atoi(argv[4]));
	if (argc == 3 && !strcmp(argv[1], "refuse"))
		return refuse(argv[2]);
	fprintf(stderr, "usage: hostile_log inject CLIENT RUNTIME | flood CLIENT SECONDS CONNS | "
		"refuse CLIENT\n");
	return 2;
}
