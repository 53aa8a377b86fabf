/* The attestation record: what verified TPM evidence proved, as the store
 * keeps it (store_attestation, hex strings) and as policy/ weighs it
 * (policy_attestation, pointing into the record); and the hardware
 * identity an attested certificate carries.  The handlers that verify
 * evidence (api/) make it, issuance (ca/) records and certifies it. */
#pragma once

#include <stdbool.h>

#include <openssl/x509v3.h>

#include "policy.h"
#include "store.h"

/* What verified evidence proved: the store's record (hex strings) and
 * the policy's fact pointing into it.  present false: no evidence. */
typedef struct ca_attested {
        bool present;
        store_attestation rec;
        policy_attestation fact;
} ca_attested;

/* The policy fact of att, NULL when there is none. */
const policy_attestation *ca_attested_fact(const ca_attested *att);
/* The fact of a stored record (a request, a certificate) into fact,
 * pointing into rec; NULL when the record holds none. */
const policy_attestation *ca_attestation_fact(const store_attestation *rec, policy_attestation *fact);
/* The record of a policy fact (what policy decided to record), or all
 * empty for NULL. */
void ca_attestation_record(const policy_attestation *fact, store_attestation *ret);

/* The hardware identity an attested certificate carries (attest-cert.c):
 * a subjectAltName otherName permanentIdentifier (RFC 4043) whose
 * identifierValue is "sha256:<hex>" of the EK's SubjectPublicKeyInfo and
 * whose assigner is absent (assigned by the certificate's issuer). */
int attest_san_append(GENERAL_NAMES *sans, const char *ek_pub_sha256);
