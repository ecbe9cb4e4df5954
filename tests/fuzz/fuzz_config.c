/*
 * libFuzzer: the config parser (service/svc_config.c), fed the input as the
 * config file through a memfd, then the checks the daemon runs after it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "svc_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct svc_config cfg; /* 200 KiB: not on the stack */
	char path[64];
	int line = 0;
	int fd = fz_memfd("fuzz-config", data, size);

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	svc_config_defaults(&cfg);
	if (svc_config_load(&cfg, path, &line) == 0)
		svc_config_finish(&cfg);
	svc_config_free(&cfg);
	close(fd);
	return 0;
}
