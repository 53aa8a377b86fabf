/* The OCSP responder's signed answers, kept so that a relying party's
 * polling costs no signature (ca-ocsp.c): one entry per certID (its DER:
 * the hash algorithm, the issuer's hashes and the serial), holding the
 * status it was signed with.  At most cap entries; the least recently
 * used gives way to a new one.  Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "cleanup.h"
#include "ocsp-sign.h"

/* A certID's DER is at most about 180 bytes (SHA-512 hashes, a 20-octet
 * serial). */
#define OCSP_CACHE_KEY_MAX 256

typedef struct ocsp_cache ocsp_cache;

int ocsp_cache_new(size_t cap, ocsp_cache **ret);
void ocsp_cache_free(ocsp_cache *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ocsp_cache *, ocsp_cache_free)

/* The answer kept for key, if it says what a says (status, revocation time
 * and reason) and is still valid at now (before its nextUpdate): appended
 * to out, *ret_fresh telling whether more than half of its validity is
 * left.  An entry that says something else (revoked since) is dropped.
 * 0, or -HWID_E_NOT_FOUND. */
int ocsp_cache_get(ocsp_cache *c, const uint8_t *key, size_t key_len, const ocsp_answer *a, int64_t now, buf *out,
                   bool *ret_fresh);
/* Keeps der (copied) as the answer a for key, replacing what was kept. */
int ocsp_cache_put(ocsp_cache *c, const uint8_t *key, size_t key_len, const ocsp_answer *a, const uint8_t *der,
                   size_t len);
/* Entries kept now. */
size_t ocsp_cache_size(ocsp_cache *c);
