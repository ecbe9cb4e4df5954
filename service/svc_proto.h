/*
 * svc_proto: the decoders of client.sock and runtime.sock packets. The
 * packet size is capped first, then protobuf-c decodes (rejecting missing
 * required fields, skipping unknown ones), then every string and repeated
 * field is checked against its cap (wire.h). The fuzz targets
 * fuzz_client_msg and fuzz_runtime_msg call them; the roles (svc_client.c,
 * svc_runtime.c) hand them to the transport as their decode op.
 */
#ifndef PD_SVC_PROTO_H
#define PD_SVC_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "profilingd.pb-c.h"

/*
 * Decode and validate one packet. On failure returns NULL and *why names
 * the reason for the log. Free with pd__*_msg__free_unpacked().
 */
Pd__ClientMsg *svc_decode_client(const uint8_t *buf, size_t len, const char **why);
Pd__RuntimeMsg *svc_decode_runtime(const uint8_t *buf, size_t len, const char **why);
/* The same, as the transport's decode op (struct svc_conn_role_ops). */
ProtobufCMessage *svc_proto_client(const uint8_t *buf, size_t len, const char **why);
ProtobufCMessage *svc_proto_runtime(const uint8_t *buf, size_t len, const char **why);

#endif
