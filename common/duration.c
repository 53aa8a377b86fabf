/* Numbers and durations as typed (duration.h). */
#include <stdio.h>

#include "cleanup.h"
#include "duration.h"
#include "error.h"

int parse_u64(const char **s, uint64_t *ret) {
        uint64_t v = 0;
        const char *p = *s;

        if (*p < '0' || *p > '9')
                return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (UINT64_MAX - (uint64_t) (*p - '0')) / 10)
                        return -1;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        *s = p;
        *ret = v;
        return 0;
}

int duration_parse(const char *s, int64_t *ret) {
        static const struct {
                char unit;
                uint64_t secs;
        } units[] = { { 's', 1 }, { 'm', 60 }, { 'h', 3600 }, { 'd', 86400 }, { 'w', 604800 } };
        const char *p = s;
        uint64_t v;

        if (!s || parse_u64(&p, &v) < 0 || !p[0] || p[1])
                return hwid_fail(HWID_E_INVALID, "'%s' is not a duration", s ? s : "");
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (units[i].unit != p[0])
                        continue;
                if (v > (uint64_t) INT64_MAX / units[i].secs)
                        return hwid_fail(HWID_E_INVALID, "duration '%s' is too long", s);
                *ret = (int64_t) (v * units[i].secs);
                return 0;
        }
        return hwid_fail(HWID_E_INVALID, "'%s' is not a duration", s);
}
