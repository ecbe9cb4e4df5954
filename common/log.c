#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static enum log_sink sink = LOG_SINK_NONE;
static int max_level = LOG_INFO;
static const char *ident = "";

static const char *const level_names[] = {
	"emerg", "alert", "crit", "error", "warn", "notice", "info", "debug",
};

void log_init(enum log_sink s, int level, const char *id)
{
	sink = s;
	max_level = level;
	ident = id ? id : "";
}

void log_set_level(int level)
{
	max_level = level;
}

/*
 * systemd sets JOURNAL_STREAM to "DEV:INO" of the stream it connected to
 * stderr; a match means stderr really goes to journald (not a shell
 * redirection inherited from a unit). INVOCATION_ID marks any unit's process:
 * its stderr goes to the journal or a file systemd reads, where the priority
 * prefix is right too and the journal stamps the time.
 */
enum log_sink log_sink_auto(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	struct stat st;
	unsigned long long dev, ino;

	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino)
		return LOG_SINK_JOURNAL;
	if (getenv("INVOCATION_ID"))
		return LOG_SINK_JOURNAL;
	return LOG_SINK_STDERR;
}

const char *log_level_name(int level)
{
	if (level < 0 || level >= (int)(sizeof(level_names) / sizeof(level_names[0])))
		return "?";
	return level_names[level];
}

int log_level_parse(const char *s)
{
	for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
		if (s && strcasecmp(s, level_names[i]) == 0)
			return i;
	return -EINVAL;
}

int log_enabled(int level)
{
	return sink != LOG_SINK_NONE && level <= max_level;
}

void log_msg(int level, const char *func, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int saved = errno;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level < 0 || level > LOG_DEBUG)
		level = LOG_ERR;

	/* One write per line so that concurrent writers do not interleave. */
	char line[1280];
	if (sink == LOG_SINK_JOURNAL) {
		snprintf(line, sizeof(line), "<%d>%s: %s\n", level, func, msg);
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s%s%-6s %s: %s\n",
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 ident, *ident ? " " : "", level_names[level], func, msg);
	}
	ssize_t r = write(STDERR_FILENO, line, strlen(line));
	(void)r;
	errno = saved;
}
