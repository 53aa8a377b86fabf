/* Turns a received PKCS#10 request into what policy/ decides on: parse
 * (PEM or DER, bounded), verify its signature, and extract the subject,
 * SANs, key and requested extensions as plain facts.  And back: the
 * policy's decision into the names the issuer writes. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "cleanup.h"
#include "policy.h"

#define CSR_MAX_BYTES 16384
#define CSR_MAX_ATTRS 16
#define CSR_MAX_SANS 32

typedef struct csr_info csr_info;

/* -HWID_E_CSR_INVALID (malformed, too big, too many names, an EC key
 * with explicit curve parameters) or
 * -HWID_E_CSR_SIGNATURE (does not verify), with a detail. */
int csr_info_parse(const uint8_t *data, size_t len, csr_info **ret);
/* data may also be a CRMF CertReqMsg (RFC 4211, what CMP's ir, cr and kur
 * carry): its proof of possession is its POPOSigningKey, and
 * csr_info_der() is then that CertReqMsg. */
void csr_info_free(csr_info *c);
/* csr-crmf.c: a DER CertReqMsg whose POPOSigningKey verifies, as an
 * unsigned X509_REQ of the template's subject, key and extensions.
 * -HWID_E_CSR_INVALID when data is not one, -HWID_E_CSR_SIGNATURE when
 * its proof of possession does not verify. */
int csr_crmf_decode(const uint8_t *data, size_t len, X509_REQ **ret);
DEFINE_TRIVIAL_CLEANUP_FUNC(csr_info *, csr_info_free)

const policy_csr *csr_info_facts(const csr_info *c);
EVP_PKEY *csr_info_pubkey(const csr_info *c);
/* The same key as a canonical SubjectPublicKeyInfo: an EC key with its
 * named curve and uncompressed point (RFC 5480), an RSA key in DER as
 * OpenSSL encodes it afresh.  What the certificate carries, and what
 * policy_csr.spki_sha256 is the SHA-256 of. */
const X509_PUBKEY *csr_info_spki(const csr_info *c);
const uint8_t *csr_info_der(const csr_info *c, size_t *ret_len);
/* The PKCS#10 request itself (its attributes: EST's challengePassword);
 * NULL for a CRMF request. */
const X509_REQ *csr_info_pkcs10(const csr_info *c);

/* Builds the subject and SANs to issue from the policy's decision. */
int issue_names(const policy_issue *iss, X509_NAME **ret_subject, GENERAL_NAMES **ret_sans);
