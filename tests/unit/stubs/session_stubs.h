/*
 * Stubs of the neighbours of svc_session.c and svc_capture.c for
 * test_session: connections are plain records, messages and failures are
 * recorded, helpers and the sink answer what the test sets.
 */
#ifndef PD_SESSION_STUBS_H
#define PD_SESSION_STUBS_H

#include "svc_session_priv.h"

struct svc_conn {
	uint64_t id;
	pid_t pid;
	struct svc_ident ident;
	uint32_t caps;
};

/* The runtime svc_conn_runtime_for answers (NULL: none). */
extern struct svc_conn *stub_runtime;
/* Messages sent to runtimes: the last one's case, how many, with an fd. */
extern int stub_sent_case, stub_sent, stub_sent_fds;
/* svc_ident_check's answer. */
extern int stub_ident_check;
/* svc_sink_expect's answer, and what svc_sink_bytes reports. */
extern int stub_sink_expect;
extern uint64_t stub_sink_bytes;
/* svc_perf_start's answer (agentless sampling). */
extern int stub_perf_start;
/* Ends: svc_deliver_fail's last error and count; svc_deliver_start calls;
 * sessions abandoned (svc_db_session_abandon). */
extern int stub_failed, stub_fails, stub_delivered, stub_abandoned;
extern char stub_fail_msg[256];

void stub_reset(void);

#endif
