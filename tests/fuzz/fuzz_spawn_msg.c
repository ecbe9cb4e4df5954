/*
 * libFuzzer: the spawner's decoder (service/svc_spawner.c). Its peer is the
 * sandboxed daemon, which is assumed compromised. A packet that decodes
 * must encode back to the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "svc_spawn.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t again[SVC_SPAWN_MSG_MAX];
	struct svc_spawn_msg m;
	size_t len;
	if (svc_spawn_decode(data, size, &m) < 0)
		return 0;
	if (svc_spawn_encode(&m, again, sizeof(again), &len) < 0 || len != size ||
	    memcmp(again, data, size) != 0)
		abort();
	return 0;
}
