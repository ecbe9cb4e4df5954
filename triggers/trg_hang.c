/*
 * Hangs: an app that opted in calls prof_heartbeat(); one that stays silent
 * past its timeout has hung. One timer checks every beating process; a
 * hang fires once, and the next heartbeat re-arms it.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

#define TICK_MS 100

struct beat {
	pid_t pid;
	unsigned timeout_ms;
	uint64_t last_ms;
	bool fired;
};

static const struct trg_ops *ops;
static struct event *timer;
static struct beat *b;
static size_t nb;
static char status[64];

static void tick(evutil_socket_t fd, short what, void *arg)
{
	uint64_t now = util_mono_ms();
	for (size_t i = 0; i < nb; i++) {
		if (!b[i].fired && now - b[i].last_ms > b[i].timeout_ms) {
			b[i].fired = true;
			ops->hang(b[i].pid);
		}
	}
}

int trg_hang_init(struct event_base *base, const struct trg_ops *o)
{
	ops = o;
	b = calloc(TRG_MAX_PIDS, sizeof(*b));
	timer = event_new(base, -1, EV_PERSIST, tick, NULL);
	struct timeval tv = { 0, TICK_MS * 1000 };
	if (!b || !timer || event_add(timer, &tv) < 0)
		return -ENOMEM;
	snprintf(status, sizeof(status), "heartbeats, checked every %d ms", TICK_MS);
	return 0;
}

void trg_hang_fini(void)
{
	if (timer)
		event_free(timer);
	timer = NULL;
	free(b);
	b = NULL;
	nb = 0;
}

int trg_hang_beat(pid_t pid, unsigned timeout_ms)
{
	size_t i;
	for (i = 0; i < nb && b[i].pid != pid; i++)
		;
	if (i == nb) {
		if (nb == TRG_MAX_PIDS)
			return -ENOSPC;
		nb++;
		b[i].pid = pid;
	}
	b[i].timeout_ms = timeout_ms;
	b[i].last_ms = util_mono_ms();
	b[i].fired = false;
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
