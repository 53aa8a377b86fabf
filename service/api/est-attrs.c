/* CsrAttrs ::= SEQUENCE SIZE (0..MAX) OF AttrOrOID, AttrOrOID ::= CHOICE
 * { oid OBJECT IDENTIFIER, attribute Attribute } (RFC 7030 §4.5.2), as the
 * RFC's own example encodes it: an Attribute ecPublicKey whose values are
 * the curves, an Attribute extensionRequest whose values are the OIDs of
 * the extensions wanted, and bare OIDs for the rest. */
#include <openssl/objects.h>
#include <openssl/x509.h>

#include "error.h"
#include "est.h"
#include "ossl-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(X509_ATTRIBUTE *, X509_ATTRIBUTE_free)

static void types_freep(STACK_OF(ASN1_TYPE) **p) {
        if (*p)
                sk_ASN1_TYPE_pop_free(*p, ASN1_TYPE_free);
}

static int push_oid(STACK_OF(ASN1_TYPE) *seq, int nid) {
        ASN1_TYPE *t = ASN1_TYPE_new();

        if (!t || !ASN1_TYPE_set1(t, V_ASN1_OBJECT, OBJ_nid2obj(nid)) || !sk_ASN1_TYPE_push(seq, t)) {
                ASN1_TYPE_free(t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* An Attribute { type, SET OF OBJECT IDENTIFIER values }, as a SEQUENCE. */
static int push_attr(STACK_OF(ASN1_TYPE) *seq, int type, const int *values, size_t n) {
        _cleanup_(X509_ATTRIBUTE_freep) X509_ATTRIBUTE *a = X509_ATTRIBUTE_create_by_NID(NULL, type, V_ASN1_OBJECT,
                                                                                         OBJ_nid2obj(values[0]), -1);
        unsigned char *der = NULL;
        ASN1_STRING *s;
        ASN1_TYPE *t;
        int len;

        for (size_t i = 1; a && i < n; i++)
                if (!X509_ATTRIBUTE_set1_data(a, V_ASN1_OBJECT, OBJ_nid2obj(values[i]), -1))
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot build a CSR attribute");
        if (!a || (len = i2d_X509_ATTRIBUTE(a, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode a CSR attribute");
        s = ASN1_STRING_new();
        t = ASN1_TYPE_new();
        if (!s || !t) {
                OPENSSL_free(der);
                ASN1_STRING_free(s);
                ASN1_TYPE_free(t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        ASN1_STRING_set0(s, der, len);
        ASN1_TYPE_set(t, V_ASN1_SEQUENCE, s);
        if (!sk_ASN1_TYPE_push(seq, t)) {
                ASN1_TYPE_free(t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

static int push_key_algs(STACK_OF(ASN1_TYPE) *seq, const ca_template *p) {
        int curves[2], r;
        size_t n = 0;

        if (p->ec_p256)
                curves[n++] = NID_X9_62_prime256v1;
        if (p->ec_p384)
                curves[n++] = NID_secp384r1;
        if (n && (r = push_attr(seq, NID_X9_62_id_ecPublicKey, curves, n)) < 0)
                return r;
        if (p->rsa && (r = push_oid(seq, NID_rsaEncryption)) < 0)
                return r;
        if (n && (r = push_oid(seq, NID_ecdsa_with_SHA256)) < 0)
                return r;
        if (p->rsa && (r = push_oid(seq, NID_sha256WithRSAEncryption)) < 0)
                return r;
        return 0;
}

int est_csrattrs_der(const ca_template *p, uint8_t **ret, size_t *ret_len) {
        _cleanup_(types_freep) STACK_OF(ASN1_TYPE) *seq = sk_ASN1_TYPE_new_null();
        static const int san[] = { NID_subject_alt_name };
        unsigned char *der = NULL;
        int r, len;

        if (!seq)
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* Proof-of-possession linking wants the channel binding there (§3.5). */
        if (p->pop_linking && (r = push_oid(seq, NID_pkcs9_challengePassword)) < 0)
                return r;
        if ((r = push_key_algs(seq, p)) < 0 || (p->grants_sans && (r = push_attr(seq, NID_ext_req, san, 1)) < 0))
                return r;
        if ((len = i2d_ASN1_SEQUENCE_ANY(seq, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the CSR attributes");
        *ret = der;
        *ret_len = (size_t) len;
        return 0;
}
