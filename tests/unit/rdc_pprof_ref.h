/* The pre-streaming pprof redactor, for the differential test only. */
#ifndef PD_RDC_PPROF_REF_H
#define PD_RDC_PPROF_REF_H

#include "rdc.h"

/* Same contract as rdc_pprof() (redact/rdc.h), reading in_fd to its end. */
int rdc_pprof_ref(int in_fd, int out_fd, const struct rdc_policy *p, struct rdc_stats *st);

#endif
