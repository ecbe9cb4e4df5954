#include "wire.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Room for a few fds so that a bomb is seen (and closed) rather than truncated. */
#define WIRE_CMSG_FDS 8

/* Room for one passed fd, aligned for a cmsghdr. */
union wire_ctl {
	char b[CMSG_SPACE(sizeof(int))];
	struct cmsghdr align;
};

/* mh sends iov (already set) with pass_fd, if any, in ctl. */
static void set_fd(struct msghdr *mh, union wire_ctl *ctl, int pass_fd)
{
	if (pass_fd < 0)
		return;
	memset(ctl, 0, sizeof(*ctl));
	mh->msg_control = ctl->b;
	mh->msg_controllen = sizeof(ctl->b);
	struct cmsghdr *c = CMSG_FIRSTHDR(mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
}

int wire_send(int sock, const void *buf, size_t len, int pass_fd)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	union wire_ctl ctl;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	set_fd(&mh, &ctl, pass_fd);
	for (;;) {
		ssize_t n = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n >= 0)
			return (size_t)n == len ? 0 : -EIO;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

int wire_send_batch(int sock, const struct wire_pkt *pkt, unsigned n)
{
	struct mmsghdr mm[WIRE_BATCH_MAX];
	struct iovec iov[WIRE_BATCH_MAX];
	union wire_ctl ctl[WIRE_BATCH_MAX];
	int r;

	if (n > WIRE_BATCH_MAX)
		n = WIRE_BATCH_MAX;
	/* One packet: sendmsg, as wire_send, so the single reply's path is unchanged. */
	if (n <= 1)
		return n ? ((r = wire_send(sock, pkt->buf, pkt->len, pkt->fd)) < 0 ? r : 1) : -EINVAL;
	memset(mm, 0, n * sizeof(*mm));
	for (unsigned i = 0; i < n; i++) {
		iov[i] = (struct iovec){ .iov_base = (void *)pkt[i].buf, .iov_len = pkt[i].len };
		mm[i].msg_hdr.msg_iov = &iov[i];
		mm[i].msg_hdr.msg_iovlen = 1;
		set_fd(&mm[i].msg_hdr, &ctl[i], pkt[i].fd);
	}
	for (;;) {
		int k = sendmmsg(sock, mm, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			/* SOCK_SEQPACKET sends a packet whole or not at all; a
			 * short one (another socket type) ends the batch before it. */
			for (int i = 0; i < k; i++)
				if (mm[i].msg_len != pkt[i].len)
					return i ? i : -EIO;
			return k;
		}
		if (k == 0)
			return -EIO;
		if (errno == EINTR)
			continue;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

int wire_send_msg(int sock, const ProtobufCMessage *msg, size_t cap, int pass_fd)
{
	uint8_t small[1024];
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = small;
	int r;

	if (len > cap)
		return -EMSGSIZE;
	if (len > sizeof(small)) {
		buf = malloc(len);
		if (!buf)
			return -ENOMEM;
	}
	protobuf_c_message_pack(msg, buf);
	r = wire_send(sock, buf, len, pass_fd);
	if (buf != small)
		free(buf);
	return r;
}

static void close_fds(struct cmsghdr *c)
{
	size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
	for (size_t i = 0; i < n; i++) {
		int fd;
		memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
		close(fd);
	}
}

/* wire_recv and wire_recv_wait; wait: a blocking receive, EINTR returned. */
static ssize_t recv_one(int sock, void *buf, size_t cap, int *fd_out, bool wait)
{
	struct iovec iov = { .iov_base = buf, .iov_len = cap };
	union {
		char b[CMSG_SPACE(WIRE_CMSG_FDS * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr mh = {
		.msg_iov = &iov, .msg_iovlen = 1,
		.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b),
	};
	ssize_t n;
	int got_fd = -1, bad = 0;

	if (fd_out)
		*fd_out = -1;
	do {
		n = recvmsg(sock, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC | (wait ? 0 : MSG_DONTWAIT));
	} while (n < 0 && errno == EINTR && !wait);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		if (nfd == 1 && got_fd < 0 && fd_out) {
			memcpy(&got_fd, CMSG_DATA(c), sizeof(int));
		} else {
			close_fds(c);
			bad = 1;
		}
	}
	if (mh.msg_flags & MSG_CTRUNC)
		bad = 1;
	if (!bad && (size_t)n > cap)
		bad = 2;
	if (bad) {
		if (got_fd >= 0)
			close(got_fd);
		return bad == 2 ? -EMSGSIZE : -EPROTO;
	}
	if (fd_out)
		*fd_out = got_fd;
	else if (got_fd >= 0)
		close(got_fd);
	return n;
}

ssize_t wire_recv(int sock, void *buf, size_t cap, int *fd_out)
{
	return recv_one(sock, buf, cap, fd_out, false);
}

ssize_t wire_recv_wait(int sock, void *buf, size_t cap, int *fd_out)
{
	return recv_one(sock, buf, cap, fd_out, true);
}
