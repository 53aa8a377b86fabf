/* Who a TPM is when it asks without a bootstrap token (docs/ATTESTATION.md,
 * "Enrollment by EK" and "Coming back by attestation"): a TPM on the EK
 * allowlist enrolling its name, or an identity whose certificate expired,
 * was superseded or was revoked (for any reason but keyCompromise and
 * privilegeWithdrawn) coming back by TPM attestation alone, as its
 * profile's reenroll_by_attestation allows (after a revocation, its
 * allowlist entry too, whatever the profile says).  Internal to hwidd's
 * CA service: attest-api.c asks it for the challenge and for the answer. */
#pragma once

#include <stdint.h>

#include "ca-internal.h"

/* The TPM with this EK (hex SHA-256 of its certificate and of its public
 * key) asks for name (NULL: the name its EK allowlist entry gives it).
 * a becomes ROLE_EK with the name and profile it enrolls under, and
 * a->reenroll says which rule let it come back, if it is coming back
 * (audited as `reenroll`).
 * -HWID_E_UNAUTHENTICATED (401): neither listed nor the TPM of name's last
 * certificate; -HWID_E_FORBIDDEN (403): name's last certificate was
 * revoked for keyCompromise or privilegeWithdrawn ("do not return"), or
 * its profile does not let it come back by attestation. */
int ca_auth_returning(ca_service *ca, const char *ek_cert_hex, const char *ek_pub_hex, const char *name,
                      int64_t now, ca_auth *a);
