/*
 * Decoders for peer bytes: the packet length is already capped by
 * wire_recv(); here protobuf-c decodes (rejecting missing required fields,
 * skipping unknown ones) and every string and repeated field is checked
 * against its cap. Fuzzed by tests/fuzz/fuzz_client_msg.c and
 * fuzz_runtime_msg.c.
 */
#include "svc_proto.h"
#include "svc_config.h"

#include <string.h>

#include "wire.h"

#define MAX_APP_NAME 256
#define MAX_RUNTIME_NAME 32
#define MAX_CAP_NAME 32

static int str_ok(const char *s, size_t cap)
{
	return !s || strnlen(s, cap + 1) <= cap;
}

Pd__ClientMsg *svc_decode_client(const uint8_t *buf, size_t len, const char **why)
{
	Pd__ClientMsg *m;

	if (len > WIRE_CLIENT_MAX_MSG) {
		*why = "message over the size cap";
		return NULL;
	}
	m = pd__client_msg__unpack(NULL, len, buf);
	if (!m) {
		*why = "undecodable or missing required field";
		return NULL;
	}
	*why = NULL;
	switch (m->msg_case) {
	case PD__CLIENT_MSG__MSG_HELLO:
		if (!str_ok(m->hello->app_name, MAX_APP_NAME))
			*why = "app_name too long";
		break;
	case PD__CLIENT_MSG__MSG_REQUEST:
		if (!str_ok(m->request->tag, WIRE_MAX_TAG))
			*why = "tag too long";
		/*
		 * Method targets: at most 64 of 1023 bytes on the wire (more: the
		 * peer is closed); admission refuses past 8 with a reason.
		 */
		else if (m->request->params &&
			 m->request->params->n_method_targets > SVC_METHOD_TARGETS_WIRE_MAX)
			*why = "too many method targets";
		for (size_t i = 0; !*why && m->request->params &&
		     i < m->request->params->n_method_targets; i++)
			if (!str_ok(m->request->params->method_targets[i], SVC_METHOD_TARGET_LEN - 1))
				*why = "method target too long";
		break;
	case PD__CLIENT_MSG__MSG_CANCEL:
	case PD__CLIENT_MSG__MSG_SET_LISTENER:
	case PD__CLIENT_MSG__MSG_ACK:
	case PD__CLIENT_MSG__MSG_ADD_TRIGGER:
	case PD__CLIENT_MSG__MSG_REMOVE_TRIGGER:
	case PD__CLIENT_MSG__MSG_BUDGET_QUERY:
		break;
	case PD__CLIENT_MSG__MSG_SIGNAL:
		if (!str_ok(m->signal->name, WIRE_MAX_TAG))
			*why = "signal name too long";
		break;
	default:
		*why = "no message set";
		break;
	}
	if (*why) {
		pd__client_msg__free_unpacked(m, NULL);
		return NULL;
	}
	return m;
}

Pd__RuntimeMsg *svc_decode_runtime(const uint8_t *buf, size_t len, const char **why)
{
	Pd__RuntimeMsg *m;

	if (len > WIRE_RUNTIME_MAX_MSG) {
		*why = "message over the size cap";
		return NULL;
	}
	m = pd__runtime_msg__unpack(NULL, len, buf);
	if (!m) {
		*why = "undecodable or missing required field";
		return NULL;
	}
	*why = NULL;
	switch (m->msg_case) {
	case PD__RUNTIME_MSG__MSG_HELLO:
		if (!str_ok(m->hello->runtime, MAX_RUNTIME_NAME) ||
		    !str_ok(m->hello->version, MAX_RUNTIME_NAME))
			*why = "runtime name or version too long";
		else if (m->hello->n_capabilities > WIRE_MAX_CAPS ||
			 m->hello->n_missing > WIRE_MAX_CAPS)
			*why = "too many capabilities";
		for (size_t i = 0; !*why && i < m->hello->n_capabilities; i++)
			if (!str_ok(m->hello->capabilities[i], MAX_CAP_NAME))
				*why = "capability name too long";
		for (size_t i = 0; !*why && i < m->hello->n_missing; i++)
			if (!str_ok(m->hello->missing[i], MAX_CAP_NAME))
				*why = "capability name too long";
		break;
	case PD__RUNTIME_MSG__MSG_DONE:
		if (!str_ok(m->done->message, WIRE_MAX_STR) ||
		    !str_ok(m->done->format, MAX_CAP_NAME))
			*why = "message or format too long";
		break;
	case PD__RUNTIME_MSG__MSG_EVENT:
		break;
	default:
		*why = "no message set";
		break;
	}
	if (*why) {
		pd__runtime_msg__free_unpacked(m, NULL);
		return NULL;
	}
	return m;
}

/* Only the pointer's type changes: base is each message's first member. */
ProtobufCMessage *svc_proto_client(const uint8_t *buf, size_t len, const char **why)
{
	Pd__ClientMsg *m = svc_decode_client(buf, len, why);
	return m ? &m->base : NULL;
}

ProtobufCMessage *svc_proto_runtime(const uint8_t *buf, size_t len, const char **why)
{
	Pd__RuntimeMsg *m = svc_decode_runtime(buf, len, why);
	return m ? &m->base : NULL;
}
