/*
 * Hangs: an app that opted in calls prof_heartbeat(); one that stays silent
 * past its timeout has hung. A hang fires once, and the next heartbeat
 * re-arms it.
 *
 * One timer, set for the earliest deadline of all (not a fixed tick): with
 * nothing due the daemon sleeps (it woke 10 times a second before, with 500
 * idle processes beating every hour). A beat only pushes its own deadline
 * later, so it re-arms the timer only when nothing was armed; when the
 * timer fires, one pass fires what is due and finds the next deadline.
 * With processes beating every B ms and a timeout T, that is one pass each
 * T - B ms at most, and a hang is seen at its deadline (within a
 * TICK_MIN_MS, the shortest the timer is set for).
 *
 * The table grows with use, doubling, up to TRG_MAX_PIDS.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util.h"

#define TICK_MIN_MS 10

struct beat {
	pid_t pid;
	unsigned timeout_ms;
	uint64_t last_ms;
	bool fired;
};

static const struct trg_ops *ops;
static struct event *timer;
static struct beat *b;
static size_t nb, bcap;
static uint64_t armed_ms; /* the deadline the timer is set for; 0: not set */
static char status[80];

static void arm(uint64_t due, uint64_t now)
{
	uint64_t ms = due > now ? due - now : 0;
	if (ms < TICK_MIN_MS)
		ms = TICK_MIN_MS;
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	if (event_add(timer, &tv) == 0)
		armed_ms = now + ms;
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_mono_ms(), next = 0;
	(void)fd, (void)what, (void)arg;
	armed_ms = 0;
	for (size_t i = 0; i < nb; i++) {
		if (b[i].fired)
			continue;
		uint64_t due = b[i].last_ms + b[i].timeout_ms + 1; /* "more than timeout" */
		if (due <= now) {
			b[i].fired = true;
			ops->hang(b[i].pid);
		} else if (!next || due < next) {
			next = due;
		}
	}
	/* ops->hang may have beaten or armed meanwhile: keep the earlier. */
	if (next && (!armed_ms || next < armed_ms))
		arm(next, now);
}

int trg_hang_init(struct event_base *base, const struct trg_ops *o)
{
	ops = o;
	timer = evtimer_new(base, tick, NULL);
	if (!timer)
		return -ENOMEM;
	snprintf(status, sizeof(status), "heartbeats, a timer at the earliest deadline");
	return 0;
}

void trg_hang_fini(void)
{
	if (timer)
		event_free(timer);
	timer = NULL;
	free(b);
	b = NULL;
	nb = bcap = 0;
	armed_ms = 0;
}

int trg_hang_beat(pid_t pid, unsigned timeout_ms)
{
	size_t i;
	for (i = 0; i < nb && b[i].pid != pid; i++)
		;
	if (i == nb) {
		if (nb == TRG_MAX_PIDS)
			return -ENOSPC;
		if (nb == bcap) {
			size_t n = bcap ? bcap * 2 : 16;
			struct beat *nbp = realloc(b, n * sizeof(*b));
			if (!nbp)
				return -ENOMEM;
			b = nbp;
			bcap = n;
		}
		nb++;
		b[i].pid = pid;
	}
	uint64_t now = util_mono_ms();
	b[i].timeout_ms = timeout_ms;
	b[i].last_ms = now;
	b[i].fired = false;
	/* A beat moves its own deadline later; only a shorter timeout than
	 * before, or an idle timer, needs the timer set. */
	uint64_t due = now + timeout_ms + 1;
	if (!armed_ms || due < armed_ms)
		arm(due, now);
	return 0;
}

void trg_hang_forget(pid_t pid)
{
	for (size_t i = 0; i < nb; i++)
		if (b[i].pid == pid) {
			b[i] = b[--nb];
			return;
		}
}

const char *trg_hang_status(void)
{
	return status[0] ? status : "not started";
}
