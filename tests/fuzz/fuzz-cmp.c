/* libFuzzer target: what every CMP request to hwidd goes through before
 * any credential is looked at (service/api/cmp/): OpenSSL's PKIMessage
 * decoder, hwid's second reading of the header, its PasswordBasedMac
 * parameters and extraCerts (cmp_view_parse()), the message re-encoded
 * without its protection (cmp_unprotected()), the proof of possession
 * checked ahead of OpenSSL (cmp_explain_bad_pop()), OpenSSL's CMP server
 * with callbacks that hand the certification request, CRMF or PKCS#10, to
 * csr_info_parse() (whose CRMF reading, csr-crmf.c, is hwid's), and the
 * genp values hwid encodes.  Never a crash or leak; every answer is a
 * PKIMessage. */
#include <stdint.h>
#include <stdlib.h>

#include <openssl/cmp.h>
#include <openssl/err.h>
#include <openssl/x509.h>

#include "cmp-internal.h"
#include "csr-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static OSSL_CMP_PKISI *cert_request(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, int id, const OSSL_CRMF_MSG *crm,
                                    const X509_REQ *p10cr, X509 **cert, STACK_OF(X509) **chain,
                                    STACK_OF(X509) **pubs) {
        unsigned char *der = NULL;
        int len = p10cr ? i2d_X509_REQ(p10cr, &der) : crm ? i2d_OSSL_CRMF_MSG(crm, &der) : -1;
        csr_info *c = NULL;

        if (len > 0 && csr_info_parse(der, (size_t) len, &c) == 0)
                csr_info_free(c);
        OPENSSL_free(der);
        return OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_rejection, 1 << OSSL_CMP_PKIFAILUREINFO_badRequest, "no");
}

static OSSL_CMP_PKISI *revocation(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, const X509_NAME *issuer,
                                  const ASN1_INTEGER *serial) {
        return OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_rejection, 1 << OSSL_CMP_PKIFAILUREINFO_badCertId, "no");
}

static X509 *signer;
static EVP_PKEY *signer_key;

static int general(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, const STACK_OF(OSSL_CMP_ITAV) *in,
                   STACK_OF(OSSL_CMP_ITAV) **out) {
        ca_template p = { .ec_p256 = true, .rsa = true, .rsa_bits = 2048 };
        STACK_OF(X509) *certs = sk_X509_new_null();
        ASN1_TYPE *v = NULL, *w = NULL;

        sk_X509_push(certs, signer);
        *out = sk_OSSL_CMP_ITAV_new_null();
        if (cmp_ca_certs_value(certs, &v) == 0)
                OSSL_CMP_ITAV_push0_stack_item(out, OSSL_CMP_ITAV_create(OBJ_nid2obj(NID_id_it_caCerts), v));
        if (cmp_template_value(&p, &w) == 0)
                OSSL_CMP_ITAV_push0_stack_item(out, OSSL_CMP_ITAV_create(OBJ_nid2obj(NID_id_it_certReqTemplate), w));
        sk_X509_free(certs);
        return 1;
}

static int quiet(const char *f, const char *file, int line, OSSL_CMP_severity l, const char *m) {
        return 1;
}

static void setup(void) {
        EVP_PKEY_CTX *kctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        X509_NAME *n = X509_NAME_new();

        EVP_PKEY_keygen_init(kctx);
        EVP_PKEY_CTX_set_group_name(kctx, "P-256");
        EVP_PKEY_keygen(kctx, &signer_key);
        EVP_PKEY_CTX_free(kctx);
        signer = X509_new();
        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *) "fuzz CA", -1, -1, 0);
        X509_set_subject_name(signer, n);
        X509_set_issuer_name(signer, n);
        X509_gmtime_adj(X509_getm_notBefore(signer), 0);
        X509_gmtime_adj(X509_getm_notAfter(signer), 3600);
        X509_set_pubkey(signer, signer_key);
        X509_sign(signer, signer_key, EVP_sha256());
        X509_NAME_free(n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const unsigned char *p = data;
        OSSL_CMP_MSG *msg = d2i_OSSL_CMP_MSG(NULL, &p, (long) size), *rsp = NULL, *plain = NULL;
        OSSL_CMP_SRV_CTX *srv;
        OSSL_CMP_CTX *ctx;
        cmp_view v = { 0 };

        if (!signer)
                setup();
        if (!msg || cmp_view_parse(data, (size_t) (p - data), &v) < 0) {
                OSSL_CMP_MSG_free(msg);
                ERR_clear_error();
                return 0;
        }
        if (cmp_unprotected(data, (size_t) (p - data), &plain) == 0) {
                OSSL_CMP_MSG_free(msg);
                msg = plain;
        }
        ERR_clear_error();
        cmp_explain_bad_pop(data, (size_t) (p - data));
        srv = OSSL_CMP_SRV_CTX_new(NULL, NULL);
        ctx = OSSL_CMP_SRV_CTX_get0_cmp_ctx(srv);
        OSSL_CMP_CTX_set_log_cb(ctx, quiet);
        OSSL_CMP_CTX_set1_cert(ctx, signer);
        OSSL_CMP_CTX_set1_pkey(ctx, signer_key);
        OSSL_CMP_SRV_CTX_init(srv, NULL, cert_request, revocation, general, NULL, NULL, NULL);
        OSSL_CMP_SRV_CTX_set_accept_unprotected(srv, 1);
        rsp = OSSL_CMP_SRV_process_request(srv, msg);
        OSSL_CMP_MSG_free(rsp);
        OSSL_CMP_SRV_CTX_free(srv);
        OSSL_CMP_MSG_free(msg);
        cmp_view_clear(&v);
        ERR_clear_error();
        return 0;
}
