/* Trusted certificates from files: every certificate of the PEM or DER
 * files named, and of every regular file in the directories named, in one
 * X509_STORE.  A named file must hold a certificate, a directory at least
 * one. */
#pragma once

#include <stddef.h>

#include <openssl/x509.h>

#include "cleanup.h"

typedef struct cert_bundle cert_bundle;

/* what names the bundle in errors ("EK roots"): -HWID_E_CONFIG naming
 * the path that cannot be read or holds no certificate. */
int cert_bundle_load(const char *what, const char *const *paths, size_t n, cert_bundle **ret);
size_t cert_bundle_count(const cert_bundle *b);
/* The certificates, for X509_STORE_CTX_init() (owned by b). */
X509_STORE *cert_bundle_store(const cert_bundle *b);
void cert_bundle_free(cert_bundle *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(cert_bundle *, cert_bundle_free)
