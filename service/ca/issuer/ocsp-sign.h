/* OCSP answers (RFC 6960 §4.2), signed by the CA key through hsm/ like
 * every other signature of the issuer: one SingleResponse for the
 * request's one certID, the responder named by its key's hash (RFC 5019
 * §2.2.3), the CA certificate alongside, the request's nonce echoed when
 * asked for. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "issuer.h"
#include "ocsp-wire.h"

typedef enum ocsp_cert_status {
        OCSP_CERT_GOOD,
        OCSP_CERT_REVOKED,
        OCSP_CERT_UNKNOWN, /* a serial this CA never issued */
} ocsp_cert_status;

typedef struct ocsp_answer {
        ocsp_cert_status status;
        int64_t revoked_at;  /* OCSP_CERT_REVOKED */
        int reason;          /* CRLReason; 0 (unspecified) is left out */
        int64_t this_update; /* Unix seconds */
        int64_t next_update; /* when a relying party should ask again */
        bool echo_nonce;     /* the request's nonce in the answer (RFC 8954) */
} ocsp_answer;

/* The signed OCSPResponse (successful) answering q with a; *ret is DER,
 * caller frees with OPENSSL_free(). */
int issuer_ocsp_sign(issuer *is, const ocsp_query *q, const ocsp_answer *a, uint8_t **ret, size_t *ret_len);
