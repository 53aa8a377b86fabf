/* Numbers and durations as people type them, on hwid's command lines and
 * in hwidd.yaml: "30s", "5m", "2h", "7d", "1w". */
#pragma once

#include <stdint.h>

/* The decimal digits at *s (at least one) into *ret, *s moved past them;
 * -1 if there are none or they overflow. */
int parse_u64(const char **s, uint64_t *ret);
/* A number and one unit (s, m, h, d or w) as seconds; -HWID_E_INVALID
 * naming s otherwise. */
int duration_parse(const char *s, int64_t *ret);
