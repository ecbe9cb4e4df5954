/* Small helpers shared by the daemon, the client library and the tools. */
#ifndef PD_UTIL_H
#define PD_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* clock_gettime in ns; 0 where the clock is gone or unknown. Async-signal-safe. */
uint64_t util_now_ns(int clock_id);
/* Monotonic milliseconds, for timeouts. */
uint64_t util_mono_ms(void);
/* strlcpy semantics; returns strlen(src). */
size_t util_strlcpy(char *dst, const char *src, size_t size);
/*
 * FNV-1a (32 bits) of a NUL-terminated string, for small in-memory tables.
 * Not keyed: a peer that picks the strings can pick collisions, so a table
 * keyed by peer strings must cost no more on a collision than on a miss.
 */
uint32_t util_str_hash(const char *s);
/* write() all of buf, retrying on EINTR. 0 or -errno (-EIO when write()
 * writes nothing and reports no error). */
int util_write_all(int fd, const void *buf, size_t len);
/*
 * Read fd to its end into a malloc'd buffer (*out, *n; the caller frees).
 * A regular file is read into one buffer of its size, so the peak is the
 * file, not the next power of two; a pipe grows from 64 KiB by doubling.
 * -E2BIG past max bytes (nothing is kept), -ENOMEM, or -errno.
 */
int util_read_all(int fd, size_t max, uint8_t **out, size_t *n);
/*
 * A runtime's capture fd is a pipe the daemon may close early (the cap, a
 * cancel): a write then raises SIGPIPE, directed at the writing thread,
 * which must not kill the app. util_sigpipe_block blocks it in the calling
 * thread (it then stays pending there, write fails with EPIPE);
 * util_sigpipe_drain discards one pending on this thread. 0 or -errno.
 */
int util_sigpipe_block(void);
struct sigaction;
/*
 * Put back the handler of sig that a sampler replaced (old). Where that
 * was SIG_DFL, SIG_IGN instead: a profiling signal still pending must not
 * meet the default action, which kills the process (and discards it).
 */
void util_sig_restore(int sig, const struct sigaction *old);
void util_sigpipe_drain(void);
/* Read /proc/<pid>/stat field 22 (start time in clock ticks). 0 or -errno. */
int util_proc_start_time(int pid, uint64_t *start);
/*
 * Read up to n - 1 bytes of a small file (/proc, /sys) into buf, NUL-
 * terminated. Returns the length, or -errno (-EIO for an empty file).
 */
ssize_t util_read_file(const char *path, char *buf, size_t n);
/*
 * The value of one line of /proc/<pid>/status ("NSpid:" as key: what
 * follows the colon, up to the newline), read whole even when lines before
 * it (a long Groups:) put it past the first page. 0; -ENOENT when no line
 * has the key; -EOVERFLOW when the value does not fit n; -errno.
 */
int util_proc_status_line(int pid, const char *key, char *out, size_t n);
/* Real uid and gid of a process, from /proc/<pid>/status. 0 or -errno. */
int util_proc_ids(int pid, unsigned *uid, unsigned *gid);
/* All four uids and gids of a process (real, effective, saved, fs), from
 * /proc/<pid>/status. 0 or -errno. */
int util_proc_creds(int pid, unsigned uid[4], unsigned gid[4]);
/* The same, and the supplementary groups: the first max into groups, their
 * count (all of them, past max too) into *ngroups. */
int util_proc_creds_groups(int pid, unsigned uid[4], unsigned gid[4], unsigned *groups,
			   size_t max, size_t *ngroups);
/* mkdir -p with mode for the last component. 0 or -errno. */
int util_mkdir_p(const char *path, unsigned mode);
/*
 * snprintf that reports truncation: 0, or -ENAMETOOLONG when the output was
 * cut (it is still NUL-terminated). Use it for paths and log messages.
 */
int util_fmt(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Helpers' status line: "error: <message>" on stderr (the daemon reads the
 * last stderr line of a helper). Returns code, for `return util_fail(...)`.
 */
int util_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
