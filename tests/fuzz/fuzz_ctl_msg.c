/* libFuzzer: the daemon's decoder of control.sock packets (profctl). */
#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"
#include "svc_ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why;
	Pdctl__CtlRequest *m = svc_ctl_decode(data, size, &why);
	if (m)
		pdctl__ctl_request__free_unpacked(m, NULL);
	return 0;
}
