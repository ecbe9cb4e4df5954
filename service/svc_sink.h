/*
 * svc_sink: drain a peer's write-only end (a pipe) into a daemon-owned
 * file, with a byte cap, in the event loop.
 *
 * Why: a runtime must never hold an fd to a file the daemon later reads,
 * appends to or hands to the redactor (issue 14; docs/DESIGN.md §2, step
 * 3). It gets the write end of a pipe; the daemon alone holds the file,
 * and only the daemon decides how much of the peer's stream lands in it.
 *
 * Contract:
 * - svc_sink_start takes in_fd (the read end; made non-blocking here and
 *   closed by svc_sink_free) and writes what it reads to out_fd (not
 *   owned, never closed here) at its current offset.
 * - More than cap bytes in all: the excess is not written and the sink
 *   ends with -EFBIG. Nothing past cap ever reaches out_fd.
 * - svc_sink_expect(n): the peer says it wrote n bytes. Reaching n ends the
 *   sink with 0 without waiting for EOF; more than n ends it with -EPROTO.
 * - It ends once: cb(ud, status) with 0 (EOF, or the expected count
 *   reached), -EFBIG, -EPROTO, or a negative errno of read/write (ENOSPC
 *   included). After that it reads no more; svc_sink_bytes stays valid.
 *   cb may free the sink.
 * - Fairness: at most SVC_SINK_BURST bytes per wakeup, so one peer's
 *   stream cannot hold the loop.
 */
#ifndef PD_SVC_SINK_H
#define PD_SVC_SINK_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;
struct svc_sink;

#define SVC_SINK_BURST (1u << 20)

typedef void (*svc_sink_cb)(void *ud, int status);

int svc_sink_start(struct event_base *base, int in_fd, int out_fd, uint64_t cap,
		   svc_sink_cb cb, void *ud, struct svc_sink **out);
/* 1 when the sink has ended now or before (cb is not called for it here),
 * 0 when it waits for more, -EPROTO when more than n arrived already. */
int svc_sink_expect(struct svc_sink *s, uint64_t n);
uint64_t svc_sink_bytes(const struct svc_sink *s);
bool svc_sink_ended(const struct svc_sink *s);
void svc_sink_free(struct svc_sink *s);

#endif
