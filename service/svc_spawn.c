/*
 * The spawner, the daemon's side (OpenSSH privsep style). The daemon forks
 * the spawner during init, before its own seccomp filter goes on and
 * before it drops capabilities: a filter is inherited across fork and
 * execve, and the helpers need what the daemon must not have
 * (perf_event_open, tracefs writes, setresuid, exec itself). What runs in
 * the spawner is svc_spawner.c; this file only forks it, sends it
 * requests, waits for each answer (it only forks, so the answer comes at
 * once) and reads its exit reports in the event loop.
 */
#include "svc_spawn.h"

#include <errno.h>
#include <event2/event.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

#define REPLY_WAIT_MS 10000

static int req_fd = -1, evt_fd = -1;
static pid_t spawner_pid = -1;
static struct event *ev_evt;
static svc_spawn_exit_fn exit_fn;
static bool lost;
static struct event_base *ev_base;

static void spawner_gone(const char *why)
{
	if (lost)
		return;
	lost = true;
	LOG_E("the spawner is gone (%s): no helper can start; stopping", why);
	if (ev_evt)
		event_del(ev_evt);
	event_base_loopexit(ev_base, NULL);
}

static void evt_cb(evutil_socket_t fd, short what, void *arg)
{
	for (;;) {
		uint8_t buf[SVC_SPAWN_HDR_LEN + 1];
		int fds[1], nfds;
		ssize_t n = svc_spawner_recv(fd, buf, sizeof(buf), fds, 0, &nfds, MSG_DONTWAIT);
		if (n == -EAGAIN || n == -EINTR)
			return;
		struct svc_spawn_msg m;
		if (n <= 0 || svc_spawn_decode(buf, (size_t)n, &m) < 0 || m.type != SVC_SPAWN_EXITED) {
			spawner_gone(n == 0 ? "closed its socket" : "bad event");
			return;
		}
		if (exit_fn)
			exit_fn(m.id, m.value);
	}
}

int svc_spawn_init(struct event_base *base, const struct svc_spawn_setup *s, svc_spawn_exit_fn fn)
{
	int rq[2], ev[2];

	ev_base = base;
	exit_fn = fn;
	lost = false;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rq) < 0)
		return -errno;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ev) < 0) {
		int e = errno;
		close(rq[0]);
		close(rq[1]);
		return -e;
	}
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		int e = errno;
		close(rq[0]);
		close(rq[1]);
		close(ev[0]);
		close(ev[1]);
		return -e;
	}
	if (pid == 0)
		svc_spawner_main(rq[1], ev[1], parent, s); /* never returns */
	close(rq[1]);
	close(ev[1]);
	req_fd = rq[0];
	evt_fd = ev[0];
	spawner_pid = pid;
	ev_evt = event_new(base, evt_fd, EV_READ | EV_PERSIST, evt_cb, NULL);
	if (!ev_evt || event_add(ev_evt, NULL) < 0) {
		svc_spawn_fini();
		return -ENOMEM;
	}
	LOG_I("spawner started (pid %d)", (int)pid);
	return 0;
}

void svc_spawn_fini(void)
{
	if (ev_evt)
		event_free(ev_evt);
	ev_evt = NULL;
	if (req_fd >= 0)
		close(req_fd);
	if (evt_fd >= 0)
		close(evt_fd);
	req_fd = evt_fd = -1;
	/* EOF on its socket ends the spawner; it reaps its own helpers. */
	if (spawner_pid > 0)
		waitpid(spawner_pid, NULL, 0);
	spawner_pid = -1;
}

bool svc_spawn_lost(void)
{
	return lost;
}

int svc_spawn_start(unsigned helper, char *const argv[], int in_fd, int out_fd, int err_fd,
		    int fd3, uint32_t flags, uint64_t id, pid_t *pid)
{
	static uint8_t buf[SVC_SPAWN_MSG_MAX];
	struct svc_spawn_msg m = { .type = SVC_SPAWN_REQ, .id = id, .helper = helper };
	int fds[4], nfds = 0, r;
	size_t len;

	if (lost || req_fd < 0)
		return -EPIPE;
	while (m.argc < SVC_SPAWN_ARGS_MAX && argv[m.argc]) {
		m.argv[m.argc] = argv[m.argc];
		m.argc++;
	}
	if (argv[m.argc])
		return -E2BIG;
	if (in_fd >= 0) {
		flags |= SVC_SPAWN_F_STDIN;
		fds[nfds++] = in_fd;
	}
	fds[nfds++] = out_fd;
	fds[nfds++] = err_fd;
	if (fd3 >= 0) {
		flags |= SVC_SPAWN_F_FD3;
		fds[nfds++] = fd3;
	}
	m.flags = flags;
	if ((r = svc_spawn_encode(&m, buf, sizeof(buf), &len)) < 0)
		return r;
	if ((r = svc_spawner_send(req_fd, buf, len, fds, nfds)) < 0) {
		spawner_gone("request not sent");
		return r;
	}
	/* The answer comes at once: the spawner only forks. */
	struct pollfd p = { .fd = req_fd, .events = POLLIN };
	do {
		r = poll(&p, 1, REPLY_WAIT_MS);
	} while (r < 0 && errno == EINTR);
	if (r <= 0) {
		spawner_gone("no answer");
		return -ETIMEDOUT;
	}
	uint8_t rb[SVC_SPAWN_HDR_LEN + 1];
	int rfds[1], nr;
	ssize_t n = svc_spawner_recv(req_fd, rb, sizeof(rb), rfds, 0, &nr, 0);
	if (n <= 0 || svc_spawn_decode(rb, (size_t)n, &m) < 0 || m.type != SVC_SPAWN_REPLY ||
	    m.id != id) {
		spawner_gone("bad answer");
		return -EPROTO;
	}
	if (m.value < 0)
		return m.value;
	if (pid)
		*pid = m.value;
	return 0;
}

int svc_spawn_kill(uint64_t id)
{
	if (lost || req_fd < 0)
		return -EPIPE;
	return svc_spawner_send_short(req_fd, SVC_SPAWN_KILL, id, 0);
}
