/*
 * svc_db_result: the result index of the state database (svc_db.h opens
 * it): a result's row and its commit with the session's end, the delivery
 * queue (attempts, acks, requeues), the retention queries and profctl's
 * listings. Failure results (no file) sit in the same queue. Caps: a
 * delivery batch is at most 16 rows; listings take a limit; the bytes of
 * 32 apps are cached (svc_db_result_bytes), kept true by every write of
 * rows calling svc_db_results_changed (svc_db_priv.h).
 */
#ifndef PD_SVC_DB_RESULT_H
#define PD_SVC_DB_RESULT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "rl.h"
#include "svc_config.h"

int svc_db_result_add(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
		      uint32_t trigger, const char *path, uint64_t size, const char *format,
		      uint64_t start_ns, uint64_t end_ns, uint64_t *result_id);
/* The result row and the session's "done", in one transaction (-ENOSPC: disk full). */
int svc_db_result_commit(uint64_t session_id, const char *app, uid_t uid, uint32_t type,
			 uint32_t trigger, const char *path, uint64_t size, const char *format,
			 uint64_t start_ns, uint64_t end_ns, uint64_t *result_id);
/* Bytes of stored results of app, or of all apps when app is NULL. */
int svc_db_result_bytes(const char *app, uint64_t *bytes);
/* A delivery attempt was made (the Result with its fd is queued). */
int svc_db_result_attempt(uint64_t result_id);
/* The app acknowledged result_id (app NULL: any app, for root). -ENOENT if
 * it is not app's or already acked. */
int svc_db_result_delivered(uint64_t result_id, const char *app);

struct svc_db_result {
	uint64_t id, session_id, size, start_ns;
	uint32_t type, trigger;
	char path[SVC_PATH_MAX];
	char tag[72];
	char note[160];
	int error;          /* a failure result (path ""): PROF_E_* and message */
	char message[256];
	uid_t uid;          /* the app's uid, owner of the file (svc_db_pending only) */
	char format[16];    /* Result.format, "" if unknown (svc_db_pending only) */
};
typedef void (*svc_db_result_fn)(const struct svc_db_result *r, void *ud);
/* Undelivered results of app (attempts < max, ended >= min_end_ns), oldest
 * first, at most limit (<= 16). Returns how many fn saw, or -EIO. */
int svc_db_pending(const char *app, uint32_t max_attempts, uint64_t min_end_ns, unsigned limit,
		   svc_db_result_fn fn, void *ud);
int svc_db_result_delete(uint64_t result_id);
/* Offer session_id's result again (attempts reset), with a note. -ENOENT if none. */
int svc_db_result_requeue(uint64_t session_id, const char *note);
/* Results that ended before before_ns (fn may delete them). */
int svc_db_expired(uint64_t before_ns, svc_db_result_fn fn, void *ud);
/* For each app over max_app_bytes, its oldest results until it would fit. */
int svc_db_over_quota(uint64_t max_app_bytes, svc_db_result_fn fn, void *ud);
/* A result row with its session, for profctl results/show. */
struct svc_db_row {
	uint64_t id, session_id, size, start_ns, end_ns;
	uint32_t type, trigger, attempts, pid;
	uid_t uid;
	bool delivered;
	char app[RL_APP_MAX];
	char path[SVC_PATH_MAX];
	char format[16];
	char tag[72];
	char note[160];
};
/* Results newest first, of uid (or any uid when all_uids) and of app (NULL:
 * any), at most limit rows to fn. Returns how many match in all, or -EIO. */
int svc_db_results_list(bool all_uids, uid_t uid, const char *app, unsigned limit,
			void (*fn)(const struct svc_db_row *r, void *ud), void *ud);
/* One result by id. 0, -ENOENT or -EIO. */
int svc_db_result_get(uint64_t id, struct svc_db_row *out);
/* Per app with stored results: its uid, count and bytes. Returns how many, or -EIO. */
int svc_db_apps(void (*fn)(const char *app, uid_t uid, uint32_t n, uint64_t bytes, void *ud),
		void *ud);

#endif
