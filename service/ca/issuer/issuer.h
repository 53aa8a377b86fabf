/* The issuer: builds certificates and CRLs and has the CA key sign them,
 * through hsm/ like every other signature.  No I/O beyond the key. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "hsm.h"
#include "policy.h"

typedef struct issuer issuer;

/* ca_key and ca_cert are borrowed and must outlive the issuer; the CA
 * certificate's public key must match the key (checked). */
int issuer_new(hwid_key *ca_key, X509 *ca_cert, issuer **ret);
void issuer_free(issuer *is);
hwid_key *issuer_key(const issuer *is);
X509 *issuer_cert(const issuer *is);
DEFINE_TRIVIAL_CLEANUP_FUNC(issuer *, issuer_free)

typedef struct issue_request {
        EVP_PKEY *subject_key;       /* from the CSR (verified) */
        /* The CSR's SubjectPublicKeyInfo (the same key): when set, copied
         * into the certificate as it stands instead of re-encoding
         * subject_key, which OpenSSL 3.0's encoders make slow. */
        const X509_PUBKEY *subject_spki;
        const X509_NAME *subject;
        const GENERAL_NAMES *sans;   /* NULL: none */
        uint32_t key_usage;          /* KU_* (policy.h) */
        uint32_t eku;                /* EKU_* */
        int64_t validity;            /* seconds */
        int64_t now;
        /* notBefore is now - backdate: a relying party whose clock is
         * behind the CA's by up to that much still accepts it. */
        int64_t backdate;
        const char *crl_url;         /* CRL distribution point; NULL: none */
        const char *ocsp_url;        /* OCSP responder (authorityInfoAccess); NULL: none */
} issue_request;

/* A signed leaf certificate and what its record needs, read off as it
 * was built rather than parsed back out of it. */
typedef struct issued_cert {
        uint8_t *der;           /* the certificate (malloc) */
        size_t der_len;
        char serial[33];        /* upper-case hex, as serial_to_hex() gives it */
        int64_t not_before;     /* Unix seconds */
        int64_t not_after;
} issued_cert;
void issued_cert_clear(issued_cert *c);

/* Builds, signs and returns a leaf certificate (basicConstraints CA:FALSE,
 * key usage, EKU, SKI/AKI, CRL distribution point, OCSP responder, SANs) with a fresh
 * random 127-bit serial.  Never a CA certificate, whatever was asked.
 * Its subject is in->subject and its names in->sans, as given. */
int issuer_sign(issuer *is, const issue_request *in, issued_cert *ret);

/* Revoked entry for the CRL builder. */
typedef struct crl_entry {
        const char *serial_hex;
        int64_t revoked_at;
        int reason; /* CRLReason; 0 (unspecified) omits the extension */
} crl_entry;

typedef struct crl_builder crl_builder;
/* Starts a CRL valid from now for validity seconds, with cRLNumber number
 * (from store_crl_number_next(): it must only grow). */
int crl_builder_new(issuer *is, int64_t now, int64_t validity, int64_t number, crl_builder **ret);
int crl_builder_add(crl_builder *b, const crl_entry *e);
/* Signs with the CA key and returns the DER encoding (free it with
 * OPENSSL_free); the builder still needs crl_builder_free(). */
int crl_builder_finish(crl_builder *b, uint8_t **ret_der, size_t *ret_len);
void crl_builder_free(crl_builder *b);

/* A self-signed root: CA:TRUE critical, keyCertSign|cRLSign critical, SKI,
 * AKI, random serial; validity days from now. */
int ca_self_sign(hwid_key *k, const X509_NAME *subject, int days, X509 **ret);

/* A link certificate (RFC 4210 §4.4, a rollover): subject_cert's subject
 * and key certified by signer (whose certificate is signer_cert) as a CA
 * (CA:TRUE, keyCertSign, cRLSign, critical), valid from now until the
 * earlier of the two certificates' notAfter.  NewWithOld: the new CA
 * certified by the old key; OldWithNew: the old CA by the new key. */
int ca_link_sign(hwid_key *signer, X509 *signer_cert, X509 *subject_cert, X509 **ret);

