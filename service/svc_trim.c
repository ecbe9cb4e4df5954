/* Give start-up's and bursts' text back to the page cache (svc_trim.h). */
#include "svc_trim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"
#include "util.h"

/* One mapping of /proc/self/smaps while its fields are read. */
struct vma {
	unsigned long start, end;
	int eligible; /* private, not writable, of a file */
	long rss_kib, anon_kib, swap_kib;
};

/*
 * Unmap v's pages if every one of them is still the file's; its KiB.
 * Anonymous counts only the written pages in memory: one swapped out
 * shows as Swap instead, and unmapping it would read the file back.
 */
static long trim_one(const struct vma *v)
{
	if (!v->eligible || v->rss_kib <= 0 || v->anon_kib != 0 || v->swap_kib != 0)
		return 0;
	if (madvise((void *)v->start, v->end - v->start, MADV_DONTNEED) < 0)
		return 0;
	return v->rss_kib;
}

/*
 * A header line of smaps: "start-end perms offset dev inode [path]". A
 * file's path starts with '/', unlike "[heap]", "[vdso]" and the like or
 * an anonymous mapping's empty one.
 */
static int parse_header(const char *line, struct vma *v)
{
	char perms[8];
	int path_at = 0;
	if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &v->start, &v->end, perms, &path_at) < 3)
		return -EINVAL;
	v->eligible = strlen(perms) == 4 && perms[1] != 'w' && perms[3] == 'p' && path_at > 0 &&
		      line[path_at] == '/';
	v->rss_kib = 0;
	/* Unknown until their lines are read: a mapping whose lines are
	 * missing is not trimmed. */
	v->anon_kib = v->swap_kib = -1;
	return 0;
}

int svc_trim_text(long *kib_out)
{
	FILE *f = fopen("/proc/self/smaps", "re");
	*kib_out = 0;
	if (!f)
		return -errno;
	char line[512];
	struct vma v = { 0 };
	int have = 0;
	long kib = 0;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		int whole = n > 0 && line[n - 1] == '\n';
		/* A field line starts with a capital ("Rss:"), a header with
		 * the mapping's start in lower-case hex. */
		if (line[0] >= 'A' && line[0] <= 'Z') {
			if (have && !strncmp(line, "Rss:", 4))
				v.rss_kib = strtol(line + 4, NULL, 10);
			else if (have && !strncmp(line, "Anonymous:", 10))
				v.anon_kib = strtol(line + 10, NULL, 10);
			else if (have && !strncmp(line, "Swap:", 5))
				v.swap_kib = strtol(line + 5, NULL, 10);
		} else {
			/* The mapping before is complete: all its fields read. */
			if (have)
				kib += trim_one(&v);
			have = parse_header(line, &v) == 0;
		}
		/* The rest of a longer line (a path past 511 bytes). */
		while (!whole) {
			int c = fgetc(f);
			whole = c == '\n' || c == EOF;
		}
	}
	if (have)
		kib += trim_one(&v);
	int err = ferror(f) ? -EIO : 0;
	fclose(f);
	*kib_out = kib;
	return err;
}

void svc_trim_start(struct svc_trim_state *s, long post_kib)
{
	s->prev_kib = s->post_kib = post_kib;
	s->floor_kib = -1;
	s->learning = 0;
}

int svc_trim_step(struct svc_trim_state *s, long cur_kib)
{
	/* The level just after a trim could not be read: the first one that
	 * can stands in for it. */
	if (s->post_kib < 0)
		s->post_kib = cur_kib;
	/* Still mapping (a fault-around or more since the last check): not
	 * quiet. A level that only went down is quiet. */
	long prev = s->prev_kib;
	s->prev_kib = cur_kib;
	if (prev < 0 || cur_kib > prev + SVC_TRIM_QUIET_KIB)
		return 0;
	if (s->learning == 1 && cur_kib > s->post_kib + SVC_TRIM_SLACK_KIB)
		return 1; /* a burst came before the floor was known: once more */
	if (s->learning) {
		s->floor_kib = cur_kib;
		s->learning = 0;
		return 0;
	}
	long base = s->floor_kib >= 0 ? s->floor_kib : s->post_kib;
	if (cur_kib > base + SVC_TRIM_SLACK_KIB)
		return 1;
	if (s->floor_kib < 0)
		s->floor_kib = cur_kib;
	return 0;
}

void svc_trim_trimmed(struct svc_trim_state *s, long post_kib)
{
	s->prev_kib = s->post_kib = post_kib;
	s->floor_kib = -1;
	s->learning = s->learning ? 2 : 1;
}

static struct event *check_ev;
static struct svc_trim_state state;

/* File-backed and shared resident KiB (statm's third field), or -errno. */
static long file_kib(void)
{
	char buf[128];
	ssize_t n = util_read_file("/proc/self/statm", buf, sizeof(buf));
	if (n < 0)
		return (long)n;
	unsigned long size, res, shared;
	if (sscanf(buf, "%lu %lu %lu", &size, &res, &shared) != 3)
		return -EIO;
	return (long)(shared * (unsigned long)(sysconf(_SC_PAGESIZE) / 1024));
}

/* Trim; the level just after (-errno when statm cannot be read). */
static long trim_now(const char *why)
{
	long kib;
	int r = svc_trim_text(&kib);
	if (r < 0)
		LOG_W("cannot read /proc/self/smaps: %s (%ld KiB unmapped)", strerror(-r), kib);
	else
		LOG_I("%s: %ld KiB of text unmapped", why, kib);
	return file_kib();
}

static void on_check(evutil_socket_t fd, short what, void *arg)
{
	static bool said;
	(void)fd, (void)what, (void)arg;
	long cur = file_kib();
	if (cur < 0) {
		if (!said)
			LOG_W("cannot read /proc/self/statm: %s; no trim until it can",
			      strerror((int)-cur));
		said = true;
		return;
	}
	if (svc_trim_step(&state, cur))
		svc_trim_trimmed(&state, trim_now("quiet after a burst"));
}

int svc_trim_init(struct event_base *base)
{
	const struct timeval every = { SVC_TRIM_CHECK_S, 0 };
	check_ev = event_new(base, -1, EV_PERSIST, on_check, NULL);
	if (!check_ev || event_add(check_ev, &every) < 0) {
		int e = check_ev ? -EIO : -ENOMEM;
		svc_trim_fini();
		return e;
	}
	svc_trim_start(&state, trim_now("start-up done"));
	return 0;
}

void svc_trim_fini(void)
{
	if (check_ev)
		event_free(check_ev);
	check_ev = NULL;
}
