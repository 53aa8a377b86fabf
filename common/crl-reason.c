/* CRLReason codes (RFC 5280 §5.3.1) by the names hwid gives them
 * (crl-reason.h). */
#include <string.h>

#include "cleanup.h"
#include "crl-reason.h"
#include "error.h"

static const struct {
        const char *name;
        int code;
} reasons[] = {
        { "unspecified", 0 }, { "key-compromise", 1 }, { "ca-compromise", 2 }, { "affiliation-changed", 3 },
        { "superseded", 4 }, { "cessation-of-operation", 5 }, { "privilege-withdrawn", 9 },
};

int revocation_reason_parse(const char *name, int *ret) {
        for (size_t i = 0; name && i < ELEMENTSOF(reasons); i++)
                if (strcmp(name, reasons[i].name) == 0) {
                        *ret = reasons[i].code;
                        return 0;
                }
        return hwid_fail(HWID_E_INVALID, "unknown revocation reason (one of " REVOCATION_REASON_NAMES ")");
}

const char *revocation_reason_name(int code) {
        for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
                if (reasons[i].code == code)
                        return reasons[i].name;
        return "unspecified";
}
