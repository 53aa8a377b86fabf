/* A certification request in CRMF (RFC 4211), the form CMP's ir, cr and
 * kur carry, as the X509_REQ the rest of csr-check.c reads.
 *
 * A CertReqMsg is as self-proving as a PKCS#10 request: its
 * POPOSigningKey is the requested key's signature over the CertRequest,
 * checked here with OpenSSL's own OSSL_CRMF_MSGS_verify_popo().  The
 * request is then the template's subject, key and extensions in an
 * unsigned X509_REQ; csr_info keeps the CertReqMsg's DER, so a request
 * stored for approval proves its key again when it is parsed again.
 *
 * OpenSSL 3.0 has no getter for the template's public key
 * (OSSL_CRMF_CERTTEMPLATE_get0_publicKey() came in 3.2): the template's
 * DER is read a second time with the ASN.1 module of RFC 4211 §5 written
 * as OpenSSL templates below, for that one field. */
#include <openssl/asn1t.h>
#include <openssl/crmf.h>
#include <openssl/err.h>

#include "csr-check.h"
#include "error.h"
#include "ossl-util.h"

typedef struct crmf_template_view {
        ASN1_INTEGER *version;
        ASN1_INTEGER *serial;
        X509_ALGOR *signing_alg;
        X509_NAME *issuer;
        STACK_OF(ASN1_TYPE) *validity;
        X509_NAME *subject;
        X509_PUBKEY *public_key;
        ASN1_BIT_STRING *issuer_uid;
        ASN1_BIT_STRING *subject_uid;
        STACK_OF(X509_EXTENSION) *extensions;
} crmf_template_view;

/* CertTemplate ::= SEQUENCE { version [0] Version OPTIONAL, ... }: the
 * module is IMPLICIT TAGS, so only the Names (CHOICEs) are explicit. */
ASN1_SEQUENCE(crmf_template_view) = {
        ASN1_IMP_OPT(crmf_template_view, version, ASN1_INTEGER, 0),
        ASN1_IMP_OPT(crmf_template_view, serial, ASN1_INTEGER, 1),
        ASN1_IMP_OPT(crmf_template_view, signing_alg, X509_ALGOR, 2),
        ASN1_EXP_OPT(crmf_template_view, issuer, X509_NAME, 3),
        ASN1_IMP_SEQUENCE_OF_OPT(crmf_template_view, validity, ASN1_ANY, 4),
        ASN1_EXP_OPT(crmf_template_view, subject, X509_NAME, 5),
        ASN1_IMP_OPT(crmf_template_view, public_key, X509_PUBKEY, 6),
        ASN1_IMP_OPT(crmf_template_view, issuer_uid, ASN1_BIT_STRING, 7),
        ASN1_IMP_OPT(crmf_template_view, subject_uid, ASN1_BIT_STRING, 8),
        ASN1_IMP_SEQUENCE_OF_OPT(crmf_template_view, extensions, X509_EXTENSION, 9),
} static_ASN1_SEQUENCE_END(crmf_template_view)

static void view_freep(crmf_template_view **p) {
        ASN1_item_free((ASN1_VALUE *) *p, ASN1_ITEM_rptr(crmf_template_view));
}

static void msgs_freep(OSSL_CRMF_MSGS **p) {
        sk_OSSL_CRMF_MSG_pop_free(*p, OSSL_CRMF_MSG_free);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_CRMF_MSG *, OSSL_CRMF_MSG_free)

/* The template's SubjectPublicKeyInfo, as sent. */
static int template_key(const OSSL_CRMF_MSG *crm, X509_PUBKEY **ret) {
        _cleanup_(view_freep) crmf_template_view *v = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        const unsigned char *p;
        int len = ASN1_item_i2d((const ASN1_VALUE *) OSSL_CRMF_MSG_get0_tmpl(crm), &der,
                                ASN1_ITEM_rptr(OSSL_CRMF_CERTTEMPLATE));

        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot encode the CRMF certificate template");
        p = der;
        v = (crmf_template_view *) ASN1_item_d2i(NULL, &p, len, ASN1_ITEM_rptr(crmf_template_view));
        if (!v || !v->public_key)
                return hwid_fail(HWID_E_CSR_INVALID, "the CRMF certificate template carries no public key");
        *ret = TAKE_PTR(v->public_key);
        return 0;
}

/* Copies the key into req's own X509_PUBKEY byte for byte, parameters and
 * all (csr-check.c then refuses explicit curves as for PKCS#10). */
static int set_key(X509_REQ *req, const X509_PUBKEY *key) {
        const unsigned char *bits;
        const X509_ALGOR *alg;
        const ASN1_OBJECT *oid;
        const void *pval;
        unsigned char *copy;
        int ptype, n;

        if (!X509_PUBKEY_get0_param(NULL, &bits, &n, (X509_ALGOR **) &alg, key))
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "the CRMF template's key is malformed");
        X509_ALGOR_get0(&oid, &ptype, &pval, alg);
        copy = n > 0 ? OPENSSL_memdup(bits, (size_t) n) : NULL;
        if (n > 0 && !copy)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_PUBKEY_set0_param(X509_REQ_get_X509_PUBKEY(req), OBJ_dup(oid), ptype,
                                    ptype == V_ASN1_OBJECT ? (void *) OBJ_dup(pval)
                                    : ptype == V_ASN1_SEQUENCE ? (void *) ASN1_STRING_dup(pval) : NULL,
                                    copy, n)) {
                OPENSSL_free(copy);
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot take the CRMF template's key");
        }
        return 0;
}

static int template_to_req(const OSSL_CRMF_MSG *crm, X509_REQ **ret) {
        _cleanup_(X509_PUBKEY_freep) X509_PUBKEY *key = NULL;
        _cleanup_(X509_REQ_freep) X509_REQ *req = X509_REQ_new();
        const OSSL_CRMF_CERTTEMPLATE *t = OSSL_CRMF_MSG_get0_tmpl(crm);
        const X509_NAME *subject = OSSL_CRMF_CERTTEMPLATE_get0_subject(t);
        X509_EXTENSIONS *exts = OSSL_CRMF_CERTTEMPLATE_get0_extensions(t);
        int r;

        if (!req)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = template_key(crm, &key)) < 0 || (r = set_key(req, key)) < 0)
                return r;
        if (subject && !X509_REQ_set_subject_name(req, subject))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot copy the CRMF template's subject");
        if (exts && sk_X509_EXTENSION_num(exts) > 0 && !X509_REQ_add_extensions(req, exts))
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot copy the CRMF template's extensions");
        *ret = TAKE_PTR(req);
        return 0;
}

int csr_crmf_decode(const uint8_t *data, size_t len, X509_REQ **ret) {
        _cleanup_(msgs_freep) OSSL_CRMF_MSGS *msgs = sk_OSSL_CRMF_MSG_new_null();
        _cleanup_(OSSL_CRMF_MSG_freep) OSSL_CRMF_MSG *crm = NULL;
        const unsigned char *p = data;
        int r;

        if (!msgs)
                return hwid_fail(HWID_E_NOMEM, NULL);
        crm = d2i_OSSL_CRMF_MSG(NULL, &p, (long) len);
        if (!crm || p != data + len) {
                ERR_clear_error();
                return hwid_fail(HWID_E_CSR_INVALID, "not a CRMF certificate request message (RFC 4211)");
        }
        if (!sk_OSSL_CRMF_MSG_push(msgs, crm))
                return hwid_fail(HWID_E_NOMEM, NULL);
        crm = NULL; /* msgs owns it */
        /* RAVerified is no proof: only the key's own signature is. */
        if (!OSSL_CRMF_MSGS_verify_popo(msgs, OSSL_CRMF_MSG_get_certReqId(sk_OSSL_CRMF_MSG_value(msgs, 0)), 0,
                                        NULL, NULL)) {
                ERR_clear_error();
                return hwid_fail(HWID_E_CSR_SIGNATURE, "the CRMF request's proof of possession (its POPOSigningKey) "
                                 "does not verify with the template's key");
        }
        if ((r = template_to_req(sk_OSSL_CRMF_MSG_value(msgs, 0), ret)) < 0)
                return r;
        return 0;
}
