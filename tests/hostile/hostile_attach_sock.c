/*
 * hostile_attach_sock: another user's file where a JVM's attach socket
 * goes (docs/JVM.md, "Stale attach sockets").
 *
 *   hostile_attach_sock stale PATH
 *     Binds a stream socket at PATH and exits: the name stays, nobody
 *     listens, as after a VM the OOM killer took. Prints "planted".
 *   hostile_attach_sock live PATH SECONDS
 *     Binds and listens at PATH for SECONDS, accepting every connection
 *     and counting what each sends until it closes. Prints "listening",
 *     then "conn bytes=N" per connection; the daemon's helper must never
 *     send a command to it.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

static int bound(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	util_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(s);
		return e;
	}
	return s;
}

/* Everything one connection sends until it closes (or 2 s of silence). */
static long drain(int c)
{
	long total = 0;
	char buf[4096];
	for (;;) {
		struct pollfd pf = { .fd = c, .events = POLLIN };
		if (poll(&pf, 1, 2000) <= 0)
			break;
		ssize_t n = read(c, buf, sizeof(buf));
		if (n <= 0)
			break;
		total += n;
	}
	return total;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "stale")) {
		int s = bound(argv[2]);
		if (s < 0) {
			fprintf(stderr, "bind %s: %s\n", argv[2], strerror(-s));
			return 1;
		}
		close(s);
		printf("planted\n");
		return 0;
	}
	if (argc == 4 && !strcmp(argv[1], "live")) {
		int s = bound(argv[2]);
		if (s < 0 || listen(s, 8) < 0) {
			fprintf(stderr, "listen %s: %s\n", argv[2], strerror(s < 0 ? -s : errno));
			return 1;
		}
		printf("listening\n");
		fflush(stdout);
		time_t end = time(NULL) + atoi(argv[3]);
		while (time(NULL) < end) {
			struct pollfd pf = { .fd = s, .events = POLLIN };
			if (poll(&pf, 1, 200) <= 0)
				continue;
			int c = accept(s, NULL, NULL);
			if (c < 0)
				continue;
			printf("conn bytes=%ld\n", drain(c));
			fflush(stdout);
			close(c);
		}
		return 0;
	}
	fprintf(stderr, "usage: hostile_attach_sock stale PATH | live PATH SECONDS\n");
	return 2;
}
