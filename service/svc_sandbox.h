/*
 * svc_sandbox: the daemon's own sandbox, applied last in init:
 * capabilities dropped to the runtime set (docs/SANDBOX.md), no_new_privs,
 * then the seccomp filter of policy/seccomp/daemon.policy. Failure is
 * fatal; nothing undoes it.
 */
#ifndef PD_SVC_SANDBOX_H
#define PD_SVC_SANDBOX_H

enum svc_seccomp_mode { SVC_SECCOMP_ENFORCE, SVC_SECCOMP_DEBUG, SVC_SECCOMP_OFF };

/* 0 or -errno. */
int svc_sandbox_apply(enum svc_seccomp_mode mode);

#endif
