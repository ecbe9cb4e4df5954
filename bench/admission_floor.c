/*
 * bench/admission_floor: the peer of bench/admission. A server on a
 * client.sock that decides nothing but what makes its messages the same
 * as profilingd's: it answers every ClientHello with a Welcome and every
 * Request at once with a RequestReply. It admits a request unless the
 * same connection's last one is still in flight, which it refuses with
 * PROFILING_IN_PROGRESS, as profilingd refuses a second capture of the
 * same pid. An admitted request's failure Result (what one without a
 * runtime gets) follows at the end of the next loop turn, as profilingd's
 * does (its capture timer fires a turn after the reply), and ends the
 * request's flight. So a client meets the same pattern of replies,
 * refusals and results as under profilingd, with none of its work: no
 * identity check, rate limit, database or group commit. The same
 * admission clients against it measure what the kernel, libprofiling and
 * protobuf-c cost on this machine today: the most any daemon could do
 * here with that message pattern.
 *   usage: admission_floor SOCKET   (runs until SIGTERM or SIGINT)
 * A benchmark peer, not a daemon: it trusts its clients and caps nothing
 * but its connections (FLOOR_MAX_FD) and its queue of results (at the cap
 * a result goes with its reply).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
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

#define FLOOR_MAX_FD 1024 /* a connection's fd is below it, or it is closed */
#define FLOOR_MAX_LATER 1024
/* A stop request is seen within this, even one that lands just before the
 * wait (the handler only sets a flag). */
#define FLOOR_TICK_MS 100

/* A failure Result owed to a connection. */
struct later {
	int fd; /* -1 once the connection is gone */
	uint64_t request_id;
	uint32_t type;
};

/* This turn's results, and the previous turn's, sent at this turn's end. */
static struct later later[2][FLOOR_MAX_LATER];
static unsigned nlater[2], cur;
/* A connection's admitted request has not had its Result yet. */
static bool in_flight[FLOOR_MAX_FD];

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

static int send_result(int fd, uint64_t request_id, uint32_t type)
{
	Pd__DaemonMsg dm = PD__DAEMON_MSG__INIT;
	Pd__Result res = PD__RESULT__INIT;
	res.request_id = request_id;
	res.type = type;
	res.error = PROF_E_RUNTIME_UNAVAILABLE;
	res.error_message = "admission_floor: no capture";
	dm.msg_case = PD__DAEMON_MSG__MSG_RESULT;
	dm.result = &res;
	int r = wire_send_msg(fd, &dm.base, WIRE_CLIENT_MAX_MSG, -1);
	in_flight[fd] = false;
	return r;
}

/* One client message: 0, or -1 to drop the connection. */
static int answer(int fd, const uint8_t *in, size_t len, uint64_t *next_id)
{
	Pd__ClientMsg *cm = pd__client_msg__unpack(NULL, len, in);
	Pd__DaemonMsg dm = PD__DAEMON_MSG__INIT;
	Pd__Welcome w = PD__WELCOME__INIT;
	Pd__RequestReply rep = PD__REQUEST_REPLY__INIT;
	int r = 0;

	if (!cm)
		return -1;
	if (cm->msg_case == PD__CLIENT_MSG__MSG_HELLO) {
		w.version = PROF_API_VERSION;
		w.runtime_socket = "";
		w.uid = (uint32_t)getuid();
		dm.msg_case = PD__DAEMON_MSG__MSG_WELCOME;
		dm.welcome = &w;
	} else if (cm->msg_case == PD__CLIENT_MSG__MSG_REQUEST) {
		rep.token = cm->request->token;
		if (in_flight[fd]) {
			rep.error = PROF_E_PROFILING_IN_PROGRESS;
			rep.message = "admission_floor: the last capture is still in flight";
		} else {
			rep.request_id = ++*next_id;
		}
		dm.msg_case = PD__DAEMON_MSG__MSG_REPLY;
		dm.reply = &rep;
	}
	/* Other messages (signals, budget queries) get no answer here. A
	 * client reads its reply before it sends again, so a full queue
	 * means a client that stopped reading: it is dropped. */
	if (dm.msg_case != PD__DAEMON_MSG__MSG__NOT_SET)
		r = wire_send_msg(fd, &dm.base, WIRE_CLIENT_MAX_MSG, -1);
	if (r >= 0 && dm.msg_case == PD__DAEMON_MSG__MSG_REPLY && !rep.error) {
		in_flight[fd] = true;
		if (nlater[cur] < FLOOR_MAX_LATER)
			later[cur][nlater[cur]++] = (struct later){ fd, rep.request_id,
								    cm->request->type };
		else
			r = send_result(fd, rep.request_id, cm->request->type);
	}
	pd__client_msg__free_unpacked(cm, NULL);
	return r < 0 ? -1 : 0;
}

/* fd is closing: nothing more is owed to it (its number may come back). */
static void forget(int fd)
{
	in_flight[fd] = false;
	for (unsigned t = 0; t < 2; t++)
		for (unsigned i = 0; i < nlater[t]; i++)
			if (later[t][i].fd == fd)
				later[t][i].fd = -1;
}

/* End of a turn: the previous turn's results go; this turn's wait a turn.
 * A send that fails is the client's to notice (its next read ends). */
static void end_turn(void)
{
	unsigned prev = cur ^ 1;
	for (unsigned i = 0; i < nlater[prev]; i++)
		if (later[prev][i].fd >= 0)
			(void)send_result(later[prev][i].fd, later[prev][i].request_id,
					  later[prev][i].type);
	nlater[prev] = 0;
	cur = prev;
}

int main(int argc, char **argv)
{
	static uint8_t buf[WIRE_CLIENT_MAX_MSG];
	struct epoll_event ev[64];
	uint64_t next_id = 0;

	if (argc != 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fprintf(stderr, "usage: admission_floor SOCKET\n"
				"  answers libprofiling's clients with profilingd's pattern of\n"
				"  replies, refusals and results, and none of its work: the floor\n"
				"  bench/admission.sh compares profilingd with\n");
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
		/* Results owed: the next turn comes at once, as profilingd's due
		 * timer makes its loop turn again without waiting. */
		int k = epoll_wait(ep, ev, 64, nlater[0] + nlater[1] ? 0 : FLOOR_TICK_MS);
		for (int i = 0; i < k; i++) {
			int fd = ev[i].data.fd;
			if (fd == ls) {
				int c;
				while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
					struct epoll_event cev = { .events = EPOLLIN, .data.fd = c };
					if (c >= FLOOR_MAX_FD ||
					    epoll_ctl(ep, EPOLL_CTL_ADD, c, &cev) < 0) {
						close(c);
						continue;
					}
				}
				continue;
			}
			ssize_t len;
			while ((len = wire_recv(fd, buf, sizeof(buf), NULL)) > 0)
				if (answer(fd, buf, (size_t)len, &next_id) < 0)
					break;
			if (len != -EAGAIN) { /* end of stream, an error, or a dropped client */
				forget(fd);
				close(fd);
			}
		}
		end_turn();
	}
	unlink(argv[1]);
	return 0;
}
