/*
 * The HotSpot attach protocol on Linux (docs/JVM.md):
 *  1. If <tmp>/.java_pid<nspid> is not a socket yet, create the trigger
 *     file <tmp>/.attach_pid<nspid> (owned by the JVM's euid, which the VM
 *     checks) and send SIGQUIT: the VM's signal thread sees the file and
 *     starts its attach listener instead of printing a thread dump.
 *  2. Connect (SOCK_STREAM). The VM checks that the peer's euid/egid are
 *     its own (or root), which is why the helper runs as the JVM's user.
 *  3. Send "1\0<cmd>\0<arg0>\0<arg1>\0<arg2>\0"; read "<status>\n<text>"
 *     until the VM closes the connection. One command per connection.
 * <tmp> is the JVM's /tmp, reached through /proc/<pid>/root so that a JVM
 * in another mount namespace (a container) works the same way.
 */
#include "ja.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

int ja_nspid(pid_t pid, pid_t *nspid)
{
	char line[512];
	/*
	 * Every kernel with pidfds has the line; without it the answer is
	 * unknown, and guessing pid would let an app in its own pid namespace
	 * pass for one in ours (ja_stale.c). Read past the first page: a long
	 * Groups: line comes before it.
	 */
	int r = util_proc_status_line((int)pid, "NSpid:", line, sizeof(line));
	if (r < 0)
		return r;
	/* The last number on the line is the pid in the innermost namespace. */
	long last = -1;
	for (const char *p = line; *p;) {
		while (*p == ' ' || *p == '\t')
			p++;
		char *e;
		long v = strtol(p, &e, 10);
		if (e == p)
			break;
		last = v;
		p = e;
	}
	if (last <= 0 || last > INT32_MAX)
		return -EINVAL;
	*nspid = (pid_t)last;
	return 0;
}

int ja_paths(pid_t pid, pid_t nspid, char *sock, size_t ns, char *trigger, size_t nt)
{
	if (util_fmt(sock, ns, "/proc/%d/root/tmp/.java_pid%d", (int)pid, (int)nspid) < 0 ||
	    util_fmt(trigger, nt, "/proc/%d/root/tmp/.attach_pid%d", (int)pid, (int)nspid) < 0)
		return -ENAMETOOLONG;
	return 0;
}

static int try_connect(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	/* Only a socket owned by the JVM's user (ours, now) is its listener. */
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/*
 * SIGQUIT is safe only once the VM handles it: its "Signal Dispatcher"
 * thread runs (comm is cut to 15 bytes). Before that (or with -Xrs, where
 * the thread never gets SIGQUIT) the signal's default action kills the VM.
 */
static bool signal_thread_up(pid_t pid)
{
	char path[64], comm[32];
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	DIR *d = opendir(path);
	bool up = false;
	if (!d)
		return false;
	for (struct dirent *e; !up && (e = readdir(d));) {
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		char p2[sizeof(path) + sizeof(e->d_name) + 8];
		snprintf(p2, sizeof(p2), "%s/%s/comm", path, e->d_name);
		if (util_read_file(p2, comm, sizeof(comm)) > 0 && !strncmp(comm, "Signal Dispatch", 15))
			up = true;
	}
	closedir(d);
	return up;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

int ja_connect(pid_t pid, int timeout_ms)
{
	char sock[128], trig[128];
	pid_t nspid;
	int r;

	if ((r = ja_nspid(pid, &nspid)) < 0 ||
	    (r = ja_paths(pid, nspid, sock, sizeof(sock), trig, sizeof(trig))) < 0)
		return r;
	int fd = try_connect(sock);
	if (fd >= 0)
		return fd;
	uint64_t deadline = util_mono_ms() + (uint64_t)timeout_ms;
	while (!signal_thread_up(pid)) {
		if (util_mono_ms() >= deadline || kill(pid, 0) < 0)
			return -ETIMEDOUT;
		sleep_ms(50);
	}
	/* A stale socket of a dead listener: the VM recreates it. */
	int tfd = open(trig, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (tfd < 0) {
		/* Another user's trigger that ja_stale.c left: say so, not EACCES. */
		struct stat st;
		r = -errno;
		if ((r == -EACCES || r == -EPERM) && lstat(trig, &st) == 0 && st.st_uid != geteuid())
			return -EADDRINUSE;
		return r;
	}
	close(tfd);
	if (kill(pid, SIGQUIT) < 0) {
		r = -errno;
		unlink(trig);
		return r;
	}
	/*
	 * Halfway with no socket yet, SIGQUIT once more, as the JDK's own
	 * attach does: the VM acts on the trigger file only at a SIGQUIT.
	 */
	uint64_t again = util_mono_ms() + (uint64_t)timeout_ms / 2;
	unsigned wait = 20;
	for (;;) {
		sleep_ms(wait);
		fd = try_connect(sock);
		uint64_t now = util_mono_ms();
		if (fd >= 0 || now >= deadline)
			break;
		/* Still a VM with its signal thread (not a pid reused since). */
		if (again && now >= again && fd == -ENOENT) {
			if (signal_thread_up(pid))
				kill(pid, SIGQUIT);
			again = 0;
		}
		if (wait < 200)
			wait *= 2;
	}
	unlink(trig);
	if (fd >= 0)
		return fd;
	/* Another user's file in the way (ja_stale.c left it: a live listener). */
	struct stat st;
	if (lstat(sock, &st) == 0 && st.st_uid != geteuid())
		return -EADDRINUSE;
	return -ETIMEDOUT;
}

int ja_send(int fd, const char *cmd, const char *a0, const char *a1, const char *a2)
{
	const char *parts[] = { JA_PROTOCOL_VERSION, cmd, a0 ? a0 : "", a1 ? a1 : "",
				a2 ? a2 : "" };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t n = strlen(parts[i]) + 1;
		if (n > JA_MAX_ARG)
			return -E2BIG;
		int r = util_write_all(fd, parts[i], n);
		if (r < 0)
			return r;
	}
	return 0;
}

int ja_read_reply(int fd, int timeout_ms, char **buf, size_t *len, bool *cut)
{
	size_t cap = 4096, n = 0;
	char *b = malloc(cap);
	uint64_t deadline = util_mono_ms() + (uint64_t)timeout_ms;
	*cut = false;
	if (!b)
		return -ENOMEM;
	for (;;) {
		uint64_t now = util_mono_ms();
		if (now >= deadline) {
			free(b);
			return -ETIMEDOUT;
		}
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int pr = poll(&pfd, 1, (int)(deadline - now));
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			free(b);
			return pr < 0 ? -errno : -ETIMEDOUT;
		}
		if (n + 1 >= cap && cap < JA_MAX_REPLY + 1) {
			size_t nc = cap * 2 > JA_MAX_REPLY + 1 ? JA_MAX_REPLY + 1 : cap * 2;
			char *nb = realloc(b, nc);
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
			cap = nc;
		}
		char sink[4096];
		bool full = n + 1 >= cap;
		ssize_t r = full ? read(fd, sink, sizeof(sink)) : read(fd, b + n, cap - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;
			free(b);
			return e;
		}
		if (r == 0)
			break;
		if (full)
			*cut = true; /* drain the rest so the VM finishes its write */
		else
			n += (size_t)r;
	}
	b[n] = '\0';
	*buf = b;
	*len = n;
	return 0;
}
