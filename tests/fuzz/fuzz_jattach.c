/*
 * libFuzzer: everything profilingd-jattach parses from a JVM. The first
 * byte picks the parser: the attach reply and a load's return code, the
 * Thread.print text, the java command line, or an HPROF to append stacks to.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char dump_text[] =
	"\"main\" #1 prio=5 os_prio=0 tid=0x1 nid=0x2a waiting on condition\n"
	"   java.lang.Thread.State: TIMED_WAITING (sleeping)\n"
	"\tat java.lang.Thread.sleep(java.base@17/Native Method)\n"
	"\tat Leak.main(Leak.java:42)\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t mode = data[0] % 4;
	const char *in = (const char *)data + 1;
	size_t len = size - 1;
	switch (mode) {
	case 0: {
		int st, rc;
		const char *body;
		size_t blen;
		if (ja_parse_reply(in, len, &st, &body, &blen) == 0)
			ja_parse_load_rc(body, blen, &rc);
		break;
	}
	case 1: {
		struct ja_threads t;
		if (ja_threads_parse(in, len, &t) == 0)
			ja_threads_free(&t);
		break;
	}
	case 2: {
		char out[256];
		ja_main_class(in, len, out, sizeof(out));
		break;
	}
	case 3: {
		struct ja_threads t;
		int ifd = memfd_create("in", 0), ofd = memfd_create("out", 0);
		if (ifd >= 0 && ofd >= 0 && write(ifd, in, len) == (ssize_t)len &&
		    ja_threads_parse(dump_text, sizeof(dump_text) - 1, &t) == 0) {
			ja_hprof_with_threads(ifd, ofd, &t);
			ja_threads_free(&t);
		}
		if (ifd >= 0)
			close(ifd);
		if (ofd >= 0)
			close(ofd);
		break;
	}
	}
	return 0;
}
