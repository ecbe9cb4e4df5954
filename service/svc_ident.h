/*
 * svc_ident: a peer's identity bound to its process, not to its pid
 * (docs/DESIGN.md §2, issue 14).
 *
 * A pid names whichever process holds it now. A connection's process can
 * exit and hand its socket on; the pid then goes to another user's
 * process. It can also exec a setuid program and keep the socket. So a
 * connection (and a capture target) is bound once, at accept, to:
 *   - a pidfd (SO_PEERPIDFD, Linux >= 6.5; pidfd_open, Linux >= 5.3, for
 *     a target found by pid and for a peer on kernels without
 *     SO_PEERPIDFD), which names that one process for its whole life;
 *     without one (ENOSYS), the pid plus its start time;
 *   - its start time (/proc/<pid>/stat field 22), which also goes to every
 *     helper that targets the process (profilingd-perf, profilingd-jattach);
 *   - all of its ids: real, effective, saved and fs uids and gids, and its
 *     supplementary groups (first SVC_IDENT_GROUPS_MAX kept, the rest
 *     counted), from /proc/<pid>/status, cross-checked with SO_PEERCRED.
 *
 * svc_ident_check() then says, before each capture start, trigger fire
 * and runtime match, whether that process still is what was bound:
 *   0        the same process with the same ids;
 *   -ESRCH   it is gone (exited, or its pid now names another process);
 *   -EPERM   its ids changed (a setuid or setgid exec, setresuid).
 * The check costs one ioctl (PIDFD_GET_INFO, Linux >= 6.13): about 1-2 us
 * here, under the 5 us a capture may spend on it. Older kernels read
 * /proc/<pid>/status (and the start time without a pidfd): tens of us
 * (bench/ident_check prints both paths).
 *
 * svc_ident_capturable() is the rule of who may capture a process: root,
 * or a uid that is its real, effective and saved uid all at once.
 *
 * Functions return 0 or a negative errno; svc_ident_fini() takes NULL and
 * a zeroed or already finished ident. No allocation: an ident is a value
 * plus at most one fd, which svc_ident_fini() closes.
 */
#ifndef PD_SVC_IDENT_H
#define PD_SVC_IDENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define SVC_IDENT_GROUPS_MAX 32

struct svc_ident {
	pid_t pid;
	int pidfd;                 /* -1: none (old kernel): pid + start time */
	uint64_t start;            /* clock ticks after boot (/proc/<pid>/stat) */
	uid_t uid[4];              /* real, effective, saved, fs */
	gid_t gid[4];
	uint32_t ngroups;          /* supplementary groups the process has */
	gid_t groups[SVC_IDENT_GROUPS_MAX]; /* the first ones of them */
};

/* An empty ident (pidfd -1): what svc_ident_fini() leaves too. */
void svc_ident_init(struct svc_ident *id);

/*
 * Bind the peer of the connected AF_UNIX socket sock (at accept).
 * -ESRCH: the peer's process is already gone or replaced; -EPERM: its ids
 * now differ from SO_PEERCRED's (it changed them after connect); else
 * -errno of getsockopt or /proc.
 */
int svc_ident_bind(struct svc_ident *id, int sock);

/*
 * Bind the process that has pid now (a capture target found by pid).
 * start != 0: it must have that start time, else -ESRCH.
 */
int svc_ident_of_pid(struct svc_ident *id, pid_t pid, uint64_t start);

/* A second handle on the same process (its own pidfd): 0 or -errno. */
int svc_ident_dup(struct svc_ident *dst, const struct svc_ident *src);

/* 0, -ESRCH (gone or replaced) or -EPERM (ids changed); see above. */
int svc_ident_check(const struct svc_ident *id);

/* uid may capture id's process: uid 0, or real = effective = saved = uid. */
bool svc_ident_capturable(const struct svc_ident *id, uid_t uid);

/* Real, effective and saved uids are not all one (a setuid process). */
bool svc_ident_mixed(const struct svc_ident *id);

void svc_ident_fini(struct svc_ident *id);

/* Which check path this kernel takes: "pidfd+PIDFD_GET_INFO",
 * "pidfd+/proc" or "pid+start time+/proc" (logs, the bench). */
const char *svc_ident_method(const struct svc_ident *id);

#endif
