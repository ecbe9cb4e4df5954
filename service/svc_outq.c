/*
 * The outgoing queue of one SOCK_SEQPACKET peer (client.sock,
 * runtime.sock, control.sock): packed messages, each with at most one fd
 * for SCM_RIGHTS, sent in order as the socket takes them. Its capacity is
 * fixed at init; svc_outq_push() refuses at the cap (-ENOBUFS) and the
 * caller closes the peer, which does not read its messages.
 */
#include "svc_outq.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "wire.h"

struct svc_outq_msg {
	uint8_t *buf;
	size_t len;
	int fd;
};

int svc_outq_init(struct svc_outq *q, uint32_t max)
{
	q->head = q->len = 0;
	q->max = max;
	q->cap = max < SVC_OUTQ_FIRST ? max : SVC_OUTQ_FIRST;
	q->msg = q->cap ? calloc(q->cap, sizeof(*q->msg)) : NULL;
	return q->msg ? 0 : -ENOMEM;
}

/* A full ring doubles (up to max), its messages moved to the front in order. */
static int grow(struct svc_outq *q)
{
	uint32_t ncap = q->cap > q->max / 2 ? q->max : q->cap * 2;
	struct svc_outq_msg *n = calloc(ncap, sizeof(*n));
	if (!n)
		return -ENOMEM;
	for (uint32_t i = 0; i < q->len; i++)
		n[i] = q->msg[(q->head + i) % q->cap];
	free(q->msg);
	q->msg = n;
	q->cap = ncap;
	q->head = 0;
	return 0;
}

static void msg_clear(struct svc_outq_msg *m)
{
	free(m->buf);
	if (m->fd >= 0)
		close(m->fd);
	m->buf = NULL;
	m->fd = -1;
}

void svc_outq_fini(struct svc_outq *q)
{
	if (!q || !q->msg)
		return;
	for (uint32_t i = 0; i < q->len; i++)
		msg_clear(&q->msg[(q->head + i) % q->cap]);
	free(q->msg);
	q->msg = NULL;
	q->len = 0;
}

int svc_outq_push(struct svc_outq *q, const ProtobufCMessage *m, size_t max, int fd)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	if (len > max)
		return -EMSGSIZE;
	if (q->len == q->max)
		return -ENOBUFS;
	int r = q->len == q->cap ? grow(q) : 0;
	if (r < 0)
		return r;
	struct svc_outq_msg *o = &q->msg[(q->head + q->len) % q->cap];
	o->buf = malloc(len ? len : 1);
	if (!o->buf)
		return -ENOMEM;
	o->len = protobuf_c_message_pack(m, o->buf);
	o->fd = -1;
	/* Our own copy: the caller may close its fd before the peer reads. */
	if (fd >= 0 && (o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		r = -errno;
		msg_clear(o);
		return r;
	}
	q->len++;
	return 0;
}

/*
 * Up to WIRE_BATCH_MAX queued messages a system call (sendmmsg): at a
 * group commit's release a peer often has two (the reply to its request
 * and the failure result of its last capture), and each sendmsg was a
 * kernel entry of its own (bench/admission.sh: sendmsg 41 % of the
 * daemon's time; docs/RATELIMIT.md, "Group commit").
 */
int svc_outq_flush(struct svc_outq *q, int sock)
{
	struct wire_pkt pkt[WIRE_BATCH_MAX];

	while (q->len) {
		unsigned n = q->len < WIRE_BATCH_MAX ? q->len : WIRE_BATCH_MAX;
		for (unsigned i = 0; i < n; i++) {
			const struct svc_outq_msg *o = &q->msg[(q->head + i) % q->cap];
			pkt[i] = (struct wire_pkt){ o->buf, o->len, o->fd };
		}
		int r = wire_send_batch(sock, pkt, n);
		if (r == -EAGAIN)
			return 1;
		/* An error is the head message's: it is gone, as it was sent. */
		unsigned done = r < 0 ? 1 : (unsigned)r;
		for (unsigned i = 0; i < done; i++) {
			msg_clear(&q->msg[q->head]);
			q->head = (q->head + 1) % q->cap;
			q->len--;
		}
		if (r < 0)
			return r;
	}
	return 0;
}
