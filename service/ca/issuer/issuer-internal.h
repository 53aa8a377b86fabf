/* What issuer.c (the CA's state, CA and CRL signing) and issuer-leaf.c
 * (leaf certificates assembled as DER) share. */
#pragma once

#include <pthread.h>

#include "buf.h"
#include "issuer.h"

/* Distinct extension values cached (a handful: see issuer-leaf.c). */
#define EXT_CACHE_MAX 16

/* An extension that depends only on the CA and the profile, by the text
 * it was made from, as DER. */
typedef struct ext_cached {
        int nid;
        char *value;
        uint8_t *der; /* OPENSSL_malloc */
        size_t der_len;
} ext_cached;

struct issuer {
        hwid_key *key;
        X509 *cert;
        /* The same for every certificate the CA issues, encoded once. */
        uint8_t *name_der; /* the CA's subject: each leaf's issuer */
        size_t name_len;
        uint8_t *not_after_der; /* the CA's notAfter, where a leaf's is capped */
        size_t not_after_len;
        int64_t not_after;
        pthread_mutex_t ext_lock; /* guards the cache below */
        ext_cached ext_cache[EXT_CACHE_MAX];
        size_t n_ext;
};

/* 16 random bytes, the top bit cleared and the next one set: a positive
 * 127-bit serial number that always takes all 16 bytes. */
int issuer_serial_bytes(uint8_t raw[16]);

/* Signs the TBS at b[start..] with mctx (from hwid_key_sign_init(); alg
 * is the AlgorithmIdentifier it signs with, which the TBS names too) and
 * makes it the signed structure there: SEQUENCE { tbs, alg, BIT STRING }.
 * In its own file, apart from its callers, so that no compiler inlines
 * it: bench/run.sh profiles the signature by this name. */
int issuer_sign_tbs(EVP_MD_CTX *mctx, buf *b, size_t start, const uint8_t *alg, size_t alg_len);
