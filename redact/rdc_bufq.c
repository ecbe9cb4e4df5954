/*
 * rdc_bufq: see rdc_bufq.h. Two rings of buffer indices (free and full)
 * under one mutex, a condition for each side. A handoff is one buffer of
 * hundreds of KiB, so the lock is taken a few dozen times a MB at most.
 */
#include "rdc_bufq.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#define BUFQ_MAX 64 /* buffers in one queue */

struct ring {
	size_t idx[BUFQ_MAX];
	size_t head, n;
};

struct rdc_bufq {
	pthread_mutex_t mu;
	pthread_cond_t can_fill, can_drain;
	struct rdc_bufq_buf *bufs;
	size_t nbuf, size;
	struct ring free, full;
	bool closed;
	int err;
	struct rdc_bufq_bell *bell;
};

struct rdc_bufq_bell {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t seq;
	unsigned waiters; /* broadcast only when someone sleeps */
};

static void ring_put(struct ring *r, size_t i)
{
	r->idx[(r->head + r->n++) % BUFQ_MAX] = i;
}

static size_t ring_get(struct ring *r)
{
	size_t i = r->idx[r->head];
	r->head = (r->head + 1) % BUFQ_MAX;
	r->n--;
	return i;
}

int rdc_bufq_new(struct rdc_bufq **qp, size_t nbuf, size_t size)
{
	struct rdc_bufq *q;

	*qp = NULL;
	if (!nbuf || nbuf > BUFQ_MAX || !size)
		return -EINVAL;
	if (!(q = calloc(1, sizeof(*q))))
		return -ENOMEM;
	q->nbuf = nbuf;
	q->size = size;
	if (pthread_mutex_init(&q->mu, NULL)) {
		free(q);
		return -ENOMEM;
	}
	if (pthread_cond_init(&q->can_fill, NULL)) {
		pthread_mutex_destroy(&q->mu);
		free(q);
		return -ENOMEM;
	}
	if (pthread_cond_init(&q->can_drain, NULL)) {
		pthread_cond_destroy(&q->can_fill);
		pthread_mutex_destroy(&q->mu);
		free(q);
		return -ENOMEM;
	}
	if (!(q->bufs = calloc(nbuf, sizeof(*q->bufs))))
		goto fail;
	for (size_t i = 0; i < nbuf; i++)
		if (!(q->bufs[i].data = malloc(size)))
			goto fail;
	rdc_bufq_reset(q);
	*qp = q;
	return 0;
fail:
	rdc_bufq_free(q);
	return -ENOMEM;
}

void rdc_bufq_free(struct rdc_bufq *q)
{
	if (!q)
		return;
	for (size_t i = 0; q->bufs && i < q->nbuf; i++)
		free(q->bufs[i].data);
	free(q->bufs);
	pthread_cond_destroy(&q->can_drain);
	pthread_cond_destroy(&q->can_fill);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

void rdc_bufq_reset(struct rdc_bufq *q)
{
	pthread_mutex_lock(&q->mu);
	q->free.head = q->free.n = 0;
	q->full.head = q->full.n = 0;
	for (size_t i = 0; i < q->nbuf; i++)
		ring_put(&q->free, i);
	q->closed = false;
	q->err = 0;
	pthread_mutex_unlock(&q->mu);
}

struct rdc_bufq_buf *rdc_bufq_take_free(struct rdc_bufq *q)
{
	struct rdc_bufq_buf *b = NULL;

	pthread_mutex_lock(&q->mu);
	while (!q->closed && !q->free.n)
		pthread_cond_wait(&q->can_fill, &q->mu);
	if (!q->closed) {
		b = &q->bufs[ring_get(&q->free)];
		b->len = 0;
		b->status = 0;
	}
	pthread_mutex_unlock(&q->mu);
	return b;
}

void rdc_bufq_push(struct rdc_bufq *q, struct rdc_bufq_buf *b)
{
	pthread_mutex_lock(&q->mu);
	ring_put(&q->full, (size_t)(b - q->bufs));
	pthread_cond_signal(&q->can_drain);
	pthread_mutex_unlock(&q->mu);
	rdc_bufq_bell_ring(q->bell);
}

struct rdc_bufq_buf *rdc_bufq_take_full(struct rdc_bufq *q)
{
	struct rdc_bufq_buf *b = NULL;

	pthread_mutex_lock(&q->mu);
	while (!q->closed && !q->full.n)
		pthread_cond_wait(&q->can_drain, &q->mu);
	if (q->full.n)
		b = &q->bufs[ring_get(&q->full)];
	pthread_mutex_unlock(&q->mu);
	return b;
}

void rdc_bufq_release(struct rdc_bufq *q, struct rdc_bufq_buf *b)
{
	pthread_mutex_lock(&q->mu);
	ring_put(&q->free, (size_t)(b - q->bufs));
	pthread_cond_signal(&q->can_fill);
	pthread_mutex_unlock(&q->mu);
	rdc_bufq_bell_ring(q->bell);
}

void rdc_bufq_close(struct rdc_bufq *q, int err)
{
	pthread_mutex_lock(&q->mu);
	if (!q->closed)
		q->err = err;
	q->closed = true;
	pthread_cond_broadcast(&q->can_fill);
	pthread_cond_broadcast(&q->can_drain);
	pthread_mutex_unlock(&q->mu);
	rdc_bufq_bell_ring(q->bell);
}

int rdc_bufq_err(struct rdc_bufq *q)
{
	pthread_mutex_lock(&q->mu);
	int err = q->err;
	pthread_mutex_unlock(&q->mu);
	return err;
}

size_t rdc_bufq_size(const struct rdc_bufq *q)
{
	return q->size;
}

struct rdc_bufq_buf *rdc_bufq_try_free(struct rdc_bufq *q, bool *closed)
{
	struct rdc_bufq_buf *b = NULL;

	pthread_mutex_lock(&q->mu);
	if (!q->closed && q->free.n) {
		b = &q->bufs[ring_get(&q->free)];
		b->len = 0;
		b->status = 0;
	}
	if (closed)
		*closed = q->closed;
	pthread_mutex_unlock(&q->mu);
	return b;
}

struct rdc_bufq_buf *rdc_bufq_try_full(struct rdc_bufq *q, bool *closed)
{
	struct rdc_bufq_buf *b = NULL;

	pthread_mutex_lock(&q->mu);
	if (q->full.n)
		b = &q->bufs[ring_get(&q->full)];
	if (closed)
		*closed = q->closed && !b;
	pthread_mutex_unlock(&q->mu);
	return b;
}

void rdc_bufq_set_bell(struct rdc_bufq *q, struct rdc_bufq_bell *b)
{
	q->bell = b;
}

int rdc_bufq_bell_new(struct rdc_bufq_bell **bp)
{
	struct rdc_bufq_bell *b;

	*bp = NULL;
	if (!(b = calloc(1, sizeof(*b))))
		return -ENOMEM;
	if (pthread_mutex_init(&b->mu, NULL)) {
		free(b);
		return -ENOMEM;
	}
	if (pthread_cond_init(&b->cv, NULL)) {
		pthread_mutex_destroy(&b->mu);
		free(b);
		return -ENOMEM;
	}
	*bp = b;
	return 0;
}

void rdc_bufq_bell_free(struct rdc_bufq_bell *b)
{
	if (!b)
		return;
	pthread_cond_destroy(&b->cv);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

uint64_t rdc_bufq_bell_seq(struct rdc_bufq_bell *b)
{
	pthread_mutex_lock(&b->mu);
	uint64_t s = b->seq;
	pthread_mutex_unlock(&b->mu);
	return s;
}

void rdc_bufq_bell_wait(struct rdc_bufq_bell *b, uint64_t seq)
{
	pthread_mutex_lock(&b->mu);
	b->waiters++;
	while (b->seq == seq)
		pthread_cond_wait(&b->cv, &b->mu);
	b->waiters--;
	pthread_mutex_unlock(&b->mu);
}

void rdc_bufq_bell_ring(struct rdc_bufq_bell *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->mu);
	b->seq++;
	if (b->waiters)
		pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->mu);
}
