/* Identities bound to the TPM that attested them (store.h): the rule both
 * stores hold at issuance, its one wording, and freeing the records. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-rows.h"

#define RELEASE_HINT \
        "only that TPM enrolls it until an admin releases it (a replaced TPM or board): hwid identity release %s"

int store_binding_check(const store_binding *b, const char *ek_pub_sha256, bool renewal) {
        bool attested = ek_pub_sha256 && ek_pub_sha256[0];

        if (!b || (attested && strcmp(ek_pub_sha256, b->ek_pub_sha256) == 0) || (!attested && renewal))
                return 0;
        if (attested)
                return hwid_fail(HWID_E_FORBIDDEN, "%s is bound to the TPM that attested it (EK sha256:%s, since "
                                 "certificate %s), not to this one (EK sha256:%s): " RELEASE_HINT, b->identity,
                                 b->ek_pub_sha256, b->serial, ek_pub_sha256, b->identity);
        return hwid_fail(HWID_E_FORBIDDEN, "%s is bound to the TPM that attested it (EK sha256:%s, since certificate "
                         "%s), and this enrollment records no attestation by it (hwid join --attest on that TPM, "
                         "under a profile whose attestation is optional or required): " RELEASE_HINT, b->identity,
                         b->ek_pub_sha256, b->serial, b->identity);
}

bool store_binding_ok(const store_binding *b) {
        return b && store_str_ok(b->identity, STORE_BINDING_NAME_MAX) && store_hex_ok(b->ek_pub_sha256, 64, 64) &&
               (!b->ek_cert_sha256[0] || store_hex_ok(b->ek_cert_sha256, 64, 64)) && store_serial_ok(b->serial);
}

void store_binding_clear(store_binding *b) {
        if (!b)
                return;
        free(b->identity);
        free(b->serial);
        *b = (store_binding) { 0 };
}

void store_binding_list_free(store_binding *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                store_binding_clear(&v[i]);
        free(v);
}
