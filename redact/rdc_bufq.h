/*
 * rdc_bufq: a bounded queue of byte buffers between two threads of the
 * redactor, one filling buffers and one draining them (the pprof
 * redactor's parser and its gzip worker, redact/rdc_pprof.c).
 *
 * Contract. rdc_bufq_new makes nbuf buffers of size bytes each, all free;
 * that is all the memory the queue ever holds (nbuf x size: the cap). The
 * filling side takes a free buffer (waiting while none is), fills it and
 * pushes it; the draining side takes the oldest full buffer (waiting
 * while none is), uses it and releases it back to the free ones. Buffers
 * go round in order; nothing is copied or allocated after rdc_bufq_new.
 * At the cap (every buffer full) the filling side waits: the faster side
 * is held to the slower's pace, memory stays flat.
 *
 * Either side may stop the other with rdc_bufq_close(q, err): every wait
 * returns NULL from then on, and rdc_bufq_err tells err (0 for a plain
 * stop). A full buffer pushed before the close is still handed out by
 * rdc_bufq_take_full until the queue is empty, so a producer's last
 * buffers are not lost when it closes after them with err 0.
 * rdc_bufq_reset (no thread waiting on q) makes every buffer free and
 * the queue open again. Thread-safe between one filler and one drainer;
 * rdc_bufq_free accepts NULL. Functions that can fail return 0 or a
 * negative errno.
 *
 * Work sharing (issue #18): a thread that serves several queues, or one
 * that would rather do another job than wait, uses the non-blocking
 * rdc_bufq_try_free/rdc_bufq_try_full and waits on a bell instead: every
 * push, release and close of a queue given rdc_bufq_set_bell rings it.
 * The bell is an event count: read rdc_bufq_bell_seq before looking at
 * the queues, and rdc_bufq_bell_wait(seq) returns at once if anything
 * rang since, so no wakeup is lost between the look and the wait. A
 * caller may ring it itself (rdc_bufq_bell_ring) for a change of its own
 * (a job given up). The bell holds no buffers: no cap of its own.
 */
#ifndef PD_RDC_BUFQ_H
#define PD_RDC_BUFQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rdc_bufq_buf {
	uint8_t *data;
	size_t len;   /* bytes filled */
	int status;   /* the filler's word on it (its own meaning) */
};

struct rdc_bufq;

int rdc_bufq_new(struct rdc_bufq **q, size_t nbuf, size_t size);
void rdc_bufq_free(struct rdc_bufq *q);
/* The filling side: a free buffer (len 0, status 0), or NULL once closed. */
struct rdc_bufq_buf *rdc_bufq_take_free(struct rdc_bufq *q);
void rdc_bufq_push(struct rdc_bufq *q, struct rdc_bufq_buf *b);
/* The draining side: the oldest full buffer, or NULL once closed and
 * drained of what was pushed before. */
struct rdc_bufq_buf *rdc_bufq_take_full(struct rdc_bufq *q);
void rdc_bufq_release(struct rdc_bufq *q, struct rdc_bufq_buf *b);
void rdc_bufq_close(struct rdc_bufq *q, int err);
int rdc_bufq_err(struct rdc_bufq *q);
void rdc_bufq_reset(struct rdc_bufq *q);
/* Non-blocking: a buffer, or NULL with *closed telling whether the queue
 * is closed (then no buffer will come: for try_full, closed and drained)
 * or has none now. closed may be NULL. */
struct rdc_bufq_buf *rdc_bufq_try_free(struct rdc_bufq *q, bool *closed);
struct rdc_bufq_buf *rdc_bufq_try_full(struct rdc_bufq *q, bool *closed);

struct rdc_bufq_bell;
int rdc_bufq_bell_new(struct rdc_bufq_bell **b);
void rdc_bufq_bell_free(struct rdc_bufq_bell *b);
uint64_t rdc_bufq_bell_seq(struct rdc_bufq_bell *b);
/* Wait until the bell rang after seq was read (at once if it did). */
void rdc_bufq_bell_wait(struct rdc_bufq_bell *b, uint64_t seq);
void rdc_bufq_bell_ring(struct rdc_bufq_bell *b);
/* From now on q rings b on every push, release and close (NULL: none).
 * Set before any thread uses q; b outlives q's use. */
void rdc_bufq_set_bell(struct rdc_bufq *q, struct rdc_bufq_bell *b);

/* Bytes of one buffer. */
size_t rdc_bufq_size(const struct rdc_bufq *q);

#endif
