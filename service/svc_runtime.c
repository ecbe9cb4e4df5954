/*
 * The runtime role (svc_runtime.h): runtime.sock's messages, handed from
 * the transport (svc_conn.c) to the session and trigger modules.
 */
#include "svc_capture.h"
#include "svc_trigger.h"
#include "svc_runtime.h"

#include <errno.h>
#include <string.h>

#include "log.h"
#include "names.h"
#include "profiling/profiling.h"
#include "svc_conn.h"
#include "svc_ident.h"
#include "svc_proto.h"
#include "util.h"
#include "wire.h"

static uint32_t parse_caps(const Pd__RuntimeHello *h)
{
	uint32_t caps = 0;
	for (size_t i = 0; i < h->n_capabilities; i++)
		caps |= names_cap_parse(h->capabilities[i]);
	return caps;
}

static int runtime_hello(struct svc_conn *c, const void *msg)
{
	const Pd__RuntimeHello *h = ((const Pd__RuntimeMsg *)msg)->hello;
	Pd__DaemonToRuntime out = PD__DAEMON_TO_RUNTIME__INIT;
	Pd__HelloAck ack = PD__HELLO_ACK__INIT;
	pid_t pid = svc_conn_pid(c);
	uid_t uid = svc_conn_uid(c);

	if (svc_conn_hello_done(c))
		return -EPROTO;
	/* The process that connected, still there with its ids. */
	int ir = svc_ident_check(svc_conn_ident(c));
	if (ir < 0) {
		LOG_W("runtime hello of pid %d refused: %s", (int)pid, svc_conn_ident_why(ir));
		return ir;
	}
	/* The pid is the kernel's word, never the message's. */
	if ((pid_t)h->pid != pid) {
		LOG_PEER(uid, LOG_WARNING, "runtime hello claims pid %u but the peer is pid %d",
			 h->pid, (int)pid);
		return -EPERM;
	}
	if (svc_conn_runtime_for(pid)) {
		LOG_PEER(uid, LOG_WARNING, "pid %d already has a runtime connection", (int)pid);
		return -EEXIST;
	}
	svc_conn_set_runtime(c, parse_caps(h), h->runtime);
	/* What the runtime would offer but could not get (a JVMTI capability). */
	char missing[WIRE_MAX_CAPS * 33 + 2] = "";
	for (size_t i = 0; i < h->n_missing; i++) {
		size_t len = strlen(missing);
		util_fmt(missing + len, sizeof(missing) - len, "%s%s", i ? "," : "", h->missing[i]);
	}
	LOG_PEER(uid, LOG_INFO, "runtime up: pid %d uid %u kind %s caps 0x%x missing %s",
		 (int)pid, (unsigned)uid, h->runtime, svc_conn_runtime_caps(c),
		 missing[0] ? missing : "-");
	ack.version = PROF_API_VERSION;
	out.msg_case = PD__DAEMON_TO_RUNTIME__MSG_HELLO_ACK;
	out.hello_ack = &ack;
	int r = svc_conn_send(c, &out.base, -1);
	if (r == 0) {
		svc_trigger_runtime_up(c);
		svc_capture_runtime_up(c);
	}
	return r;
}

static int runtime_done(struct svc_conn *c, const void *msg)
{
	return svc_capture_done(c, ((const Pd__RuntimeMsg *)msg)->done);
}

static int runtime_event(struct svc_conn *c, const void *msg)
{
	/* It may fire a trigger: only for the process that connected. */
	if (svc_conn_check(c) < 0)
		return 0;
	svc_trigger_runtime_event(c, ((const Pd__RuntimeMsg *)msg)->event);
	return 0;
}

static const struct svc_conn_handler handlers[] = {
	{ PD__RUNTIME_MSG__MSG_HELLO, false, runtime_hello },
	{ PD__RUNTIME_MSG__MSG_DONE, true, runtime_done },
	{ PD__RUNTIME_MSG__MSG_EVENT, true, runtime_event },
};

static const struct svc_conn_role_ops ops = {
	.max_in = WIRE_RUNTIME_MAX_MSG,
	.max_out = WIRE_RUNTIME_MAX_MSG,
	.decode = svc_proto_runtime,
	.handlers = handlers,
	.nhandlers = sizeof(handlers) / sizeof(handlers[0]),
	.closed = svc_capture_runtime_down,
};

int svc_runtime_init(void)
{
	return svc_conn_role_register(SVC_ROLE_RUNTIME, &ops);
}

void svc_runtime_fini(void)
{
	svc_conn_role_unregister(SVC_ROLE_RUNTIME);
}
