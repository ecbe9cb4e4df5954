/*
 * A hand-made runtime agent for the hostile suite: the attacker speaks
 * runtime.sock itself (PROFILING_NO_AGENT=1 keeps libprofiling's agent
 * out), so it can keep, probe and abuse the fds the daemon passes.
 */
#ifndef PD_HRT_H
#define PD_HRT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <profiling/profiling.h>

#include "profilingd.pb-c.h"

#define HCHECK(cond, ...) do { if (!(cond)) { fprintf(stderr, "hostile: %s:%d: ", __func__, \
	__LINE__); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); exit(2); } } while (0)

struct hrt_outcome {
	int done, error;
	char msg[256];
};

/* Hello on $PROFILINGD_RUNTIME_SOCKET with this pid and caps; waits for the ack. */
int hrt_runtime(const char *const *caps, size_t ncaps);
/* The next daemon->runtime message within ms: its case; *fd gets a passed fd
 * (or -1), *sid the session id of a capture or cancel. */
int hrt_read(int rt, int *fd, uint64_t *sid, int ms);
/* CaptureDone{status 0, bytes} for sid. */
void hrt_done(int rt, uint64_t sid, uint64_t bytes);
prof_client *hrt_client(void);
/* A result callback filling struct hrt_outcome, and a wait for it. */
void hrt_on_result(const struct prof_result *r, void *ud);
void hrt_wait(prof_client *c, struct hrt_outcome *o, int max_ms);
/* A one-sample pprof of this pid into fd; returns the bytes written. */
uint64_t hrt_write_pprof(int fd);

#endif
