/* An identity bound to the TPM that attested it (store.h,
 * docs/ATTESTATION.md "A name is bound to its TPM"), checked where an
 * enrollment is decided: before anything is signed or held for approval,
 * and, for a TPM without a token, before its challenge is made.  The store
 * holds the same rule again when it commits.  Internal to hwidd's CA
 * service. */
#pragma once

#include "ca-internal.h"

/* Whether name may be enrolled with a certificate recording the
 * attestation att (NULL: none): 0, or -HWID_E_FORBIDDEN (403) naming the
 * TPM name is bound to and `hwid identity release`.  Read through a->reads
 * when it was read ahead. */
int ca_binding_check(ca_service *ca, const ca_auth *a, const char *name, const policy_attestation *att);
