/* The HTTP side of TPM attestation (docs/ATTESTATION.md): POST /v1/attest
 * asks for a challenge; POST /csr and POST /v1/renew carry the answer in a
 * JSON body beside the CSR.  This door parses and bounds that JSON into
 * what the CA core takes (ca_evidence, ca_attest_ask): it decides
 * nothing. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ca.h"
#include "http.h"

/* A body of POST /csr or POST /v1/renew: the CSR, and the attestation
 * evidence if it came as JSON with one. */
typedef struct ca_body {
        const uint8_t *csr;  /* PEM or DER, into the request or csr_text */
        size_t csr_len;
        bool has_evidence;
        ca_evidence ev;      /* its buffers owned */
        char *csr_text;      /* owned: the "csr" of a JSON body */
} ca_body;

/* A PKCS#10 body (PEM or DER) as it is; with Content-Type
 * application/json, {"csr": PEM, "attestation": {...}}, every field
 * checked and bounded: -HWID_E_INVALID (400) naming what is wrong.  *ret
 * is set either way (ca_body_clear() it). */
int ca_body_parse(const http_request *req, ca_body *ret);
void ca_body_clear(ca_body *b);
