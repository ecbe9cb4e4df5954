/*
 * The spawner (service/svc_spawner.c): its message codec, and a real spawner
 * process on real socketpairs running real helpers (/bin/echo, /bin/sleep):
 * a helper outside the table, wrong fd counts, malformed packets and
 * duplicate ids are refused, exits and kills are reported, and the spawner
 * kills its helpers and exits when the daemon's end closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "svc_spawn.h"

static void test_codec_roundtrip(void **state)
{
	static uint8_t buf[SVC_SPAWN_MSG_MAX];
	struct svc_spawn_msg m = { .type = SVC_SPAWN_REQ, .id = 42, .helper = 1,
				   .flags = SVC_SPAWN_F_REDACT, .argc = 3,
				   .argv = { "profilingd-redact", "--pids", "", NULL } };
	struct svc_spawn_msg d;
	size_t len;
	assert_int_equal(svc_spawn_encode(&m, buf, sizeof(buf), &len), 0);
	assert_int_equal(svc_spawn_decode(buf, len, &d), 0);
	assert_int_equal(d.type, SVC_SPAWN_REQ);
	assert_int_equal(d.id, 42);
	assert_int_equal(d.helper, 1);
	assert_int_equal(d.flags, SVC_SPAWN_F_REDACT);
	assert_int_equal(d.argc, 3);
	assert_string_equal(d.argv[0], "profilingd-redact");
	assert_string_equal(d.argv[2], "");
	assert_null(d.argv[3]);
	/* Every strict prefix is malformed: the strings must fill the packet. */
	for (size_t cut = 0; cut < len; cut++)
		assert_int_equal(svc_spawn_decode(buf, cut, &d), -EBADMSG);
	/* A trailing byte after the last string. */
	buf[len] = 'x';
	assert_int_equal(svc_spawn_decode(buf, len + 1, &d), -EBADMSG);
}

static void test_codec_rejects(void **state)
{
	static uint8_t buf[SVC_SPAWN_MSG_MAX + 16];
	struct svc_spawn_msg m = { .type = SVC_SPAWN_REQ, .id = 1, .argc = 1, .argv = { "x" } };
	struct svc_spawn_msg d;
	size_t len;

	/* Unknown flag bits. */
	m.flags = 0x80;
	assert_int_equal(svc_spawn_encode(&m, buf, sizeof(buf), &len), 0);
	assert_int_equal(svc_spawn_decode(buf, len, &d), -EBADMSG);
	m.flags = 0;
	/* No argv[0]. */
	m.argc = 0;
	assert_int_equal(svc_spawn_encode(&m, buf, sizeof(buf), &len), 0);
	assert_int_equal(svc_spawn_decode(buf, len, &d), -EBADMSG);
	/* A KILL with a payload or a helper index. */
	struct svc_spawn_msg k = { .type = SVC_SPAWN_KILL, .id = 3 };
	assert_int_equal(svc_spawn_encode(&k, buf, sizeof(buf), &len), 0);
	assert_int_equal(svc_spawn_decode(buf, len, &d), 0);
	buf[len] = 0;
	assert_int_equal(svc_spawn_decode(buf, len + 1, &d), -EBADMSG);
	k.helper = 1;
	assert_int_equal(svc_spawn_encode(&k, buf, sizeof(buf), &len), 0);
	assert_int_equal(svc_spawn_decode(buf, len, &d), -EBADMSG);
	/* Unknown type, bad magic. */
	k = (struct svc_spawn_msg){ .type = 9, .id = 3 };
	assert_int_equal(svc_spawn_encode(&k, buf, sizeof(buf), &len), 0);
	assert_int_equal(svc_spawn_decode(buf, len, &d), -EBADMSG);
	k.type = SVC_SPAWN_EXITED;
	assert_int_equal(svc_spawn_encode(&k, buf, sizeof(buf), &len), 0);
	buf[0] ^= 1;
	assert_int_equal(svc_spawn_decode(buf, len, &d), -EBADMSG);
	/* Over the caps: too many arguments, one too long, a packet too big. */
	static const char *many[SVC_SPAWN_ARGS_MAX + 2];
	for (int i = 0; i < SVC_SPAWN_ARGS_MAX + 1; i++)
		many[i] = "a";
	struct svc_spawn_msg big = { .type = SVC_SPAWN_REQ, .argc = SVC_SPAWN_ARGS_MAX + 1 };
	memcpy(big.argv, many, sizeof(big.argv));
	assert_int_equal(svc_spawn_encode(&big, buf, sizeof(buf), &len), -E2BIG);
	static char longarg[SVC_SPAWN_ARG_LEN_MAX + 2];
	memset(longarg, 'a', sizeof(longarg) - 1);
	struct svc_spawn_msg lng = { .type = SVC_SPAWN_REQ, .argc = 1, .argv = { longarg } };
	assert_int_equal(svc_spawn_encode(&lng, buf, sizeof(buf), &len), -E2BIG);
	assert_int_equal(svc_spawn_decode(buf, SVC_SPAWN_MSG_MAX + 1, &d), -EBADMSG);
}

/* ------------------------------------------------------ a real spawner */

struct rig {
	int req, evt;
	pid_t pid;
};

static void rig_start(struct rig *r)
{
	int a[2], b[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, a), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, b), 0);
	/* Index 0 echo, 1 sleep, 2 absent (not installed). */
	struct svc_spawn_setup s = { .helpers = { "/bin/echo", "/bin/sleep", "" }, .nhelpers = 3 };
	r->pid = fork();
	assert_true(r->pid >= 0);
	if (r->pid == 0) {
		close(a[0]);
		close(b[0]);
		svc_spawner_serve(a[1], b[1], &s);
		_exit(0);
	}
	close(a[1]);
	close(b[1]);
	r->req = a[0];
	r->evt = b[0];
}

static void send_raw(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr align;
		char b[CMSG_SPACE(8 * sizeof(int))];
	} u;
	struct iovec iov = { (void *)buf, len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (nfds) {
		memset(&u, 0, sizeof(u));
		mh.msg_control = u.b;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, (size_t)nfds * sizeof(int));
	}
	assert_int_equal(sendmsg(sock, &mh, 0), (ssize_t)len);
}

static void send_req(struct rig *r, uint64_t id, uint32_t helper, const char *const *argv,
		     const int *fds, int nfds, uint32_t flags)
{
	static uint8_t buf[SVC_SPAWN_MSG_MAX];
	struct svc_spawn_msg m = { .type = SVC_SPAWN_REQ, .id = id, .helper = helper, .flags = flags };
	size_t len;
	while (argv[m.argc]) {
		m.argv[m.argc] = argv[m.argc];
		m.argc++;
	}
	assert_int_equal(svc_spawn_encode(&m, buf, sizeof(buf), &len), 0);
	send_raw(r->req, buf, len, fds, nfds);
}

/* The next packet on sock (generous timeout: a loaded machine), decoded. */
static void recv_msg(int sock, uint32_t type, struct svc_spawn_msg *m)
{
	uint8_t buf[256];
	struct pollfd p = { .fd = sock, .events = POLLIN };
	assert_int_equal(poll(&p, 1, 30000), 1);
	ssize_t n = recv(sock, buf, sizeof(buf), 0);
	assert_true(n > 0);
	assert_int_equal(svc_spawn_decode(buf, (size_t)n, m), 0);
	assert_int_equal(m->type, type);
}

static void test_spawner_runs_helpers(void **state)
{
	struct rig r;
	struct svc_spawn_msg m;
	int out[2], err[2];
	char text[64];

	rig_start(&r);
	assert_int_equal(pipe(out), 0);
	assert_int_equal(pipe(err), 0);
	int fds[2] = { out[1], err[1] };

	/* A listed helper runs with its argv and fds; its exit is reported. */
	send_req(&r, 7, 0, (const char *[]){ "echo", "hello", "spawner", NULL }, fds, 2, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.id, 7);
	assert_true(m.value > 0);
	close(out[1]);
	close(err[1]);
	ssize_t n = read(out[0], text, sizeof(text) - 1);
	assert_true(n > 0);
	text[n] = '\0';
	assert_string_equal(text, "hello spawner\n");
	recv_msg(r.evt, SVC_SPAWN_EXITED, &m);
	assert_int_equal(m.id, 7);
	assert_true(WIFEXITED(m.value));
	assert_int_equal(WEXITSTATUS(m.value), 0);
	close(out[0]);
	close(err[0]);

	int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
	int two[2] = { null_fd, null_fd };
	/* Not in the table, or listed as not installed: refused. */
	send_req(&r, 8, 5, (const char *[]){ "sh", NULL }, two, 2, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.value, -EPERM);
	send_req(&r, 9, 2, (const char *[]){ "x", NULL }, two, 2, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.value, -EPERM);
	/* Wrong fd count: F_STDIN promises three. */
	send_req(&r, 10, 0, (const char *[]){ "echo", NULL }, two, 2, SVC_SPAWN_F_STDIN);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.value, -EBADF);
	/* Too many fds are closed and the request refused. */
	int five[5] = { null_fd, null_fd, null_fd, null_fd, null_fd };
	send_req(&r, 11, 0, (const char *[]){ "echo", NULL }, five, 5, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_true(m.value < 0);
	/* Garbage: answered, and the spawner keeps serving. */
	send_raw(r.req, "garbage", 7, NULL, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.value, -EBADMSG);

	/* KILL ends a running helper; a duplicate id is refused meanwhile. */
	send_req(&r, 12, 1, (const char *[]){ "sleep", "60", NULL }, two, 2, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_true(m.value > 0);
	pid_t sleeper = m.value;
	send_req(&r, 12, 1, (const char *[]){ "sleep", "60", NULL }, two, 2, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.value, -EEXIST);
	struct svc_spawn_msg k = { .type = SVC_SPAWN_KILL, .id = 12 };
	uint8_t kb[64];
	size_t klen;
	assert_int_equal(svc_spawn_encode(&k, kb, sizeof(kb), &klen), 0);
	send_raw(r.req, kb, klen, NULL, 0);
	recv_msg(r.evt, SVC_SPAWN_EXITED, &m);
	assert_int_equal(m.id, 12);
	assert_true(WIFSIGNALED(m.value));
	assert_int_equal(WTERMSIG(m.value), SIGKILL);
	assert_int_equal(kill(sleeper, 0), -1);

	/* F_FD3: one more fd, last, which the helper gets as its fd 3 (the
	 * redactor's kernel stream). Promised but missing: refused. */
	send_req(&r, 20, 1, (const char *[]){ "sleep", "60", NULL }, two, 2, SVC_SPAWN_F_FD3);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_int_equal(m.value, -EBADF);
	int kfd = memfd_create("kernel-stream", MFD_CLOEXEC);
	assert_true(kfd >= 0);
	int three[3] = { null_fd, null_fd, kfd };
	send_req(&r, 21, 1, (const char *[]){ "sleep", "60", NULL }, three, 3, SVC_SPAWN_F_FD3);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	assert_true(m.value > 0);
	sleeper = m.value;
	close(kfd);
	char link[64], target[128] = "";
	snprintf(link, sizeof(link), "/proc/%d/fd/3", (int)sleeper);
	/* The exec may not have happened yet: fd 3 is set before it. */
	for (int i = 0; i < 30000 && !strstr(target, "memfd:kernel-stream"); i++) {
		ssize_t tl = readlink(link, target, sizeof(target) - 1);
		target[tl > 0 ? tl : 0] = '\0';
		if (!strstr(target, "memfd:kernel-stream"))
			usleep(1000);
	}
	assert_non_null(strstr(target, "memfd:kernel-stream"));
	k.id = 21;
	assert_int_equal(svc_spawn_encode(&k, kb, sizeof(kb), &klen), 0);
	send_raw(r.req, kb, klen, NULL, 0);
	recv_msg(r.evt, SVC_SPAWN_EXITED, &m);
	assert_int_equal(m.id, 21);

	/* EOF from the daemon: the spawner kills what runs and exits. */
	send_req(&r, 13, 1, (const char *[]){ "sleep", "60", NULL }, two, 2, 0);
	recv_msg(r.req, SVC_SPAWN_REPLY, &m);
	sleeper = m.value;
	close(r.req);
	int status;
	assert_int_equal(waitpid(r.pid, &status, 0), r.pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(kill(sleeper, 0), -1);
	close(r.evt);
	close(null_fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec_roundtrip),
		cmocka_unit_test(test_codec_rejects),
		cmocka_unit_test(test_spawner_runs_helpers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
