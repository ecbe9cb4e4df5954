/*
 * The spawner: a small privileged process that starts the daemon's helpers
 * (OpenSSH privsep style). The daemon forks it during init, before its own
 * seccomp filter goes on and before it drops capabilities: a filter is
 * inherited across fork and execve, and the helpers need what the daemon
 * must not have (perf_event_open, tracefs writes, setresuid, exec itself).
 *
 * The spawner holds the fixed helper table it was forked with; the daemon
 * names a helper by index, never by path. Requests come over a
 * SOCK_SEQPACKET socketpair (req): SPAWN carries the index, argv and the
 * helper's fds (SCM_RIGHTS) and is answered at once with REPLY (pid or
 * -errno); KILL ends a helper by request id (SIGKILL) and gets no answer.
 * Each helper's exit is reported on a second socketpair (evt) as EXITED
 * with its wait status, read by the daemon's event loop. The spawner has
 * no other input; when the daemon goes away (EOF) it kills its helpers
 * and exits. It has no seccomp filter of its own because the helpers
 * would inherit it; its capabilities are those the helpers need.
 */
#include "svc.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"

#define SPAWN_MAGIC 0x50445350u /* "PDSP" */
#define REPLY_WAIT_MS 10000

/* The fixed part of every message; SPAWN is followed by argc strings. */
struct wire_hdr {
	uint32_t magic;
	uint16_t type;
	uint16_t argc;
	uint64_t id;
	uint32_t helper;
	uint32_t flags;
	int32_t value;
	uint32_t reserved;
};

int svc_spawn_encode(const struct svc_spawn_msg *m, uint8_t *buf, size_t cap, size_t *len)
{
	struct wire_hdr h = { .magic = SPAWN_MAGIC, .type = (uint16_t)m->type, .id = m->id,
			      .helper = m->helper, .flags = m->flags, .value = m->value };
	size_t pos = sizeof(h);

	if (m->argc > SVC_SPAWN_ARGS_MAX || cap < pos)
		return -E2BIG;
	h.argc = (uint16_t)m->argc;
	for (uint32_t i = 0; i < m->argc; i++) {
		size_t l = strlen(m->argv[i]);
		if (l > SVC_SPAWN_ARG_LEN_MAX || cap - pos < l + 1)
			return -E2BIG;
		memcpy(buf + pos, m->argv[i], l + 1);
		pos += l + 1;
	}
	memcpy(buf, &h, sizeof(h));
	*len = pos;
	return 0;
}

int svc_spawn_decode(const uint8_t *buf, size_t len, struct svc_spawn_msg *m)
{
	struct wire_hdr h;

	if (len < sizeof(h) || len > SVC_SPAWN_MSG_MAX)
		return -EBADMSG;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != SPAWN_MAGIC || h.reserved)
		return -EBADMSG;
	memset(m, 0, sizeof(*m));
	m->type = h.type;
	m->id = h.id;
	m->helper = h.helper;
	m->flags = h.flags;
	m->value = h.value;
	switch (h.type) {
	case SVC_SPAWN_REQ:
		if (h.argc < 1 || h.argc > SVC_SPAWN_ARGS_MAX ||
		    (h.flags & ~(SVC_SPAWN_F_REDACT | SVC_SPAWN_F_STDIN | SVC_SPAWN_F_FD3)) ||
		    h.value)
			return -EBADMSG;
		break;
	case SVC_SPAWN_KILL:
	case SVC_SPAWN_REPLY:
	case SVC_SPAWN_EXITED:
		/* Fixed size, no strings. */
		return h.argc || h.flags || h.helper || len != sizeof(h) ? -EBADMSG : 0;
	default:
		return -EBADMSG;
	}
	/* Exactly argc NUL-terminated strings, filling the packet. */
	size_t pos = sizeof(h);
	for (uint32_t i = 0; i < h.argc; i++) {
		const uint8_t *nul = memchr(buf + pos, 0, len - pos);
		if (!nul || (size_t)(nul - (buf + pos)) > SVC_SPAWN_ARG_LEN_MAX)
			return -EBADMSG;
		m->argv[i] = (const char *)buf + pos;
		pos = (size_t)(nul - buf) + 1;
	}
	if (pos != len)
		return -EBADMSG;
	m->argc = h.argc;
	m->argv[m->argc] = NULL;
	return 0;
}

/* One packet and up to nfds fds. Stray or truncated fds fail it. */
static ssize_t recv_packet(int sock, uint8_t *buf, size_t cap, int *fds, int maxfds, int *nfds,
			   int flags)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { buf, cap };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b,
			     .msg_controllen = sizeof(u.b) };
	ssize_t n;
	int got = 0;
	bool bad = false;

	do {
		n = recvmsg(sock, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC | flags);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (got < maxfds)
				fds[got++] = fd;
			else {
				close(fd);
				bad = true;
			}
		}
	}
	if (bad || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) || (size_t)n > cap) {
		for (int i = 0; i < got; i++)
			close(fds[i]);
		*nfds = 0;
		return -EMSGSIZE;
	}
	*nfds = got;
	return n;
}

static int send_packet(int sock, const uint8_t *buf, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds > 4)
		return -EINVAL;
	if (nfds > 0) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	ssize_t n;
	do {
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EIO;
}

static int send_small(int sock, uint32_t type, uint64_t id, int32_t value)
{
	struct svc_spawn_msg m = { .type = type, .id = id, .value = value };
	uint8_t buf[sizeof(struct wire_hdr)];
	size_t len;
	int r = svc_spawn_encode(&m, buf, sizeof(buf), &len);
	return r < 0 ? r : send_packet(sock, buf, len, NULL, 0);
}

/* ------------------------------------------------------ the spawner side */

/*
 * What the helpers may get at execve (root's capabilities come from the
 * bounding set): perf_event_open of other users' processes (perfmon,
 * sys_admin, sys_ptrace, ipc_lock for its ring buffers), tracefs
 * (dac_override, sys_admin), the JVM attach helper (setuid, setgid, kill,
 * sys_ptrace, dac_read_search for /proc/<pid>/root/tmp), the redactor's
 * user switch (setuid, setgid). Everything else leaves the bounding set.
 */
static const int spawner_caps[] = {
	CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_KILL,
	CAP_SETGID, CAP_SETUID, CAP_IPC_LOCK, CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_SYS_NICE,
	CAP_SYS_RESOURCE, CAP_PERFMON,
};

static void spawner_bound_caps(void)
{
	for (int c = 0; c <= 63; c++) {
		bool keep = c == CAP_SETPCAP; /* dropped last: dropping needs it */
		for (size_t i = 0; i < sizeof(spawner_caps) / sizeof(spawner_caps[0]); i++)
			keep = keep || spawner_caps[i] == c;
		if (!keep && prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0 && errno == EINVAL)
			break; /* past the kernel's last capability */
	}
	prctl(PR_CAPBSET_DROP, CAP_SETPCAP, 0, 0, 0);
}

static pid_t serve_pid; /* the spawner itself, parent of every helper */

struct child {
	uint64_t id;
	pid_t pid;
	int pidfd;
};

/* In the new child, before exec: only async-signal-safe calls. */
static void exec_helper(const struct svc_spawn_setup *s, const char *path, char *const argv[],
			const int *fds, uint32_t flags)
{
	int k = (flags & SVC_SPAWN_F_STDIN) ? 1 : 0;
	int in = k ? fds[0] : open("/dev/null", O_RDONLY | O_CLOEXEC);
	int out = fds[k], err = fds[k + 1];
	sigset_t none;

	/* The spawner ignores SIGINT/SIGTERM (the daemon's exit ends it). */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		_exit(EX_OSERR);
	/* Over the request socket's copy (close-on-exec: gone at exec when
	 * no fd 3 is given). Received fds are above 4, so nothing is lost. */
	if ((flags & SVC_SPAWN_F_FD3) && dup2(fds[k + 2], 3) < 0)
		_exit(EX_OSERR);
	if (flags & SVC_SPAWN_F_REDACT) {
		struct rlimit cpu = { s->redact_cpu_s, s->redact_cpu_s + 1 };
#ifndef PROFILINGD_SANITIZE_BUILD
		/* Sanitizer runtimes reserve terabytes of shadow: no address-space cap there. */
		struct rlimit as = { s->redact_as_bytes, s->redact_as_bytes };
		setrlimit(RLIMIT_AS, &as);
#endif
		setrlimit(RLIMIT_CPU, &cpu);
		if (s->drop_privs) {
			if (setgroups(0, NULL) < 0 || setresgid(s->gid, s->gid, s->gid) < 0 ||
			    setresuid(s->uid, s->uid, s->uid) < 0)
				_exit(EX_NOPERM);
		}
		/* The redactor sets no_new_privs too; doing it here covers exec. */
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	}
	/* A helper dies with the spawner, which dies with the daemon (even on
	 * SIGKILL). Set after the uid change, which clears it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
	if (getppid() != serve_pid)
		_exit(EX_IOERR);
	execve(path, argv, (char *[]){ NULL });
	/* Not EX_CANTCREAT: that is a helper's full disk (names.h). */
	_exit(EX_OSFILE);
}

static int32_t do_spawn(const struct svc_spawn_setup *s, const struct svc_spawn_msg *m,
			const int *fds, int nfds, struct child *kids, unsigned *nkids)
{
	int want = 2 + !!(m->flags & SVC_SPAWN_F_STDIN) + !!(m->flags & SVC_SPAWN_F_FD3);
	if (nfds != want)
		return -EBADF;
	if (m->helper >= s->nhelpers || !s->helpers[m->helper] || !s->helpers[m->helper][0])
		return -EPERM;
	if (*nkids >= SVC_SPAWN_CHILDREN_MAX)
		return -EAGAIN;
	for (unsigned i = 0; i < *nkids; i++)
		if (kids[i].id == m->id)
			return -EEXIST;
	pid_t pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		exec_helper(s, s->helpers[m->helper], (char *const *)m->argv, fds, m->flags);
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		int e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		return -e;
	}
	kids[*nkids] = (struct child){ m->id, pid, pidfd };
	(*nkids)++;
	return pid;
}

static void kill_all(struct child *kids, unsigned nkids)
{
	for (unsigned i = 0; i < nkids; i++) {
		kill(kids[i].pid, SIGKILL);
		waitpid(kids[i].pid, NULL, 0);
		close(kids[i].pidfd);
	}
}

int svc_spawner_serve(int req, int evt, const struct svc_spawn_setup *s)
{
	static struct child kids[SVC_SPAWN_CHILDREN_MAX];
	static struct pollfd pfd[SVC_SPAWN_CHILDREN_MAX + 1];
	static uint8_t buf[SVC_SPAWN_MSG_MAX];
	unsigned nkids = 0;

	serve_pid = getpid();
	for (;;) {
		pfd[0] = (struct pollfd){ .fd = req, .events = POLLIN };
		for (unsigned i = 0; i < nkids; i++)
			pfd[i + 1] = (struct pollfd){ .fd = kids[i].pidfd, .events = POLLIN };
		if (poll(pfd, nkids + 1, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		/* Exits first: they free slots, and their order is theirs. */
		for (unsigned i = nkids; i-- > 0;) {
			if (!pfd[i + 1].revents)
				continue;
			int status = 0;
			if (waitpid(kids[i].pid, &status, WNOHANG) != kids[i].pid)
				continue;
			close(kids[i].pidfd);
			int r = send_small(evt, SVC_SPAWN_EXITED, kids[i].id, status);
			kids[i] = kids[--nkids];
			if (r < 0)
				goto out; /* the daemon is gone */
		}
		if (!pfd[0].revents)
			continue;
		int fds[4], nfds = 0;
		ssize_t n = recv_packet(req, buf, sizeof(buf), fds, 4, &nfds, 0);
		if (n == 0 || (n < 0 && n != -EMSGSIZE))
			break; /* EOF: the daemon exited */
		struct svc_spawn_msg m;
		int32_t res;
		if (n < 0 || svc_spawn_decode(buf, (size_t)n, &m) < 0 ||
		    (m.type != SVC_SPAWN_REQ && m.type != SVC_SPAWN_KILL)) {
			LOG_W("spawner: malformed request refused");
			res = -EBADMSG;
			m.id = 0;
			m.type = SVC_SPAWN_REQ;
		} else if (m.type == SVC_SPAWN_KILL) {
			for (unsigned i = 0; i < nkids; i++)
				if (kids[i].id == m.id)
					kill(kids[i].pid, SIGKILL); /* its exit is reported */
			for (int i = 0; i < nfds; i++)
				close(fds[i]);
			continue;
		} else {
			res = do_spawn(s, &m, fds, nfds, kids, &nkids);
			if (res < 0)
				LOG_W("spawner: request %llu (helper %u) refused: %s",
				      (unsigned long long)m.id, m.helper, strerror(-res));
		}
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		if (send_small(req, SVC_SPAWN_REPLY, m.id, res) < 0)
			break;
	}
out:
	kill_all(kids, nkids);
	return 0;
}

/* ------------------------------------------------------- the daemon side */

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
		uint8_t buf[sizeof(struct wire_hdr) + 1];
		int fds[1], nfds;
		ssize_t n = recv_packet(fd, buf, sizeof(buf), fds, 0, &nfds, MSG_DONTWAIT);
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
	if (pid == 0) {
		/* Nothing of the daemon's stays open here but stdio and the two
		 * sockets (moved to 3 and 4). */
		if (dup2(rq[1], 3) < 0 || dup2(ev[1], 4) < 0)
			_exit(EX_SOFTWARE);
		fcntl(3, F_SETFD, FD_CLOEXEC);
		fcntl(4, F_SETFD, FD_CLOEXEC);
		syscall(SYS_close_range, 5, ~0u, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
		if (getppid() != parent)
			_exit(0);
		prctl(PR_SET_NAME, "pd-spawner", 0, 0, 0); /* comm: 15 chars max */
		/* It holds the helpers' fds and their privileges: no ptrace by a
		 * same-uid process, no core file (common/sandbox.h). */
		if (sbx_no_dump() < 0)
			_exit(EX_SOFTWARE);
		spawner_bound_caps(); /* best effort: not root, nothing to drop */
		signal(SIGINT, SIG_IGN);
		signal(SIGTERM, SIG_IGN);
		svc_spawner_serve(3, 4, s);
		_exit(0); /* no atexit handlers: they belong to the daemon */
	}
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

pid_t svc_spawn_pid(void)
{
	return spawner_pid;
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
	if ((r = send_packet(req_fd, buf, len, fds, nfds)) < 0) {
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
	uint8_t rb[sizeof(struct wire_hdr) + 1];
	int rfds[1], nr;
	ssize_t n = recv_packet(req_fd, rb, sizeof(rb), rfds, 0, &nr, 0);
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
	return send_small(req_fd, SVC_SPAWN_KILL, id, 0);
}
