/*
 * The privileged side of profilingd-jattach: runs as root, before the
 * helper becomes the JVM's user, and does one thing.
 *
 * HotSpot makes its attach socket by binding <tmp>/.java_pid<nspid>.tmp
 * and renaming it onto <tmp>/.java_pid<nspid>. A VM killed by SIGKILL (the
 * OOM killer, say) never removes its socket, and /tmp is sticky: when the
 * pid comes round again for a JVM of another user, that VM can neither
 * unlink the old name (its vm_start tries) nor rename onto it, so its
 * attach listener never comes up and every capture of it times out. An
 * unprivileged user can cause the same on purpose by binding a socket of
 * that name. Root may remove it; the VM then makes its own.
 *
 * Removed only when all hold: the name is not the JVM's user's (the VM
 * replaces its own), it is not a directory, and, for a socket, nobody
 * listens on it (a connect is refused): a live listener is left alone,
 * since it may be another VM's with the same namespace pid, and is
 * reported instead. The helper sends nothing over this probe.
 *
 * The trigger file <tmp>/.attach_pid<nspid> has the same problem from the
 * helper's side: it cannot create the file over another user's, and the
 * VM ignores one that is not its user's. It is removed on the same terms
 * (a trigger is never a listener, so no probe).
 */
#include "ja.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

/* 1: a stream listener accepts at name in dfd; 0: none; -errno. */
static int listening(int dfd, const char *name)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* Through the directory fd: nothing on the way is looked up again. */
	if (util_fmt(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/%s", dfd, name) < 0)
		return -ENAMETOOLONG;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	int r = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	int e = r < 0 ? errno : 0;
	close(fd);
	if (r == 0 || e == EAGAIN || e == EINPROGRESS)
		return 1; /* EAGAIN: a listener with a full backlog */
	/* Refused: nobody listens. A datagram or seqpacket socket is no VM's. */
	if (e == ECONNREFUSED || e == EPROTOTYPE)
		return 0;
	return -e;
}

/*
 * One name in the VM's /tmp, another user's: removed unless it is a
 * directory or (probe) a socket somebody listens on. 1: removed; 0: left
 * (absent, or the VM's user's); -EADDRINUSE; -errno.
 */
static int clear_name(int dfd, const char *name, uid_t jvm_uid, bool probe, uid_t *owner)
{
	struct stat st, again;
	int r;

	*owner = (uid_t)-1;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	*owner = st.st_uid;
	if (st.st_uid == jvm_uid)
		return 0;
	if (S_ISDIR(st.st_mode))
		return -EADDRINUSE;
	if (probe && S_ISSOCK(st.st_mode) && (r = listening(dfd, name)) != 0)
		return r > 0 ? -EADDRINUSE : r;
	/*
	 * The same file still: not one the VM made in the meantime (another
	 * attach may have started it). What is left of the race, a rename
	 * between this stat and the unlink, costs that attach a timeout.
	 */
	if (fstatat(dfd, name, &again, AT_SYMLINK_NOFOLLOW) < 0 || again.st_ino != st.st_ino ||
	    again.st_dev != st.st_dev)
		return 0;
	return unlinkat(dfd, name, 0) < 0 ? -errno : 1;
}

int ja_clear_stale(pid_t pid, uid_t jvm_uid, uid_t owner[2])
{
	char dir[64], sock[32], trig[32];
	pid_t nspid;
	int r;

	owner[0] = owner[1] = (uid_t)-1;
	if ((r = ja_nspid(pid, &nspid)) < 0)
		return r;
	if (util_fmt(dir, sizeof(dir), "/proc/%d/root/tmp", (int)pid) < 0 ||
	    util_fmt(sock, sizeof(sock), ".java_pid%d", (int)nspid) < 0 ||
	    util_fmt(trig, sizeof(trig), ".attach_pid%d", (int)nspid) < 0)
		return -ENAMETOOLONG;
	/* A /tmp that is a link is the app's making: not followed. */
	int dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	int rs = clear_name(dfd, sock, jvm_uid, true, &owner[0]);
	/*
	 * The trigger file: the helper could not create it over another
	 * user's (sticky /tmp), and the VM ignores one not of its user. It
	 * is never a listener, so anything but a directory goes. Its failure
	 * is left to the helper's own create, which reports it.
	 */
	int rt = clear_name(dfd, trig, jvm_uid, false, &owner[1]);
	close(dfd);
	if (rs < 0)
		return rs;
	return (rs == 1 ? JA_STALE_SOCKET : 0) | (rt == 1 ? JA_STALE_TRIGGER : 0);
}
