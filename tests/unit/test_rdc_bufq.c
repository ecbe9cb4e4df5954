/*
 * rdc_bufq: the queue between the pprof redactor's parser and its gzip
 * worker (issue #18). Order through the rings, the cap, a close that
 * still hands out what was pushed before it, and the bell: a thread that
 * reads the bell's count, finds nothing and waits must be woken by any
 * push, release or close after that read (a lost wakeup hangs the
 * threaded case, and ctest's timeout fails it). Real threads.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "rdc_bufq.h"

static void test_try_order_and_cap(void **state)
{
	struct rdc_bufq *q;
	struct rdc_bufq_bell *bell;
	struct rdc_bufq_buf *b[3];
	bool closed = true;

	(void)state;
	assert_int_equal(rdc_bufq_new(&q, 3, 64), 0);
	assert_int_equal(rdc_bufq_bell_new(&bell), 0);
	rdc_bufq_set_bell(q, bell);
	assert_null(rdc_bufq_try_full(q, &closed));
	assert_false(closed);
	uint64_t s0 = rdc_bufq_bell_seq(bell);
	for (int i = 0; i < 3; i++) {
		assert_non_null(b[i] = rdc_bufq_try_free(q, &closed));
		b[i]->len = (size_t)i + 1;
	}
	/* The cap: every buffer taken, none free. */
	assert_null(rdc_bufq_try_free(q, &closed));
	assert_false(closed);
	for (int i = 0; i < 3; i++)
		rdc_bufq_push(q, b[i]);
	assert_int_equal(rdc_bufq_bell_seq(bell), s0 + 3);
	/* Rung since s0: returns at once. */
	rdc_bufq_bell_wait(bell, s0);
	for (int i = 0; i < 3; i++) {
		struct rdc_bufq_buf *x = rdc_bufq_try_full(q, NULL);
		assert_ptr_equal(x, b[i]);
		assert_int_equal(x->len, (size_t)i + 1);
		if (i < 2)
			rdc_bufq_release(q, x);
	}
	/* Closed with one buffer pushed before: handed out, then "closed". */
	rdc_bufq_push(q, b[2]);
	rdc_bufq_close(q, -EIO);
	assert_null(rdc_bufq_try_free(q, &closed));
	assert_true(closed);
	assert_ptr_equal(rdc_bufq_try_full(q, &closed), b[2]);
	assert_false(closed);
	assert_null(rdc_bufq_try_full(q, &closed));
	assert_true(closed);
	assert_int_equal(rdc_bufq_err(q), -EIO);
	assert_int_equal(rdc_bufq_bell_seq(bell), s0 + 3 + 2 + 2);
	rdc_bufq_free(q);
	rdc_bufq_bell_free(bell);
	rdc_bufq_free(NULL);
	rdc_bufq_bell_free(NULL);
	rdc_bufq_bell_ring(NULL);
}

/* Two queues on one bell, as the redactor has them: a "worker" moves
 * every buffer from a to b (a codec), the main thread feeds a and drains
 * b, each waiting only on the bell. */
#define ROUNDS 20000
struct two {
	struct rdc_bufq *a, *b;
	struct rdc_bufq_bell *bell;
	int moved;
};

static void *mover(void *arg)
{
	struct two *t = arg;

	for (;;) {
		uint64_t seq = rdc_bufq_bell_seq(t->bell);
		bool closed;
		struct rdc_bufq_buf *in = rdc_bufq_try_full(t->a, &closed);
		if (closed)
			break;
		if (!in) {
			rdc_bufq_bell_wait(t->bell, seq);
			continue;
		}
		struct rdc_bufq_buf *out;
		while (!(out = rdc_bufq_try_free(t->b, NULL))) {
			rdc_bufq_bell_wait(t->bell, seq);
			seq = rdc_bufq_bell_seq(t->bell);
		}
		memcpy(out->data, in->data, in->len);
		out->len = in->len;
		rdc_bufq_release(t->a, in);
		rdc_bufq_push(t->b, out);
		t->moved++;
	}
	return NULL;
}

static void test_bell_threads(void **state)
{
	struct two t = { 0 };
	pthread_t th;
	int sent = 0, got = 0;

	(void)state;
	assert_int_equal(rdc_bufq_bell_new(&t.bell), 0);
	assert_int_equal(rdc_bufq_new(&t.a, 2, sizeof(int)), 0);
	assert_int_equal(rdc_bufq_new(&t.b, 2, sizeof(int)), 0);
	rdc_bufq_set_bell(t.a, t.bell);
	rdc_bufq_set_bell(t.b, t.bell);
	assert_int_equal(pthread_create(&th, NULL, mover, &t), 0);
	while (got < ROUNDS) {
		uint64_t seq = rdc_bufq_bell_seq(t.bell);
		bool did = false;
		struct rdc_bufq_buf *x;
		if (sent < ROUNDS && (x = rdc_bufq_try_free(t.a, NULL))) {
			memcpy(x->data, &sent, sizeof(sent));
			x->len = sizeof(sent);
			rdc_bufq_push(t.a, x);
			sent++;
			did = true;
		}
		if ((x = rdc_bufq_try_full(t.b, NULL))) {
			int v;
			memcpy(&v, x->data, sizeof(v));
			assert_int_equal(v, got); /* in order, none lost */
			rdc_bufq_release(t.b, x);
			got++;
			did = true;
		}
		if (!did)
			rdc_bufq_bell_wait(t.bell, seq);
	}
	rdc_bufq_close(t.a, 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(t.moved, ROUNDS);
	rdc_bufq_free(t.a);
	rdc_bufq_free(t.b);
	rdc_bufq_bell_free(t.bell);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_try_order_and_cap),
		cmocka_unit_test(test_bell_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
