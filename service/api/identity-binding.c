/* An identity bound to the TPM that attested it (identity-binding.h). */
#include "error.h"
#include "identity-binding.h"

int ca_binding_check(ca_service *ca, const ca_auth *a, const char *name, const policy_attestation *att) {
        _cleanup_(store_binding_clear) store_binding b = { 0 };
        int r = store_reads_binding_get(ca->store, a->reads, name, &b);

        if (r == -HWID_E_NOT_FOUND) {
                hwid_error_clear();
                return 0;
        }
        return r < 0 ? r : store_binding_check(&b, att ? att->ek_pub_sha256 : NULL, false);
}
