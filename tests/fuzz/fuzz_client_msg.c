/* libFuzzer: the daemon's decoder for client.sock packets. */
#include <stddef.h>
#include <stdint.h>

#include "svc_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why;
	Pd__ClientMsg *m = svc_decode_client(data, size, &why);
	if (m)
		pd__client_msg__free_unpacked(m, NULL);
	return 0;
}
