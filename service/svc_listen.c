/*
 * The daemon's listening sockets (svc_listen.h): bound here or taken from
 * systemd, and the accept step all three share. svc_conn.c, the transport,
 * opens client.sock, runtime.sock and control.sock through it.
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
#include "svc_listen.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include "svc_sd.h"
#include <unistd.h>

#include "log.h"
#include "util.h"

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

/* ------------------------------------------------------------ listeners */

/*
 * Ready an inherited listening socket: it must be AF_UNIX SOCK_SEQPACKET;
 * it gets CLOEXEC and O_NONBLOCK (inherited without them, and helpers must
 * not get it); its path is its bound path, else name. 0 or -errno.
 */
static int inherited(struct svc_listener *l, int fd, const char *name)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);

	if (svc_sd_is_socket(fd, AF_UNIX, SOCK_SEQPACKET, 1) <= 0) {
		LOG_E("activated socket '%s' (fd %d) is not a listening AF_UNIX SOCK_SEQPACKET "
		      "socket: use ListenSequentialPacket= in the socket unit", name, fd);
		return -EINVAL;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && sa.sun_path[0])
		util_strlcpy(l->path, sa.sun_path, sizeof(l->path));
	else
		util_strlcpy(l->path, name, sizeof(l->path));
	util_strlcpy(l->name, name, sizeof(l->name));
	l->fd = fd;
	l->activated = true;
	return 0;
}

/* Which spec fd is: by name first, else by its bound path; -1 for none. */
static int match(int fd, const char *name, const struct svc_listen_spec *spec, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(name, spec[i].name))
			return (int)i;
	for (unsigned i = 0; i < n; i++)
		if (svc_sd_is_socket_unix(fd, SOCK_SEQPACKET, 1, spec[i].path) > 0)
			return (int)i;
	return -1;
}

int svc_listen_activated(struct svc_listener *ls, const struct svc_listen_spec *spec,
			 unsigned n)
{
	char **names = NULL;
	int nfds, r = 0;

	for (unsigned i = 0; i < n; i++) {
		memset(&ls[i], 0, sizeof(ls[i]));
		ls[i].fd = -1;
	}
	nfds = svc_sd_listen_fds_with_names(&names);
	if (nfds < 0) {
		LOG_W("socket activation: %s; binding the sockets here", strerror(-nfds));
		return 0;
	}
	for (int k = 0; k < nfds; k++) {
		int fd = SVC_SD_LISTEN_FDS_START + k;
		const char *name = names && names[k] ? names[k] : "unknown";
		int i = r < 0 ? -1 : match(fd, name, spec, n);
		if (i < 0 || ls[i].fd >= 0) {
			if (r == 0)
				LOG_W("socket activation: fd %d '%s' is none of client.sock, "
				      "runtime.sock, control.sock (by name or configured path): closed",
				      fd, name);
			close(fd);
			continue;
		}
		if ((r = inherited(&ls[i], fd, name)) < 0)
			close(fd);
	}
	if (names)
		for (int k = 0; k < nfds; k++)
			free(names[k]);
	free(names);
	return r;
}

/* Bind and listen at path (l->fd). A stale socket is replaced, never a file. */
static int bind_at(struct svc_listener *l, const char *path, int backlog)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	char dir[sizeof(l->path)];
	int r;

	util_strlcpy(l->path, path, sizeof(l->path));
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	util_strlcpy(dir, path, sizeof(dir));
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = '\0';
		if ((r = util_mkdir_p(dir, 0755)) < 0) {
			LOG_E("cannot create %s: %s", dir, strerror(-r));
			return r;
		}
	}
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			LOG_E("%s exists and is not a socket", path);
			return -EEXIST;
		}
		unlink(path);
	}
	l->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0)
		return -errno;
	if (bind(l->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l->fd, backlog) < 0) {
		r = -errno;
		LOG_E("cannot listen on %s: %s", path, strerror(errno));
		close(l->fd);
		l->fd = -1;
		return r;
	}
	/* Any local process may connect; authorisation is by peer uid. */
	chmod(path, 0666);
	return 0;
}

int svc_listen_start(struct svc_listener *l, const struct svc_listen_spec *spec,
		     struct event_base *base, void (*cb)(int fd, short what, void *arg), void *arg)
{
	int r;

	if (l->fd < 0 && (r = bind_at(l, spec->path, spec->backlog)) < 0)
		return r;
	if ((r = svc_acceptor_start(&l->acc, base, l->fd, l->path, cb, arg)) < 0)
		return r;
	if (spec->label)
		LOG_I("listening on %s (%s%s)", l->path, spec->label,
		      l->activated ? ", socket-activated" : "");
	else if (l->activated)
		LOG_I("listening on %s (socket-activated as '%s')", l->path, l->name);
	else
		LOG_I("listening on %s", l->path);
	return 0;
}

void svc_listen_close(struct svc_listener *l)
{
	if (!l)
		return;
	svc_acceptor_stop(&l->acc);
	if (l->fd >= 0) {
		close(l->fd);
		/* An activated socket's path belongs to its socket unit. */
		if (!l->activated)
			unlink(l->path);
	}
	l->fd = -1;
}
