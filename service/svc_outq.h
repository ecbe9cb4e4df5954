/*
 * svc_outq: a peer's bounded outgoing queue, used by the transport
 * (svc_conn.c) for every peer of client.sock, runtime.sock and
 * control.sock.
 *
 * Cap and what happens at it: svc_outq_push() refuses with -ENOBUFS and
 * the caller closes the peer, which does not read its messages. Each
 * queued message holds its packed bytes and at most one fd (a dup).
 * The ring is sized by use: SVC_OUTQ_FIRST slots at init, doubled when
 * full up to the cap (an idle peer holds 4 slots, not [limits]
 * max_queued_msgs: issue #18, 500 idle peers). A failed growth is
 * -ENOMEM, as a failed malloc of the message is.
 */
#ifndef PD_SVC_OUTQ_H
#define PD_SVC_OUTQ_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

struct svc_outq_msg;
#define SVC_OUTQ_FIRST 4

struct svc_outq {
	struct svc_outq_msg *msg;
	uint32_t cap, head, len; /* cap: the ring's slots now */
	uint32_t max;            /* the cap: cap grows up to it */
};

/* max messages at most; 0 or -ENOMEM (max 0 is -ENOMEM too). */
int svc_outq_init(struct svc_outq *q, uint32_t max);
/* Frees what is queued, closing its fds. NULL and a failed init are fine. */
void svc_outq_fini(struct svc_outq *q);
/* Pack m and queue it with a duplicate of fd (-1: none); nothing is sent.
 * -EMSGSIZE over max bytes, -ENOBUFS at the cap, -ENOMEM, -errno of dup. */
int svc_outq_push(struct svc_outq *q, const ProtobufCMessage *m, size_t max, int fd);
/* Send in order until the socket would block, up to WIRE_BATCH_MAX
 * messages a system call (sendmmsg): 0 all sent, 1 would block
 * (wait for EV_WRITE), -errno when sending failed (the message is gone). */
int svc_outq_flush(struct svc_outq *q, int sock);

#endif
