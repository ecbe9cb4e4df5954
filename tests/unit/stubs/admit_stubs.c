/* svc_admit.c's neighbour for test_admit: the result index (svc_db). */
#include "svc_db_result.h"

uint64_t stub_result_bytes;

int svc_db_result_bytes(const char *app, uint64_t *bytes)
{
	*bytes = stub_result_bytes;
	return 0;
}
