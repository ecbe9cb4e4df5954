/*
 * it_swarm: a malicious-client swarm against the real daemon (swarm.sh
 * starts it). As root, with the daemon's pid and sockets:
 *
 *   it_swarm PID CLIENT_SOCK RUNTIME_SOCK [PER_UID_CAP]
 *   it_swarm exhaust PID CLIENT_SOCK DAEMON_LOG
 *
 * SWARM_UIDS processes, each under a uid of its own (setresuid), open
 * SWARM_PER_UID client connections at once, 1,620 in all: 1,080 valid ones
 * held open together (hello, listener, a heap-profile request that is
 * answered, cancel, ack, signal, remove-trigger; or hello and idle) and 540
 * malicious ones: oversized packets, truncated packets, random bytes, fd
 * bombs (SCM_MAX_FD = 253 fds in one message, before and after the hello),
 * a request before the hello, and a second hello. Each also runs a
 * connect/disconnect storm and misbehaving runtimes on runtime.sock (hello
 * with the wrong pid, a message before the hello, oversize, an fd bomb).
 * Each checks that every bad connection is closed by the daemon and every
 * valid one is answered and kept.
 *
 * Then: a valid runtime and a second one for the same pid (closed); the
 * per-uid cap (connection max_clients_per_uid + 1 of one uid is closed at
 * once while another uid still connects); the daemon's fds return to
 * their count before the swarm; and its memory stays under the bounds
 * below (docs/FUZZING.md). "exhaust" is the out-of-fds phase (see there).
 * swarm.sh then has the daemon deliver a real capture.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profilingd.pb-c.h"
#include "util.h"
#include "wire.h"

#define SWARM_UIDS 27
#define SWARM_PER_UID 60          /* under the default max_clients_per_uid (64) */
#define SWARM_STORM 100           /* connect/disconnect cycles per uid process */
#define SWARM_UID_BASE 30000
#define CAP_UID_A 40000
#define CAP_UID_B 40001
#define SCM_MAX_FD 253            /* the kernel's limit of fds in one message */
#define WAIT_MS 20000             /* generous: the machine is shared and loaded */
#define ALARM_S 120               /* a daemon that stops answering fails the test, never hangs it */

/*
 * Memory bounds (documented in docs/ARCHITECTURE.md): the daemon's peak
 * RSS (VmHWM) over the whole swarm may exceed its RSS before it by at most
 * RSS_GROWTH_MB. Sanitizer builds keep freed memory in quarantine and add
 * shadow memory, so they get a larger bound.
 */
#define RSS_GROWTH_MB 32
#define RSS_GROWTH_MB_SANITIZE 256

static const char *client_path, *runtime_path;
static pid_t daemon_pid;

#define CHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "FAIL %s:%d: ", __func__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(1); } } while (0)

enum kind {
	K_VALID, K_VALID2, K_VALID3, K_IDLE, K_OVERSIZE, K_TRUNCATED, K_RANDOM, K_BOMB,
	K_BOMB_AFTER_HELLO, K_BEFORE_HELLO, K_HELLO_TWICE, NKINDS
};

/* Must the daemon close this kind of connection? (random bytes: it may decode.) */
static bool must_close(enum kind k)
{
	return k >= K_OVERSIZE && k != K_RANDOM;
}

/* A non-blocking connection; a full listen backlog is retried for wait_ms. */
static int sock_connect_wait(const char *path, int wait_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	uint64_t end = util_mono_ms() + (uint64_t)wait_ms;
	for (;;) {
		if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) == 0)
			return s;
		if (errno != EAGAIN || util_mono_ms() >= end)
			break;
		poll(NULL, 0, 10);
	}
	int r = -errno;
	close(s);
	return r;
}

static int sock_connect(const char *path)
{
	return sock_connect_wait(path, WAIT_MS);
}

static int send_client(int s, Pd__ClientMsg *m)
{
	return wire_send_msg(s, &m->base, WIRE_CLIENT_MAX_MSG, -1);
}

static int send_hello(int s)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__ClientHello h = PD__CLIENT_HELLO__INIT;
	h.version = 1;
	h.app_name = "swarm";
	m.msg_case = PD__CLIENT_MSG__MSG_HELLO;
	m.hello = &h;
	return send_client(s, &m);
}

/* A heap profile: without a runtime (runtime_wait_ms = 0) it fails at once. */
static void pack_request(Pd__ClientMsg *m, Pd__Request *rq, uint64_t token)
{
	pd__client_msg__init(m);
	pd__request__init(rq);
	rq->token = token;
	rq->type = 2; /* PROF_HEAP_PROFILE */
	rq->tag = "swarm";
	m->msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m->request = rq;
}

/* The rest of a valid app's conversation. */
static int send_valid_rest(int s, uint64_t token)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__SetListener sl = PD__SET_LISTENER__INIT;
	Pd__Cancel c = PD__CANCEL__INIT;
	Pd__Ack a = PD__ACK__INIT;
	Pd__AppSignal sg = PD__APP_SIGNAL__INIT;
	Pd__RemoveTrigger rt = PD__REMOVE_TRIGGER__INIT;
	Pd__Request rq;
	int r;

	m.msg_case = PD__CLIENT_MSG__MSG_SET_LISTENER;
	sl.has_enable = 1;
	sl.enable = 1;
	m.set_listener = &sl;
	if ((r = send_client(s, &m)) < 0)
		return r;
	pack_request(&m, &rq, token);
	if ((r = send_client(s, &m)) < 0)
		return r;
	pd__client_msg__init(&m);
	m.msg_case = PD__CLIENT_MSG__MSG_CANCEL;
	c.request_id = 987654321;
	m.cancel = &c;
	if ((r = send_client(s, &m)) < 0)
		return r;
	m.msg_case = PD__CLIENT_MSG__MSG_ACK;
	a.result_id = 123456789;
	m.ack = &a;
	if ((r = send_client(s, &m)) < 0)
		return r;
	m.msg_case = PD__CLIENT_MSG__MSG_SIGNAL;
	sg.kind = 3; /* heartbeat */
	m.signal = &sg;
	if ((r = send_client(s, &m)) < 0)
		return r;
	m.msg_case = PD__CLIENT_MSG__MSG_REMOVE_TRIGGER;
	rt.token = token + 1;
	m.remove_trigger = &rt;
	return send_client(s, &m);
}

/* Send buf with n fds (all copies of fd) attached. */
static int send_fds(int s, const void *buf, size_t len, int fd, int n)
{
	union {
		char b[CMSG_SPACE(SCM_MAX_FD * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
			     .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
	memset(&ctl, 0, sizeof(ctl));
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
	for (int i = 0; i < n; i++)
		memcpy(CMSG_DATA(c) + i * sizeof(int), &fd, sizeof(int));
	return sendmsg(s, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

static uint64_t rnd_state;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)(rnd_state >> 16);
}

struct peer {
	int s;
	enum kind kind;
	bool closed, welcomed, replied;
	uint64_t token;
};

/* Read what the daemon sent; note closure, the Welcome and our RequestReply. */
static void drain(struct peer *p)
{
	uint8_t buf[WIRE_CLIENT_MAX_MSG];
	for (;;) {
		ssize_t n = recv(p->s, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			p->closed = true;
			return;
		}
		if (n < 0)
			return;
		Pd__DaemonMsg *d = pd__daemon_msg__unpack(NULL, (size_t)n, buf);
		if (!d)
			continue;
		if (d->msg_case == PD__DAEMON_MSG__MSG_WELCOME)
			p->welcomed = true;
		if (d->msg_case == PD__DAEMON_MSG__MSG_REPLY && d->reply->token == p->token)
			p->replied = true;
		pd__daemon_msg__free_unpacked(d, NULL);
	}
}

/* Open and play one connection of kind k; returns the socket or -errno. */
static int play(struct peer *p, enum kind k, int bombfd, uint64_t token)
{
	uint8_t big[WIRE_CLIENT_MAX_MSG * 2];
	Pd__ClientMsg m;
	Pd__Request rq;
	int r = 0;

	memset(p, 0, sizeof(*p));
	p->kind = k;
	p->token = token;
	p->s = sock_connect(client_path);
	if (p->s < 0)
		return p->s;
	switch (k) {
	case K_VALID:
	case K_VALID2:
	case K_VALID3:
		if ((r = send_hello(p->s)) == 0)
			r = send_valid_rest(p->s, token);
		break;
	case K_IDLE:
		r = send_hello(p->s);
		break;
	case K_OVERSIZE:
		memset(big, 0x0a, sizeof(big));
		r = send(p->s, big, WIRE_CLIENT_MAX_MSG + 1 + rnd() % WIRE_CLIENT_MAX_MSG,
			 MSG_NOSIGNAL) < 0 ? -errno : 0;
		break;
	case K_TRUNCATED: {
		/* A hello, then half of a request: the length prefix of its tag runs past the end. */
		uint8_t pk[256];
		pack_request(&m, &rq, token);
		rq.tag = "a-tag-long-enough-to-cut";
		size_t n = pd__client_msg__pack(&m, pk);
		if ((r = send_hello(p->s)) == 0)
			r = wire_send(p->s, pk, n - 8, -1);
		break;
	}
	case K_RANDOM: {
		size_t n = 1 + rnd() % 2000;
		for (size_t i = 0; i < n; i++)
			big[i] = (uint8_t)rnd();
		r = wire_send(p->s, big, n, -1);
		break;
	}
	case K_BOMB:
	case K_BOMB_AFTER_HELLO:
		if (k == K_BOMB_AFTER_HELLO)
			r = send_hello(p->s);
		if (r == 0) {
			pack_request(&m, &rq, token);
			size_t n = pd__client_msg__pack(&m, big);
			r = send_fds(p->s, big, n, bombfd, SCM_MAX_FD);
		}
		break;
	case K_BEFORE_HELLO:
		pack_request(&m, &rq, token);
		r = send_client(p->s, &m);
		break;
	case K_HELLO_TWICE:
		if ((r = send_hello(p->s)) == 0)
			r = send_hello(p->s);
		break;
	default:
		break;
	}
	/* The daemon may close a bad peer before all was sent: not an error. */
	if (r < 0 && r != -EPIPE && r != -ECONNRESET && r != -EAGAIN)
		return r;
	return p->s;
}

/* Misbehaving runtimes; each must be closed. Returns how many were not. */
static int bad_runtimes(int bombfd)
{
	uint8_t big[WIRE_RUNTIME_MAX_MSG + 100];
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	Pd__CaptureDone d = PD__CAPTURE_DONE__INIT;
	struct peer p[4] = { 0 };
	int open_left = 0;

	h.runtime = "native";
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	for (int i = 0; i < 4; i++) {
		p[i].s = sock_connect(runtime_path);
		CHECK(p[i].s >= 0, "runtime connect: %s", strerror(-p[i].s));
	}
	h.pid = (uint32_t)getpid() + 1; /* the wrong pid */
	wire_send_msg(p[0].s, &m.base, WIRE_RUNTIME_MAX_MSG, -1);
	m.msg_case = PD__RUNTIME_MSG__MSG_DONE; /* before the hello */
	m.done = &d;
	d.session_id = 1;
	wire_send_msg(p[1].s, &m.base, WIRE_RUNTIME_MAX_MSG, -1);
	memset(big, 0x12, sizeof(big));
	send(p[2].s, big, sizeof(big), MSG_NOSIGNAL);
	send_fds(p[3].s, "\x0a\x02\x08\x01", 4, bombfd, SCM_MAX_FD);
	uint64_t end = util_mono_ms() + WAIT_MS;
	for (int i = 0; i < 4; i++) {
		while (!p[i].closed && util_mono_ms() < end) {
			struct pollfd pf = { .fd = p[i].s, .events = POLLIN };
			if (poll(&pf, 1, 50) > 0)
				drain(&p[i]);
		}
		open_left += !p[i].closed;
		close(p[i].s);
	}
	return open_left;
}

/* One uid's share of the swarm. Exit status 0 when every check held. */
static int swarm_child(int idx, int go_fd, int ready_fd, int release_fd)
{
	uid_t uid = SWARM_UID_BASE + (uid_t)idx;
	struct peer p[SWARM_PER_UID];
	int pipefd[2], failures = 0;
	char c;

	alarm(ALARM_S);
	rnd_state = 0x9e3779b97f4a7c15ull ^ (uint64_t)(idx + 1) * 0x100000001b3ull;
	/* The fd to bomb with, before the privileges go. */
	CHECK(pipe2(pipefd, O_CLOEXEC) == 0, "pipe");
	CHECK(setgroups(0, NULL) == 0 && setresgid(uid, uid, uid) == 0 &&
	      setresuid(uid, uid, uid) == 0, "drop to uid %u: %s", (unsigned)uid, strerror(errno));
	/* All start together: the parent closes go_fd's other end. */
	CHECK(read(go_fd, &c, 1) == 0, "start signal");

	/* Two in three valid (4 kinds), one in three malicious (the 7 other kinds). */
	for (int i = 0, nv = 0, nb = 0; i < SWARM_PER_UID; i++) {
		enum kind k = i % 3 == 2 ? (enum kind)(K_OVERSIZE + nb++ % (NKINDS - K_OVERSIZE))
			    : (enum kind)(nv++ % (K_IDLE + 1));
		int r = play(&p[i], k, pipefd[0], ((uint64_t)idx << 32) | (uint64_t)(i + 1));
		CHECK(r >= 0, "uid %u connection %d (kind %d): %s", (unsigned)uid, i, k,
		      strerror(-r));
	}
	/* Connect/disconnect storm: half say hello first, none waits. */
	for (int i = 0; i < SWARM_STORM; i++) {
		int s = sock_connect(client_path);
		CHECK(s >= 0, "storm connect %d: %s", i, strerror(-s));
		if (i & 1)
			send_hello(s);
		close(s);
	}
	failures += bad_runtimes(pipefd[0]);
	if (failures)
		fprintf(stderr, "uid %u: %d bad runtimes were not closed\n", (unsigned)uid, failures);

	/* Every bad connection closed, every valid one answered and kept. */
	uint64_t end = util_mono_ms() + WAIT_MS;
	for (;;) {
		struct pollfd pf[SWARM_PER_UID];
		int pending = 0;
		for (int i = 0; i < SWARM_PER_UID; i++) {
			pf[i].fd = p[i].s;
			pf[i].events = POLLIN;
			bool done = p[i].closed ||
				    (p[i].kind <= K_VALID3 && p[i].replied) ||
				    (p[i].kind == K_IDLE && p[i].welcomed) ||
				    p[i].kind == K_RANDOM;
			pending += !done;
		}
		if (!pending || util_mono_ms() >= end)
			break;
		if (poll(pf, SWARM_PER_UID, 100) > 0)
			for (int i = 0; i < SWARM_PER_UID; i++)
				if (pf[i].revents)
					drain(&p[i]);
	}
	/* Hold the valid connections until every uid has its own up. */
	CHECK(write(ready_fd, "r", 1) == 1, "ready");
	CHECK(read(release_fd, &c, 1) == 0, "release");
	int closed = 0, answered = 0;
	for (int i = 0; i < SWARM_PER_UID; i++) {
		drain(&p[i]);
		enum kind k = p[i].kind;
		if (must_close(k) && !p[i].closed) {
			fprintf(stderr, "uid %u: connection %d (kind %d) was not closed\n",
				(unsigned)uid, i, k);
			failures++;
		}
		if (k <= K_IDLE) {
			bool ok = !p[i].closed && p[i].welcomed && (k == K_IDLE || p[i].replied);
			if (!ok) {
				fprintf(stderr, "uid %u: valid connection %d (kind %d): closed %d "
					"welcome %d reply %d\n", (unsigned)uid, i, k, p[i].closed,
					p[i].welcomed, p[i].replied);
				failures++;
			}
			answered += ok;
		}
		closed += p[i].closed;
		close(p[i].s);
	}
	printf("uid %u: %d connections (%d closed by the daemon, %d valid answered), "
	       "%d storm cycles, 4 bad runtimes\n", (unsigned)uid, SWARM_PER_UID, closed, answered,
	       SWARM_STORM);
	fflush(stdout);
	return failures ? 1 : 0;
}

static int count_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	int n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* A "VmRSS:"-style field of /proc/<pid>/status, in KiB, or -1. */
static long status_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	long v = -1;
	size_t n = strlen(field);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static bool daemon_alive(void)
{
	return kill(daemon_pid, 0) == 0;
}

/* True when the daemon closes s within ms (nothing else arrives on it). */
static bool closed_within(int s, int ms)
{
	struct peer p = { .s = s };
	uint64_t end = util_mono_ms() + (uint64_t)ms;
	while (!p.closed && util_mono_ms() < end) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 50) > 0)
			drain(&p);
	}
	return p.closed;
}

static bool welcomed_within(int s, int ms)
{
	struct peer p = { .s = s };
	uint64_t end = util_mono_ms() + (uint64_t)ms;
	while (!p.welcomed && !p.closed && util_mono_ms() < end) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		if (poll(&pf, 1, 50) > 0)
			drain(&p);
	}
	return p.welcomed && !p.closed;
}

/*
 * Connections "as" another uid. The daemon binds a connection to its
 * process and that process's ids, and refuses one whose process no longer
 * has the ids it connected with: a root process that connects under
 * seteuid() and switches back is such a process. So each uid gets a helper
 * child that is that uid (all of its ids), connects on request and passes
 * the socket back; it lives until this program ends.
 */
struct uid_helper {
	uid_t uid;
	int ctl;
};
static struct uid_helper helpers[16];
static int nhelpers;

static void helper_serve(int ctl)
{
	int32_t wait_ms;
	while (read(ctl, &wait_ms, sizeof(wait_ms)) == sizeof(wait_ms)) {
		int s = sock_connect_wait(client_path, wait_ms);
		int32_t r = s < 0 ? s : 0;
		if (wire_send(ctl, &r, sizeof(r), s) < 0)
			_exit(1);
		if (s >= 0)
			close(s);
	}
	_exit(0);
}

static struct uid_helper *helper_for(uid_t uid)
{
	int sp[2];
	for (int i = 0; i < nhelpers; i++)
		if (helpers[i].uid == uid)
			return &helpers[i];
	CHECK(nhelpers < (int)(sizeof(helpers) / sizeof(helpers[0])), "too many helper uids");
	CHECK(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) == 0, "socketpair");
	pid_t pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0) {
		/* None of the parent's connections may stay open in here. */
		if (dup2(sp[1], 3) < 0 || close_range(4, ~0u, 0) < 0)
			_exit(1);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(1);
		helper_serve(3);
	}
	close(sp[1]);
	helpers[nhelpers] = (struct uid_helper){ uid, sp[0] };
	return &helpers[nhelpers++];
}

/* A connection to client.sock made by a process of uid (its every id): the
 * socket, or -errno of connect (-EAGAIN: the backlog stayed full for wait_ms). */
static int connect_via(uid_t uid, int wait_ms)
{
	struct uid_helper *h = helper_for(uid);
	int32_t w = wait_ms, r = -EIO;
	int fd = -1;
	struct pollfd pf = { .fd = h->ctl, .events = POLLIN };
	CHECK(write(h->ctl, &w, sizeof(w)) == sizeof(w), "helper of uid %u", (unsigned)uid);
	CHECK(poll(&pf, 1, wait_ms + WAIT_MS) == 1 && wire_recv(h->ctl, &r, sizeof(r), &fd) ==
	      (ssize_t)sizeof(r), "no answer from the helper of uid %u", (unsigned)uid);
	if (r < 0 && fd >= 0)
		close(fd);
	return r < 0 ? r : fd;
}

/* Connect with euid as the peer's identity (SO_PEERCRED takes the euid). */
static int connect_as(uid_t euid)
{
	int s = connect_via(euid, WAIT_MS);
	CHECK(s >= 0, "connect as %u: %s", (unsigned)euid, strerror(-s));
	return s;
}

static void test_uid_cap(int cap)
{
	int *held = calloc((size_t)cap, sizeof(int));
	CHECK(held, "calloc");
	for (int i = 0; i < cap; i++) {
		held[i] = connect_as(CAP_UID_A);
		CHECK(send_hello(held[i]) == 0, "hello %d", i);
		CHECK(welcomed_within(held[i], WAIT_MS), "connection %d of %d of uid %u refused",
		      i + 1, cap, CAP_UID_A);
	}
	int extra = connect_as(CAP_UID_A);
	CHECK(closed_within(extra, 5000), "connection %d of uid %u was not closed at once",
	      cap + 1, CAP_UID_A);
	close(extra);
	int other = connect_as(CAP_UID_B);
	CHECK(send_hello(other) == 0, "hello");
	CHECK(welcomed_within(other, WAIT_MS), "uid %u could not connect while uid %u was at its cap",
	      CAP_UID_B, CAP_UID_A);
	close(other);
	for (int i = 0; i < cap; i++)
		close(held[i]);
	free(held);
	printf("per-uid cap: %d connections of uid %u served, number %d closed at once, "
	       "uid %u still served\n", cap, CAP_UID_A, cap + 1, CAP_UID_B);
}

/* A real runtime hello for our pid, then a second one for the same pid. */
static void test_runtime_dup(void)
{
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	h.pid = (uint32_t)getpid();
	h.runtime = "native";
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	int a = sock_connect(runtime_path), b = sock_connect(runtime_path);
	CHECK(a >= 0 && b >= 0, "runtime connect");
	CHECK(wire_send_msg(a, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "hello");
	struct pollfd pf = { .fd = a, .events = POLLIN };
	CHECK(poll(&pf, 1, WAIT_MS) == 1, "no HelloAck");
	uint8_t buf[WIRE_RUNTIME_MAX_MSG];
	ssize_t n = recv(a, buf, sizeof(buf), 0);
	Pd__DaemonToRuntime *d = n > 0 ? pd__daemon_to_runtime__unpack(NULL, (size_t)n, buf) : NULL;
	CHECK(d && d->msg_case == PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK, "no HelloAck");
	pd__daemon_to_runtime__free_unpacked(d, NULL);
	CHECK(wire_send_msg(b, &m.base, WIRE_RUNTIME_MAX_MSG, -1) == 0, "hello");
	CHECK(closed_within(b, WAIT_MS), "a second runtime for pid %d was not closed", (int)getpid());
	close(b);
	close(a);
}

/*
 * it_swarm exhaust PID CLIENT_SOCK LOG: the daemon's fd limit was lowered
 * under its caps (prlimit). EXHAUST_CONNS clients of EXHAUST_UIDS uids say
 * hello: it serves what its fds allow, pauses accept instead of spinning
 * (a bounded number of "pausing" log lines), and once they leave it serves
 * a new client.
 */
#define EXHAUST_UIDS 10
#define EXHAUST_CONNS 400
#define EXHAUST_HOLD_MS 2000

static int count_lines(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	char line[1024];
	int n = 0;
	while (f && fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	if (f)
		fclose(f);
	return n;
}

static int exhaust(const char *log)
{
	static struct peer p[EXHAUST_CONNS];
	int opened = 0, refused = 0, welcomed = 0;
	int pauses_before = count_lines(log, "pausing it for");
	/* Pauses are counted from here: the connects (each made by a helper of
	 * its uid, a round trip on a loaded machine) take time too. */
	uint64_t t_begin = util_mono_ms();

	bool full = false;
	for (int i = 0; i < EXHAUST_CONNS; i++) {
		/*
		 * A full backlog: give a slow daemon a second to catch up; once it
		 * stays full (the daemon is out of fds), do not wait any more.
		 */
		p[i].s = connect_via(CAP_UID_B + 1 + (uid_t)(i % EXHAUST_UIDS), full ? 0 : 1000);
		full = full || p[i].s == -EAGAIN;
		if (p[i].s < 0) {
			CHECK(p[i].s == -EAGAIN, "connect: %s", strerror(-p[i].s));
			refused++;
			continue;
		}
		opened++;
		send_hello(p[i].s);
	}
	uint64_t t0 = util_mono_ms();
	while (util_mono_ms() - t0 < EXHAUST_HOLD_MS) {
		poll(NULL, 0, 50);
		for (int i = 0; i < EXHAUST_CONNS; i++)
			if (p[i].s >= 0)
				drain(&p[i]);
	}
	for (int i = 0; i < EXHAUST_CONNS; i++)
		welcomed += p[i].s >= 0 && p[i].welcomed;
	uint64_t held_ms = util_mono_ms() - t0;
	int pauses = count_lines(log, "pausing it for") - pauses_before;
	printf("out of fds: %d connected (%d served, the rest in the backlog), %d refused by a "
	       "full backlog; %d accept pauses in %llu ms; daemon %d fds\n", opened, welcomed,
	       refused, pauses, (unsigned long long)held_ms, count_fds(daemon_pid));
	CHECK(daemon_alive(), "the daemon died out of fds");
	CHECK(welcomed > 0 && welcomed < opened, "expected the fd limit to stop the daemon short "
	      "of %d clients (served %d)", opened, welcomed);
	CHECK(pauses >= 1, "the daemon never paused accept");
	/* One pause per 100 ms; a spinning accept loop would log thousands a second. */
	uint64_t run_ms = util_mono_ms() - t_begin;
	CHECK(pauses <= (int)(run_ms / 50) + 100, "%d accept pauses in %llu ms: spinning", pauses,
	      (unsigned long long)run_ms);
	for (int i = 0; i < EXHAUST_CONNS; i++)
		if (p[i].s >= 0)
			close(p[i].s);
	int s = connect_as(CAP_UID_A);
	CHECK(send_hello(s) == 0, "hello");
	CHECK(welcomed_within(s, WAIT_MS), "no Welcome once the clients left");
	close(s);
	printf("PASS: out of fds, the daemon paused accept and served again once fds were free\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 5 && !strcmp(argv[1], "exhaust")) {
		daemon_pid = (pid_t)atoi(argv[2]);
		client_path = argv[3];
		signal(SIGPIPE, SIG_IGN);
		setvbuf(stdout, NULL, _IOLBF, 0);
		alarm(ALARM_S);
		return exhaust(argv[4]);
	}
	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: it_swarm DAEMON_PID CLIENT_SOCK RUNTIME_SOCK [PER_UID_CAP]\n");
		return 2;
	}
	daemon_pid = (pid_t)atoi(argv[1]);
	client_path = argv[2];
	runtime_path = argv[3];
	int cap = argc == 5 ? atoi(argv[4]) : 64;
	bool sanitize = getenv("PD_SANITIZE") != NULL;
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(ALARM_S + 30);

	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	CHECK(daemon_alive(), "daemon %d is not running", (int)daemon_pid);
	int fds_before = count_fds(daemon_pid);
	long rss_before = status_kb(daemon_pid, "VmRSS");
	CHECK(fds_before > 0 && rss_before > 0, "cannot read /proc/%d", (int)daemon_pid);
	printf("daemon before: %d fds, VmRSS %ld KiB\n", fds_before, rss_before);

	int go[2], ready[2], release[2];
	CHECK(pipe2(go, O_CLOEXEC) == 0 && pipe2(ready, O_CLOEXEC) == 0 &&
	      pipe2(release, O_CLOEXEC) == 0, "pipe");
	pid_t kids[SWARM_UIDS];
	uint64_t t0 = util_mono_ms();
	for (int i = 0; i < SWARM_UIDS; i++) {
		kids[i] = fork();
		CHECK(kids[i] >= 0, "fork");
		if (kids[i] == 0) {
			close(go[1]);
			close(ready[0]);
			close(release[1]);
			_exit(swarm_child(i, go[0], ready[1], release[0]));
		}
	}
	close(go[0]);
	close(ready[1]);
	close(release[0]);
	close(go[1]); /* go */
	/* All uids hold their valid connections: count the daemon's fds then. */
	int nready = 0;
	char c;
	while (nready < SWARM_UIDS && read(ready[0], &c, 1) == 1)
		nready++;
	int fds_peak = count_fds(daemon_pid);
	printf("swarm holding: %d of %d uids checked, daemon has %d fds\n", nready, SWARM_UIDS,
	       fds_peak);
	close(release[1]);
	int failed = 0;
	for (int i = 0; i < SWARM_UIDS; i++) {
		int st;
		CHECK(waitpid(kids[i], &st, 0) == kids[i], "waitpid");
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			failed++;
	}
	printf("swarm: %d uids x %d connections + %d storm cycles + 4 bad runtimes each, "
	       "%llu ms\n", SWARM_UIDS, SWARM_PER_UID, SWARM_STORM,
	       (unsigned long long)(util_mono_ms() - t0));
	CHECK(daemon_alive(), "the daemon died during the swarm");
	CHECK(failed == 0, "%d of %d swarm processes saw a check fail", failed, SWARM_UIDS);
	/* Two in three connections are valid and were all open at once. */
	CHECK(fds_peak >= fds_before + SWARM_UIDS * SWARM_PER_UID * 2 / 3,
	      "only %d daemon fds while %d valid clients were connected", fds_peak,
	      SWARM_UIDS * SWARM_PER_UID * 2 / 3);

	test_runtime_dup();
	test_uid_cap(cap);
	CHECK(daemon_alive(), "the daemon died");

	/* Every connection is gone: the fds must come back to where they were. */
	int fds_after = -1;
	uint64_t end = util_mono_ms() + WAIT_MS;
	while (util_mono_ms() < end && (fds_after = count_fds(daemon_pid)) > fds_before)
		poll(NULL, 0, 100);
	if (fds_after > fds_before) {
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "ls -l /proc/%d/fd >&2", (int)daemon_pid);
		(void)!system(cmd);
	}
	CHECK(fds_after <= fds_before, "fd leak: %d fds before the swarm, %d after", fds_before,
	      fds_after);
	long hwm = status_kb(daemon_pid, "VmHWM"), rss = status_kb(daemon_pid, "VmRSS");
	long bound = (long)(sanitize ? RSS_GROWTH_MB_SANITIZE : RSS_GROWTH_MB) * 1024;
	printf("daemon after: %d fds, VmRSS %ld KiB, VmHWM %ld KiB (peak growth %ld KiB, "
	       "bound %ld KiB)\n", fds_after, rss, hwm, hwm - rss_before, bound);
	CHECK(hwm - rss_before <= bound, "peak RSS grew by %ld KiB, over the %ld KiB bound",
	      hwm - rss_before, bound);
	printf("PASS: swarm survived\n");
	return 0;
}
