/*
 * The two pieces of the systemd protocol the daemon speaks, written here
 * instead of linking libsystemd (issue #18: libsystemd and the libraries
 * it pulls in, gcrypt, gpg-error, lz4, zstd, lzma and libcap, were about
 * 1 MiB of the daemon's 6.7 MiB RSS, for five calls):
 *
 * - readiness (sd_notify(3)): one datagram to $NOTIFY_SOCKET (a path, or
 *   "@name" for the abstract namespace); nothing without it;
 * - socket activation (sd_listen_fds(3)): fds from 3, $LISTEN_FDS of them,
 *   when $LISTEN_PID is this process; names from $LISTEN_FDNAMES.
 *
 * Same contract as libsystemd's functions of the same names, for what the
 * daemon uses of them. Safe under the daemon's seccomp policy: an AF_UNIX
 * datagram socket, sendmsg, close.
 */
#ifndef PD_SVC_SD_H
#define PD_SVC_SD_H

#include <stdbool.h>

#define SVC_SD_LISTEN_FDS_START 3

/* Send state ("READY=1", ...). 0 when sent or not under systemd, else -errno. */
int svc_sd_notify(const char *state);

/*
 * The fds systemd passed: their count (0: none, not for us), or -errno
 * for a malformed environment. *names gets one malloc'd name per fd
 * ("unknown" where none was given), freed by the caller (each, then the
 * array); NULL when the count is 0. The fds get FD_CLOEXEC; the LISTEN_*
 * variables are removed, so helpers do not see them.
 */
int svc_sd_listen_fds_with_names(char ***names);

/* Is fd a socket of family and type, listening (listening 1) or not (0)?
 * 1 yes, 0 no, -errno when it cannot be told. */
int svc_sd_is_socket(int fd, int family, int type, int listening);

/* The same for AF_UNIX, bound to path: 1 yes, 0 no, -errno. */
int svc_sd_is_socket_unix(int fd, int type, int listening, const char *path);

#endif
