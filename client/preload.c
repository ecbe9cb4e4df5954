/*
 * libprofiling_preload.so: heap profiling and the runtime agent for an
 * unmodified app, by LD_PRELOAD. Loading it interposes the allocator
 * (heap.c); this constructor optionally starts sampling at once, so a
 * capture sees the allocations made since start-up, and starts the agent
 * that answers the daemon's capture requests.
 *
 *   PROFILING_HEAP_FROM_START=1   sample from load (until the first capture ends)
 *   PROFILING_HEAP_INTERVAL=N     its interval in bytes (default 4096)
 *   PROFILINGD_SOCKET             the daemon's client socket, as for libprofiling:
 *                                 the agent asks it for the runtime socket
 *   PROFILINGD_RUNTIME_SOCKET     the old name, kept: the runtime socket itself;
 *                                 when set it wins
 *   PROFILING_DEBUG=1             log to stderr (e.g. an agent that could not
 *                                 register); nothing is printed otherwise
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "heap.h"
#include "log.h"

#define PRELOAD_RUNTIME_SOCKET "/run/profilingd/runtime.sock"

static int preload_agent;

/* secure_getenv: a set-id program must not take orders from its caller's environment. */
static const char *preload_env(const char *name)
{
	const char *v = secure_getenv(name);
	return v && *v ? v : NULL;
}

static uint32_t preload_interval(void)
{
	const char *v = preload_env("PROFILING_HEAP_INTERVAL");
	char *end;

	if (!v)
		return 0;
	errno = 0;
	unsigned long n = strtoul(v, &end, 10);
	if (errno || *end || n == 0 || n > (1ul << 30)) {
		LOG_D("ignoring PROFILING_HEAP_INTERVAL=%s", v);
		return 0;
	}
	return (uint32_t)n;
}

__attribute__((constructor)) static void preload_init(void)
{
	const char *d = preload_env("PROFILING_DEBUG");
	const char *from_start = preload_env("PROFILING_HEAP_FROM_START");
	const char *rt_sock = preload_env("PROFILINGD_RUNTIME_SOCKET");
	const char *sock = preload_env("PROFILINGD_SOCKET");
	int r;

	if (d && !strcmp(d, "1"))
		log_init(LOG_SINK_STDERR, LOG_DEBUG, "libprofiling_preload");
	if (from_start && !strcmp(from_start, "1") && (r = heap_start(preload_interval())) < 0)
		LOG_D("heap_start: %s", strerror(-r));
	/* The daemon may not be up yet: the agent connects on its own thread, don't wait. */
	if (rt_sock)
		r = agent_start(rt_sock, 0);
	else if (sock)
		r = agent_start_via_client(sock, 0);
	else
		r = agent_start(PRELOAD_RUNTIME_SOCKET, 0);
	if (r < 0) {
		/* Nobody could ever collect the samples: don't pay for them. */
		LOG_D("agent_start: %s", strerror(-r));
		heap_discard();
		return;
	}
	preload_agent = 1;
}

__attribute__((destructor)) static void preload_fini(void)
{
	if (preload_agent)
		agent_stop();
	preload_agent = 0;
}
