/*
 * Pressure stalls: kernel PSI triggers ("some <stall us> <window us>"
 * written into /proc/pressure/{memory,cpu,io}), which wake us with POLLPRI
 * when the stall in a window crosses the threshold — no polling. libevent
 * does not wait for POLLPRI, so each PSI fd sits alone in an epoll set
 * whose fd the event loop watches: the kernel's PSI poll consumes its
 * event when the outer loop looks, so the wake-up itself is the news, and
 * one set per trigger says which fired.
 *
 * Caps: TRG_PSI_MAX triggers; past it trg_psi_watch gives -ENOSPC.
 */
#include "trg.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"

#define TRG_PSI_MAX 256

static const struct trg_ops *ops;
static struct event_base *base;
static bool available;
static struct {
	int fd, ep, key;
	struct event *ev;
} psi[TRG_PSI_MAX];
static char status[160];

static const char *const res_file[] = { "/proc/pressure/memory", "/proc/pressure/cpu",
					"/proc/pressure/io" };

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
	int slot = (int)(intptr_t)arg;
	struct epoll_event e;
	/* Drain the set; its readiness was the event (see above). */
	epoll_wait(psi[slot].ep, &e, 1, 0);
	LOG_D("PSI trigger %d crossed", slot);
	if (ops->psi)
		ops->psi(psi[slot].key);
}

static void release(int i)
{
	if (psi[i].ev)
		event_free(psi[i].ev);
	if (psi[i].ep >= 0)
		close(psi[i].ep);
	if (psi[i].fd >= 0)
		close(psi[i].fd);
	psi[i].ev = NULL;
	psi[i].ep = psi[i].fd = -1;
}

int trg_psi_init(struct event_base *b, const struct trg_ops *o)
{
	base = b;
	ops = o;
	for (int i = 0; i < TRG_PSI_MAX; i++) {
		psi[i].fd = psi[i].ep = -1;
		psi[i].ev = NULL;
	}
	if (access(res_file[0], R_OK) < 0) {
		snprintf(status, sizeof(status), "unavailable: %s: %s (kernel without PSI, or psi=0)",
			 res_file[0], strerror(errno));
		LOG_W("pressure stalls: %s", status);
		return 0;
	}
	available = true;
	snprintf(status, sizeof(status), "PSI triggers on /proc/pressure/*");
	return 0;
}

void trg_psi_fini(void)
{
	for (int i = 0; i < TRG_PSI_MAX; i++)
		release(i);
	available = false;
}

int trg_psi_watch(int key, unsigned resource, unsigned stall_us, unsigned window_ms)
{
	char line[64];
	int slot;
	if (!available)
		return -ENOTSUP;
	if (resource > 2)
		return -EINVAL;
	trg_psi_unwatch(key);
	for (slot = 0; slot < TRG_PSI_MAX && psi[slot].fd >= 0; slot++)
		;
	if (slot == TRG_PSI_MAX)
		return -ENOSPC;
	int fd = open(res_file[resource], O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int len = snprintf(line, sizeof(line), "some %u %u", stall_us, window_ms * 1000);
	/* The kernel checks the window (500 ms..10 s) and the threshold. */
	if (write(fd, line, (size_t)len + 1) < 0) {
		int r = -errno;
		/* Without CAP_SYS_RESOURCE the window must be a multiple of 2 s:
		 * widen it rather than run without the trigger. */
		unsigned wide = (window_ms + 1999) / 2000 * 2000;
		if (r == -EINVAL && wide != window_ms && wide <= 10000) {
			len = snprintf(line, sizeof(line), "some %u %u", stall_us, wide * 1000);
			if (write(fd, line, (size_t)len + 1) >= 0) {
				LOG_N("PSI window %u ms widened to %u ms (no CAP_SYS_RESOURCE)",
				      window_ms, wide);
				r = 0;
			}
		}
		if (r < 0) {
			close(fd);
			return r;
		}
	}
	struct epoll_event e = { .events = EPOLLPRI };
	psi[slot].fd = fd;
	psi[slot].key = key;
	psi[slot].ep = epoll_create1(EPOLL_CLOEXEC);
	if (psi[slot].ep < 0 || epoll_ctl(psi[slot].ep, EPOLL_CTL_ADD, fd, &e) < 0) {
		int r = -errno;
		release(slot);
		return r;
	}
	psi[slot].ev = event_new(base, psi[slot].ep, EV_READ | EV_PERSIST, on_ready,
				 (void *)(intptr_t)slot);
	if (!psi[slot].ev || event_add(psi[slot].ev, NULL) < 0) {
		release(slot);
		return -ENOMEM;
	}
	return 0;
}

void trg_psi_unwatch(int key)
{
	for (int i = 0; i < TRG_PSI_MAX; i++)
		if (psi[i].fd >= 0 && psi[i].key == key)
			release(i);
}

const char *trg_psi_status(void)
{
	return status[0] ? status : "not started";
}
