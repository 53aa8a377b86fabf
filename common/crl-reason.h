/* RFC 5280 CRLReason codes by the names hwid uses ("key-compromise",
 * ...): what `hwid cert revoke --reason` and the admin API take, and what
 * a certificate's record shows. */
#pragma once

/* -HWID_E_INVALID listing the names for any other. */
int revocation_reason_parse(const char *name, int *ret);
const char *revocation_reason_name(int code);
/* "unspecified, key-compromise, ..." for help texts. */
#define REVOCATION_REASON_NAMES                                                                       \
        "unspecified, key-compromise, ca-compromise, affiliation-changed, superseded, "             \
        "cessation-of-operation, privilege-withdrawn"
