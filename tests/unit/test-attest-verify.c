/* The CA's attestation checks without a TPM (the exchange against swtpm is
 * tests/integration/attest-crypto.sh): a Certify made and signed here with
 * a software key standing in for the AK must verify, and every way it can
 * be wrong must be refused with the right class and reason; the attribute
 * checks of AKs and device keys; the single-use, expiring challenge table;
 * public areas, names and the EK templates. */
#include <string.h>

#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

#include "attest-verify.h"
#include "check.h"
#include "error.h"
#include "ossl-util.h"

#define AK_ATTRS (TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | \
                  TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT)
#define KEY_ATTRS (TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | \
                   TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT)

static const uint8_t nonce[ATTEST_NONCE_LEN] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };

/* A P-256 software key and its TPM public area with the given attributes. */
static EVP_PKEY *ec_key(TPMA_OBJECT attrs, TPMT_PUBLIC *ret) {
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "prime256v1");

        CHECK(k && tpm_ek_public_from_key(TPM_EK_ECC_P256, k, ret) == 0);
        ret->objectAttributes = attrs;
        ret->authPolicy.size = 0;
        ret->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        return k;
}

typedef struct certify {
        TPMS_ATTEST at;
        uint8_t info[sizeof(TPMS_ATTEST)];
        size_t info_len;
        uint8_t sig[sizeof(TPMT_SIGNATURE)];
        size_t sig_len;
} certify;

/* What TPM2_Certify of key over nonce would give, signed with ak. */
static void certify_init(certify *c, const TPMT_PUBLIC *key) {
        memset(c, 0, sizeof(*c));
        c->at.magic = TPM2_GENERATED_VALUE;
        c->at.type = TPM2_ST_ATTEST_CERTIFY;
        c->at.extraData.size = sizeof(nonce);
        memcpy(c->at.extraData.buffer, nonce, sizeof(nonce));
        CHECK(tpm_public_name(key, &c->at.attested.certify.name) == 0);
}

static void certify_sign(certify *c, EVP_PKEY *ak) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        uint8_t der[128];
        const uint8_t *p = der;
        size_t der_len = sizeof(der), off = 0;
        TPMT_SIGNATURE s = { .sigAlg = TPM2_ALG_ECDSA, .signature.ecdsa.hash = TPM2_ALG_SHA256 };
        ECDSA_SIG *es;

        c->info_len = 0;
        CHECK(Tss2_MU_TPMS_ATTEST_Marshal(&c->at, c->info, sizeof(c->info), &c->info_len) == TSS2_RC_SUCCESS);
        CHECK(EVP_DigestSignInit_ex(ctx, NULL, "SHA256", NULL, NULL, ak, NULL) == 1);
        CHECK(EVP_DigestSign(ctx, der, &der_len, c->info, c->info_len) == 1);
        es = d2i_ECDSA_SIG(NULL, &p, (long) der_len);
        CHECK(es != NULL);
        s.signature.ecdsa.signatureR.size = (UINT16) BN_bn2binpad(ECDSA_SIG_get0_r(es), s.signature.ecdsa.signatureR.buffer, 32);
        s.signature.ecdsa.signatureS.size = (UINT16) BN_bn2binpad(ECDSA_SIG_get0_s(es), s.signature.ecdsa.signatureS.buffer, 32);
        ECDSA_SIG_free(es);
        CHECK(Tss2_MU_TPMT_SIGNATURE_Marshal(&s, c->sig, sizeof(c->sig), &off) == TSS2_RC_SUCCESS);
        c->sig_len = off;
}

static int verify(const TPMT_PUBLIC *ak, const certify *c, const TPMT_PUBLIC *key) {
        hwid_error_clear();
        return attest_verify_certify(ak, c->info, c->info_len, c->sig, c->sig_len, key, nonce, sizeof(nonce));
}

#define CHECK_REFUSED(expr, code, reason)                    \
        do {                                                 \
                int _r = (expr);                             \
                CHECK(_r == -(code));                        \
                CHECK_CONTAINS(hwid_strerror(_r), reason);   \
        } while (0)

static void certify_checks(void) {
        TPMT_PUBLIC ak_pub, key_pub, other_pub;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ak = ec_key(AK_ATTRS, &ak_pub);
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = ec_key(KEY_ATTRS, &key_pub);
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *other = ec_key(KEY_ATTRS, &other_pub);
        certify c;

        certify_init(&c, &key_pub);
        certify_sign(&c, ak);
        CHECK(verify(&ak_pub, &c, &key_pub) == 0);
        CHECK(attest_key_matches(&key_pub, key) == 0);
        CHECK_REFUSED(attest_key_matches(&key_pub, other), HWID_E_ATTESTATION, "CSR's key is not the certified");
        /* Signed by another key than the AK. */
        certify_sign(&c, other);
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_ATTESTATION, "does not verify with the AK");
        /* Content changed after signing. */
        certify_sign(&c, ak);
        c.info[44] ^= 1; /* in the clock */
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_ATTESTATION, "does not verify with the AK");
        /* Names another key. */
        certify_sign(&c, ak);
        CHECK_REFUSED(verify(&ak_pub, &c, &other_pub), HWID_E_ATTESTATION, "names another key");
        /* Over another nonce. */
        c.at.extraData.buffer[0] ^= 1;
        certify_sign(&c, ak);
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_ATTESTATION, "over another nonce");
        /* Not made by a TPM; not a Certify (a Quote). */
        certify_init(&c, &key_pub);
        c.at.magic = 0x12345678;
        certify_sign(&c, ak);
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_ATTESTATION, "not made by a TPM");
        certify_init(&c, &key_pub);
        c.at.type = TPM2_ST_ATTEST_QUOTE;
        memset(&c.at.attested, 0, sizeof(c.at.attested));
        certify_sign(&c, ak);
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_ATTESTATION, "not a Certify");
        /* Malformed: trailing bytes, truncated. */
        certify_init(&c, &key_pub);
        certify_sign(&c, ak);
        c.info_len++;
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_INVALID, "not a TPMS_ATTEST");
        c.info_len--;
        c.sig_len -= 3;
        CHECK_REFUSED(verify(&ak_pub, &c, &key_pub), HWID_E_INVALID, "not a TPMT_SIGNATURE");
}

static void attribute_checks(void) {
        TPMT_PUBLIC p;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = ec_key(AK_ATTRS, &p);

        CHECK(k != NULL);
        CHECK(attest_check_ak(&p) == 0);
        p.objectAttributes = AK_ATTRS & ~TPMA_OBJECT_RESTRICTED;
        CHECK_REFUSED(attest_check_ak(&p), HWID_E_ATTESTATION, "lacks restricted");
        p.objectAttributes = AK_ATTRS & ~TPMA_OBJECT_FIXEDTPM;
        CHECK_REFUSED(attest_check_ak(&p), HWID_E_ATTESTATION, "lacks fixedTPM");
        p.objectAttributes = AK_ATTRS | TPMA_OBJECT_DECRYPT;
        CHECK_REFUSED(attest_check_ak(&p), HWID_E_ATTESTATION, "has decrypt");

        p.objectAttributes = KEY_ATTRS;
        CHECK(attest_check_device_key(&p) == 0);
        p.objectAttributes = KEY_ATTRS & ~(TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT);
        CHECK_REFUSED(attest_check_device_key(&p), HWID_E_ATTESTATION, "lacks fixedTPM");
        p.objectAttributes = KEY_ATTRS & ~TPMA_OBJECT_SENSITIVEDATAORIGIN;
        CHECK_REFUSED(attest_check_device_key(&p), HWID_E_ATTESTATION, "lacks sensitiveDataOrigin");
        p.objectAttributes = KEY_ATTRS | TPMA_OBJECT_DECRYPT;
        CHECK_REFUSED(attest_check_device_key(&p), HWID_E_ATTESTATION, "has decrypt");
}

static attest_pending pending(uint8_t id, uint64_t expires) {
        attest_pending p = { .expires = expires, .ek_cert_len = 3 + id };
        EVP_PKEY_free(ec_key(AK_ATTRS, &p.ak));

        memset(p.id, id, sizeof(p.id));
        memset(p.secret_sha256, id ^ 0x5a, sizeof(p.secret_sha256));
        memset(p.nonce, id ^ 0xa5, sizeof(p.nonce));
        memset(p.ek_cert, id, p.ek_cert_len);
        return p;
}

static bool pending_eq(const attest_pending *a, const attest_pending *b) {
        uint8_t wa[TPM_PUBLIC_MAX], wb[TPM_PUBLIC_MAX];
        size_t la, lb;

        CHECK(tpm_public_marshal(&a->ak, wa, &la) == 0 && tpm_public_marshal(&b->ak, wb, &lb) == 0);
        return memcmp(a->id, b->id, sizeof(a->id)) == 0 && a->expires == b->expires &&
               memcmp(a->secret_sha256, b->secret_sha256, sizeof(a->secret_sha256)) == 0 &&
               memcmp(a->nonce, b->nonce, sizeof(a->nonce)) == 0 && la == lb && memcmp(wa, wb, la) == 0 &&
               a->ek_cert_len == b->ek_cert_len && memcmp(a->ek_cert, b->ek_cert, a->ek_cert_len) == 0;
}

/* The same rules whichever table holds the challenges. */
static void fresh_rules(attest_fresh *f) {
        attest_pending a = pending(1, 100), b = pending(2, 200), c = pending(3, 300), got;

        CHECK(attest_fresh_put(f, &a, 50) == 0);
        CHECK(attest_fresh_put(f, &b, 50) == 0);
        /* Full: a third waits for room. */
        CHECK_REFUSED(attest_fresh_put(f, &c, 50), HWID_E_RATE_LIMITED, "already waiting");
        /* Taken once, whole, then gone. */
        CHECK(attest_fresh_take(f, b.id, 60, &got) == 0);
        CHECK(pending_eq(&got, &b));
        CHECK_REFUSED(attest_fresh_take(f, b.id, 60, &got), HWID_E_ATTESTATION, "unknown attestation challenge");
        /* Expired: refused, and used up all the same. */
        CHECK_REFUSED(attest_fresh_take(f, a.id, 100, &got), HWID_E_ATTESTATION, "expired");
        CHECK_REFUSED(attest_fresh_take(f, a.id, 60, &got), HWID_E_ATTESTATION, "unknown attestation challenge");
        /* Expired ones make room for new ones. */
        CHECK(attest_fresh_put(f, &a, 50) == 0);
        CHECK(attest_fresh_put(f, &c, 150) == 0); /* a (expires 100) is purged */
        CHECK(attest_fresh_put(f, &b, 150) == 0);
        CHECK_REFUSED(attest_fresh_take(f, a.id, 150, &got), HWID_E_ATTESTATION, "unknown");
}

static void fresh_table(void) {
        _cleanup_(attest_fresh_freep) attest_fresh *f = NULL;

        CHECK(attest_fresh_new_memory(2, &f) == 0);
        fresh_rules(f);
}

/* Public areas in wire form, names, templates. */
static void public_areas(void) {
        TPMT_PUBLIC p, q;
        uint8_t wire[TPM_PUBLIC_MAX], wire2[TPM_PUBLIC_MAX];
        size_t len, len2;
        TPM2B_NAME n;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = ec_key(KEY_ATTRS, &p);
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t) 2048);

        CHECK(tpm_public_marshal(&p, wire, &len) == 0);
        CHECK(tpm_public_unmarshal(wire, len, "x", &q) == 0);
        CHECK(tpm_public_marshal(&q, wire2, &len2) == 0);
        CHECK(len2 == len && memcmp(wire, wire2, len) == 0);
        CHECK_REFUSED(tpm_public_unmarshal(wire, len - 1, "the AK", &q), HWID_E_INVALID, "the AK is not");
        wire[len] = 0;
        CHECK_REFUSED(tpm_public_unmarshal(wire, len + 1, "the AK", &q), HWID_E_INVALID, "the AK is not");
        CHECK(tpm_public_name(&p, &n) == 0);
        CHECK(n.size == 34 && n.name[0] == 0x00 && n.name[1] == 0x0b);
        /* The EK templates: an RSA EK from an RSA key, not from an EC one. */
        CHECK(tpm_ek_public_from_key(TPM_EK_RSA_2048, rsa, &q) == 0);
        CHECK(q.unique.rsa.size == 256 && q.parameters.rsaDetail.keyBits == 2048 && q.objectAttributes == 0x000300b2);
        CHECK_REFUSED(tpm_ek_public_from_key(TPM_EK_RSA_2048, k, &q), HWID_E_ATTESTATION, "not an RSA 2048");
        CHECK_REFUSED(tpm_ek_public_from_key(TPM_EK_ECC_P384, k, &q), HWID_E_ATTESTATION, "secp384r1");
}

int main(void) {
        certify_checks();
        attribute_checks();
        fresh_table();
        public_areas();
        return check_done("test-attest-verify");
}
