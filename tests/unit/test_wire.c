/* Framing (wire.c) and the daemon's message decoders (svc_proto.c). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "profilingd.pb-c.h"
#include "svc_proto.h"
#include "wire.h"

static int sp[2];

static int setup(void **state)
{
	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp);
}

static int teardown(void **state)
{
	close(sp[0]);
	close(sp[1]);
	return 0;
}

static int count_fds(void)
{
	int n = 0;
	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

static void send_fds(int sock, const void *buf, size_t len, const int *fds, int nfds)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	char ctl[CMSG_SPACE(16 * sizeof(int))];
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	memset(ctl, 0, sizeof(ctl));
	if (nfds) {
		mh.msg_control = ctl;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	assert_int_equal(sendmsg(sock, &mh, 0), (ssize_t)len);
}

static void test_roundtrip_one_packet(void **state)
{
	char buf[64];
	assert_int_equal(wire_send(sp[0], "hello", 5, -1), 0);
	assert_int_equal(wire_send(sp[0], "world!", 6, -1), 0);
	/* Packet boundaries are kept: two sends, two receives. */
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), 5);
	assert_memory_equal(buf, "hello", 5);
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), 6);
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), -EAGAIN);
}

/* A batch: one sendmmsg, packets kept apart, each fd with its own packet,
 * at most WIRE_BATCH_MAX a call; one packet goes as wire_send's. */
static void test_send_batch(void **state)
{
	struct wire_pkt pkt[WIRE_BATCH_MAX + 4];
	char data[WIRE_BATCH_MAX + 4][8], buf[16];
	int p[2], fd;
	assert_int_equal(pipe(p), 0);
	for (unsigned i = 0; i < WIRE_BATCH_MAX + 4; i++) {
		snprintf(data[i], sizeof(data[i]), "m%u", i);
		pkt[i] = (struct wire_pkt){ data[i], strlen(data[i]), i == 1 || i == 5 ? p[1] : -1 };
	}
	assert_int_equal(wire_send_batch(sp[0], pkt, WIRE_BATCH_MAX + 4), WIRE_BATCH_MAX);
	assert_int_equal(wire_send_batch(sp[0], pkt + WIRE_BATCH_MAX, 1), 1);
	assert_int_equal(wire_send_batch(sp[0], pkt, 0), -EINVAL);
	for (unsigned i = 0; i <= WIRE_BATCH_MAX; i++) {
		unsigned want = i < WIRE_BATCH_MAX ? i : WIRE_BATCH_MAX;
		ssize_t n = wire_recv(sp[1], buf, sizeof(buf), &fd);
		assert_int_equal(n, (ssize_t)strlen(data[want]));
		assert_memory_equal(buf, data[want], (size_t)n);
		if (i == 1 || i == 5) {
			assert_true(fd >= 0);
			assert_int_equal(write(fd, "z", 1), 1);
			close(fd);
		} else {
			assert_int_equal(fd, -1);
		}
	}
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), -EAGAIN);
	assert_int_equal(read(p[0], buf, sizeof(buf)), 2);
	close(p[0]);
	close(p[1]);
	/* A peer gone: the first packet's error, nothing sent. */
	close(sp[1]);
	sp[1] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_int_equal(wire_send_batch(sp[0], pkt + 2, 3), -EPIPE);
}

static void test_oversize_dropped(void **state)
{
	char big[300], buf[256];
	memset(big, 'x', sizeof(big));
	assert_int_equal(wire_send(sp[0], big, sizeof(big), -1), 0);
	assert_int_equal(wire_send(sp[0], big, 256, -1), 0);
	/* One over the cap is refused before any decoding; exactly at the cap is fine. */
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), -EMSGSIZE);
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), 256);
}

static void test_fd_passing(void **state)
{
	char buf[16];
	int fd = -1;
	int p[2];
	assert_int_equal(pipe(p), 0);
	assert_int_equal(wire_send(sp[0], "f", 1, p[1]), 0);
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), &fd), 1);
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_int_equal(write(fd, "z", 1), 1);
	assert_int_equal(read(p[0], buf, 1), 1);
	assert_int_equal(buf[0], 'z');
	close(fd);
	close(p[0]);
	close(p[1]);
}

static void test_unexpected_fd_closed(void **state)
{
	char buf[16];
	int p[2];
	assert_int_equal(pipe(p), 0);
	int before = count_fds();
	assert_int_equal(wire_send(sp[0], "f", 1, p[1]), 0);
	/* The receiver expects no fd: it is closed and the packet refused. */
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), -EPROTO);
	assert_int_equal(count_fds(), before);
	close(p[0]);
	close(p[1]);
}

static void test_fd_bomb_closed(void **state)
{
	char buf[16];
	int fds[12], out = -1;
	for (int i = 0; i < 12; i++)
		fds[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
	int before = count_fds();
	send_fds(sp[0], "b", 1, fds, 12);
	/* More fds than the receive buffer holds: MSG_CTRUNC, all closed. */
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), &out), -EPROTO);
	assert_int_equal(out, -1);
	assert_int_equal(count_fds(), before);
	send_fds(sp[0], "b", 1, fds, 2);
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), &out), -EPROTO);
	assert_int_equal(count_fds(), before);
	for (int i = 0; i < 12; i++)
		close(fds[i]);
}

static void test_eof(void **state)
{
	char buf[4];
	close(sp[0]);
	sp[0] = open("/dev/null", O_RDONLY);
	assert_int_equal(wire_recv(sp[1], buf, sizeof(buf), NULL), 0);
}

/*
 * wire_recv_wait waits in the receive on a blocking socket; its
 * SO_RCVTIMEO ends the wait with -EAGAIN, as a non-blocking socket does at
 * once. The client library's reply wait relies on both (client.c).
 */
static void test_recv_wait(void **state)
{
	char buf[16];
	struct timeval tv = { 0, 20 * 1000 };
	int fd = -1, pass = open("/dev/null", O_RDONLY | O_CLOEXEC);

	assert_true(pass >= 0);
	assert_int_equal(setsockopt(sp[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	/* Nothing comes: the receive timeout ends the wait. */
	assert_int_equal(wire_recv_wait(sp[1], buf, sizeof(buf), &fd), -EAGAIN);
	assert_int_equal(fd, -1);
	/* A packet with an fd, as wire_recv takes it. */
	assert_int_equal(wire_send(sp[0], "reply", 5, pass), 0);
	assert_int_equal(wire_recv_wait(sp[1], buf, sizeof(buf), &fd), 5);
	assert_memory_equal(buf, "reply", 5);
	assert_true(fd >= 0 && fd != pass);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	/* The same checks: an fd where none is wanted is refused and closed. */
	int before = count_fds();
	assert_int_equal(wire_send(sp[0], "x", 1, pass), 0);
	assert_int_equal(wire_recv_wait(sp[1], buf, sizeof(buf), NULL), -EPROTO);
	assert_int_equal(count_fds(), before);
	/* An app may make the socket non-blocking: then -EAGAIN at once. */
	int fl = fcntl(sp[1], F_GETFL);
	assert_int_equal(fcntl(sp[1], F_SETFL, fl | O_NONBLOCK), 0);
	assert_int_equal(wire_recv_wait(sp[1], buf, sizeof(buf), &fd), -EAGAIN);
	assert_int_equal(fcntl(sp[1], F_SETFL, fl), 0);
	/* The end of the stream. */
	close(sp[0]);
	sp[0] = open("/dev/null", O_RDONLY);
	assert_int_equal(wire_recv_wait(sp[1], buf, sizeof(buf), &fd), 0);
	close(pass);
}

static void test_send_msg_cap(void **state)
{
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	char tag[2048];
	memset(tag, 'a', sizeof(tag) - 1);
	tag[sizeof(tag) - 1] = '\0';
	rq.token = 1;
	rq.type = 3;
	rq.tag = tag;
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	assert_int_equal(wire_send_msg(sp[0], &m.base, 100, -1), -EMSGSIZE);
	assert_int_equal(wire_send_msg(sp[0], &m.base, WIRE_CLIENT_MAX_MSG, -1), 0);
}

static size_t pack_client(Pd__ClientMsg *m, uint8_t *buf)
{
	return pd__client_msg__pack(m, buf);
}

static void test_decode_client(void **state)
{
	uint8_t buf[4096];
	const char *why;
	Pd__ClientMsg m = PD__CLIENT_MSG__INIT;
	Pd__Request rq = PD__REQUEST__INIT;
	char tag[WIRE_MAX_TAG + 2];

	rq.token = 7;
	rq.type = 3;
	m.msg_case = PD__CLIENT_MSG__MSG_REQUEST;
	m.request = &rq;
	size_t n = pack_client(&m, buf);
	Pd__ClientMsg *d = svc_decode_client(buf, n, &why);
	assert_non_null(d);
	assert_int_equal(d->request->token, 7);
	pd__client_msg__free_unpacked(d, NULL);

	/* Tag exactly at the cap passes; one more byte is refused. */
	memset(tag, 't', WIRE_MAX_TAG);
	tag[WIRE_MAX_TAG] = '\0';
	rq.tag = tag;
	n = pack_client(&m, buf);
	d = svc_decode_client(buf, n, &why);
	assert_non_null(d);
	pd__client_msg__free_unpacked(d, NULL);
	tag[WIRE_MAX_TAG] = 't';
	tag[WIRE_MAX_TAG + 1] = '\0';
	n = pack_client(&m, buf);
	assert_null(svc_decode_client(buf, n, &why));
	assert_string_equal(why, "tag too long");

	/* A Request without its required token: field 2 (type) only. */
	uint8_t no_token[] = { 0x12, 0x02, 0x10, 0x03 };
	assert_null(svc_decode_client(no_token, sizeof(no_token), &why));

	/* Unknown fields are skipped: field 15 varint inside ClientMsg. */
	uint8_t unknown[] = { 0x78, 0x01, 0x1a, 0x02, 0x08, 0x05 };
	d = svc_decode_client(unknown, sizeof(unknown), &why);
	assert_non_null(d);
	assert_int_equal(d->msg_case, PD__CLIENT_MSG__MSG_CANCEL);
	assert_int_equal(d->cancel->request_id, 5);
	pd__client_msg__free_unpacked(d, NULL);

	/* No oneof member set, and garbage. */
	assert_null(svc_decode_client((const uint8_t *)"", 0, &why));
	uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff };
	assert_null(svc_decode_client(junk, sizeof(junk), &why));
}

static void test_decode_runtime_caps(void **state)
{
	uint8_t buf[WIRE_RUNTIME_MAX_MSG + 16];
	const char *why;
	Pd__RuntimeMsg m = PD__RUNTIME_MSG__INIT;
	Pd__RuntimeHello h = PD__RUNTIME_HELLO__INIT;
	char *caps[WIRE_MAX_CAPS + 1];
	for (int i = 0; i <= WIRE_MAX_CAPS; i++)
		caps[i] = "stack_sampling";

	h.pid = 1;
	h.runtime = "native";
	h.capabilities = caps;
	h.n_capabilities = WIRE_MAX_CAPS;
	m.msg_case = PD__RUNTIME_MSG__MSG_HELLO;
	m.hello = &h;
	size_t n = pd__runtime_msg__pack(&m, buf);
	Pd__RuntimeMsg *d = svc_decode_runtime(buf, n, &why);
	assert_non_null(d);
	pd__runtime_msg__free_unpacked(d, NULL);

	h.n_capabilities = WIRE_MAX_CAPS + 1;
	n = pd__runtime_msg__pack(&m, buf);
	assert_null(svc_decode_runtime(buf, n, &why));
	assert_string_equal(why, "too many capabilities");

	/* A hello with its pid but without the required runtime name. */
	uint8_t no_name[] = { 0x0a, 0x02, 0x08, 0x01 };
	assert_null(svc_decode_runtime(no_name, sizeof(no_name), &why));

	/* Over the runtime socket's size cap: refused before unpacking. */
	assert_null(svc_decode_runtime(buf, WIRE_RUNTIME_MAX_MSG + 1, &why));
	assert_string_equal(why, "message over the size cap");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_roundtrip_one_packet, setup, teardown),
		cmocka_unit_test_setup_teardown(test_send_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oversize_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fd_passing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unexpected_fd_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fd_bomb_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eof, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recv_wait, setup, teardown),
		cmocka_unit_test_setup_teardown(test_send_msg_cap, setup, teardown),
		cmocka_unit_test(test_decode_client),
		cmocka_unit_test(test_decode_runtime_caps),
	};
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
