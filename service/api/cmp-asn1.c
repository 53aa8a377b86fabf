/* The parts of CMP's ASN.1 (RFC 4210 Appendix F, RFC 9483 §4.3) that
 * OpenSSL 3.0 parses but exports no getter for, or has no encoder of,
 * declared with OpenSSL's ASN.1 templates: decoding stays OpenSSL's. */
#include <string.h>

#include <openssl/asn1t.h>
#include <openssl/crmf.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "cmp.h"
#include "error.h"
#include "ossl-util.h"

/* PKIHeader (explicit tags: the CMP module is EXPLICIT TAGS). */
typedef struct cmp_header_view {
        ASN1_INTEGER *pvno;
        GENERAL_NAME *sender;
        GENERAL_NAME *recipient;
        ASN1_GENERALIZEDTIME *message_time;
        X509_ALGOR *protection_alg;
        ASN1_OCTET_STRING *sender_kid;
        ASN1_OCTET_STRING *recip_kid;
        ASN1_OCTET_STRING *transaction_id;
        ASN1_OCTET_STRING *sender_nonce;
        ASN1_OCTET_STRING *recip_nonce;
        STACK_OF(ASN1_UTF8STRING) *free_text;
        STACK_OF(ASN1_TYPE) *general_info;
} cmp_header_view;

ASN1_SEQUENCE(cmp_header_view) = {
        ASN1_SIMPLE(cmp_header_view, pvno, ASN1_INTEGER),
        ASN1_SIMPLE(cmp_header_view, sender, GENERAL_NAME),
        ASN1_SIMPLE(cmp_header_view, recipient, GENERAL_NAME),
        ASN1_EXP_OPT(cmp_header_view, message_time, ASN1_GENERALIZEDTIME, 0),
        ASN1_EXP_OPT(cmp_header_view, protection_alg, X509_ALGOR, 1),
        ASN1_EXP_OPT(cmp_header_view, sender_kid, ASN1_OCTET_STRING, 2),
        ASN1_EXP_OPT(cmp_header_view, recip_kid, ASN1_OCTET_STRING, 3),
        ASN1_EXP_OPT(cmp_header_view, transaction_id, ASN1_OCTET_STRING, 4),
        ASN1_EXP_OPT(cmp_header_view, sender_nonce, ASN1_OCTET_STRING, 5),
        ASN1_EXP_OPT(cmp_header_view, recip_nonce, ASN1_OCTET_STRING, 6),
        ASN1_EXP_SEQUENCE_OF_OPT(cmp_header_view, free_text, ASN1_UTF8STRING, 7),
        ASN1_EXP_SEQUENCE_OF_OPT(cmp_header_view, general_info, ASN1_ANY, 8),
} static_ASN1_SEQUENCE_END(cmp_header_view)

/* PKIMessage: the body stays opaque here (OpenSSL reads it). */
typedef struct cmp_msg_view {
        cmp_header_view *header;
        ASN1_TYPE *body;
        ASN1_BIT_STRING *protection;
        STACK_OF(X509) *extra_certs;
} cmp_msg_view;

ASN1_SEQUENCE(cmp_msg_view) = {
        ASN1_SIMPLE(cmp_msg_view, header, cmp_header_view),
        ASN1_SIMPLE(cmp_msg_view, body, ASN1_ANY),
        ASN1_EXP_OPT(cmp_msg_view, protection, ASN1_BIT_STRING, 0),
        ASN1_EXP_SEQUENCE_OF_OPT(cmp_msg_view, extra_certs, X509, 1),
} static_ASN1_SEQUENCE_END(cmp_msg_view)

static void msg_view_freep(cmp_msg_view **p) {
        ASN1_item_free((ASN1_VALUE *) *p, ASN1_ITEM_rptr(cmp_msg_view));
}

static int copy_octets(const ASN1_OCTET_STRING *s, uint8_t *out, size_t max, size_t *ret_len, const char *what) {
        size_t n = s ? (size_t) ASN1_STRING_length(s) : 0;

        if (n > max)
                return hwid_fail(HWID_E_INVALID, "the %s has %zu bytes, more than %zu", what, n, max);
        if (n)
                memcpy(out, ASN1_STRING_get0_data(s), n);
        *ret_len = n;
        return 0;
}

int cmp_view_parse(const uint8_t *der, size_t len, cmp_view *ret) {
        _cleanup_(msg_view_freep) cmp_msg_view *m = NULL;
        const unsigned char *p = der;
        const ASN1_OBJECT *alg = NULL;
        cmp_view v = { .protection_nid = NID_undef };
        int r;

        m = (cmp_msg_view *) ASN1_item_d2i(NULL, &p, (long) len, ASN1_ITEM_rptr(cmp_msg_view));
        if (!m || p != der + len) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "not one DER PKIMessage (RFC 4210)");
        }
        if (m->header->protection_alg)
                X509_ALGOR_get0(&alg, NULL, NULL, m->header->protection_alg);
        v.protection_nid = alg ? OBJ_obj2nid(alg) : NID_undef;
        /* A protection algorithm OpenSSL has no name for is still one. */
        if (alg && v.protection_nid == NID_undef)
                v.protection_nid = -1;
        if ((r = copy_octets(m->header->sender_kid, v.kid, sizeof(v.kid), &v.kid_len, "senderKID")) < 0 ||
            (r = copy_octets(m->header->transaction_id, v.tid, sizeof(v.tid), &v.tid_len, "transactionID")) < 0)
                return r;
        if (sk_X509_num(m->extra_certs) > 0 && !(v.signer = X509_dup(sk_X509_value(m->extra_certs, 0))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = v;
        return 0;
}

void cmp_view_clear(cmp_view *v) {
        X509_free(v->signer);
        *v = (cmp_view) { 0 };
}

/* ---- genp values ---- */

/* CaCertsValue ::= SEQUENCE SIZE (1..MAX) OF CMPCertificate */
ASN1_ITEM_TEMPLATE(cmp_certs_seq) =
        ASN1_EX_TEMPLATE_TYPE(ASN1_TFLG_SEQUENCE_OF, 0, certs, X509)
static_ASN1_ITEM_TEMPLATE_END(cmp_certs_seq)

/* CertReqTemplateContent ::= SEQUENCE { certTemplate CertTemplate,
 * keySpec Controls OPTIONAL }, Controls ::= SEQUENCE OF
 * AttributeTypeAndValue. */
typedef struct cmp_attr_tv {
        ASN1_OBJECT *type;
        ASN1_TYPE *value;
} cmp_attr_tv;

ASN1_SEQUENCE(cmp_attr_tv) = {
        ASN1_SIMPLE(cmp_attr_tv, type, ASN1_OBJECT),
        ASN1_SIMPLE(cmp_attr_tv, value, ASN1_ANY),
} static_ASN1_SEQUENCE_END(cmp_attr_tv)

DEFINE_STACK_OF(cmp_attr_tv)

typedef struct cmp_req_template {
        OSSL_CRMF_CERTTEMPLATE *tmpl;
        STACK_OF(cmp_attr_tv) *key_spec;
} cmp_req_template;

ASN1_SEQUENCE(cmp_req_template) = {
        ASN1_SIMPLE(cmp_req_template, tmpl, OSSL_CRMF_CERTTEMPLATE),
        ASN1_SEQUENCE_OF_OPT(cmp_req_template, key_spec, cmp_attr_tv),
} static_ASN1_SEQUENCE_END(cmp_req_template)

/* A SEQUENCE already encoded, as an ASN1_TYPE value (takes der). */
static int sequence_value(unsigned char *der, int len, ASN1_TYPE **ret) {
        ASN1_STRING *s = ASN1_STRING_new();
        ASN1_TYPE *t = ASN1_TYPE_new();

        if (len <= 0 || !s || !t) {
                OPENSSL_free(der);
                ASN1_STRING_free(s);
                ASN1_TYPE_free(t);
                return len <= 0 ? hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode a CMP value")
                                : hwid_fail(HWID_E_NOMEM, NULL);
        }
        ASN1_STRING_set0(s, der, len);
        ASN1_TYPE_set(t, V_ASN1_SEQUENCE, s);
        *ret = t;
        return 0;
}

int cmp_ca_certs_value(STACK_OF(X509) *certs, ASN1_TYPE **ret) {
        unsigned char *der = NULL;
        int len = ASN1_item_i2d((const ASN1_VALUE *) certs, &der, ASN1_ITEM_rptr(cmp_certs_seq));

        return sequence_value(der, len, ret);
}

static void req_template_freep(cmp_req_template **p) {
        ASN1_item_free((ASN1_VALUE *) *p, ASN1_ITEM_rptr(cmp_req_template));
}

/* One keySpec entry: type (a dotted OID) = value (takes value). */
static int push_key_spec(cmp_req_template *t, const char *oid, ASN1_TYPE *value) {
        cmp_attr_tv *a = (cmp_attr_tv *) ASN1_item_new(ASN1_ITEM_rptr(cmp_attr_tv));

        if (!a || !value) {
                ASN1_TYPE_free(value);
                ASN1_item_free((ASN1_VALUE *) a, ASN1_ITEM_rptr(cmp_attr_tv));
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        ASN1_OBJECT_free(a->type);
        ASN1_TYPE_free(a->value);
        a->type = OBJ_txt2obj(oid, 1);
        a->value = value;
        if (!a->type || !sk_cmp_attr_tv_push(t->key_spec, a)) {
                ASN1_item_free((ASN1_VALUE *) a, ASN1_ITEM_rptr(cmp_attr_tv));
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* id-regCtrl-algId (RFC 9483 §4.3.3): AlgorithmIdentifier of an EC curve. */
static int push_curve(cmp_req_template *t, int curve) {
        _cleanup_(X509_ALGOR_freep) X509_ALGOR *alg = X509_ALGOR_new();
        unsigned char *der = NULL;
        ASN1_TYPE *v;
        int len, r;

        if (!alg || !X509_ALGOR_set0(alg, OBJ_nid2obj(NID_X9_62_id_ecPublicKey), V_ASN1_OBJECT, OBJ_nid2obj(curve)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        len = i2d_X509_ALGOR(alg, &der);
        if ((r = sequence_value(der, len, &v)) < 0)
                return r;
        return push_key_spec(t, "1.3.6.1.5.5.7.5.1.11", v);
}

/* id-regCtrl-rsaKeyLen: the RSA modulus length, in bits. */
static int push_rsa(cmp_req_template *t, long bits) {
        ASN1_INTEGER *n = ASN1_INTEGER_new();
        ASN1_TYPE *v = ASN1_TYPE_new();

        if (!n || !v || !ASN1_INTEGER_set(n, bits)) {
                ASN1_INTEGER_free(n);
                ASN1_TYPE_free(v);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        ASN1_TYPE_set(v, V_ASN1_INTEGER, n);
        return push_key_spec(t, "1.3.6.1.5.5.7.5.1.12", v);
}

int cmp_template_value(const policy_profile *p, ASN1_TYPE **ret) {
        _cleanup_(req_template_freep) cmp_req_template *t = NULL;
        unsigned char *der = NULL;
        int len, r = 0;

        t = (cmp_req_template *) ASN1_item_new(ASN1_ITEM_rptr(cmp_req_template));
        if (!t || !(t->key_spec = sk_cmp_attr_tv_new_null()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (p->key_algs & KEYALG_EC_P256)
                r = push_curve(t, NID_X9_62_prime256v1);
        if (r >= 0 && (p->key_algs & KEYALG_EC_P384))
                r = push_curve(t, NID_secp384r1);
        if (r >= 0 && (p->key_algs & KEYALG_RSA))
                r = push_rsa(t, p->rsa_min_bits > 0 ? p->rsa_min_bits : 2048);
        if (r < 0)
                return r;
        len = ASN1_item_i2d((const ASN1_VALUE *) t, &der, ASN1_ITEM_rptr(cmp_req_template));
        return sequence_value(der, len, ret);
}
