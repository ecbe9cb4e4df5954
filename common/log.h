/*
 * One logger for every module. Each line carries the calling function's
 * name. The daemon logs to stderr (syslog priority prefixes such as "<3>"
 * when run by systemd, readable lines otherwise). Libraries start with the
 * logger off and never print unless asked (PROFILING_DEBUG=1).
 */
#ifndef PD_LOG_H
#define PD_LOG_H

#include <syslog.h>

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

#define LOG_E(...) log_msg(LOG_ERR, __func__, __VA_ARGS__)
#define LOG_W(...) log_msg(LOG_WARNING, __func__, __VA_ARGS__)
#define LOG_N(...) log_msg(LOG_NOTICE, __func__, __VA_ARGS__)
#define LOG_I(...) log_msg(LOG_INFO, __func__, __VA_ARGS__)
#define LOG_D(...) log_msg(LOG_DEBUG, __func__, __VA_ARGS__)

#endif
