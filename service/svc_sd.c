/*
 * sd_notify and socket activation without libsystemd (svc_sd.h says why).
 * The wire format is systemd's documented one: sd_notify(3),
 * sd_listen_fds(3).
 */
#include "svc_sd.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int svc_sd_notify(const char *state)
{
	const char *e = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n;

	if (!e || !*e || !state)
		return 0;
	n = strlen(e);
	if ((e[0] != '/' && e[0] != '@') || n >= sizeof(sa.sun_path))
		return -EINVAL;
	memcpy(sa.sun_path, e, n);
	if (e[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract: the length bounds the name */
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	struct iovec iov = { .iov_base = (void *)state, .iov_len = strlen(state) };
	struct msghdr mh = {
		.msg_name = &sa,
		.msg_namelen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n +
					   (e[0] == '/')),
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	int r = sendmsg(s, &mh, MSG_NOSIGNAL) < 0 ? -errno : 0;
	close(s);
	return r;
}

static int parse_int(const char *s, long *out)
{
	char *end;
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < 0)
		return -EINVAL;
	*out = v;
	return 0;
}

int svc_sd_listen_fds_with_names(char ***names)
{
	long pid, n;
	int r = 0;

	*names = NULL;
	if (parse_int(getenv("LISTEN_PID"), &pid) < 0 || pid != (long)getpid())
		goto out; /* not for us (or none): 0 */
	if ((r = parse_int(getenv("LISTEN_FDS"), &n)) < 0)
		goto out;
	/* fds count up from 3; an absurd count is a broken environment */
	if (n > 4096) {
		r = -EINVAL;
		goto out;
	}
	for (long k = 0; k < n; k++)
		if (fcntl(SVC_SD_LISTEN_FDS_START + (int)k, F_SETFD, FD_CLOEXEC) < 0) {
			r = -errno;
			goto out;
		}
	if (n == 0)
		goto out;
	char **v = calloc((size_t)n, sizeof(*v));
	const char *fdn = getenv("LISTEN_FDNAMES");
	if (!v) {
		r = -ENOMEM;
		goto out;
	}
	for (long k = 0; k < n; k++) {
		/* "a:b:c", one per fd; missing or empty names are "unknown" */
		size_t len = fdn ? strcspn(fdn, ":") : 0;
		v[k] = len ? strndup(fdn, len) : strdup("unknown");
		if (!v[k]) {
			while (k-- > 0)
				free(v[k]);
			free(v);
			r = -ENOMEM;
			goto out;
		}
		if (fdn)
			fdn = fdn[len] == ':' ? fdn + len + 1 : NULL;
	}
	*names = v;
	r = (int)n;
out:
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	return r;
}

int svc_sd_is_socket(int fd, int family, int type, int listening)
{
	struct stat st;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int v;
	socklen_t vl = sizeof(v);

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &vl) < 0)
		return -errno;
	if (v != type)
		return 0;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return -errno;
	if (len < sizeof(sa_family_t) || ss.ss_family != family)
		return 0;
	if (listening >= 0) {
		vl = sizeof(v);
		if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) < 0)
			return -errno;
		if (!v != !listening)
			return 0;
	}
	return 1;
}

int svc_sd_is_socket_unix(int fd, int type, int listening, const char *path)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	int r = svc_sd_is_socket(fd, AF_UNIX, type, listening);

	if (r <= 0 || !path)
		return r;
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	size_t plen = len > offsetof(struct sockaddr_un, sun_path)
			      ? len - offsetof(struct sockaddr_un, sun_path) : 0;
	size_t want = strlen(path);
	/* a path socket's name may or may not carry its NUL in the length */
	if (plen && sa.sun_path[plen - 1] == '\0')
		plen--;
	return plen == want && memcmp(sa.sun_path, path, want) == 0;
}
