/*
 * svc_listen: the daemon's listening sockets, client.sock, runtime.sock and
 * control.sock, and the accept step they share.
 *
 * A socket comes from systemd socket activation when it is passed
 * (matched by FileDescriptorName, else by its bound path), and is bound
 * here otherwise (mode 0666: every request is authorised by the peer's
 * uid; a stale socket at the path is replaced, never another file). An
 * activated socket's path belongs to its socket unit and is not unlinked.
 *
 * Out of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) a listener
 * pauses for SVC_ACCEPT_PAUSE_MS, one log line per pause, instead of
 * spinning; connections wait in the listen backlog meanwhile.
 */
#ifndef PD_SVC_LISTEN_H
#define PD_SVC_LISTEN_H

#include <stdbool.h>
#include <sys/un.h>

#define SVC_ACCEPT_PAUSE_MS 100
/* Fds a peer's binding needs beyond its socket: its pidfd and one /proc
 * file at a time (svc_ident_bind). */
#define SVC_ACCEPT_SPARE_FDS 2

struct event;
struct event_base;

struct svc_acceptor {
	int fd;                 /* the listening socket (not owned) */
	const char *path;       /* for the log; must outlive the acceptor */
	struct event *ev;       /* readable: cb(fd, what, arg) */
	struct event *resume;   /* ends a pause */
};
/* Watch fd with cb. 0 or -ENOMEM. */
int svc_acceptor_start(struct svc_acceptor *a, struct event_base *base, int fd,
		       const char *path, void (*cb)(int fd, short what, void *arg), void *arg);
/* accept4 (non-blocking, close-on-exec): the new fd, or -errno (-EAGAIN:
 * none waiting; fd or memory exhaustion has paused the listener). */
int svc_acceptor_accept(struct svc_acceptor *a);
/* Pause the listener when err (-errno) is fd or memory exhaustion, which
 * also struck after accept (the peer's pidfd): 0 paused, else -EINVAL and
 * nothing done. what names the step in the log line. */
int svc_acceptor_pause(struct svc_acceptor *a, const char *what, int err);
/* Free the events (the fd stays open). NULL is fine. */
void svc_acceptor_stop(struct svc_acceptor *a);

/* What one daemon socket is. */
struct svc_listen_spec {
	const char *name;   /* systemd's FileDescriptorName: "client", "runtime", "control" */
	const char *path;   /* the configured path */
	const char *label;  /* said in its "listening on" line, or NULL */
	int backlog;
};

struct svc_listener {
	int fd;             /* -1: none yet */
	bool activated;     /* from systemd: the socket unit owns the path */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char name[32];      /* the FileDescriptorName it came with */
	struct svc_acceptor acc;
};

/*
 * Empty ls[0..n), then take the sockets systemd passed (LISTEN_FDS): one
 * named spec[i].name, or else bound at spec[i].path, becomes ls[i]
 * (CLOEXEC and O_NONBLOCK set; helpers must not inherit it). An fd that
 * matches none, or a second one for the same socket, is closed with a
 * warning. 0, or -EINVAL when a matching fd is not a listening AF_UNIX
 * SOCK_SEQPACKET socket (the socket unit is wrong: fatal).
 */
int svc_listen_activated(struct svc_listener *ls, const struct svc_listen_spec *spec,
			 unsigned n);
/* Bind and listen at spec->path unless l was activated, then accept with
 * cb(fd, what, arg) through l->acc. 0 or -errno. */
int svc_listen_start(struct svc_listener *l, const struct svc_listen_spec *spec,
		     struct event_base *base, void (*cb)(int fd, short what, void *arg), void *arg);
/* Stop accepting, close, and unlink a path bound here. NULL is fine. */
void svc_listen_close(struct svc_listener *l);

#endif
