/*
 * Seccomp sandboxes from allow-lists kept as data in policy/seccomp/
 * (compiled in at build time). The filter checks the architecture and
 * kills the process on anything not listed; debug mode traps instead and
 * writes the offending syscall number to stderr before exiting.
 */
#ifndef PD_SANDBOX_H
#define PD_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>

/* Install the filter. 0 or -errno; callers treat failure as fatal. */
int sbx_install(const char *const *syscalls, size_t n, bool debug);

#endif
