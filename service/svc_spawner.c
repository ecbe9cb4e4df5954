/*
 * The spawner's privileged side, kept apart so that it can be audited on
 * its own: everything here runs in the process "pd-spawner", forked by the
 * daemon during init (svc_spawn.c) before the daemon drops capabilities
 * and installs its seccomp filter. So this code runs as root, with no
 * seccomp filter (the helpers would inherit it) and with the bounding set
 * cut to what the helpers need (spawner_caps[] below), no dumps, and
 * PR_SET_PDEATHSIG: it dies with the daemon. Its only input is the
 * daemon's request socket, decoded here (svc_spawn_decode, fuzzed by
 * tests/fuzz/fuzz_spawn_msg.c); it never takes a path from it: a helper
 * is an index into the table it was forked with.
 *
 * Requests come over a SOCK_SEQPACKET socketpair (req): SPAWN carries the
 * index, argv and the helper's fds (SCM_RIGHTS) and is answered at once
 * with REPLY (pid or -errno); KILL ends a helper by request id (SIGKILL)
 * and gets no answer. Each helper's exit is reported on a second
 * socketpair (evt) as EXITED with its wait status. When the daemon goes
 * away (EOF) the spawner kills its helpers and exits.
 *
 * In a helper's child, before execve: its fds on 0, 1, 2 (and 3), default
 * signals, for the redactor (SVC_SPAWN_F_REDACT) rlimits, the redact user
 * with no groups and no_new_privs; an empty environment.
 *
 * The wire codec and packet I/O live here too, since the spawner is what
 * must survive a bad packet; the daemon's side uses the same functions.
 */
#include "svc_spawner.h"

#include <errno.h>
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
#include <sys/uio.h>
#include <sys/wait.h>
#include <sysexits.h>
#include <unistd.h>

#include "log.h"
#include "sandbox.h"

#define SPAWN_MAGIC 0x50445350u /* "PDSP" */

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
_Static_assert(sizeof(struct wire_hdr) == SVC_SPAWN_HDR_LEN, "the header is fixed");

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

/* Stray or truncated fds fail the packet (svc_spawner.h). */
ssize_t svc_spawner_recv(int sock, uint8_t *buf, size_t cap, int *fds, int maxfds, int *nfds,
			 int flags)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(SVC_SPAWN_FDS_MAX * sizeof(int))];
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

int svc_spawner_send(int sock, const uint8_t *buf, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(SVC_SPAWN_FDS_MAX * sizeof(int))];
	} u;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds < 0 || nfds > SVC_SPAWN_FDS_MAX)
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

int svc_spawner_send_short(int sock, uint32_t type, uint64_t id, int32_t value)
{
	struct svc_spawn_msg m = { .type = type, .id = id, .value = value };
	uint8_t buf[sizeof(struct wire_hdr)];
	size_t len;
	int r = svc_spawn_encode(&m, buf, sizeof(buf), &len);
	return r < 0 ? r : svc_spawner_send(sock, buf, len, NULL, 0);
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
			int r = svc_spawner_send_short(evt, SVC_SPAWN_EXITED, kids[i].id, status);
			kids[i] = kids[--nkids];
			if (r < 0)
				goto out; /* the daemon is gone */
		}
		if (!pfd[0].revents)
			continue;
		int fds[SVC_SPAWN_FDS_MAX], nfds = 0;
		ssize_t n = svc_spawner_recv(req, buf, sizeof(buf), fds, SVC_SPAWN_FDS_MAX, &nfds, 0);
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
		if (svc_spawner_send_short(req, SVC_SPAWN_REPLY, m.id, res) < 0)
			break;
	}
out:
	kill_all(kids, nkids);
	return 0;
}

void svc_spawner_main(int req, int evt, pid_t parent, const struct svc_spawn_setup *s)
{
	/* Nothing of the daemon's stays open here but stdio and the two
	 * sockets (moved to 3 and 4). */
	if (dup2(req, 3) < 0 || dup2(evt, 4) < 0)
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
