/*
 * rdc_bufq: a bounded queue of byte buffers between two threads of the
 * redactor, one filling buffers and one draining them (the pprof
 * redactor's inflater and deflater threads, redact/rdc_pprof.c).
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
 */
#ifndef PD_RDC_BUFQ_H
#define PD_RDC_BUFQ_H

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
/* Bytes of one buffer. */
size_t rdc_bufq_size(const struct rdc_bufq *q);

#endif
