/* The attestation record (attest-record.h): what verified evidence proved,
 * as the store keeps it and as policy/ weighs it. */
#include <stdio.h>

#include "attest-record.h"

const policy_attestation *ca_attestation_fact(const store_attestation *rec, policy_attestation *fact) {
        if (!store_attested(rec))
                return NULL;
        *fact = (policy_attestation) { .ek_pub_sha256 = rec->ek_pub_sha256,
                                       .ek_cert_sha256 = rec->ek_cert_sha256[0] ? rec->ek_cert_sha256 : NULL,
                                       .ak_name = rec->ak_name[0] ? rec->ak_name : NULL };
        return fact;
}

const policy_attestation *ca_attested_fact(const ca_attested *att) {
        return att && att->present ? &att->fact : NULL;
}

void ca_attestation_record(const policy_attestation *fact, store_attestation *ret) {
        *ret = (store_attestation) { 0 };
        if (!fact)
                return;
        snprintf(ret->ek_pub_sha256, sizeof(ret->ek_pub_sha256), "%s", fact->ek_pub_sha256);
        snprintf(ret->ek_cert_sha256, sizeof(ret->ek_cert_sha256), "%s", fact->ek_cert_sha256 ? fact->ek_cert_sha256 : "");
        snprintf(ret->ak_name, sizeof(ret->ak_name), "%s", fact->ak_name ? fact->ak_name : "");
}
