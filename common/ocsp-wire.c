/* OCSP requests, read strictly and bounded (ocsp-wire.h).  OpenSSL parses
 * the ASN.1; what is checked here is what hwidd answers: one certID, a
 * hash it can compute, a nonce of a sane length, no critical extension it
 * does not know. */
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "base64.h"
#include "error.h"
#include "ocsp-wire.h"
#include "ossl-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(OCSP_REQUEST *, OCSP_REQUEST_free)

static int malformed(const char *why) {
        ERR_clear_error();
        return hwid_fail(HWID_E_INVALID, "malformed OCSP request: %s", why);
}

/* The request's own encoding must be the DER OpenSSL would write: one
 * encoding per request (a BER variant never reaches the answer's cache). */
static int parse_der(const uint8_t *der, size_t len, OCSP_REQUEST **ret) {
        const unsigned char *p = der;
        _cleanup_(OCSP_REQUEST_freep) OCSP_REQUEST *req = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *again = NULL;
        int n;

        if (len == 0)
                return malformed("the body is empty");
        if (len > OCSP_REQUEST_MAX)
                return malformed("longer than 4096 bytes");
        if (!(req = d2i_OCSP_REQUEST(NULL, &p, (long) len)) || p != der + len)
                return malformed("not one DER OCSPRequest");
        n = i2d_OCSP_REQUEST(req, &again);
        if (n <= 0 || (size_t) n != len || memcmp(again, der, len) != 0)
                return malformed("not DER (a BER encoding)");
        *ret = TAKE_PTR(req);
        return 0;
}

/* The Nonce (RFC 8954 §2.1): extnValue is the DER of an OCTET STRING of
 * 1 to 32 octets. */
static int nonce_length(X509_EXTENSION *ext, size_t *ret) {
        const ASN1_OCTET_STRING *v = X509_EXTENSION_get_data(ext);
        const unsigned char *p = ASN1_STRING_get0_data(v);
        ASN1_OCTET_STRING *inner = d2i_ASN1_OCTET_STRING(NULL, &p, ASN1_STRING_length(v));
        int n = inner ? ASN1_STRING_length(inner) : -1;
        bool whole = inner && p == ASN1_STRING_get0_data(v) + ASN1_STRING_length(v);

        ASN1_OCTET_STRING_free(inner);
        if (!whole || n < 1 || n > OCSP_NONCE_MAX)
                return malformed("the nonce must be an OCTET STRING of 1 to 32 octets (RFC 8954)");
        *ret = (size_t) n;
        return 0;
}

/* The request's extensions: a nonce (at most one), others only if not
 * critical. */
static int request_extensions(OCSP_REQUEST *req, size_t *ret_nonce) {
        size_t nonce = 0;
        int n = OCSP_REQUEST_get_ext_count(req), r;

        for (int i = 0; i < n; i++) {
                X509_EXTENSION *ext = OCSP_REQUEST_get_ext(req, i);

                if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) == NID_id_pkix_OCSP_Nonce) {
                        if (nonce)
                                return malformed("two nonces");
                        if ((r = nonce_length(ext, &nonce)) < 0)
                                return r;
                } else if (X509_EXTENSION_get_critical(ext)) {
                        return malformed("a critical request extension hwidd does not know");
                }
        }
        *ret_nonce = nonce;
        return 0;
}

static bool hash_known(int nid) {
        return nid == NID_sha1 || nid == NID_sha256 || nid == NID_sha384 || nid == NID_sha512;
}

/* The certID's hash algorithm has no parameters, or NULL (RFC 5754 §2):
 * else one serial would have endless certIDs, each a cache entry. */
static bool hash_params_plain(OCSP_CERTID *id) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        const unsigned char *p;
        X509_ALGOR *alg = NULL;
        long len;
        int n = i2d_OCSP_CERTID(id, &der), tag, class, type = -1;

        p = der;
        if (n > 0 && !(ASN1_get_object(&p, &len, &tag, &class, n) & 0x80) &&
            (alg = d2i_X509_ALGOR(NULL, &p, len)))
                X509_ALGOR_get0(NULL, &type, NULL, alg);
        X509_ALGOR_free(alg);
        return type == V_ASN1_UNDEF || type == V_ASN1_NULL;
}

/* The one certID: a hash hwidd computes, hashes of its length, a serial
 * that is a certificate's (positive, at most 20 octets). */
static int read_certid(ocsp_query *q) {
        OCSP_ONEREQ *one = OCSP_request_onereq_get0(q->req, 0);
        OCSP_CERTID *id = one ? OCSP_onereq_get0_id(one) : NULL;
        ASN1_OCTET_STRING *name_hash = NULL, *key_hash = NULL;
        ASN1_OBJECT *md = NULL;
        ASN1_INTEGER *serial = NULL;
        _cleanup_(BN_freep) BIGNUM *bn = NULL;
        char *hex;
        int size;

        if (!id || !OCSP_id_get0_info(&name_hash, &md, &key_hash, &serial, id))
                return malformed("no certID");
        if (OCSP_ONEREQ_get_ext_count(one) > 0 && OCSP_ONEREQ_get_ext_by_critical(one, 1, -1) >= 0)
                return malformed("a critical extension in the certID's request");
        q->hash_nid = OBJ_obj2nid(md);
        if (!hash_known(q->hash_nid))
                return malformed("the certID's hash algorithm is not SHA-1, SHA-256, SHA-384 or SHA-512");
        if (!hash_params_plain(id))
                return malformed("the certID's hash algorithm has parameters other than NULL");
        size = EVP_MD_get_size(EVP_get_digestbynid(q->hash_nid));
        if (ASN1_STRING_length(name_hash) != size || ASN1_STRING_length(key_hash) != size)
                return malformed("the certID's hashes are not as long as its hash algorithm's");
        if (ASN1_STRING_type(serial) != V_ASN1_INTEGER || ASN1_STRING_length(serial) < 1 ||
            ASN1_STRING_length(serial) > OCSP_SERIAL_MAX)
                return malformed("the certID's serial is not a positive number of at most 20 octets");
        if (!(bn = ASN1_INTEGER_to_BN(serial, NULL)) || !(hex = BN_bn2hex(bn)))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot read a serial number");
        snprintf(q->serial, sizeof(q->serial), "%s", hex);
        OPENSSL_free(hex);
        q->id = id;
        return 0;
}

int ocsp_query_parse(const uint8_t *der, size_t len, ocsp_query *ret) {
        ocsp_query q = { 0 };
        int r;

        if ((r = parse_der(der, len, &q.req)) < 0)
                return r;
        if (OCSP_request_onereq_count(q.req) != 1)
                r = malformed("not exactly one certID (RFC 5019 §2.1.1: one certificate per request)");
        else if ((r = request_extensions(q.req, &q.nonce_len)) >= 0)
                r = read_certid(&q);
        if (r < 0) {
                ocsp_query_clear(&q);
                return r;
        }
        *ret = q;
        return 0;
}

void ocsp_query_clear(ocsp_query *q) {
        OCSP_REQUEST_free(q->req);
        *q = (ocsp_query) { 0 };
}

int ocsp_get_decode(const char *tail, uint8_t **ret_der, size_t *ret_len) {
        _cleanup_free_ char *text = NULL;
        size_t n = strnlen(tail, OCSP_GET_MAX + 1);

        if (n == 0 || n > OCSP_GET_MAX)
                return malformed("GET /ocsp/ needs the base64 of a request of at most 4096 bytes");
        if (!(text = strndup(tail, n)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* A '+' a client left unencoded reads as a space once a form
         * decoder has seen it: it was a '+'. */
        for (char *p = text; *p; p++)
                if (*p == ' ')
                        *p = '+';
        if (base64_decode(text, n, false, ret_der, ret_len) < 0)
                return malformed("GET /ocsp/ is not followed by the base64 of a request");
        return 0;
}

bool ocsp_query_names_issuer(const ocsp_query *q, const X509 *issuer) {
        const EVP_MD *md = EVP_get_digestbynid(q->hash_nid);
        OCSP_CERTID *ours = md ? OCSP_cert_to_id(md, NULL, issuer) : NULL;
        bool same = ours && OCSP_id_issuer_cmp(ours, q->id) == 0;

        OCSP_CERTID_free(ours);
        ERR_clear_error();
        return same;
}

int ocsp_status_response(int status, uint8_t **ret, size_t *ret_len) {
        OCSP_RESPONSE *resp = OCSP_response_create(status, NULL);
        unsigned char *der = NULL;
        int n = resp ? i2d_OCSP_RESPONSE(resp, &der) : -1;

        OCSP_RESPONSE_free(resp);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode an OCSP answer");
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}
