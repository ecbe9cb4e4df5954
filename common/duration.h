/*
 * duration: one syntax for every duration a person types, in the config
 * (service/svc_config.c) and on profctl's command line:
 *
 *   <number>[<unit>]   unit: ms, s, m or h; number: digits with at most
 *                      three decimals ("1.5s", "0.25m"), no sign, no spaces
 *
 * A bare number is in the unit the caller names (bare_ms: 1 for keys
 * ending in _ms, 1000 for those in _s): today's meaning of each key, so
 * old configs read as before. The result is in milliseconds and must be a
 * whole number of them ("0.5ms" is refused).
 *
 * dur_parse_ms returns 0, -EINVAL (not a duration) or -ERANGE (more than
 * UINT64_MAX ms). Pure function: no state, no allocation.
 */
#ifndef PD_DURATION_H
#define PD_DURATION_H

#include <stdint.h>

int dur_parse_ms(const char *s, uint64_t bare_ms, uint64_t *out_ms);

#endif
