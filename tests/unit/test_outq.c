/*
 * svc_outq: the per-peer ring that grows by use up to its cap (issue #18).
 * Order must survive a growth that happens while the ring has wrapped, the
 * cap must still refuse with -ENOBUFS, and fds must travel with their
 * messages. Real socketpair, real protobuf-c packing.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "profilingd.pb-c.h"
#include "svc_outq.h"
#include "wire.h"

static int sp[2];

static int setup(void **state)
{
	(void)state;
	return socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp);
}

static int teardown(void **state)
{
	(void)state;
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

static void push_id(struct svc_outq *q, uint64_t id, int fd, int want)
{
	Pd__Ack a = PD__ACK__INIT;
	a.result_id = id;
	assert_int_equal(svc_outq_push(q, &a.base, 4096, fd), want);
}

/* The next message on sp[1]: its id; *fd_out gets the fd it carried or -1. */
static uint64_t recv_id(int *fd_out)
{
	uint8_t buf[256];
	int fd = -1;
	ssize_t n = wire_recv(sp[1], buf, sizeof(buf), &fd);
	assert_true(n > 0);
	Pd__Ack *a = pd__ack__unpack(NULL, (size_t)n, buf);
	assert_non_null(a);
	uint64_t id = a->result_id;
	pd__ack__free_unpacked(a, NULL);
	if (fd_out)
		*fd_out = fd;
	else if (fd >= 0)
		close(fd);
	return id;
}

/* Starts small, grows to the cap, refuses past it, keeps the order. */
static void test_grows_to_cap(void **state)
{
	(void)state;
	struct svc_outq q;
	assert_int_equal(svc_outq_init(&q, 64), 0);
	assert_int_equal(q.cap, SVC_OUTQ_FIRST);
	for (uint64_t i = 0; i < 64; i++)
		push_id(&q, i + 1, -1, 0);
	assert_int_equal(q.cap, 64);
	push_id(&q, 65, -1, -ENOBUFS);
	assert_int_equal(svc_outq_flush(&q, sp[0]), 0);
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(recv_id(NULL), i + 1);
	svc_outq_fini(&q);
}

/* A growth while the ring has wrapped (head in the middle) keeps order and
 * fds; a cap that is not a power of two is reached exactly. */
static void test_grow_wrapped(void **state)
{
	(void)state;
	struct svc_outq q;
	assert_int_equal(svc_outq_init(&q, 10), 0);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(nul >= 0);
	for (uint64_t i = 1; i <= 4; i++)
		push_id(&q, i, -1, 0);
	assert_int_equal(svc_outq_flush(&q, sp[0]), 0);
	for (uint64_t i = 1; i <= 4; i++)
		assert_int_equal(recv_id(NULL), i);
	assert_int_equal(q.len, 0);
	assert_int_equal(q.head, 0);
	push_id(&q, 5, -1, 0);
	push_id(&q, 6, -1, 0);
	push_id(&q, 7, -1, 0);
	/* After sending 5, 6, 7 the head is at slot 3: of the next four
	 * messages, three wrap to the ring's start. */
	assert_int_equal(svc_outq_flush(&q, sp[0]), 0);
	for (uint64_t i = 5; i <= 7; i++)
		assert_int_equal(recv_id(NULL), i);
	assert_int_equal(q.head, 3);
	push_id(&q, 8, nul, 0);  /* slot 3 */
	push_id(&q, 9, -1, 0);   /* slot 0, wrapped */
	push_id(&q, 10, -1, 0);  /* slot 1 */
	push_id(&q, 11, nul, 0); /* slot 2: full at 4 */
	assert_int_equal(q.cap, 4);
	push_id(&q, 12, -1, 0);  /* grows to 8 while wrapped */
	assert_int_equal(q.cap, 8);
	for (uint64_t i = 13; i <= 17; i++)
		push_id(&q, i, -1, 0);
	assert_int_equal(q.cap, 10); /* doubled past half the cap: the cap */
	assert_int_equal(q.len, 10);
	push_id(&q, 18, -1, -ENOBUFS);
	assert_int_equal(svc_outq_flush(&q, sp[0]), 0);
	for (uint64_t i = 8; i <= 17; i++) {
		int fd = -1;
		assert_int_equal(recv_id(&fd), i);
		if (i == 8 || i == 11) {
			assert_true(fd >= 0);
			close(fd);
		} else
			assert_int_equal(fd, -1);
	}
	close(nul);
	svc_outq_fini(&q);
}

/* A cap under the first size is the ring's size; fini frees queued fds. */
static void test_small_cap_and_fini(void **state)
{
	(void)state;
	struct svc_outq q;
	int before = count_fds();
	assert_int_equal(svc_outq_init(&q, 0), -ENOMEM);
	svc_outq_fini(&q);
	assert_int_equal(svc_outq_init(&q, 2), 0);
	assert_int_equal(q.cap, 2);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	push_id(&q, 1, nul, 0);
	push_id(&q, 2, nul, 0);
	push_id(&q, 3, nul, -ENOBUFS);
	close(nul);
	svc_outq_fini(&q); /* closes both dups: no fd left */
	svc_outq_fini(NULL);
	assert_int_equal(count_fds(), before);
}

/*
 * A batch (one sendmmsg) that meets a full socket: what went stays sent,
 * the rest waits in order with its fds (flush says 1), and a later flush
 * sends it. The send buffer is made small so that the socket fills
 * inside a batch of WIRE_BATCH_MAX.
 */
static void test_batch_meets_full_socket(void **state)
{
	(void)state;
	struct svc_outq q;
	int before = count_fds();
	int small = 4096;
	assert_int_equal(setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert_true(nul >= 0);
	assert_int_equal(svc_outq_init(&q, 256), 0);
	for (uint64_t i = 1; i <= 256; i++)
		push_id(&q, i, i % 3 ? -1 : nul, 0);
	assert_int_equal(svc_outq_flush(&q, sp[0]), 1);
	uint32_t left = q.len;
	assert_true(left > 0 && left < 256);
	/* Read what went, in order with its fds, then let the queue go on. */
	uint64_t next = 1;
	for (int rounds = 0; next <= 256; rounds++) {
		assert_true(rounds < 1000);
		while (next <= 256 - q.len) {
			int fd = -1;
			assert_int_equal(recv_id(&fd), next);
			assert_int_equal(fd >= 0, next % 3 == 0);
			if (fd >= 0)
				close(fd);
			next++;
		}
		if (q.len)
			assert_true(svc_outq_flush(&q, sp[0]) >= 0);
	}
	assert_int_equal(q.len, 0);
	close(nul);
	svc_outq_fini(&q);
	assert_int_equal(count_fds(), before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_grows_to_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grow_wrapped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_small_cap_and_fini, setup, teardown),
		cmocka_unit_test_setup_teardown(test_batch_meets_full_socket, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
