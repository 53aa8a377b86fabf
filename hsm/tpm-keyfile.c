/* TPM key data, no TPM access: the object templates hwid creates keys
 * from, public areas turned into EVP_PKEYs, signature schemes and their
 * encoding, and the TSS2 PEM key file (TSSPRIVKEY, as written
 * by tpm2-tools and the tpm2 OpenSSL provider). */
#include <string.h>

#include <openssl/asn1t.h>
#include <openssl/err.h>
#include <openssl/obj_mac.h>
#include <openssl/pem.h>
#include <tss2/tss2_mu.h>

#include "backend.h"
#include "error.h"
#include "ossl-util.h"
#include "tpm-internal.h"

#define TSS2_PEM_NAME "TSS2 PRIVATE KEY"
#define OID_LOADABLE_KEY "2.23.133.10.1.3"

static const struct {
        int nid;
        TPMI_ECC_CURVE curve;
        size_t size; /* bytes per coordinate */
} ecc_curves[] = {
        { NID_X9_62_prime256v1, TPM2_ECC_NIST_P256, 32 },
        { NID_secp384r1, TPM2_ECC_NIST_P384, 48 },
};

void tpm_primary_template(TPM2B_PUBLIC *ret) {
        *ret = (TPM2B_PUBLIC) {
                .publicArea = {
                        .type = TPM2_ALG_ECC,
                        .nameAlg = TPM2_ALG_SHA256,
                        .objectAttributes = TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_RESTRICTED |
                                            TPMA_OBJECT_DECRYPT | TPMA_OBJECT_NODA |
                                            TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                            TPMA_OBJECT_SENSITIVEDATAORIGIN,
                        .parameters.eccDetail = {
                                .symmetric = { .algorithm = TPM2_ALG_AES,
                                               .keyBits.aes = 128,
                                               .mode.aes = TPM2_ALG_CFB },
                                .scheme.scheme = TPM2_ALG_NULL,
                                .curveID = TPM2_ECC_NIST_P256,
                                .kdf.scheme = TPM2_ALG_NULL,
                        },
                },
        };
}

int tpm_key_template(hwid_key_type type, TPM2B_PUBLIC *ret) {
        int nid = hsm_key_type_curve_nid(type), bits = hsm_key_type_rsa_bits(type);
        /* No scheme in the key: each signature names its own (ECDSA,
         * RSASSA or RSAPSS) and its hash.  Invariant 1 is fixedTPM,
         * fixedParent and sensitiveDataOrigin.  noDA: the key has no
         * authValue, so dictionary-attack protection guards nothing, while
         * every use of a DA-protected object marks the TPM so that its next
         * start after an unclean stop (a power cut) counts a failed try;
         * three cuts in a row would lock the device out of its own key. */
        TPMT_PUBLIC p = {
                .nameAlg = TPM2_ALG_SHA256,
                .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                    TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                    TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_NODA,
        };

        for (size_t i = 0; nid != NID_undef && i < ELEMENTSOF(ecc_curves); i++)
                if (ecc_curves[i].nid == nid) {
                        p.type = TPM2_ALG_ECC;
                        p.parameters.eccDetail = (TPMS_ECC_PARMS) {
                                .symmetric.algorithm = TPM2_ALG_NULL,
                                .scheme.scheme = TPM2_ALG_NULL,
                                .curveID = ecc_curves[i].curve,
                                .kdf.scheme = TPM2_ALG_NULL,
                        };
                        *ret = (TPM2B_PUBLIC) { .publicArea = p };
                        return 0;
                }
        if (bits != 2048 && bits != 3072)
                return hwid_fail(HWID_E_KEY_TYPE, "the TPM backend cannot create %s keys",
                                 hwid_key_type_to_string(type));
        p.type = TPM2_ALG_RSA;
        p.parameters.rsaDetail = (TPMS_RSA_PARMS) {
                .symmetric.algorithm = TPM2_ALG_NULL,
                .scheme.scheme = TPM2_ALG_NULL,
                .keyBits = (TPMI_RSA_KEY_BITS) bits,
                .exponent = 0, /* the default, 65537 */
        };
        *ret = (TPM2B_PUBLIC) { .publicArea = p };
        return 0;
}

/* Copies a TPM2B coordinate into a fixed-size field, left-padded with
 * zeros: an uncompressed point needs both at the curve's full size. */
static int ecc_coord(const TPM2B_ECC_PARAMETER *c, size_t size, uint8_t *out) {
        if (c->size > size)
                return -1;
        memset(out, 0, size - c->size);
        memcpy(out + size - c->size, c->buffer, c->size);
        return 0;
}

static int ecc_pub_to_pkey(const TPMT_PUBLIC *pub, const char *what, EVP_PKEY **ret) {
        uint8_t point[1 + 2 * 48];

        for (size_t i = 0; i < ELEMENTSOF(ecc_curves); i++) {
                size_t n = ecc_curves[i].size;

                if (ecc_curves[i].curve != pub->parameters.eccDetail.curveID)
                        continue;
                point[0] = 0x04; /* uncompressed */
                if (ecc_coord(&pub->unique.ecc.x, n, point + 1) < 0 ||
                    ecc_coord(&pub->unique.ecc.y, n, point + 1 + n) < 0)
                        return hwid_fail(HWID_E_INVALID, "%s has a malformed EC point", what);
                return hsm_pub_from_ec_point(ecc_curves[i].nid, point, 1 + 2 * n, ret);
        }
        return hwid_fail(HWID_E_KEY_TYPE, "%s is on TPM curve 0x%04x (hwid supports P-256 and P-384)",
                         what, pub->parameters.eccDetail.curveID);
}

static int rsa_pub_to_pkey(const TPMT_PUBLIC *pub, const char *what, EVP_PKEY **ret) {
        const TPMS_RSA_PARMS *parms = &pub->parameters.rsaDetail;
        /* An exponent of 0 in the public area means the default, 65537. */
        uint32_t exp = parms->exponent ? parms->exponent : 65537;
        uint8_t e[4] = { exp >> 24, exp >> 16, exp >> 8, exp };

        if (parms->keyBits != 2048 && parms->keyBits != 3072)
                return hwid_fail(HWID_E_KEY_TYPE, "%s is a %u-bit RSA key (hwid supports 2048 and 3072)",
                                 what, parms->keyBits);
        if (pub->unique.rsa.size != parms->keyBits / 8)
                return hwid_fail(HWID_E_INVALID, "%s has a malformed RSA modulus", what);
        return hsm_pub_from_rsa(pub->unique.rsa.buffer, pub->unique.rsa.size, e, sizeof(e), ret);
}

int tpm_pub_to_pkey(const TPMT_PUBLIC *pub, const char *what, EVP_PKEY **ret) {
        switch (pub->type) {
        case TPM2_ALG_ECC:
                return ecc_pub_to_pkey(pub, what, ret);
        case TPM2_ALG_RSA:
                return rsa_pub_to_pkey(pub, what, ret);
        default:
                return hwid_fail(HWID_E_KEY_TYPE, "%s is a TPM object of type 0x%04x, not an EC or RSA key",
                                 what, pub->type);
        }
}

int tpm_sig_scheme(TPMI_ALG_PUBLIC key_type, hsm_sig_scheme scheme, int md_nid,
                   size_t digest_len, TPMT_SIG_SCHEME *ret) {
        static const struct {
                int nid;
                TPMI_ALG_HASH alg;
                size_t len;
        } hashes[] = {
                { NID_sha256, TPM2_ALG_SHA256, 32 },
                { NID_sha384, TPM2_ALG_SHA384, 48 },
                { NID_sha512, TPM2_ALG_SHA512, 64 },
        };
        static const struct {
                TPMI_ALG_SIG_SCHEME alg;
                const char *name;
        } schemes[] = {
                [HSM_SIG_ECDSA] = { TPM2_ALG_ECDSA, "ECDSA" },
                [HSM_SIG_RSA_PKCS1] = { TPM2_ALG_RSASSA, "RSA PKCS#1 v1.5" },
                [HSM_SIG_RSA_PSS] = { TPM2_ALG_RSAPSS, "RSA-PSS" },
        };
        TPMI_ALG_SIG_SCHEME alg;

        if ((unsigned) scheme >= ELEMENTSOF(schemes))
                return hwid_fail(HWID_E_INVALID, "unknown signature scheme %d", (int) scheme);
        alg = schemes[scheme].alg;
        if ((key_type == TPM2_ALG_ECC) != (alg == TPM2_ALG_ECDSA))
                return hwid_fail(HWID_E_INVALID, "cannot make an %s signature with a TPM %s key",
                                 schemes[scheme].name, key_type == TPM2_ALG_ECC ? "EC" : "RSA");
        for (size_t i = 0; i < ELEMENTSOF(hashes); i++) {
                if (hashes[i].nid != md_nid)
                        continue;
                if (digest_len != hashes[i].len)
                        return hwid_fail(HWID_E_INVALID, "a %s digest has %zu bytes, not %zu",
                                         OBJ_nid2sn(md_nid), hashes[i].len, digest_len);
                *ret = (TPMT_SIG_SCHEME) { .scheme = alg, .details.any.hashAlg = hashes[i].alg };
                return 0;
        }
        return hwid_fail(HWID_E_INVALID, "the TPM backend signs SHA-256, SHA-384 or SHA-512 digests, not %s",
                         OBJ_nid2sn(md_nid));
}

int tpm_sig_encode(const TPMT_SIGNATURE *s, uint8_t *sig, size_t *siglen) {
        const TPM2B_PUBLIC_KEY_RSA *rsa;

        switch (s->sigAlg) {
        case TPM2_ALG_ECDSA:
                return hsm_ecdsa_raw_to_der(s->signature.ecdsa.signatureR.buffer, s->signature.ecdsa.signatureR.size,
                                            s->signature.ecdsa.signatureS.buffer, s->signature.ecdsa.signatureS.size,
                                            sig, siglen);
        case TPM2_ALG_RSASSA:
        case TPM2_ALG_RSAPSS:
                rsa = s->sigAlg == TPM2_ALG_RSASSA ? &s->signature.rsassa.sig : &s->signature.rsapss.sig;
                if (rsa->size > *siglen)
                        return hwid_fail(HWID_E_CRYPTO, "RSA signature does not fit its buffer");
                memcpy(sig, rsa->buffer, rsa->size);
                *siglen = rsa->size;
                return 0;
        default:
                return hwid_fail(HWID_E_TPM, "the TPM returned a signature of type 0x%04x", s->sigAlg);
        }
}

/* TSSPRIVKEY ::= SEQUENCE {
 *      type        OBJECT IDENTIFIER,     -- 2.23.133.10.1.3, loadable key
 *      emptyAuth   [0] EXPLICIT BOOLEAN OPTIONAL,
 *      parent      INTEGER,
 *      pubkey      OCTET STRING,          -- marshalled TPM2B_PUBLIC
 *      privkey     OCTET STRING }         -- marshalled TPM2B_PRIVATE */
typedef struct TSSPRIVKEY {
        ASN1_OBJECT *type;
        ASN1_BOOLEAN emptyAuth; /* -1 when absent */
        ASN1_INTEGER *parent;
        ASN1_OCTET_STRING *pubkey;
        ASN1_OCTET_STRING *privkey;
} TSSPRIVKEY;

ASN1_SEQUENCE(TSSPRIVKEY) = {
        ASN1_SIMPLE(TSSPRIVKEY, type, ASN1_OBJECT),
        ASN1_EXP_OPT(TSSPRIVKEY, emptyAuth, ASN1_BOOLEAN, 0),
        ASN1_SIMPLE(TSSPRIVKEY, parent, ASN1_INTEGER),
        ASN1_SIMPLE(TSSPRIVKEY, pubkey, ASN1_OCTET_STRING),
        ASN1_SIMPLE(TSSPRIVKEY, privkey, ASN1_OCTET_STRING),
} static_ASN1_SEQUENCE_END(TSSPRIVKEY)

IMPLEMENT_STATIC_ASN1_ALLOC_FUNCTIONS(TSSPRIVKEY)
IMPLEMENT_STATIC_ASN1_ENCODE_FUNCTIONS(TSSPRIVKEY)
DEFINE_TRIVIAL_CLEANUP_FUNC(TSSPRIVKEY *, TSSPRIVKEY_free)

static int tssprivkey_fill(TSSPRIVKEY *tpk, const TPM2B_PUBLIC *pub, const TPM2B_PRIVATE *priv,
                           uint32_t parent) {
        uint8_t pubbuf[sizeof(*pub)], privbuf[sizeof(*priv)];
        size_t publen = 0, privlen = 0;
        ASN1_OBJECT *oid;

        if (Tss2_MU_TPM2B_PUBLIC_Marshal(pub, pubbuf, sizeof(pubbuf), &publen) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_PRIVATE_Marshal(priv, privbuf, sizeof(privbuf), &privlen) != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_INTERNAL, "cannot marshal the TPM key blob");
        oid = OBJ_txt2obj(OID_LOADABLE_KEY, 1);
        if (!oid)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode the TPM key file");
        ASN1_OBJECT_free(tpk->type);
        tpk->type = oid;
        /* DER spells TRUE 0xff; OpenSSL writes the int as it is. */
        tpk->emptyAuth = 0xff;
        if (!ASN1_INTEGER_set_uint64(tpk->parent, parent) ||
            !ASN1_OCTET_STRING_set(tpk->pubkey, pubbuf, (int) publen) ||
            !ASN1_OCTET_STRING_set(tpk->privkey, privbuf, (int) privlen))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode the TPM key file");
        return 0;
}

int tpm_keyfile_encode(const TPM2B_PUBLIC *pub, const TPM2B_PRIVATE *priv, uint32_t parent,
                       char **ret_pem, size_t *ret_len) {
        _cleanup_(TSSPRIVKEY_freep) TSSPRIVKEY *tpk = TSSPRIVKEY_new();
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        _cleanup_(BIO_free_allp) BIO *bio = BIO_new(BIO_s_mem());
        char *data, *copy;
        long len;
        int derlen, r;

        if (!tpk || !bio)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode the TPM key file");
        if (parent != TPM_KEYFILE_PARENT && parent != TPM_SRK_HANDLE)
                return hwid_fail(HWID_E_INTERNAL, "a key file with parent 0x%08x", parent);
        r = tssprivkey_fill(tpk, pub, priv, parent);
        if (r < 0)
                return r;
        derlen = i2d_TSSPRIVKEY(tpk, &der);
        if (derlen <= 0 || !PEM_write_bio(bio, TSS2_PEM_NAME, "", der, derlen))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the TPM key file");
        len = BIO_get_mem_data(bio, &data);
        copy = len > 0 ? strndup(data, (size_t) len) : NULL;
        if (!copy)
                return hwid_fail(HWID_E_NOMEM, "cannot encode the TPM key file");
        *ret_pem = copy;
        *ret_len = (size_t) len;
        return 0;
}

/* Reads the one PEM block and DER-decodes it, insisting that the DER
 * is exactly the TSSPRIVKEY and nothing more. */
static int keyfile_parse(const char *path, const char *data, size_t len, TSSPRIVKEY **ret) {
        _cleanup_(BIO_free_allp) BIO *bio = BIO_new_mem_buf(data, (int) len);
        _cleanup_(OPENSSL_freep) char *name = NULL, *header = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        const unsigned char *p;
        TSSPRIVKEY *tpk;
        long derlen = 0;

        if (!bio)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot read %s", path);
        if (!PEM_read_bio(bio, &name, &header, &der, &derlen) || strcmp(name, TSS2_PEM_NAME) != 0) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "%s is not a TSS2 PEM key file "
                                                 "(no \"" TSS2_PEM_NAME "\" block)", path);
        }
        p = der;
        tpk = d2i_TSSPRIVKEY(NULL, &p, derlen);
        if (!tpk || p != der + derlen) {
                TSSPRIVKEY_free(tpk);
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "%s holds a malformed TSS2 key", path);
        }
        *ret = tpk;
        return 0;
}

static int keyfile_check(const char *path, const TSSPRIVKEY *tpk, uint32_t *ret_parent) {
        char oid[64] = "";
        uint64_t parent;

        if (OBJ_obj2txt(oid, sizeof(oid), tpk->type, 1) <= 0 || strcmp(oid, OID_LOADABLE_KEY) != 0)
                return hwid_fail(HWID_E_INVALID, "%s is not a loadable TSS2 key (type %s)", path, oid);
        if (!ASN1_INTEGER_get_uint64(&parent, tpk->parent)) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "%s has a malformed parent handle", path);
        }
        /* Parent 0 is the spec's old spelling of the owner hierarchy. */
        if (parent != 0 && parent != TPM_KEYFILE_PARENT && parent != TPM_SRK_HANDLE)
                return hwid_fail(HWID_E_INVALID, "%s has parent 0x%08llx; hwid loads keys under "
                                                 "the owner storage primary 0x%08x or the SRK 0x%08x only",
                                 path, (unsigned long long) parent, TPM_KEYFILE_PARENT, TPM_SRK_HANDLE);
        /* An absent emptyAuth means the key has an auth value. */
        if (tpk->emptyAuth <= 0)
                return hwid_fail(HWID_E_INVALID, "%s is protected by an auth value, "
                                                 "which hwid does not support", path);
        *ret_parent = parent == TPM_SRK_HANDLE ? TPM_SRK_HANDLE : TPM_KEYFILE_PARENT;
        return 0;
}

/* Unmarshals a TPM2B from an OCTET STRING that must hold it exactly. */
#define UNMARSHAL_EXACT(TYPE, os, out)                                                         \
        ({                                                                                     \
                size_t _off_ = 0;                                                              \
                Tss2_MU_##TYPE##_Unmarshal((os)->data, (size_t) (os)->length, &_off_, (out)) == \
                                TSS2_RC_SUCCESS &&                                             \
                        _off_ == (size_t) (os)->length;                                        \
        })

int tpm_keyfile_decode(const char *path, const char *data, size_t len,
                       TPM2B_PUBLIC *ret_pub, TPM2B_PRIVATE *ret_priv, uint32_t *ret_parent) {
        _cleanup_(TSSPRIVKEY_freep) TSSPRIVKEY *tpk = NULL;
        TPM2B_PUBLIC pub = { 0 };
        TPM2B_PRIVATE priv = { 0 };
        uint32_t parent;
        int r;

        r = keyfile_parse(path, data, len, &tpk);
        if (r < 0)
                return r;
        r = keyfile_check(path, tpk, &parent);
        if (r < 0)
                return r;
        if (!UNMARSHAL_EXACT(TPM2B_PUBLIC, tpk->pubkey, &pub) ||
            !UNMARSHAL_EXACT(TPM2B_PRIVATE, tpk->privkey, &priv))
                return hwid_fail(HWID_E_INVALID, "%s holds a malformed TPM key blob", path);
        *ret_pub = pub;
        *ret_priv = priv;
        *ret_parent = parent;
        return 0;
}
