/* The HTTP side of TPM attestation (docs/ATTESTATION.md): POST /v1/attest
 * makes a challenge; POST /csr and POST /v1/renew carry the answer in a
 * JSON body beside the CSR.  This module parses and bounds that JSON,
 * verifies the evidence (attest-verify.h) and hands enroll.c what it
 * proved, as a fact for policy/ and a record for the store: it decides
 * nothing about issuance.  Internal to hwidd's CA service. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "attest-record.h"
#include "ca-internal.h"

/* A body of POST /csr or POST /v1/renew: the CSR, and the attestation
 * evidence if it came as JSON with one. */
typedef struct ca_body {
        const uint8_t *csr;  /* PEM or DER, into the request or csr_text */
        size_t csr_len;
        bool has_evidence;
        char id[33];
        uint8_t *activated, *certify_info, *signature, *key_public;
        size_t activated_len, certify_info_len, signature_len, key_public_len;
        char *csr_text;      /* owned: the "csr" of a JSON body */
} ca_body;

/* A PKCS#10 body (PEM or DER) as it is; with Content-Type
 * application/json, {"csr": PEM, "attestation": {...}}, every field
 * checked and bounded: -HWID_E_INVALID (400) naming what is wrong. */
int ca_body_parse(const http_request *req, ca_body *ret);
void ca_body_clear(ca_body *b);

/* Verifies b's evidence for the key of csr (using up its challenge):
 * -HWID_E_ATTESTATION (403) saying which proof failed, -HWID_E_INVALID
 * (400) if malformed. */
int ca_attest_verify(ca_service *ca, const ca_body *b, const csr_info *csr, int64_t now, ca_attested *ret);

/* Authenticates a request without a token by its verified attestation:
 * the TPM's EK must be on the EK allowlist; a becomes ROLE_EK with the
 * listed name and profile (-HWID_E_UNAUTHENTICATED otherwise). */
int ca_auth_ek(ca_service *ca, const ca_attested *att, ca_auth *a);

/* POST /v1/attest. */
void ca_attest(ca_service *ca, const http_request *req, http_response *resp);
