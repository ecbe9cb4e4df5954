/* Drain a pipe into a daemon-owned file, capped (svc_sink.h). */
#include "svc_sink.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "util.h"

struct svc_sink {
	struct event *ev;
	int in_fd, out_fd;
	uint64_t cap, bytes;
	uint64_t expect;        /* what the peer says it wrote; UINT64_MAX: not said */
	bool ended;
	svc_sink_cb cb;
	void *ud;
};

/* Stop reading; the read end stays open until svc_sink_free, so a peer
 * still writing blocks or gets EPIPE only once the owner lets go. */
static void end(struct svc_sink *s)
{
	s->ended = true;
	if (s->ev)
		event_del(s->ev);
}

static void finish(struct svc_sink *s, int status)
{
	end(s);
	s->cb(s->ud, status); /* may free s: nothing after this */
}

static void read_cb(evutil_socket_t fd, short what, void *arg)
{
	/* One static buffer: the loop is single-threaded and a burst is
	 * written out before the next read. */
	static char buf[1 << 16];
	struct svc_sink *s = arg;
	size_t burst = 0;

	(void)what;
	while (burst < SVC_SINK_BURST) {
		/* One byte over the limit is enough to know it was crossed. */
		uint64_t limit = s->cap < s->expect ? s->cap : s->expect;
		uint64_t room = limit - s->bytes + 1;
		size_t want = room < sizeof(buf) ? (size_t)room : sizeof(buf);
		ssize_t n = read(fd, buf, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n < 0) {
			finish(s, -errno);
			return;
		}
		if (n == 0) {
			finish(s, 0);
			return;
		}
		size_t keep = (size_t)n;
		int over = 0;
		if (s->bytes + keep > s->cap) {
			keep = (size_t)(s->cap - s->bytes);
			over = -EFBIG;
		} else if (s->bytes + keep > s->expect) {
			keep = (size_t)(s->expect - s->bytes);
			over = -EPROTO;
		}
		int r = keep ? util_write_all(s->out_fd, buf, keep) : 0;
		if (r < 0) {
			finish(s, r);
			return;
		}
		s->bytes += keep;
		burst += keep;
		if (over) {
			finish(s, over);
			return;
		}
		if (s->bytes == s->expect) {
			finish(s, 0);
			return;
		}
	}
}

int svc_sink_start(struct event_base *base, int in_fd, int out_fd, uint64_t cap,
		   svc_sink_cb cb, void *ud, struct svc_sink **out)
{
	*out = NULL;
	if (!base || in_fd < 0 || out_fd < 0 || !cb)
		return -EINVAL;
	int fl = fcntl(in_fd, F_GETFL);
	if (fl < 0 || fcntl(in_fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	struct svc_sink *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->in_fd = in_fd;
	s->out_fd = out_fd;
	s->cap = cap;
	s->expect = UINT64_MAX;
	s->cb = cb;
	s->ud = ud;
	s->ev = event_new(base, in_fd, EV_READ | EV_PERSIST, read_cb, s);
	if (!s->ev || event_add(s->ev, NULL) < 0) {
		if (s->ev)
			event_free(s->ev);
		free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

int svc_sink_expect(struct svc_sink *s, uint64_t n)
{
	if (!s)
		return -EINVAL;
	if (s->bytes > n) {
		end(s);
		return -EPROTO;
	}
	if (s->ended)
		return 1;
	if (s->bytes == n) {
		end(s);
		return 1;
	}
	s->expect = n;
	return 0;
}

uint64_t svc_sink_bytes(const struct svc_sink *s)
{
	return s ? s->bytes : 0;
}

bool svc_sink_ended(const struct svc_sink *s)
{
	return s && s->ended;
}

void svc_sink_free(struct svc_sink *s)
{
	if (!s)
		return;
	if (s->ev)
		event_free(s->ev);
	if (s->in_fd >= 0)
		close(s->in_fd);
	free(s);
}
