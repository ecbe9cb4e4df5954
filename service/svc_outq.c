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

int svc_outq_init(struct svc_outq *q, uint32_t cap)
{
	q->head = q->len = 0;
	q->cap = cap;
	q->msg = cap ? calloc(cap, sizeof(*q->msg)) : NULL;
	return q->msg ? 0 : -ENOMEM;
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
	if (q->len == q->cap)
		return -ENOBUFS;
	struct svc_outq_msg *o = &q->msg[(q->head + q->len) % q->cap];
	o->buf = malloc(len ? len : 1);
	if (!o->buf)
		return -ENOMEM;
	o->len = protobuf_c_message_pack(m, o->buf);
	o->fd = -1;
	/* Our own copy: the caller may close its fd before the peer reads. */
	if (fd >= 0 && (o->fd = fcntl(fd, F_DUPFD_CLOEXEC, 3)) < 0) {
		int r = -errno;
		msg_clear(o);
		return r;
	}
	q->len++;
	return 0;
}

int svc_outq_flush(struct svc_outq *q, int sock)
{
	while (q->len) {
		struct svc_outq_msg *o = &q->msg[q->head];
		int r = wire_send(sock, o->buf, o->len, o->fd);
		if (r == -EAGAIN)
			return 1;
		msg_clear(o);
		q->head = (q->head + 1) % q->cap;
		q->len--;
		if (r < 0)
			return r;
	}
	return 0;
}
