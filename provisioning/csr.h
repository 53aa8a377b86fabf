/* The in-device CSR builder: a PKCS#10 request whose signature is made by
 * the key inside its TPM or HSM. */
#pragma once

#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "hsm.h"

/* Builds and signs a request for subject (and SANs, may be NULL), then
 * checks the signature with the public key before handing it out. */
int csr_build(hwid_key *k, const X509_NAME *subject, const GENERAL_NAMES *sans, X509_REQ **ret);

/* Same, with an arbitrary list of requested extensions (may be NULL). */
int csr_build_ext(hwid_key *k, const X509_NAME *subject, STACK_OF(X509_EXTENSION) *exts, X509_REQ **ret);

/* PEM encoding; caller frees. */
int csr_to_pem(X509_REQ *req, char **ret);
