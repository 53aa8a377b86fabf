/* The audit chain's record encoding and hash, the same for every store
 * backend (specified in store.h, and in docs/OPERATIONS.md for whoever
 * checks the chain with other tools).  Each backend hashes what it
 * appends; store-audit.c verifies a whole chain. */
#include <string.h>

#include <openssl/evp.h>

#include "error.h"
#include "ossl-util.h"
#include "store.h"

#define AUDIT_HASH_DOMAIN "hwid-audit-v1" /* hashed with its terminating NUL */

static const uint8_t zero_hash[STORE_AUDIT_HASH_LEN];

static int put_field(EVP_MD_CTX *md, const char *s) {
        uint8_t len[4] = { 0xff, 0xff, 0xff, 0xff };
        size_t n = s ? strlen(s) : 0;

        if (s && n >= 0xffffffffu)
                return 0;
        if (s) {
                len[0] = (uint8_t) (n >> 24);
                len[1] = (uint8_t) (n >> 16);
                len[2] = (uint8_t) (n >> 8);
                len[3] = (uint8_t) n;
        }
        return EVP_DigestUpdate(md, len, sizeof(len)) && (!s || EVP_DigestUpdate(md, s, n));
}

int store_audit_hash(const uint8_t *prev, const store_audit *a, uint8_t ret[STORE_AUDIT_HASH_LEN]) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint64_t at = (uint64_t) a->at;
        uint8_t at_be[8];
        unsigned len = 0;

        for (int i = 0; i < 8; i++)
                at_be[i] = (uint8_t) (at >> (56 - 8 * i));
        if (!md || !EVP_DigestInit_ex(md, EVP_sha256(), NULL) ||
            !EVP_DigestUpdate(md, AUDIT_HASH_DOMAIN, sizeof(AUDIT_HASH_DOMAIN)) ||
            !EVP_DigestUpdate(md, prev ? prev : zero_hash, STORE_AUDIT_HASH_LEN) ||
            !EVP_DigestUpdate(md, at_be, sizeof(at_be)) || !put_field(md, a->actor) ||
            !put_field(md, a->action) || !put_field(md, a->target) || !put_field(md, a->outcome) ||
            !put_field(md, a->reason) || !put_field(md, a->token_id) || !EVP_DigestFinal_ex(md, ret, &len) ||
            len != STORE_AUDIT_HASH_LEN)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot hash an audit record");
        return 0;
}
