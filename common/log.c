#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
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

/* Length of the valid UTF-8 sequence at s (1..4) that is not a C1
 * control, or 0: its bytes are to be escaped one by one. */
static size_t utf8_ok(const unsigned char *s)
{
	unsigned char b = s[0], lo = 0x80, hi = 0xBF;
	size_t n;

	if (b >= 0xC2 && b <= 0xDF)
		n = 2;
	else if (b >= 0xE0 && b <= 0xEF)
		n = 3;
	else if (b >= 0xF0 && b <= 0xF4)
		n = 4;
	else
		return 0;
	/* No overlong forms, surrogates or code points past U+10FFFF. */
	if (b == 0xE0)
		lo = 0xA0;
	else if (b == 0xED)
		hi = 0x9F;
	else if (b == 0xF0)
		lo = 0x90;
	else if (b == 0xF4)
		hi = 0x8F;
	else if (b == 0xC2)
		lo = 0xA0; /* U+0080..U+009F are the C1 controls (CSI among them) */
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xBF)
			return 0;
	return n;
}

size_t log_escape(char *out, size_t n, const char *str)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *s = (const unsigned char *)(str ? str : "");
	size_t o = 0;

	if (!out || n == 0)
		return 0;
	while (*s) {
		char e[4];
		size_t len = 0, take = 1;
		if (*s >= 0x20 && *s < 0x7f) {
			e[len++] = (char)*s;
		} else if (*s >= 0x80 && (take = utf8_ok(s)) > 0) {
			if (o + take >= n)
				break;
			memcpy(out + o, s, take);
			o += take;
			s += take;
			continue;
		} else {
			take = 1;
			e[len++] = '\\';
			switch (*s) {
			case '\n': e[len++] = 'n'; break;
			case '\r': e[len++] = 'r'; break;
			case '\t': e[len++] = 't'; break;
			case 0x1b: e[len++] = 'e'; break;
			default:
				e[len++] = 'x';
				e[len++] = hex[*s >> 4];
				e[len++] = hex[*s & 15];
			}
		}
		if (o + len >= n)
			break;
		memcpy(out + o, e, len);
		o += len;
		s += take;
	}
	out[o] = '\0';
	return o;
}

/* Write one line: msg escaped, in the sink's format. */
static void emit(int level, const char *func, const char *msg)
{
	char esc[1280], line[1536];

	if (level < 0 || level > LOG_DEBUG)
		level = LOG_ERR;
	/*
	 * Escaped here, for the whole message, rather than at each call site:
	 * nearly every argument a module logs can hold a peer's bytes (names,
	 * tags, paths, messages), and our own format strings hold no control
	 * characters, so this changes nothing else and no call site can forget.
	 */
	log_escape(esc, sizeof(esc), msg);
	/* One write per line so that concurrent writers do not interleave. */
	if (sink == LOG_SINK_JOURNAL) {
		snprintf(line, sizeof(line), "<%d>%s: %s\n", level, func, esc);
	} else {
		struct timespec ts;
		struct tm tm;
		clock_gettime(CLOCK_REALTIME, &ts);
		localtime_r(&ts.tv_sec, &tm);
		snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s%s%-6s %s: %s\n",
			 tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			 ident, *ident ? " " : "", level_names[level], func, esc);
	}
	ssize_t r = write(STDERR_FILENO, line, strlen(line));
	(void)r;
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
	emit(level, func, msg);
	errno = saved;
}

/* ------------------------------------------------ per-uid rate limit */

struct bucket {
	bool used;
	uid_t uid;
	uint32_t tokens_ms;    /* tokens, in LOG_PEER_REFILL_MS units of one line */
	uint64_t last_ms;      /* when tokens_ms was last brought up to date */
	uint64_t seen_ms;      /* the uid's last line: the least recent is reused */
	uint64_t suppressed;   /* lines dropped since the last summary */
};

static struct bucket buckets[LOG_PEER_UIDS];
static unsigned nsuppressing; /* buckets with suppressed > 0 */

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void refill(struct bucket *b, uint64_t now)
{
	const uint64_t full = (uint64_t)LOG_PEER_BURST * LOG_PEER_REFILL_MS;
	uint64_t t = b->tokens_ms + (now - b->last_ms);
	b->tokens_ms = (uint32_t)(t > full ? full : t);
	b->last_ms = now;
}

static void summary(struct bucket *b)
{
	char msg[96];
	if (!b->suppressed)
		return;
	snprintf(msg, sizeof(msg), "uid %u: %llu lines suppressed", (unsigned)b->uid,
		 (unsigned long long)b->suppressed);
	emit(LOG_NOTICE, "log_peer", msg);
	b->suppressed = 0;
	nsuppressing--;
}

/* uid's bucket; at the cap the one whose uid logged least recently is reused. */
static struct bucket *bucket_for(uid_t uid, uint64_t now)
{
	struct bucket *lru = NULL;
	for (size_t i = 0; i < LOG_PEER_UIDS; i++) {
		struct bucket *b = &buckets[i];
		if (b->used && b->uid == uid)
			return b;
		if (!b->used) {
			if (!lru || lru->used)
				lru = b;
		} else if (!lru || (lru->used && b->seen_ms < lru->seen_ms)) {
			lru = b;
		}
	}
	summary(lru);
	lru->used = true;
	lru->uid = uid;
	lru->tokens_ms = LOG_PEER_BURST * LOG_PEER_REFILL_MS;
	lru->last_ms = now;
	lru->suppressed = 0;
	return lru;
}

/* The summary of b if it has a token for it: summaries draw from the
 * bucket like any line, so a uid's lines never pass the budget. */
static void summary_due(struct bucket *b)
{
	if (b->suppressed && b->tokens_ms >= LOG_PEER_REFILL_MS) {
		b->tokens_ms -= LOG_PEER_REFILL_MS;
		summary(b);
	}
}

/* Summaries of uids whose bucket has a token again (or all of them). */
static void flush(uint64_t now, bool all)
{
	for (size_t i = 0; nsuppressing && i < LOG_PEER_UIDS; i++) {
		struct bucket *b = &buckets[i];
		if (!b->used || !b->suppressed)
			continue;
		refill(b, now);
		if (all)
			summary(b);
		else
			summary_due(b);
	}
}

void log_peer_flush(void)
{
	if (sink != LOG_SINK_NONE)
		flush(mono_ms(), true);
}

void log_peer_msg(uid_t uid, int level, const char *func, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	int saved = errno;

	if (!log_enabled(level))
		return;
	if (uid != 0) {
		uint64_t now = mono_ms();
		struct bucket *b = bucket_for(uid, now);
		b->seen_ms = now;
		refill(b, now);
		/* This uid's summary first (its own token), then the line. */
		summary_due(b);
		if (b->tokens_ms < LOG_PEER_REFILL_MS) {
			if (!b->suppressed++)
				nsuppressing++;
			errno = saved;
			return;
		}
		b->tokens_ms -= LOG_PEER_REFILL_MS;
		/* Any other uid's summary that is due. */
		if (nsuppressing)
			flush(now, false);
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	emit(level, func, msg);
	errno = saved;
}
