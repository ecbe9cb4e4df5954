/* libFuzzer: the daemon's decoder for runtime.sock packets. */
#include <stddef.h>
#include <stdint.h>

#include "svc_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why;
	Pd__RuntimeMsg *m = svc_decode_runtime(data, size, &why);
	if (m)
		pd__runtime_msg__free_unpacked(m, NULL);
	return 0;
}
