/* prof_strerror: shared by the daemon and exported by libprofiling. */
#include "profiling/profiling.h"

const char *prof_strerror(int e)
{
	switch (e < 0 ? -e : e) {
	case PROF_E_NONE: return "success";
	case PROF_E_RATE_LIMIT_SYSTEM: return "system-wide rate limit reached";
	case PROF_E_RATE_LIMIT_PROCESS: return "per-app rate limit reached";
	case PROF_E_PROFILING_IN_PROGRESS: return "a capture of this process is already running";
	case PROF_E_EXECUTING: return "the capture failed while running";
	case PROF_E_POST_PROCESSING: return "the capture could not be post-processed";
	case PROF_E_NO_DISK_SPACE: return "no disk space or quota for the result";
	case PROF_E_INVALID_REQUEST: return "invalid request";
	case PROF_E_UNKNOWN: return "unknown error or lost connection";
	case PROF_E_RUNTIME_UNAVAILABLE: return "no runtime agent in the target process";
	case PROF_E_TIMEOUT: return "the runtime missed its deadline";
	case PROF_E_CANCELLED: return "cancelled";
	case PROF_E_TRIGGER_COOLDOWN: return "trigger is cooling down";
	case PROF_E_PERMISSION: return "permission denied";
	default: return "unrecognised error";
	}
}
