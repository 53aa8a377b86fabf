/* An identity bound to the TPM that attested it (store.h,
 * docs/ATTESTATION.md "A name is bound to its TPM"), checked where an
 * enrollment is decided: before anything is signed or held for approval,
 * and, for a TPM without a token, before its challenge is made.  The store
 * holds the same rule again when it commits. */
#include "ca-internal.h"
#include "error.h"

void admin_release_reason(const store_binding *b, char *out, size_t size) {
        snprintf(out, size, "released from the TPM with EK sha256:%s (bound since certificate %s)", b->ek_pub_sha256,
                 b->serial);
}

int ca_binding_check(ca_service *ca, const ca_auth *a, const char *name, const policy_attestation *att) {
        _cleanup_(store_binding_clear) store_binding b = { 0 };
        int r = store_reads_binding_get(ca->store, a->reads, name, &b);

        if (r == -HWID_E_NOT_FOUND) {
                hwid_error_clear();
                return 0;
        }
        return r < 0 ? r : store_binding_check(&b, att ? att->ek_pub_sha256 : NULL, false);
}
