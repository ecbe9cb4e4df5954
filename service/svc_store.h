/*
 * svc_store: the daemon's files for captures and results.
 *
 * Contract:
 * - The capture types' names (file-name word, extension, redaction format,
 *   the runtime capability each needs) come from common/names.h.
 * - Result names are <type>_<tag>_<utc>_<id>.<ext>, tag [a-z0-9-]{1,20} or
 *   "none". svc_store_result_name writes them and svc_store_name_id is
 *   the one parser of them.
 * - <state>/raw/ (0700, the daemon's only) and <state>/results/<uid>/
 *   (the app's, 0700): svc_store_init creates them and removes what a
 *   crashed run left (partial captures, unfinished results, results
 *   renamed into place but never indexed), then prunes; the retention
 *   pass then runs hourly until svc_store_fini.
 * - svc_store_open is the one checked open of a stored result for anyone.
 * Below svc_session and svc_deliver; it calls svc_db and svc_admit only.
 */
#ifndef PD_SVC_STORE_H
#define PD_SVC_STORE_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>
#include <time.h>

struct event_base;
struct svc_config;

/* Creates raw/ and results/, cleans what a crash left, prunes, and
 * starts the hourly retention pass. 0 or -errno (logged). */
int svc_store_init(struct event_base *base, const struct svc_config *cfg);
void svc_store_fini(void);
/* <state>/raw: the daemon's own files (captures, crash dumps). */
const char *svc_store_raw_dir(void);
/* <state>/results/<uid>, created owned by the app (uid, gid), mode 0700. */
int svc_store_app_dir(uid_t uid, gid_t gid, char *out, size_t n);
/* The result name of session id (type, tag as the app gave it) at when.
 * 0, -EINVAL for an unknown type, -ENAMETOOLONG. */
int svc_store_result_name(uint32_t type, const char *tag, uint64_t id, time_t when, char *out,
			  size_t n);
/* The session id in a result name. 0, or -EINVAL when name is not one
 * (hidden files, the .tmp-<id> of an unfinished result, other names). */
int svc_store_name_id(const char *name, uint64_t *id);

/* Retention: delete expired results and the oldest over a quota. now_ns is
 * injectable for tests. Returns how many were removed. */
int svc_store_prune(const struct svc_config *cfg, uint64_t now_ns);
/*
 * Open a stored result for delivery to uid (to the app, or to profctl).
 * The file sits in the app's own directory, where the app may have put
 * anything by now, and the daemon opens it with CAP_DAC_OVERRIDE: so no
 * link is followed and no FIFO waited on (O_NOFOLLOW|O_NONBLOCK), and the
 * file must be a regular file owned by uid with exactly one link (not a
 * hard link to a file of someone else's). Returns the fd or -errno:
 * -ENOENT gone, -ELOOP a symlink, -EINVAL not a regular file, -EPERM
 * another owner, -EMLINK more than one link. what (may be NULL) gets a
 * reason for the log.
 */
int svc_store_open(const char *path, uid_t uid, char *what, size_t n);

#endif
