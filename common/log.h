/*
 * One logger for every module. Each line carries the calling function's
 * name. The daemon logs to stderr (syslog priority prefixes such as "<3>"
 * when run by systemd, readable lines otherwise). Libraries start with the
 * logger off and never print unless asked (PROFILING_DEBUG=1).
 *
 * Peer strings: every message is escaped where it is written (log_escape):
 * control characters (< 0x20, 0x7f, the C1 range) and bytes that are not
 * UTF-8 become \n, \r, \t, \e or \xNN. So a runtime's name, a
 * CaptureDone message, a tag or a path can never start a line of its own
 * (a forged "<0>" journal priority) or drive a terminal.
 *
 * Peer volume: a line caused by a peer goes through LOG_PEER(uid, ...):
 * a token bucket per uid, LOG_PEER_BURST lines at once, then one every
 * LOG_PEER_REFILL_MS. Lines past it are counted, not written; once a
 * token is back, one "uid U: N lines suppressed" takes it (before the
 * uid's next line, or another uid's), so a uid's lines, summaries
 * included, stay within the budget; at exit every count is written.
 * Buckets: LOG_PEER_UIDS; at the cap the one of the uid that logged least
 * recently is reused (its count of suppressed lines is written first).
 * Root (uid 0) is trusted and not limited.
 */
#ifndef PD_LOG_H
#define PD_LOG_H

#include <stddef.h>
#include <sys/types.h>
#include <syslog.h>

#define LOG_PEER_UIDS 256
/* 40 at once, then 5 a second: what a busy app's lifecycle lines need,
 * and 18,000 lines an hour at most from a hostile one. */
#define LOG_PEER_BURST 40
#define LOG_PEER_REFILL_MS 200

enum log_sink {
	LOG_SINK_NONE = 0,   /* drop everything (library default) */
	LOG_SINK_STDERR,     /* "time level func: msg" */
	LOG_SINK_JOURNAL,    /* "<prio>func: msg" for journald */
};

void log_init(enum log_sink sink, int max_level, const char *ident);
/* Pick the sink from the environment: journal when started by systemd
 * (JOURNAL_STREAM naming our stderr, or INVOCATION_ID), else stderr. */
enum log_sink log_sink_auto(void);
/* Change the level only (config reload). */
void log_set_level(int level);
int log_level_parse(const char *s);
/* "error", "info", ...; "?" out of range. */
const char *log_level_name(int level);
int log_enabled(int level);

void log_msg(int level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* As log_msg, for a line a peer of uid caused: rate-limited per uid. */
void log_peer_msg(uid_t uid, int level, const char *func, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Write the "N lines suppressed" line of every uid that has one (at exit). */
void log_peer_flush(void);
/*
 * Copy s into out[n] (NUL-terminated) with control characters and
 * non-UTF-8 bytes escaped as above; a sequence that does not fit is left
 * out whole. Returns the length written.
 */
size_t log_escape(char *out, size_t n, const char *s);

#define LOG_E(...) log_msg(LOG_ERR, __func__, __VA_ARGS__)
#define LOG_W(...) log_msg(LOG_WARNING, __func__, __VA_ARGS__)
#define LOG_N(...) log_msg(LOG_NOTICE, __func__, __VA_ARGS__)
#define LOG_I(...) log_msg(LOG_INFO, __func__, __VA_ARGS__)
#define LOG_D(...) log_msg(LOG_DEBUG, __func__, __VA_ARGS__)
#define LOG_PEER(uid, level, ...) log_peer_msg((uid), (level), __func__, __VA_ARGS__)

#endif
