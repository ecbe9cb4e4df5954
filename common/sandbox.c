#include "sandbox.h"

#include <errno.h>
#include <seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_sigsys(int sig, siginfo_t *si, void *uc)
{
	char msg[96];
	int n = snprintf(msg, sizeof(msg), "seccomp: forbidden syscall %d\n", si->si_syscall);
	if (n > 0) {
		ssize_t w = write(STDERR_FILENO, msg, (size_t)n);
		(void)w;
	}
	/* Raw exit_group: sanitizer runtimes wrap _exit with calls the filter
	 * forbids. 75, not 159 (128 + SIGSYS), so a trap is told from a kill. */
	syscall(SYS_exit_group, 75);
}

int sbx_install(const char *const *syscalls, size_t n, bool debug)
{
	scmp_filter_ctx ctx;
	int r;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	if (debug) {
		struct sigaction sa;
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_sigsys;
		sa.sa_flags = SA_SIGINFO;
		if (sigaction(SIGSYS, &sa, NULL) < 0)
			return -errno;
	}
	/* Only the native architecture: other ABIs hit the default action. */
	ctx = seccomp_init(debug ? SCMP_ACT_TRAP : SCMP_ACT_KILL_PROCESS);
	if (!ctx)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		int nr = seccomp_syscall_resolve_name(syscalls[i]);
		if (nr == __NR_SCMP_ERROR) {
			r = -EINVAL; /* a typo in the policy must not widen it silently */
			goto out;
		}
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) < 0)
			goto out;
	}
	r = seccomp_load(ctx);
out:
	seccomp_release(ctx);
	return r;
}
