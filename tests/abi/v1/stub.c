/*
 * Link-time stand-in for the first libprofiling.so.1 (README): the symbols
 * of v1/profiling.h, unversioned. A program linked with it gets the
 * references an old binary has; at run time the real library replaces it,
 * so nothing here is ever called by the test and every function fails.
 */
#include "profiling.h"

#include <stddef.h>

prof_client *prof_connect(const char *socket_path, int *err)
{
	(void)socket_path;
	if (err)
		*err = -38; /* ENOSYS */
	return NULL;
}
void prof_close(prof_client *c) { (void)c; }
int prof_fd(prof_client *c) { (void)c; return -1; }
int prof_dispatch(prof_client *c, int timeout_ms)
{
	(void)c; (void)timeout_ms;
	return -PROF_E_UNKNOWN;
}
int prof_request(prof_client *c, enum prof_type type, const struct prof_params *params,
		 const char *tag, prof_result_cb cb, void *ud, uint64_t *request_id)
{
	(void)c; (void)type; (void)params; (void)tag; (void)cb; (void)ud; (void)request_id;
	return -PROF_E_UNKNOWN;
}
int prof_cancel(prof_client *c, uint64_t request_id)
{
	(void)c; (void)request_id;
	return -PROF_E_UNKNOWN;
}
int prof_set_result_listener(prof_client *c, prof_result_cb cb, void *ud)
{
	(void)c; (void)cb; (void)ud;
	return -PROF_E_UNKNOWN;
}
void prof_trace_begin(const char *name) { (void)name; }
void prof_trace_end(void) {}
void prof_trace_instant(const char *name) { (void)name; }
void prof_trace_counter(const char *name, int64_t value) { (void)name; (void)value; }
int prof_add_trigger(prof_client *c, const struct prof_trigger *t)
{
	(void)c; (void)t;
	return -PROF_E_UNKNOWN;
}
int prof_remove_trigger(prof_client *c, enum prof_trigger_type type)
{
	(void)c; (void)type;
	return -PROF_E_UNKNOWN;
}
int prof_clear_triggers(prof_client *c) { (void)c; return -PROF_E_UNKNOWN; }
void prof_report_fully_drawn(void) {}
void prof_report_anomaly(const char *name) { (void)name; }
void prof_heartbeat(void) {}
const char *prof_strerror(int error) { (void)error; return "stub"; }
