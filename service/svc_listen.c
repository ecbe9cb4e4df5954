/*
 * The accept step every listener shares: client.sock and runtime.sock
 * (svc_conn.c) and control.sock (svc_ctl.c).
 *
 * Out of fds or kernel memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), accept
 * leaves the connection in the backlog and the socket stays readable: a
 * level-triggered loop would call us again at once, spinning a core and
 * flooding the log. So the listener is paused for SVC_ACCEPT_PAUSE_MS, with
 * one log line per pause, and resumes by itself; waiting connections sit
 * in the listen backlog meanwhile (connect() fails with EAGAIN once it is
 * full). Binding a peer takes its socket and two fds more
 * (SVC_ACCEPT_SPARE_FDS), so accept only takes one from the backlog while
 * all three are there.
 */
#include "svc.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct svc_acceptor *a = arg;
	if (a->ev)
		event_add(a->ev, NULL);
}

int svc_acceptor_start(struct svc_acceptor *a, struct event_base *base, int fd,
		       const char *path, void (*cb)(int fd, short what, void *arg), void *arg)
{
	a->fd = fd;
	a->path = path;
	a->ev = event_new(base, fd, EV_READ | EV_PERSIST, cb, arg);
	a->resume = evtimer_new(base, resume_cb, a);
	if (!a->ev || !a->resume || event_add(a->ev, NULL) < 0) {
		svc_acceptor_stop(a);
		return -ENOMEM;
	}
	return 0;
}

int svc_acceptor_accept(struct svc_acceptor *a)
{
	/*
	 * Binding a peer (svc_ident_bind) needs two fds beyond its socket: the
	 * pidfd it keeps, and one /proc file open at a time while it reads the
	 * peer's ids. Hold both while accepting, so that a peer is never taken
	 * out of the backlog without room to bind it, which would leave
	 * nothing to do but reset it.
	 */
	int spare[SVC_ACCEPT_SPARE_FDS];
	int n = 0, fd = -1, e = EMFILE;
	while (n < SVC_ACCEPT_SPARE_FDS && (spare[n] = fcntl(a->fd, F_DUPFD_CLOEXEC, 0)) >= 0)
		n++;
	if (n < SVC_ACCEPT_SPARE_FDS)
		e = errno;
	else if ((fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) < 0)
		e = errno;
	while (n > 0)
		close(spare[--n]);
	if (fd >= 0)
		return fd;
	if (svc_acceptor_pause(a, "accept", -e) == 0)
		return -e;
	if (e != EAGAIN && e != EINTR && e != ECONNABORTED)
		LOG_W("accept on %s: %s", a->path, strerror(e));
	return -e;
}

int svc_acceptor_pause(struct svc_acceptor *a, const char *what, int err)
{
	if (!a || (err != -EMFILE && err != -ENFILE && err != -ENOBUFS && err != -ENOMEM))
		return -EINVAL;
	struct timeval tv = { 0, SVC_ACCEPT_PAUSE_MS * 1000 };
	LOG_W("%s on %s: %s; pausing it for %d ms", what, a->path, strerror(-err),
	      SVC_ACCEPT_PAUSE_MS);
	event_del(a->ev);
	evtimer_add(a->resume, &tv);
	return 0;
}

void svc_acceptor_stop(struct svc_acceptor *a)
{
	if (!a)
		return;
	if (a->ev)
		event_free(a->ev);
	if (a->resume)
		event_free(a->resume);
	a->ev = a->resume = NULL;
}
