/*
 * The stored result files: their names, the directories, the clean-up of
 * what a crashed run left, retention of delivered and undelivered results
 * (files older than retention_days go, then, per app, the oldest ones past
 * max_app_result_bytes; the index row goes with the file), and the checked
 * open of a result for delivery. svc_store.h has the contract.
 */
#include "svc_db.h"
#include "svc_db_result.h"
#include "svc_admit.h"
#include "svc_store.h"

#include <dirent.h>
#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "util.h"

static const struct svc_config *store_cfg; /* for the hourly pass */
static char raw_dir[SVC_PATH_MAX], results_dir[SVC_PATH_MAX];
static struct event *retention;

const char *svc_store_raw_dir(void)
{
	return raw_dir;
}

int svc_store_app_dir(uid_t uid, gid_t gid, char *out, size_t n)
{
	if (util_fmt(out, n, "%s/%u", results_dir, (unsigned)uid) < 0)
		return -ENAMETOOLONG;
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* Owned by the app so that it can remove its own results. */
	if (chown(out, uid, gid) < 0 && errno != EPERM)
		return -errno;
	return chmod(out, 0700) < 0 ? -errno : 0;
}

int svc_store_result_name(uint32_t type, const char *tag, uint64_t id, time_t when, char *out,
			  size_t n)
{
	char clean[21], ts[32];
	struct tm tm;
	size_t j = 0;

	if (!names_type_valid(type))
		return -EINVAL;
	/* Tags are the app's words: only [a-z0-9-] reach a file name. */
	for (size_t i = 0; tag && tag[i] && j < sizeof(clean) - 1; i++) {
		char ch = tag[i];
		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		clean[j++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ? ch : '-';
	}
	clean[j] = '\0';
	gmtime_r(&when, &tm);
	strftime(ts, sizeof(ts), "%Y%m%dT%H%M%SZ", &tm);
	return util_fmt(out, n, "%s_%s_%s_%llu.%s", names_type_file(type), j ? clean : "none",
			ts, (unsigned long long)id, names_type_ext(type)) < 0 ? -ENAMETOOLONG : 0;
}

int svc_store_name_id(const char *name, uint64_t *id)
{
	const char *us = name ? strrchr(name, '_') : NULL;
	char *end;
	if (!us || name[0] == '.')
		return -EINVAL;
	unsigned long long v = strtoull(us + 1, &end, 10);
	if (end == us + 1 || *end != '.')
		return -EINVAL;
	*id = v;
	return 0;
}

struct prune_ctx {
	int removed;
};

static void remove_one(const struct svc_db_result *r, void *ud)
{
	struct prune_ctx *pc = ud;
	if (unlink(r->path) < 0 && errno != ENOENT) {
		LOG_W("cannot remove %s: %s", r->path, strerror(errno));
		return;
	}
	if (svc_db_result_delete(r->id) == 0)
		pc->removed++;
}

int svc_store_prune(const struct svc_config *cfg, uint64_t now_ns)
{
	struct prune_ctx pc = { 0 };
	uint64_t age = (uint64_t)cfg->retention_days * 86400ull * 1000000000ull;
	int r;

	if (now_ns > age && (r = svc_db_expired(now_ns - age, remove_one, &pc)) < 0)
		return r;
	int expired = pc.removed;
	if ((r = svc_db_over_quota(cfg->max_app_result_bytes, remove_one, &pc)) < 0)
		return r;
	if (pc.removed) {
		LOG_I("retention: removed %d result(s) (%d past %u days, %d over an app's quota)",
		      pc.removed, expired, cfg->retention_days, pc.removed - expired);
		svc_admit_recount();
	}
	return pc.removed;
}

int svc_store_open(const char *path, uid_t uid, char *what, size_t n)
{
	struct stat st;
	char dummy[1];
	int r;

	if (!what || !n) {
		what = dummy;
		n = sizeof(dummy);
	}
	what[0] = '\0';
	if (!path || !*path)
		return -ENOENT;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
	if (fd < 0) {
		r = -errno;
		snprintf(what, n, "%s", r == -ELOOP ? "a symbolic link" : strerror(-r));
		return r;
	}
	if (fstat(fd, &st) < 0) {
		r = -errno;
		snprintf(what, n, "%s", strerror(-r));
	} else if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		snprintf(what, n, "not a regular file");
	} else if (st.st_uid != uid && !(st.st_uid == geteuid() && geteuid() != 0)) {
		/* (A daemon run without root cannot chown: its own files are the app's.) */
		r = -EPERM;
		snprintf(what, n, "owned by uid %u, not the app's uid %u", (unsigned)st.st_uid,
			 (unsigned)uid);
	} else if (st.st_nlink != 1) {
		r = -EMLINK;
		snprintf(what, n, "%lu links, not 1", (unsigned long)st.st_nlink);
	} else
		return fd;
	close(fd);
	return r;
}

/*
 * Empty a regular file before it is unlinked: a daemon before this one
 * handed apps O_RDWR fds to files in raw/, and an app that still holds
 * one would otherwise keep the blocks after the unlink.
 */
static void truncate_entry(int dfd, const char *name)
{
	int fd = openat(dfd, name, O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ftruncate(fd, 0) < 0)
		LOG_D("ftruncate %s: %s", name, strerror(errno));
	close(fd);
}

/*
 * Remove the entries of directory dfd whose names start with prefix
 * (NULL: every entry but the hidden ones), emptied first when truncate is
 * set. Closes dfd. Returns how many.
 */
static int unlink_entries(int dfd, const char *prefix, bool truncate)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	int n = 0;
	if (!d) {
		close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		if (prefix ? strncmp(e->d_name, prefix, strlen(prefix)) != 0 : e->d_name[0] == '.')
			continue;
		if (truncate)
			truncate_entry(dirfd(d), e->d_name);
		if (unlinkat(dirfd(d), e->d_name, 0) == 0)
			n++;
	}
	closedir(d);
	return n;
}

/* Results half-written by a crashed run: <results>/<uid>/.tmp-<id>. */
static void clean_tmp_results(void)
{
	DIR *d = opendir(results_dir);
	struct dirent *de;
	int n = 0;
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		int afd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
		if (afd >= 0)
			n += unlink_entries(afd, ".tmp-", false);
	}
	closedir(d);
	if (n)
		LOG_N("removed %d unfinished result file(s) left by a previous run", n);
}

static void clean_raw(void)
{
	int dfd = open(raw_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int n = dfd >= 0 ? unlink_entries(dfd, NULL, true) : 0;
	if (n)
		LOG_N("removed %d partial capture file(s) left by a previous run", n);
}

/*
 * A session the previous run left active may have renamed its result into
 * place just before it died, without indexing it: remove that file, since
 * the app is told the capture failed.
 */
static void sweep_recovered(uint64_t id, uid_t uid, void *ud)
{
	char dir[SVC_PATH_MAX + 16];
	int *removed = ud;
	uint64_t v;
	if (util_fmt(dir, sizeof(dir), "%s/%u", results_dir, (unsigned)uid) < 0)
		return;
	DIR *d = opendir(dir);
	struct dirent *de;
	if (!d)
		return;
	while ((de = readdir(d)))
		if (svc_store_name_id(de->d_name, &v) == 0 && v == id &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0)
			(*removed)++;
	closedir(d);
}

static void retention_cb(evutil_socket_t fd, short what, void *arg)
{
	svc_store_prune(store_cfg, util_now_ns(CLOCK_REALTIME));
}

int svc_store_init(struct event_base *base, const struct svc_config *cfg)
{
	int r;
	store_cfg = cfg;
	if (util_fmt(raw_dir, sizeof(raw_dir), "%s/raw", cfg->state_dir) < 0 ||
	    util_fmt(results_dir, sizeof(results_dir), "%s/results", cfg->state_dir) < 0) {
		LOG_E("state_dir path too long");
		return -ENAMETOOLONG;
	}
	if ((r = util_mkdir_p(raw_dir, 0700)) < 0 || (r = util_mkdir_p(results_dir, 0755)) < 0) {
		LOG_E("cannot create the state directories under %s: %s", cfg->state_dir,
		      strerror(-r));
		return r;
	}
	chmod(raw_dir, 0700);
	clean_raw();
	clean_tmp_results();
	int swept = 0;
	if ((r = svc_db_recovered(sweep_recovered, &swept)) > 0)
		LOG_N("%d capture(s) cut short by the previous run: their apps get a failure result"
		      "%s", r, swept ? " (unindexed result files removed)" : "");
	retention = event_new(base, -1, EV_PERSIST, retention_cb, NULL);
	struct timeval hour = { .tv_sec = 3600 };
	if (!retention || event_add(retention, &hour) < 0)
		return -ENOMEM;
	svc_store_prune(cfg, util_now_ns(CLOCK_REALTIME));
	return 0;
}

void svc_store_fini(void)
{
	if (retention)
		event_free(retention);
	retention = NULL;
}
