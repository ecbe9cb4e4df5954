/*
 * svc_ident: identity bound to a process (svc_ident.h has the contract).
 *
 * The kernel's own handles do the binding: a pidfd names one process and
 * never a later one with the same pid. The /proc reads around it are made
 * while the pidfd's process is known to be alive (checked after reading),
 * so what they say is that process's: a pid is not handed out again
 * before its process is reaped.
 */
#include "svc_ident.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77 /* asm-generic/socket.h, Linux 6.5 */
#endif

/* linux/pidfd.h of Linux 6.13 (PIDFD_INFO_SIZE_VER0); older headers lack it. */
struct ident_pidfd_info {
	uint64_t mask;
	uint64_t cgroupid;
	uint32_t pid, tgid, ppid;
	uint32_t ruid, rgid, euid, egid, suid, sgid, fsuid, fsgid;
	uint32_t spare0[1];
};
#define IDENT_PIDFD_INFO_CREDS (1ull << 1)
#define IDENT_PIDFD_GET_INFO _IOWR(0xFF, 11, struct ident_pidfd_info)
/* policy/seccomp/daemon.policy allows this ioctl by its number. */
_Static_assert(IDENT_PIDFD_GET_INFO == 0xC040FF0Bul, "PIDFD_GET_INFO as in daemon.policy");
_Static_assert(sizeof(struct ident_pidfd_info) == 64, "PIDFD_INFO_SIZE_VER0");

/* Whether PIDFD_GET_INFO works here: -1 not tried yet, 0 no, 1 yes. */
static int have_get_info = -1;

void svc_ident_init(struct svc_ident *id)
{
	memset(id, 0, sizeof(*id));
	id->pidfd = -1;
}

void svc_ident_fini(struct svc_ident *id)
{
	if (!id)
		return;
	if (id->pidfd >= 0)
		close(id->pidfd);
	svc_ident_init(id);
}

const char *svc_ident_method(const struct svc_ident *id)
{
	if (id->pidfd < 0)
		return "pid+start time+/proc";
	return have_get_info == 0 ? "pidfd+/proc" : "pidfd+PIDFD_GET_INFO";
}

/*
 * Uid:, Gid: and Groups: of /proc/<pid>/status into id. 0, -ESRCH when
 * there is no such process, or -EINVAL.
 */
static int read_status(struct svc_ident *id, pid_t pid)
{
	unsigned u[4], g[4];
	size_t n = 0;
	/* uid_t and gid_t are unsigned int: the groups go straight in. */
	_Static_assert(sizeof(gid_t) == sizeof(unsigned), "gid_t is unsigned int");
	int r = util_proc_creds_groups((int)pid, u, g, (unsigned *)id->groups,
				       SVC_IDENT_GROUPS_MAX, &n);
	if (r < 0)
		return r == -ENOENT || r == -ESRCH ? -ESRCH : r;
	for (int i = 0; i < 4; i++) {
		id->uid[i] = (uid_t)u[i];
		id->gid[i] = (gid_t)g[i];
	}
	id->ngroups = (uint32_t)n;
	return 0;
}

static int read_start(pid_t pid, uint64_t *start)
{
	int r = util_proc_start_time((int)pid, start);
	return r == -ENOENT || r == -ESRCH ? -ESRCH : r;
}

/* The pidfd's process has not been reaped yet (its pid is still its own). */
static int pidfd_alive(int pidfd)
{
	/* EPERM (a daemon without CAP_KILL, another user's process) still
	 * means there is a process to refuse the signal. */
	if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) == 0 || errno == EPERM)
		return 0;
	return errno == ESRCH ? -ESRCH : -errno;
}

/* Creds of the pidfd's process by ioctl: 0, -ESRCH, or -ENOTTY where the
 * kernel lacks PIDFD_GET_INFO (before 6.13). */
static int get_info(int pidfd, struct ident_pidfd_info *info)
{
	if (have_get_info == 0)
		return -ENOTTY;
	memset(info, 0, sizeof(*info));
	info->mask = IDENT_PIDFD_INFO_CREDS;
	if (ioctl(pidfd, IDENT_PIDFD_GET_INFO, info) == 0) {
		have_get_info = 1;
		return 0;
	}
	int e = errno;
	if (e == ESRCH)
		return -ESRCH;
	if (e == ENOTTY || e == EINVAL || e == EOPNOTSUPP) {
		have_get_info = 0;
		return -ENOTTY;
	}
	return -e;
}

/*
 * Fill id from /proc for id->pid, which id->pidfd (if any) names: status,
 * start time, then proof that the process read is still the bound one.
 */
static int fill(struct svc_ident *id)
{
	uint64_t again;
	int r;

	if ((r = read_start(id->pid, &id->start)) < 0 || (r = read_status(id, id->pid)) < 0)
		return r;
	if (id->pidfd >= 0)
		return pidfd_alive(id->pidfd);
	/* No pidfd: the same start time after the status read means the same process. */
	if ((r = read_start(id->pid, &again)) < 0)
		return r;
	return again == id->start ? 0 : -ESRCH;
}

int svc_ident_bind(struct svc_ident *id, int sock)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	int pidfd = -1, r;

	svc_ident_init(id);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		return -errno;
	if (cred.pid <= 0)
		return -ESRCH;
	len = sizeof(pidfd);
	if (getsockopt(sock, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0) {
		/* Any error but "not on this kernel" means the peer is no longer
		 * there to bind. */
		if (errno != ENOPROTOOPT && errno != ENOSYS && errno != EOPNOTSUPP)
			return errno == EINVAL || errno == ESRCH ? -ESRCH : -errno;
		/*
		 * Before Linux 6.5 (ENOPROTOOPT): a pidfd of whatever has the pid
		 * now (Linux >= 5.3), else the pid and its start time. Either is
		 * checked against SO_PEERCRED below, so a process of another user
		 * that took the pid before this accept is refused; one of the
		 * same user would be bound in the connector's place (it could
		 * have been handed the socket anyway).
		 */
		pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
		if (pidfd < 0 && errno != ENOSYS)
			return errno == EINVAL || errno == ESRCH ? -ESRCH : -errno;
	}
	id->pid = cred.pid;
	id->pidfd = pidfd;
	if ((r = fill(id)) < 0)
		goto fail;
	/*
	 * SO_PEERCRED holds the effective ids at connect. Ids that differ now
	 * belong to a process that changed them since (a setuid exec), or,
	 * without a pidfd, to the next owner of the pid: nobody to bind.
	 */
	if (id->uid[1] != cred.uid || id->gid[1] != cred.gid) {
		r = -EPERM;
		goto fail;
	}
	return 0;
fail:
	svc_ident_fini(id);
	return r;
}

int svc_ident_of_pid(struct svc_ident *id, pid_t pid, uint64_t start)
{
	int r;

	svc_ident_init(id);
	if (pid <= 0)
		return -ESRCH;
	id->pid = pid;
	id->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (id->pidfd < 0) {
		if (errno != ENOSYS) {
			r = errno == EINVAL ? -ESRCH : -errno;
			goto fail;
		}
		id->pidfd = -1;
	}
	if ((r = fill(id)) < 0)
		goto fail;
	if (start && start != id->start) {
		r = -ESRCH;
		goto fail;
	}
	return 0;
fail:
	svc_ident_fini(id);
	return r;
}

int svc_ident_dup(struct svc_ident *dst, const struct svc_ident *src)
{
	*dst = *src;
	if (src->pidfd < 0)
		return 0;
	dst->pidfd = fcntl(src->pidfd, F_DUPFD_CLOEXEC, 0);
	if (dst->pidfd < 0) {
		int e = errno;
		svc_ident_init(dst);
		return -e;
	}
	return 0;
}

static bool same_ids(const struct svc_ident *id, const uid_t u[4], const gid_t g[4])
{
	for (int i = 0; i < 4; i++)
		if (u[i] != id->uid[i] || g[i] != id->gid[i])
			return false;
	return true;
}

int svc_ident_check(const struct svc_ident *id)
{
	struct ident_pidfd_info info;
	struct svc_ident now;
	int r;

	if (!id || id->pid <= 0)
		return -ESRCH;
	if (id->pidfd >= 0) {
		r = get_info(id->pidfd, &info);
		if (r == 0) {
			uid_t u[4] = { info.ruid, info.euid, info.suid, info.fsuid };
			gid_t g[4] = { info.rgid, info.egid, info.sgid, info.fsgid };
			return same_ids(id, u, g) ? 0 : -EPERM;
		}
		if (r != -ENOTTY)
			return r;
	}
	/* The /proc path: ids (with groups) now, then proof it is still the process. */
	svc_ident_init(&now);
	if ((r = read_status(&now, id->pid)) < 0)
		return r;
	if (id->pidfd >= 0) {
		if ((r = pidfd_alive(id->pidfd)) < 0)
			return r;
	} else {
		if ((r = read_start(id->pid, &now.start)) < 0)
			return r;
		if (now.start != id->start)
			return -ESRCH;
	}
	if (!same_ids(id, now.uid, now.gid) || now.ngroups != id->ngroups)
		return -EPERM;
	for (uint32_t i = 0; i < now.ngroups && i < SVC_IDENT_GROUPS_MAX; i++)
		if (now.groups[i] != id->groups[i])
			return -EPERM;
	return 0;
}

bool svc_ident_mixed(const struct svc_ident *id)
{
	return id->uid[0] != id->uid[1] || id->uid[0] != id->uid[2] ||
	       id->gid[0] != id->gid[1] || id->gid[0] != id->gid[2];
}

bool svc_ident_capturable(const struct svc_ident *id, uid_t uid)
{
	if (uid == 0)
		return true;
	return !svc_ident_mixed(id) && id->uid[0] == uid;
}
