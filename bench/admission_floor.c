/*
 * bench/admission_floor: the peer of bench/admission. A server on a
 * client.sock that decides nothing: it answers every ClientHello with a
 * Welcome and every Request at once with an admitting RequestReply plus
 * the failure Result an admitted request without a runtime gets from
 * profilingd, both in one sendmmsg. No identity check, no rate limit, no
 * database, no batching. The same admission clients against it measure
 * what the kernel, libprofiling and protobuf-c cost on this machine today:
 * the most any daemon could do here with that message pattern. Every
 * request is admitted, which makes a client receive more than under
 * profilingd's mix (where some are refused with a reply alone), so the
 * floor errs low, never in profilingd's favour.
 *   usage: admission_floor SOCKET   (runs until SIGTERM or SIGINT)
 * A benchmark peer, not a daemon: it trusts its clients and caps nothing
 * but its connection count.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "profiling/profiling.h"
#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define FLOOR_MAX_CONNS 1024

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int listen_on(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path)) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	unlink(path);
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 4096) < 0) {
		int r = -errno;
		close(s);
		return r;
	}
	return s;
}

/* Pack m into buf; the packet for it. Both messages fit WIRE_CLIENT_MAX_MSG. */
static struct wire_pkt pack(const Pd__DaemonMsg *m, uint8_t *buf)
{
	struct wire_pkt p = { .buf = buf, .fd = -1 };
	p.len = pd__daemon_msg__pack(m, buf);
	return p;
}

/* One client message: 0, or -1 to drop the connection. */
static int answer(int fd, const uint8_t *in, size_t len, uint64_t *next_id)
{
	static uint8_t out[2][WIRE_CLIENT_MAX_MSG];
	Pd__ClientMsg *cm = pd__client_msg__unpack(NULL, len, in);
	Pd__DaemonMsg dm = PD__DAEMON_MSG__INIT;
	struct wire_pkt pkt[2];
	unsigned n = 0;
	int r = 0;

	if (!cm)
		return -1;
	if (cm->msg_case == PD__CLIENT_MSG__MSG_HELLO) {
		Pd__Welcome w = PD__WELCOME__INIT;
		w.version = PROF_API_VERSION;
		w.runtime_socket = "";
		w.uid = (uint32_t)getuid();
		dm.msg_case = PD__DAEMON_MSG__MSG_WELCOME;
		dm.welcome = &w;
		pkt[n] = pack(&dm, out[n]);
		n++;
	} else if (cm->msg_case == PD__CLIENT_MSG__MSG_REQUEST) {
		Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
		Pd__Result res = PD__RESULT__INIT;
		rep.token = cm->request->token;
		rep.request_id = ++*next_id;
		dm.msg_case = PD__DAEMON_MSG__MSG_REPLY;
		dm.reply = &rep;
		pkt[n] = pack(&dm, out[n]);
		n++;
		res.request_id = rep.request_id;
		res.type = cm->request->type;
		res.error = PROF_E_RUNTIME_UNAVAILABLE;
		res.error_message = "admission_floor: no capture";
		dm.msg_case = PD__DAEMON_MSG__MSG_RESULT;
		dm.result = &res;
		pkt[n] = pack(&dm, out[n]);
		n++;
	}
	/* Other messages (signals, budget queries) get no answer here. */
	for (unsigned i = 0; i < n; i += (unsigned)r) {
		/* A client reads its reply before it sends again, so a full
		 * queue means a client that stopped reading: drop it. */
		r = wire_send_batch(fd, pkt + i, n - i);
		if (r <= 0)
			break;
	}
	pd__client_msg__free_unpacked(cm, NULL);
	return r < 0 ? -1 : 0;
}

int main(int argc, char **argv)
{
	static uint8_t buf[WIRE_CLIENT_MAX_MSG];
	struct epoll_event ev[64];
	uint64_t next_id = 0;
	int nconns = 0;

	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: admission_floor SOCKET\n"
				"  answers libprofiling's hello and requests at once, deciding\n"
				"  nothing: the floor bench/admission.sh compares profilingd with\n");
		return argc == 2 ? 0 : 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	int ls = listen_on(argv[1]);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ls < 0 || ep < 0) {
		fprintf(stderr, "admission_floor: %s: %s\n", argv[1],
			strerror(ls < 0 ? -ls : errno));
		return 1;
	}
	struct epoll_event lev = { .events = EPOLLIN, .data.fd = ls };
	epoll_ctl(ep, EPOLL_CTL_ADD, ls, &lev);
	while (!stop) {
		int k = epoll_wait(ep, ev, 64, -1);
		for (int i = 0; i < k; i++) {
			int fd = ev[i].data.fd;
			if (fd == ls) {
				int c;
				while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event cev = { .events = EPOLLIN, .data.fd = c };
					if (nconns >= FLOOR_MAX_CONNS ||
					    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0) {
						close(c);
						continue;
					}
					nconns++;
				}
				continue;
			}
			ssize_t len;
			while ((len = wire_recv(fd, buf, sizeof(buf), NULL)) > 0)
				if (answer(fd, buf, (size_t)len, &next_id) < 0)
					break;
			if (len != -EAGAIN) { /* end of stream, an error, or a dropped client */
				close(fd);
				nconns--;
			}
		}
	}
	unlink(argv[1]);
	return 0;
}
