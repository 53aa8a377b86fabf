/* OCSP requests read by common/ocsp-wire.c and answers signed by
 * service/ca/issuer/ocsp-sign.c, checked with OpenSSL's own OCSP client
 * functions (OCSP_basic_verify, OCSP_resp_find_status, OCSP_check_nonce)
 * against CAs whose keys are in SoftHSM2. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/ocsp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "base64.h"
#include "ca-fixture.h"
#include "check.h"
#include "error.h"
#include "ocsp-sign.h"
#include "ocsp-wire.h"
#include "ossl-util.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(OCSP_REQUEST *, OCSP_REQUEST_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(OCSP_RESPONSE *, OCSP_RESPONSE_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(OCSP_BASICRESP *, OCSP_BASICRESP_free)

/* What a request is made of; each test changes one thing. */
typedef struct req_spec {
        const EVP_MD *md;
        const char *serial;    /* hex */
        bool negative;
        size_t nonce;          /* bytes; 0: none */
        int copies;            /* certIDs (default 1) */
        bool critical_ext;     /* an unknown critical request extension */
        int tamper;            /* flip a byte: 1 the name hash's first, 2 the key hash's last */
} req_spec;

static OCSP_CERTID *certid(const req_spec *s, X509 *ca_cert) {
        _cleanup_(BN_freep) BIGNUM *bn = NULL;
        _cleanup_(ASN1_INTEGER_freep) ASN1_INTEGER *serial = NULL;
        OCSP_CERTID *id;

        if (!BN_hex2bn(&bn, s->serial))
                return NULL;
        BN_set_negative(bn, s->negative);
        serial = BN_to_ASN1_INTEGER(bn, NULL);
        id = OCSP_cert_id_new(s->md, X509_get_subject_name(ca_cert), X509_get0_pubkey_bitstr(ca_cert), serial);
        if (id && s->tamper) {
                ASN1_OCTET_STRING *name_hash = NULL, *key_hash = NULL;
                OCSP_id_get0_info(&name_hash, NULL, &key_hash, NULL, id);
                if (s->tamper == 1)
                        name_hash->data[0] ^= 1;
                else
                        key_hash->data[key_hash->length - 1] ^= 1;
        }
        return id;
}

static int critical_ext(OCSP_REQUEST *req) {
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *v = ASN1_OCTET_STRING_new();
        _cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;
        ASN1_OBJECT *oid = OBJ_txt2obj("1.3.6.1.4.1.99999.1", 1);

        if (!v || !oid || !ASN1_OCTET_STRING_set(v, (const unsigned char *) "\x05\x00", 2) ||
            !(ext = X509_EXTENSION_create_by_OBJ(NULL, oid, 1, v))) {
                ASN1_OBJECT_free(oid);
                return -1;
        }
        ASN1_OBJECT_free(oid);
        return OCSP_REQUEST_add_ext(req, ext, -1) ? 0 : -1;
}

/* The DER request of s for issuer. */
static uint8_t *make_request(const req_spec *s, X509 *ca_cert, size_t *ret_len) {
        _cleanup_(OCSP_REQUEST_freep) OCSP_REQUEST *req = OCSP_REQUEST_new();
        unsigned char *der = NULL, nonce[64];
        int n;

        for (int i = 0; req && i < (s->copies ? s->copies : 1); i++) {
                OCSP_CERTID *id = certid(s, ca_cert);
                if (!id || !OCSP_request_add0_id(req, id))
                        return NULL;
        }
        if (s->nonce && (RAND_bytes(nonce, (int) s->nonce) != 1 ||
                         !OCSP_request_add1_nonce(req, nonce, (int) s->nonce)))
                return NULL;
        if (s->critical_ext && critical_ext(req) < 0)
                return NULL;
        n = i2d_OCSP_REQUEST(req, &der);
        *ret_len = n > 0 ? (size_t) n : 0;
        return n > 0 ? der : NULL;
}

static int parse_spec(const req_spec *s, X509 *ca_cert, ocsp_query *q) {
        size_t len = 0;
        uint8_t *der = make_request(s, ca_cert, &len);
        int r = der ? ocsp_query_parse(der, len, q) : -HWID_E_INTERNAL;

        OPENSSL_free(der);
        return r;
}

static void refused(const req_spec *s, X509 *ca_cert, const char *why) {
        ocsp_query q = { 0 };
        int r = parse_spec(s, ca_cert, &q);

        CHECK(r == -HWID_E_INVALID);
        if (r == -HWID_E_INVALID)
                CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), why);
        ocsp_query_clear(&q);
}

static void test_parse(ca *a, ca *b) {
        ocsp_query q = { 0 };

        CHECK(parse_spec(&(req_spec) { .md = EVP_sha1(), .serial = "0A1B2C" }, a->cert, &q) == 0);
        CHECK_STREQ(q.serial, "0A1B2C");
        CHECK(q.hash_nid == NID_sha1 && q.nonce_len == 0);
        CHECK(ocsp_query_names_issuer(&q, a->cert));
        CHECK(!ocsp_query_names_issuer(&q, b->cert));
        ocsp_query_clear(&q);
        CHECK(parse_spec(&(req_spec) { .md = EVP_sha256(), .serial = "7F00", .nonce = 32 }, a->cert, &q) == 0);
        CHECK(q.hash_nid == NID_sha256 && q.nonce_len == 32);
        CHECK(ocsp_query_names_issuer(&q, a->cert));
        ocsp_query_clear(&q);
        /* Each hash compared: the name's first byte, the key's last. */
        for (int t = 1; t <= 2; t++) {
                CHECK(parse_spec(&(req_spec) { .md = EVP_sha256(), .serial = "01", .tamper = t }, a->cert, &q) == 0);
                CHECK(!ocsp_query_names_issuer(&q, a->cert));
                ocsp_query_clear(&q);
        }
}

/* A certID whose SHA-1 has parameters other than NULL (an empty OCTET
 * STRING in NULL's place) is refused; the same with NULL is read. */
static void refused_params(ca *a) {
        static const uint8_t sha1_null[] = { 0x2B, 0x0E, 0x03, 0x02, 0x1A, 0x05, 0x00 };
        size_t len = 0;
        uint8_t *der = make_request(&(req_spec) { .md = EVP_sha1(), .serial = "01" }, a->cert, &len), *at = NULL;
        ocsp_query q = { 0 };

        for (size_t i = 0; der && i + sizeof(sha1_null) <= len && !at; i++)
                if (memcmp(der + i, sha1_null, sizeof(sha1_null)) == 0)
                        at = der + i;
        CHECK(at != NULL);
        if (at) {
                CHECK(ocsp_query_parse(der, len, &q) == 0);
                ocsp_query_clear(&q);
                at[5] = 0x04;
                CHECK(ocsp_query_parse(der, len, &q) == -HWID_E_INVALID);
                CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "parameters");
        }
        OPENSSL_free(der);
}

static void test_refused(ca *a) {
        static const uint8_t junk[] = { 0x30, 0x03, 0x02, 0x01, 0x01 };
        uint8_t *der, big[OCSP_REQUEST_MAX + 1] = { 0x30 };
        ocsp_query q = { 0 };
        size_t len = 0;

        refused(&(req_spec) { .md = EVP_md5(), .serial = "01" }, a->cert, "hash algorithm");
        refused(&(req_spec) { .md = EVP_sha1(), .serial = "01", .copies = 2 }, a->cert, "exactly one certID");
        refused(&(req_spec) { .md = EVP_sha1(), .serial = "01", .copies = 1000 }, a->cert, "longer than");
        refused(&(req_spec) { .md = EVP_sha1(), .serial = "01", .nonce = 33 }, a->cert, "nonce");
        refused(&(req_spec) { .md = EVP_sha1(), .serial = "01", .critical_ext = true }, a->cert, "critical");
        refused(&(req_spec) { .md = EVP_sha1(), .serial = "05", .negative = true }, a->cert, "serial");
        refused(&(req_spec) { .md = EVP_sha1(), .serial = "0102030405060708090A0B0C0D0E0F101112131415" }, a->cert,
                "serial");
        CHECK(ocsp_query_parse(junk, sizeof(junk), &q) == -HWID_E_INVALID);
        CHECK(ocsp_query_parse(big, sizeof(big), &q) == -HWID_E_INVALID);
        CHECK(ocsp_query_parse(big, 0, &q) == -HWID_E_INVALID);
        der = make_request(&(req_spec) { .md = EVP_sha1(), .serial = "01" }, a->cert, &len);
        CHECK(der && ocsp_query_parse(der, len - 1, &q) == -HWID_E_INVALID); /* truncated */
        /* The same request, BER: the outer SEQUENCE of indefinite length. */
        if (der && der[1] < 0x80) {
                uint8_t *ber = malloc(len + 2);
                memcpy(ber, der, len);
                ber[1] = 0x80;
                ber[len] = ber[len + 1] = 0;
                CHECK(ocsp_query_parse(ber, len + 2, &q) == -HWID_E_INVALID);
                CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "DER");
                free(ber);
        }
        OPENSSL_free(der);
        refused_params(a);
}

static void test_get(ca *a) {
        _cleanup_free_ char *b64 = NULL;
        _cleanup_free_ uint8_t *back = NULL;
        char *long_path = calloc(1, OCSP_GET_MAX + 2);
        size_t len = 0, back_len = 0;
        uint8_t *der = make_request(&(req_spec) { .md = EVP_sha1(), .serial = "FBFF", .nonce = 16 }, a->cert, &len);

        CHECK(der && base64_encode(der, len, false, &b64) == 0);
        for (char *p = b64; p && *p; p++) /* a form decoder's '+' */
                if (*p == '+')
                        *p = ' ';
        CHECK(b64 && ocsp_get_decode(b64, &back, &back_len) == 0);
        CHECK(back && back_len == len && memcmp(back, der, len) == 0);
        CHECK(ocsp_get_decode("not base64!", &back, &back_len) == -HWID_E_INVALID);
        CHECK(ocsp_get_decode("", &back, &back_len) == -HWID_E_INVALID);
        memset(long_path, 'A', OCSP_GET_MAX + 1);
        CHECK(ocsp_get_decode(long_path, &back, &back_len) == -HWID_E_INVALID);
        free(long_path);
        OPENSSL_free(der);
}

/* Signs a for a request of spec s to ca c, and reads it back as a relying party does. */
static void answer_checked(ca *c, const req_spec *s, const ocsp_answer *a) {
        _cleanup_(X509_STORE_freep) X509_STORE *store = X509_STORE_new();
        _cleanup_(OCSP_RESPONSE_freep) OCSP_RESPONSE *resp = NULL;
        _cleanup_(OCSP_BASICRESP_freep) OCSP_BASICRESP *bs = NULL;
        ASN1_GENERALIZEDTIME *rev = NULL, *thisu = NULL, *nextu = NULL;
        ocsp_query q = { 0 };
        uint8_t *der = NULL;
        const unsigned char *p;
        size_t len = 0;
        int status = -1, reason = -1;
        static const int codes[] = { V_OCSP_CERTSTATUS_GOOD, V_OCSP_CERTSTATUS_REVOKED, V_OCSP_CERTSTATUS_UNKNOWN };

        CHECK(parse_spec(s, c->cert, &q) == 0);
        CHECK(issuer_ocsp_sign(c->is, &q, a, &der, &len) == 0);
        p = der;
        CHECK(der && (resp = d2i_OCSP_RESPONSE(NULL, &p, (long) len)));
        CHECK(resp && OCSP_response_status(resp) == OCSP_RESPONSE_STATUS_SUCCESSFUL);
        CHECK(resp && (bs = OCSP_response_get1_basic(resp)));
        CHECK(store && X509_STORE_add_cert(store, c->cert));
        CHECK(bs && OCSP_basic_verify(bs, NULL, store, 0) == 1);
        CHECK(bs && OCSP_resp_find_status(bs, (OCSP_CERTID *) q.id, &status, &reason, &rev, &thisu, &nextu) == 1);
        CHECK(status == codes[a->status]);
        if (a->status == OCSP_CERT_REVOKED) {
                struct tm tm;
                CHECK(rev && ASN1_TIME_to_tm(rev, &tm) == 1 && (int64_t) timegm(&tm) == a->revoked_at);
                CHECK(reason == (a->reason > 0 ? a->reason : -1));
        }
        CHECK(bs && OCSP_check_validity(thisu, nextu, 300, -1) == 1);
        CHECK(bs && OCSP_check_nonce(q.req, bs) == (!s->nonce ? 2 : a->echo_nonce ? 1 : -1));
        OPENSSL_free(der);
        ocsp_query_clear(&q);
}

static void test_answers(ca *c) {
        int64_t now = (int64_t) time(NULL);
        req_spec plain = { .md = EVP_sha1(), .serial = "4A11" }, nonced = { .md = EVP_sha256(), .serial = "4A12",
                                                                             .nonce = 16 };

        answer_checked(c, &plain, &(ocsp_answer) { .status = OCSP_CERT_GOOD, .this_update = now,
                                                    .next_update = now + 3600 });
        answer_checked(c, &plain, &(ocsp_answer) { .status = OCSP_CERT_REVOKED, .revoked_at = now - 60, .reason = 1,
                                                    .this_update = now, .next_update = now + 3600 });
        answer_checked(c, &plain, &(ocsp_answer) { .status = OCSP_CERT_REVOKED, .revoked_at = now - 5,
                                                    .this_update = now, .next_update = now + 3600 });
        answer_checked(c, &plain, &(ocsp_answer) { .status = OCSP_CERT_UNKNOWN, .this_update = now,
                                                    .next_update = now + 3600 });
        answer_checked(c, &nonced, &(ocsp_answer) { .status = OCSP_CERT_GOOD, .this_update = now,
                                                     .next_update = now + 3600, .echo_nonce = true });
        answer_checked(c, &nonced, &(ocsp_answer) { .status = OCSP_CERT_GOOD, .this_update = now,
                                                     .next_update = now + 3600 });
}

/* Another CA's answer does not verify against this CA. */
static void test_wrong_signer(ca *a, ca *b) {
        _cleanup_(X509_STORE_freep) X509_STORE *store = X509_STORE_new();
        _cleanup_(OCSP_RESPONSE_freep) OCSP_RESPONSE *resp = NULL;
        _cleanup_(OCSP_BASICRESP_freep) OCSP_BASICRESP *bs = NULL;
        ocsp_query q = { 0 };
        uint8_t *der = NULL;
        const unsigned char *p;
        size_t len = 0;
        int64_t now = (int64_t) time(NULL);

        CHECK(parse_spec(&(req_spec) { .md = EVP_sha1(), .serial = "01" }, a->cert, &q) == 0);
        CHECK(issuer_ocsp_sign(b->is, &q, &(ocsp_answer) { .status = OCSP_CERT_GOOD, .this_update = now,
                                                           .next_update = now + 60 }, &der, &len) == 0);
        p = der;
        CHECK(der && (resp = d2i_OCSP_RESPONSE(NULL, &p, (long) len)) && (bs = OCSP_response_get1_basic(resp)));
        CHECK(store && X509_STORE_add_cert(store, a->cert));
        CHECK(bs && OCSP_basic_verify(bs, NULL, store, OCSP_NOINTERN) != 1);
        ERR_clear_error();
        OPENSSL_free(der);
        ocsp_query_clear(&q);
}

static void test_status_responses(void) {
        static const int all[] = { OCSP_RESPONSE_STATUS_MALFORMEDREQUEST, OCSP_RESPONSE_STATUS_INTERNALERROR,
                                    OCSP_RESPONSE_STATUS_TRYLATER, OCSP_RESPONSE_STATUS_UNAUTHORIZED };

        for (size_t i = 0; i < ELEMENTSOF(all); i++) {
                _cleanup_(OCSP_RESPONSE_freep) OCSP_RESPONSE *resp = NULL;
                uint8_t *der = NULL;
                const unsigned char *p;
                size_t len = 0;

                CHECK(ocsp_status_response(all[i], &der, &len) == 0);
                p = der;
                CHECK(der && (resp = d2i_OCSP_RESPONSE(NULL, &p, (long) len)));
                CHECK(resp && OCSP_response_status(resp) == all[i]);
                CHECK(len == 5); /* SEQUENCE { ENUMERATED }: no response bytes, nothing signed */
                OPENSSL_free(der);
        }
}

int main(void) {
        ca ec = { 0 }, other = { 0 }, rsa = { 0 };
        int r = ca_fixture_setup("test-ocsp");

        if (r != 0)
                return r;
        CHECK(ca_make("ocsp-ec", HWID_KEY_EC_P256, "/CN=OCSP EC CA", 365, &ec) == 0);
        CHECK(ca_make("ocsp-other", HWID_KEY_EC_P256, "/CN=OCSP EC CA", 365, &other) == 0); /* same name */
        CHECK(ca_make("ocsp-rsa", HWID_KEY_RSA_2048, "/CN=OCSP RSA CA", 365, &rsa) == 0);
        if (ec.is && other.is && rsa.is) {
                test_parse(&ec, &other);
                test_refused(&ec);
                test_get(&ec);
                test_answers(&ec);
                test_answers(&rsa);
                test_wrong_signer(&ec, &other);
        }
        test_status_responses();
        ca_done(&ec);
        ca_done(&other);
        ca_done(&rsa);
        ca_fixture_teardown();
        return check_done("test-ocsp");
}
