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
 * full). A peer holds two fds, its socket and its pidfd, so accept only
 * takes one from the backlog while both are there.
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
	 * A peer needs two fds: its socket and its process's pidfd
	 * (svc_ident_bind). Hold the second while accepting, so that a peer is
	 * never taken out of the backlog without room for its pidfd, which
	 * would leave nothing to do but reset it.
	 */
	int spare = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
	int fd = spare < 0 ? -1 : accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	int e = errno;
	if (spare >= 0)
		close(spare);
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
