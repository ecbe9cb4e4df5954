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
 * that name. Root may remove it; the VM then makes its own. The trigger
 * file <tmp>/.attach_pid<nspid> has the same problem from the helper's
 * side: it cannot create the file over another user's, and the VM ignores
 * one that is not its user's.
 *
 * A name is removed only when all hold:
 *  - the process is the one the daemon admitted (start time), and stayed
 *    so while its ids, its namespace pid and its /tmp were read (a pidfd
 *    taken first is still alive after);
 *  - the VM is in this pid namespace (its nspid is its pid). In a pid
 *    namespace of its own an app picks its nspid, so it could name
 *    another user's VM's files in a /tmp it shares with the host;
 *  - the VM's mount namespace belongs to this user namespace. An app with
 *    a user namespace of its own can mount what it likes: another sticky
 *    directory (/dev/shm) over its /tmp, or a file of root's over the
 *    name, under which a live socket of another user would go unprobed;
 *  - that /tmp is sticky (elsewhere the VM can replace the name itself);
 *  - the name is on the same mount as that /tmp (nothing mounted on it);
 *  - the name is another user's, and not a directory;
 *  - for the socket: nobody listens on it (a connect through a
 *    no-follow handle of that very inode is refused; nothing is sent). A
 *    live listener is left alone and reported. A trigger is never a
 *    listener, so it gets no probe.
 * Left open: unlinkat() goes by name. Between the last check and the
 * unlink the name's owner may remove it, and the VM rename its new socket
 * onto it; that socket is then removed. Only the stale name's owner can
 * do that in a sticky /tmp, and what it gains, a VM without a listener,
 * it could have by keeping a live socket on the name.
 */
#include "ja.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

/* 1: a stream listener accepts on the socket fd (an O_PATH handle) names;
 * 0: none; -errno. */
static int listening(int fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	/* The handle's inode itself: a link swapped in since is not followed. */
	if (util_fmt(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", fd) < 0)
		return -ENAMETOOLONG;
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return -errno;
	int r = connect(s, (struct sockaddr *)&sa, sizeof(sa));
	int e = r < 0 ? errno : 0;
	close(s);
	if (r == 0 || e == EAGAIN || e == EINPROGRESS)
		return 1; /* EAGAIN: a listener with a full backlog */
	/* Refused: nobody listens. A datagram or seqpacket socket is no VM's. */
	if (e == ECONNREFUSED || e == EPROTOTYPE)
		return 0;
	return -e;
}

/* The id of the mount fd is on; -errno (-ENOSYS: the kernel does not say). */
static int mount_id(int fd, uint64_t *id)
{
	struct statx sx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &sx) < 0)
		return -errno;
	if (!(sx.stx_mask & STATX_MNT_ID))
		return -ENOSYS;
	*id = sx.stx_mnt_id;
	return 0;
}

/*
 * One name in the VM's /tmp (dfd, on mount dmnt): 1 removed; 0 left
 * (absent, the VM user's, or something mounted on it); -EADDRINUSE (a
 * directory, or with probe a live listener); -errno.
 */
static int clear_name(int dfd, uint64_t dmnt, const char *name, uid_t jvm_uid, bool probe,
		      uid_t *owner)
{
	struct stat st, again;
	uint64_t mnt;
	int r = 0;

	*owner = (uid_t)-1;
	int fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	*owner = st.st_uid;
	if (st.st_uid == jvm_uid)
		goto out;
	/*
	 * The open crossed anything mounted on the name; the unlink would
	 * not (it removes what lies under), so what was checked must be what
	 * goes. Where the kernel cannot tell, nothing goes.
	 */
	if (mount_id(fd, &mnt) < 0 || mnt != dmnt)
		goto out;
	if (S_ISDIR(st.st_mode)) {
		r = -EADDRINUSE;
		goto out;
	}
	if (probe && S_ISSOCK(st.st_mode) && (r = listening(fd)) != 0) {
		r = r > 0 ? -EADDRINUSE : r;
		goto out;
	}
	/*
	 * The name must still be that inode: not one the VM made in the
	 * meantime (another attach may have started it). In a sticky /tmp
	 * only the file's owner can put something else there, so what this
	 * removes is never more than that user's own file.
	 */
	if (fstatat(dfd, name, &again, AT_SYMLINK_NOFOLLOW) < 0 || again.st_ino != st.st_ino ||
	    again.st_dev != st.st_dev) {
		r = 0;
		goto out;
	}
	r = unlinkat(dfd, name, 0) < 0 ? -errno : 1;
out:
	close(fd);
	return r;
}

/*
 * 1: pid's mount namespace is owned by this process's user namespace, so
 * every mount in it was made by someone privileged here; 0: another's;
 * -errno.
 */
static int own_mounts(pid_t pid)
{
	char path[64];
	struct stat mine, theirs;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int ufd = ioctl(fd, NS_GET_USERNS);
	r = ufd < 0 ? -errno : 0;
	close(fd);
	if (r < 0)
		return r == -EPERM ? 0 : r; /* EPERM: owned outside our view */
	if (fstat(ufd, &theirs) < 0 || stat("/proc/self/ns/user", &mine) < 0)
		r = -errno;
	else
		r = theirs.st_dev == mine.st_dev && theirs.st_ino == mine.st_ino;
	close(ufd);
	return r;
}

/* pid is still the process pidfd names (or, with no pidfd, started at start). */
static bool still(pid_t pid, int pidfd, uint64_t start)
{
	uint64_t now = 0;
	if (pidfd >= 0)
		return syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0;
	return util_proc_start_time((int)pid, &now) == 0 && now == start;
}

int ja_clear_stale(pid_t pid, uint64_t start, uid_t jvm_uid, struct ja_stale *out)
{
	char dir[64], sock[32], trig[32];
	unsigned u[4], g[4];
	uint64_t now;
	pid_t nspid;
	struct stat st;
	int dfd = -1, r;

	*out = (struct ja_stale){ .owner = { (uid_t)-1, (uid_t)-1 } };
	/* Taken first: alive at the end, it proves the reads between were of it. */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if ((r = util_proc_start_time((int)pid, &now)) < 0)
		goto out;
	if (start && now != start) {
		r = -ESRCH;
		goto out;
	}
	start = now;
	if ((r = util_proc_creds((int)pid, u, g)) < 0 || (r = ja_nspid(pid, &nspid)) < 0)
		goto out;
	if (u[1] != jvm_uid) {
		r = -ESRCH;
		goto out;
	}
	if (nspid != pid) {
		r = 0; /* its own pid namespace: nothing done (see the top) */
		goto out;
	}
	if ((r = own_mounts(pid)) <= 0)
		goto out; /* another user namespace's mounts: nothing done */
	if (util_fmt(dir, sizeof(dir), "/proc/%d/root/tmp", (int)pid) < 0 ||
	    util_fmt(sock, sizeof(sock), ".java_pid%d", (int)nspid) < 0 ||
	    util_fmt(trig, sizeof(trig), ".attach_pid%d", (int)nspid) < 0) {
		r = -ENAMETOOLONG;
		goto out;
	}
	/* A /tmp that is a link is the app's making: not followed. */
	if ((dfd = open(dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if (!still(pid, pidfd, start)) {
		r = -ESRCH;
		goto out;
	}
	if (fstat(dfd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!(st.st_mode & S_ISVTX)) {
		r = 0;
		goto out;
	}
	uint64_t dmnt;
	if ((r = mount_id(dfd, &dmnt)) < 0) {
		r = r == -ENOSYS ? 0 : r;
		goto out;
	}
	int rs = clear_name(dfd, dmnt, sock, jvm_uid, true, &out->owner[0]);
	int rt = clear_name(dfd, dmnt, trig, jvm_uid, false, &out->owner[1]);
	out->removed = (rs == 1 ? JA_STALE_SOCKET : 0) | (rt == 1 ? JA_STALE_TRIGGER : 0);
	/* The trigger's own failure is left to the helper's create of it. */
	r = rs < 0 ? rs : 0;
out:
	if (dfd >= 0)
		close(dfd);
	if (pidfd >= 0)
		close(pidfd);
	return r;
}
