/*
 * Framing for profilingd's SOCK_SEQPACKET sockets: one protobuf message per
 * packet, at most one passed fd per packet. The size cap is checked with
 * MSG_TRUNC before anything is decoded; fds that arrive unasked, or more
 * than one, are closed and the packet is refused.
 */
#ifndef PD_WIRE_H
#define PD_WIRE_H

#include <stddef.h>
#include <sys/types.h>
#include <protobuf-c/protobuf-c.h>

/* Hard caps, shared by both ends (docs/PROTOCOL.md). */
#define WIRE_CLIENT_MAX_MSG  (16 * 1024)  /* client.sock, either direction */
#define WIRE_RUNTIME_MAX_MSG (16 * 1024)  /* runtime.sock, either direction */
#define WIRE_MAX_STR         1024          /* any string field */
#define WIRE_MAX_TAG         64            /* request tag before sanitising */
#define WIRE_MAX_CAPS        16            /* RuntimeHello.capabilities */

/*
 * Send one packet; pass_fd < 0 sends none. Never raises SIGPIPE.
 * Returns 0 or -errno (-EAGAIN when the peer's queue is full).
 */
int wire_send(int sock, const void *buf, size_t len, int pass_fd);

/* One packet of a wire_send_batch: its bytes and its fd (-1: none). */
struct wire_pkt {
	const void *buf;
	size_t len;
	int fd;
};

/*
 * Send up to WIRE_BATCH_MAX of n packets in order, in one system call
 * (sendmmsg): a peer's queued messages cost one kernel entry, not one
 * each. Each stays its own packet with its own fd, as wire_send's would.
 * Returns how many were sent (> 0), or -errno for the first (-EAGAIN
 * when the peer's queue is full); a packet after the last one sent is
 * not sent, and the next call meets its error. -EIO when the first
 * packet went short (never on SOCK_SEQPACKET: a packet goes whole or
 * not at all); a short one later ends the batch before it.
 */
#define WIRE_BATCH_MAX 16
int wire_send_batch(int sock, const struct wire_pkt *pkt, unsigned n);

/*
 * Pack msg and send it. Returns 0, -EMSGSIZE if the packed form exceeds
 * cap, or what wire_send returns.
 */
int wire_send_msg(int sock, const ProtobufCMessage *msg, size_t cap, int pass_fd);

/*
 * Receive one packet into buf. *fd_out (if fd_out is non-NULL) gets the
 * passed fd or -1. Returns the length (> 0), 0 at end of stream, or:
 *   -EMSGSIZE  the packet was larger than cap (it is consumed and dropped)
 *   -EPROTO    control data was truncated, or an fd arrived that was not
 *              expected (fd_out NULL) or more than one: all are closed
 *   -EAGAIN    nothing to read on a non-blocking socket
 */
ssize_t wire_recv(int sock, void *buf, size_t cap, int *fd_out);

/*
 * wire_recv, but on a blocking socket (O_NONBLOCK clear) it waits for the
 * packet in the receive itself: one system call where a poll and a receive
 * were two. The socket's SO_RCVTIMEO bounds the wait: when it runs out, or
 * at once on a non-blocking socket, -EAGAIN. A signal that ends the wait
 * gives -EINTR (not retried: the caller re-checks its own deadline).
 */
ssize_t wire_recv_wait(int sock, void *buf, size_t cap, int *fd_out);

#endif
