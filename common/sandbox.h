/*
 * Seccomp sandboxes from allow-lists kept as data in policy/seccomp/
 * (compiled in at build time by pd_seccomp_policy() in CMakeLists.txt).
 * The filter accepts the native x86_64 ABI only and kills the process on
 * anything not listed; debug mode traps instead, writes the offending
 * syscall's number and name to stderr and exits with SBX_TRAP_EXIT.
 *
 * A rule allows one syscall, either with any arguments (arg < 0) or when
 * one argument compares to a value. Several rules for one syscall are ORed:
 * "kill arg1 == 0" and "fcntl arg1 == F_SETLK" lines in the policy.
 * A "refuse" rule makes a call fail with an errno instead of killing: for
 * library code that copes with the failure (an NSS module's connect()).
 */
#ifndef PD_SANDBOX_H
#define PD_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum sbx_op { SBX_ANY, SBX_EQ, SBX_NE, SBX_LT, SBX_LE, SBX_GT, SBX_GE, SBX_MASKED_EQ };

struct sbx_rule {
	const char *name; /* syscall name as libseccomp knows it */
	int arg;          /* 0..5, or -1 with SBX_ANY */
	enum sbx_op op;
	uint64_t value;
	uint64_t mask;    /* SBX_MASKED_EQ only: (arg & mask) == value */
	int refuse;       /* 0: allow; else fail the call with this errno */
};

/* Exit status of a process whose forbidden syscall was trapped in debug
 * mode; a kill shows as signal 31 (shell status 159) instead. */
#define SBX_TRAP_EXIT 75

/*
 * Set no_new_privs and install the filter. 0 or -errno: -ENOTSUP on an
 * architecture the policies were not written for, -EINVAL on a name
 * libseccomp does not know (a typo must not widen a policy silently).
 * Callers treat failure as fatal.
 */
int sbx_install(const struct sbx_rule *rules, size_t n, bool debug);

/*
 * The same filter (enforcing, no debug trap), built by libseccomp in a
 * short-lived forked child that hands the BPF back through a pipe; this
 * process only loads it (no_new_privs, then seccomp(2)). For a long-lived
 * process (the daemon): libseccomp's code and allocations never become
 * part of its resident memory (issue #18). Same errors as sbx_install,
 * -EPROTO for a program the child did not hand back whole. Needs fork,
 * pipe2, read and wait4, before any filter forbids them.
 */
int sbx_install_apart(const struct sbx_rule *rules, size_t n);

/*
 * Make this process non-dumpable (PR_SET_DUMPABLE 0): a process of the
 * same uid can then neither ptrace it nor open its /proc/<pid>/mem, fds or
 * environ, and it leaves no core file. Every helper calls it first thing,
 * since the helpers run as, or hold data of, a uid an app may share; a
 * uid switch resets the flag to fs.suid_dumpable, so sbx_drop() calls it
 * again after one. 0 or -errno.
 */
int sbx_no_dump(void);

/*
 * Keep only the capabilities in keep[] (bounding, permitted and effective
 * sets, within what the process has; ambient and inheritable cleared).
 * With uid != (uid_t)-1, first switch to uid/gid (no supplementary groups)
 * and keep those capabilities across the switch; the process is left
 * non-dumpable. Run as root, before sbx_install(). 0 or -errno.
 */
int sbx_drop(const int *keep, size_t n, uid_t uid, gid_t gid);

#endif
