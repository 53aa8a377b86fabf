/* The parts of CMP's ASN.1 (RFC 4210 Appendix F, RFC 9483 §4.3) that
 * OpenSSL 3.0 parses but exports no getter for, or has no encoder of,
 * declared with OpenSSL's ASN.1 templates: decoding stays OpenSSL's. */
#include <pthread.h>
#include <string.h>

#include <openssl/asn1t.h>
#include <openssl/crmf.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "cmp-internal.h"
#include "error.h"
#include "ossl-util.h"

/* InfoTypeAndValue, of generalInfo. */
typedef struct cmp_itav_view {
        ASN1_OBJECT *type;
        ASN1_TYPE *value;
} cmp_itav_view;

ASN1_SEQUENCE(cmp_itav_view) = {
        ASN1_SIMPLE(cmp_itav_view, type, ASN1_OBJECT),
        ASN1_OPT(cmp_itav_view, value, ASN1_ANY),
} static_ASN1_SEQUENCE_END(cmp_itav_view)

DEFINE_STACK_OF(cmp_itav_view)

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
        STACK_OF(cmp_itav_view) *general_info;
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
        ASN1_EXP_SEQUENCE_OF_OPT(cmp_header_view, general_info, cmp_itav_view, 8),
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

/* PBMParameter (RFC 4210 §5.1.3.1). */
typedef struct cmp_pbm_param {
        ASN1_OCTET_STRING *salt;
        X509_ALGOR *owf;
        ASN1_INTEGER *iteration_count;
        X509_ALGOR *mac;
} cmp_pbm_param;

ASN1_SEQUENCE(cmp_pbm_param) = {
        ASN1_SIMPLE(cmp_pbm_param, salt, ASN1_OCTET_STRING),
        ASN1_SIMPLE(cmp_pbm_param, owf, X509_ALGOR),
        ASN1_SIMPLE(cmp_pbm_param, iteration_count, ASN1_INTEGER),
        ASN1_SIMPLE(cmp_pbm_param, mac, X509_ALGOR),
} static_ASN1_SEQUENCE_END(cmp_pbm_param)

static void pbm_param_freep(cmp_pbm_param **p) {
        ASN1_item_free((ASN1_VALUE *) *p, ASN1_ITEM_rptr(cmp_pbm_param));
}

/* The parameters of a PasswordBasedMac protectionAlg, as sent: read,
 * never used here (cmp-auth.c decides whether they may be). */
static cmp_pbm pbm_of(const X509_ALGOR *alg) {
        _cleanup_(pbm_param_freep) cmp_pbm_param *prm = NULL;
        cmp_pbm pbm = { .malformed = true };
        const ASN1_STRING *seq;
        const unsigned char *p;
        const void *pval;
        int ptype;

        X509_ALGOR_get0(NULL, &ptype, &pval, alg);
        if (ptype != V_ASN1_SEQUENCE)
                return pbm;
        seq = pval;
        p = ASN1_STRING_get0_data(seq);
        prm = (cmp_pbm_param *) ASN1_item_d2i(NULL, &p, ASN1_STRING_length(seq), ASN1_ITEM_rptr(cmp_pbm_param));
        if (!prm || p != ASN1_STRING_get0_data(seq) + ASN1_STRING_length(seq)) {
                ERR_clear_error();
                return pbm;
        }
        pbm = (cmp_pbm) { .owf_nid = OBJ_obj2nid(prm->owf->algorithm), .mac_nid = OBJ_obj2nid(prm->mac->algorithm),
                          .salt_len = (size_t) ASN1_STRING_length(prm->salt) };
        if (!ASN1_INTEGER_get_int64(&pbm.iterations, prm->iteration_count) || pbm.iterations < 0)
                pbm.iterations = -1;
        ERR_clear_error();
        return pbm;
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

static int view_read(const uint8_t *der, size_t len, cmp_msg_view **ret) {
        const unsigned char *p = der;
        cmp_msg_view *m = (cmp_msg_view *) ASN1_item_d2i(NULL, &p, (long) len, ASN1_ITEM_rptr(cmp_msg_view));

        if (!m || p != der + len) {
                msg_view_freep(&m);
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "not one DER PKIMessage (RFC 4210)");
        }
        *ret = m;
        return 0;
}

int cmp_view_parse(const uint8_t *der, size_t len, cmp_view *ret) {
        _cleanup_(msg_view_freep) cmp_msg_view *m = NULL;
        const ASN1_OBJECT *alg = NULL;
        cmp_view v = { .protection_nid = NID_undef };
        int r;

        if ((r = view_read(der, len, &m)) < 0)
                return r;
        if (m->header->protection_alg)
                X509_ALGOR_get0(&alg, NULL, NULL, m->header->protection_alg);
        v.protection_nid = alg ? OBJ_obj2nid(alg) : NID_undef;
        /* A protection algorithm OpenSSL has no name for is still one. */
        if (alg && v.protection_nid == NID_undef)
                v.protection_nid = -1;
        if (v.protection_nid == NID_id_PasswordBasedMAC)
                v.pbm = pbm_of(m->header->protection_alg);
        for (int i = 0; i < sk_cmp_itav_view_num(m->header->general_info); i++)
                if (OBJ_obj2nid(sk_cmp_itav_view_value(m->header->general_info, i)->type) ==
                    NID_id_it_implicitConfirm)
                        v.implicit_confirm = true;
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

int cmp_unprotected(const uint8_t *der, size_t len, OSSL_CMP_MSG **ret) {
        _cleanup_(msg_view_freep) cmp_msg_view *m = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *out = NULL;
        const unsigned char *p;
        OSSL_CMP_MSG *msg;
        int n, r;

        if ((r = view_read(der, len, &m)) < 0)
                return r;
        X509_ALGOR_free(m->header->protection_alg);
        m->header->protection_alg = NULL;
        ASN1_BIT_STRING_free(m->protection);
        m->protection = NULL;
        n = ASN1_item_i2d((const ASN1_VALUE *) m, &out, ASN1_ITEM_rptr(cmp_msg_view));
        p = out;
        if (n <= 0 || !(msg = d2i_OSSL_CMP_MSG(NULL, &p, n)))
                return hwid_fail_ossl(HWID_E_INVALID, "cannot re-encode the PKIMessage without its protection");
        *ret = msg;
        return 0;
}

/* A body's choice (its [tag], EXPLICIT: ASN1_ANY keeps it whole as
 * V_ASN1_OTHER) and where the value it wraps begins. */
static bool body_value(const ASN1_TYPE *body, int *ret_tag, const unsigned char **ret_p, long *ret_len) {
        const unsigned char *p;
        int class;

        if (!body || body->type != V_ASN1_OTHER)
                return false;
        p = ASN1_STRING_get0_data(body->value.asn1_string);
        if (ASN1_get_object(&p, ret_len, ret_tag, &class, ASN1_STRING_length(body->value.asn1_string)) & 0x80 ||
            class != V_ASN1_CONTEXT_SPECIFIC)
                return false;
        *ret_p = p;
        return true;
}

/* Whether the one request of an ir, cr or kur carries a proof of
 * possession that verifies, and a p10cr's CSR its signature, as OpenSSL's
 * server checks them (RAVerified refused); true for any other message,
 * which OpenSSL's server refuses before it looks at a proof. */
static bool pop_verifies(const uint8_t *der, size_t len) {
        _cleanup_(msg_view_freep) cmp_msg_view *m = NULL;
        OSSL_CRMF_MSGS *reqs = NULL;
        X509_REQ *csr = NULL;
        const unsigned char *p;
        bool ok = true;
        long n;
        int tag;

        if (view_read(der, len, &m) < 0 || !body_value(m->body, &tag, &p, &n))
                return true;
        if (tag == CMP_BODY_P10CR && (csr = d2i_X509_REQ(NULL, &p, n)))
                ok = X509_REQ_verify(csr, X509_REQ_get0_pubkey(csr)) > 0;
        /* OpenSSL's server takes one request, of certReqId 0, and refuses
         * anything else before it looks at the proof. */
        if ((tag == CMP_BODY_IR || tag == CMP_BODY_CR || tag == CMP_BODY_KUR) &&
            (reqs = d2i_OSSL_CRMF_MSGS(NULL, &p, n)) && sk_OSSL_CRMF_MSG_num(reqs) == 1 &&
            OSSL_CRMF_MSG_get_certReqId(sk_OSSL_CRMF_MSG_value(reqs, 0)) == 0)
                ok = OSSL_CRMF_MSGS_verify_popo(reqs, 0, 0, NULL, NULL) == 1;
        sk_OSSL_CRMF_MSG_pop_free(reqs, OSSL_CRMF_MSG_free);
        X509_REQ_free(csr);
        ERR_clear_error();
        return ok;
}

/* hwid's own reason, in an error library of its own. */
static pthread_once_t pop_once = PTHREAD_ONCE_INIT;
static int pop_lib;
static ERR_STRING_DATA pop_strings[] = {
        { ERR_PACK(0, 0, 1), "the proof of possession does not verify: sign the request (its POPOSigningKey, or "
                             "the CSR) with the key it asks a certificate for" },
        { 0, NULL },
};

static void pop_register(void) {
        pop_lib = ERR_get_next_error_library();
        ERR_load_strings(pop_lib, pop_strings);
}

void cmp_explain_bad_pop(const uint8_t *der, size_t len) {
        if (pop_verifies(der, len))
                return;
        pthread_once(&pop_once, pop_register);
        ERR_raise(pop_lib, 1);
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

/* RootCaKeyUpdateContent ::= SEQUENCE { newWithNew CMPCertificate,
 * newWithOld [0] CMPCertificate OPTIONAL, oldWithNew [1] CMPCertificate
 * OPTIONAL } (RFC 4210 §5.3.19.15, RFC 9480; the module's tags are
 * EXPLICIT).  OpenSSL 3.0 has no type for it. */
typedef struct cmp_root_update {
        X509 *new_with_new, *new_with_old, *old_with_new;
} cmp_root_update;

ASN1_SEQUENCE(cmp_root_update) = {
        ASN1_SIMPLE(cmp_root_update, new_with_new, X509),
        ASN1_EXP_OPT(cmp_root_update, new_with_old, X509, 0),
        ASN1_EXP_OPT(cmp_root_update, old_with_new, X509, 1),
} static_ASN1_SEQUENCE_END(cmp_root_update)

int cmp_root_update_value(const ca_update *u, ASN1_TYPE **ret) {
        cmp_root_update v = { .new_with_new = u->new_with_new, .new_with_old = u->new_with_old,
                              .old_with_new = u->old_with_new };
        unsigned char *der = NULL;
        int len = ASN1_item_i2d((const ASN1_VALUE *) &v, &der, ASN1_ITEM_rptr(cmp_root_update));

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

int cmp_template_value(const ca_template *p, ASN1_TYPE **ret) {
        _cleanup_(req_template_freep) cmp_req_template *t = NULL;
        unsigned char *der = NULL;
        int len, r = 0;

        t = (cmp_req_template *) ASN1_item_new(ASN1_ITEM_rptr(cmp_req_template));
        if (!t || !(t->key_spec = sk_cmp_attr_tv_new_null()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (p->ec_p256)
                r = push_curve(t, NID_X9_62_prime256v1);
        if (r >= 0 && p->ec_p384)
                r = push_curve(t, NID_secp384r1);
        if (r >= 0 && p->rsa)
                r = push_rsa(t, p->rsa_bits);
        if (r < 0)
                return r;
        len = ASN1_item_i2d((const ASN1_VALUE *) t, &der, ASN1_ITEM_rptr(cmp_req_template));
        return sequence_value(der, len, ret);
}
