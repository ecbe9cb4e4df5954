#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t util_now_ns(int clock_id)
{
	struct timespec ts;
	if (clock_gettime(clock_id, &ts) < 0)
		return 0; /* a thread CPU clock whose thread has exited */
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t util_mono_ms(void)
{
	return util_now_ns(CLOCK_MONOTONIC) / 1000000ull;
}

size_t util_strlcpy(char *dst, const char *src, size_t size)
{
	size_t n = strlen(src);
	if (size) {
		size_t c = n < size - 1 ? n : size - 1;
		memcpy(dst, src, c);
		dst[c] = '\0';
	}
	return n;
}

uint32_t util_str_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

int util_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Nothing written and no error: asking again would spin. */
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int util_read_all(int fd, size_t max, uint8_t **out, size_t *n)
{
	size_t cap = 1u << 16, len = 0;
	struct stat sb;
	/* One more byte than the file, to see its end in the same buffer. */
	if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
		if ((uint64_t)sb.st_size > max)
			return -E2BIG;
		cap = (size_t)sb.st_size + 1;
	}
	uint8_t *b = malloc(cap);
	if (!b)
		return -ENOMEM;
	for (;;) {
		if (len == cap) {
			if (cap > max) {
				free(b);
				return -E2BIG;
			}
			uint8_t *nb = realloc(b, cap * 2);
			if (!nb) {
				free(b);
				return -ENOMEM;
			}
			b = nb;
			cap *= 2;
		}
		ssize_t r = read(fd, b + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;
			free(b);
			return e;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len > max) {
		free(b);
		return -E2BIG;
	}
	*out = b;
	*n = len;
	return 0;
}

void util_sig_restore(int sig, const struct sigaction *old)
{
	if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler == SIG_DFL) {
		struct sigaction ign;
		memset(&ign, 0, sizeof(ign));
		ign.sa_handler = SIG_IGN;
		sigaction(sig, &ign, NULL);
	} else {
		sigaction(sig, old, NULL);
	}
}

int util_sigpipe_block(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	return -pthread_sigmask(SIG_BLOCK, &set, NULL);
}

void util_sigpipe_drain(void)
{
	sigset_t set, pending;
	const struct timespec now = { 0, 0 };
	/* Only when it is pending: sigtimedwait would also take a process-wide
	 * SIGPIPE meant for the app's own threads' handlers. */
	if (sigpending(&pending) < 0 || !sigismember(&pending, SIGPIPE))
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	while (sigtimedwait(&set, NULL, &now) < 0 && errno == EINTR)
		;
}

ssize_t util_read_file(const char *path, char *buf, size_t n)
{
	if (!n)
		return -EINVAL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t len;
	do {
		len = read(fd, buf, n - 1);
	} while (len < 0 && errno == EINTR);
	int e = errno;
	close(fd);
	if (len <= 0) {
		buf[0] = '\0';
		return len < 0 ? -e : -EIO;
	}
	buf[len] = '\0';
	return len;
}

int util_proc_status_line(int pid, const char *key, char *out, size_t n)
{
	char path[64], buf[4096];
	size_t klen = strlen(key), have = 0, got = 0;
	/* at_bol: buf[0] starts a line (not the rest of one longer than buf). */
	bool at_bol = true, eof = false;
	int r = -ENOENT;

	if (!n || !klen || klen >= sizeof(buf) / 2)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (!eof || have) {
		if (!eof && have < sizeof(buf)) {
			ssize_t len = read(fd, buf + have, sizeof(buf) - have);
			if (len < 0 && errno == EINTR)
				continue;
			if (len < 0) {
				r = -errno;
				break;
			}
			eof = len == 0;
			have += (size_t)len;
			got += (size_t)len;
		}
		char *nl = memchr(buf, '\n', have);
		if (!nl && !eof && have < sizeof(buf))
			continue; /* a short read: the line is not whole yet */
		size_t line = nl ? (size_t)(nl - buf) : have;
		if (at_bol && line >= klen && !memcmp(buf, key, klen)) {
			if (!nl && !eof) {
				r = -EOVERFLOW; /* a wanted line longer than the buffer */
				break;
			}
			size_t vlen = line - klen;
			if (vlen >= n) {
				r = -EOVERFLOW;
				break;
			}
			memcpy(out, buf + klen, vlen);
			out[vlen] = '\0';
			r = 0;
			break;
		}
		/* Drop the line, or all of a buffer that holds only part of one. */
		size_t drop = nl ? line + 1 : have;
		at_bol = nl != NULL;
		memmove(buf, buf + drop, have - drop);
		have -= drop;
	}
	close(fd);
	if (r == -ENOENT && !got)
		r = -EIO;
	return r;
}

int util_proc_start_time(int pid, uint64_t *start)
{
	char path[64], buf[1024];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((n = util_read_file(path, buf, sizeof(buf))) < 0)
		return (int)n;
	/* comm may hold spaces and parens: fields restart after the last ')'. */
	char *p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	p++;
	/* After ')' comes field 3 (state); start time is field 22. */
	unsigned long long v = 0;
	int field = 2;
	char *save = NULL;
	for (char *tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		if (++field == 22) {
			if (sscanf(tok, "%llu", &v) != 1)
				return -EINVAL;
			*start = v;
			return 0;
		}
	}
	return -EINVAL;
}

int util_mkdir_p(const char *path, unsigned mode)
{
	char tmp[4096];
	if (util_strlcpy(tmp, path, sizeof(tmp)) >= sizeof(tmp))
		return -ENAMETOOLONG;
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int util_fmt(char *out, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(out, n, fmt, ap);
	va_end(ap);
	if (r < 0)
		return -EINVAL;
	return (size_t)r >= n ? -ENAMETOOLONG : 0;
}

int util_proc_creds(int pid, unsigned uid[4], unsigned gid[4])
{
	return util_proc_creds_groups(pid, uid, gid, NULL, 0, NULL);
}

int util_proc_creds_groups(int pid, unsigned uid[4], unsigned gid[4], unsigned *groups,
			   size_t max, size_t *ngroups)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	ssize_t n = util_read_file(path, buf, sizeof(buf));
	if (n < 0)
		return (int)n;
	char *u = strstr(buf, "\nUid:"), *g = strstr(buf, "\nGid:");
	if (!u || !g || sscanf(u + 5, "%u %u %u %u", &uid[0], &uid[1], &uid[2], &uid[3]) != 4 ||
	    sscanf(g + 5, "%u %u %u %u", &gid[0], &gid[1], &gid[2], &gid[3]) != 4)
		return -EINVAL;
	if (!ngroups)
		return 0;
	*ngroups = 0;
	char *p = strstr(buf, "\nGroups:");
	if (!p)
		return 0;
	for (p += 8;;) {
		char *end;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			break;
		unsigned long v = strtoul(p, &end, 10);
		if (*ngroups < max)
			groups[*ngroups] = (unsigned)v;
		(*ngroups)++;
		p = end;
	}
	return 0;
}

int util_proc_ids(int pid, unsigned *uid, unsigned *gid)
{
	unsigned u[4], g[4];
	int r = util_proc_creds(pid, u, g);
	if (r < 0)
		return r;
	*uid = u[0];
	*gid = g[0];
	return 0;
}

int util_fail(int code, const char *fmt, ...)
{
	va_list ap;
	fputs("error: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}
