/* The issuer's leaf certificates (service/ca/issuer/issuer-leaf.c), assembled as
 * DER, against the same certificate built the way hwid built them before
 * (an OpenSSL X509 object, fields set and extensions added in the same
 * order, signed with X509_sign_ctx): for every kind of request, the TBS
 * must be byte for byte the same, the certificate must parse, re-encode
 * to the same bytes and verify with the CA's key, and what issuer_sign()
 * reports (serial, times) must be what the certificate says.
 *
 * The CA keys are in SoftHSM2 (a token made for the test in a private
 * directory), signing through hwid's provider like hwidd does.  Skipped
 * (77) where SoftHSM2 is not installed and HWID_ALLOW_SKIP=1; fails otherwise. */
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <openssl/x509v3.h>

#include "attest-record.h"
#include "ca-fixture.h"
#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "issuer.h"
#include "ossl-util.h"
#include "x509-util.h"

#define Y2050 INT64_C(2524608000) /* 2050-01-01T00:00:00Z: GeneralizedTime from here */
#define DAY INT64_C(86400)

/* One request, and the extension texts the old code made of it. */
typedef struct issue_case {
        const char *what;
        bool rsa_subject;
        bool use_spki;       /* the key as a CSR carries it (issue_request.subject_spki) */
        const char *subject;
        const char *sans;    /* san_parse() syntax; NULL: none */
        bool attested;       /* plus the TPM's permanentIdentifier */
        uint32_t ku;
        const char *ku_text;
        uint32_t eku;
        const char *eku_text;
        int64_t now;         /* 0: the current time */
        int64_t validity;
        const char *crl_url;
        int not_after_type;  /* V_ASN1_UTCTIME or V_ASN1_GENERALIZEDTIME */
        bool capped;         /* notAfter is the CA's */
} issue_case;

static int add_text_ext(X509 *x, X509 *ca_cert, int nid, const char *value) {
        _cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;
        X509V3_CTX ctx;

        X509V3_set_ctx(&ctx, ca_cert, x, NULL, NULL, 0);
        ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        return ext && X509_add_ext(x, ext, -1) ? 0 : -1;
}

static int ref_ski(X509 *x) {
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *ski = ASN1_OCTET_STRING_new();
        const unsigned char *pk = NULL;
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned md_len = 0;
        int pk_len = 0;

        if (!ski || !X509_PUBKEY_get0_param(NULL, &pk, &pk_len, NULL, X509_get_X509_PUBKEY(x)) ||
            !EVP_Digest(pk, (size_t) pk_len, md, &md_len, EVP_sha1(), NULL) ||
            !ASN1_OCTET_STRING_set(ski, md, (int) md_len) ||
            !X509_add1_ext_i2d(x, NID_subject_key_identifier, ski, 0, X509V3_ADD_DEFAULT))
                return -1;
        return 0;
}

/* The extensions as issuer.c added them before issue 16, in its order. */
static int ref_extensions(X509 *x, X509 *ca_cert, const issue_case *t, const issue_request *in) {
        _cleanup_free_ char *dp = NULL;

        if (add_text_ext(x, ca_cert, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
            add_text_ext(x, ca_cert, NID_key_usage, t->ku_text) < 0 ||
            (t->eku_text && add_text_ext(x, ca_cert, NID_ext_key_usage, t->eku_text) < 0) || ref_ski(x) < 0 ||
            add_text_ext(x, ca_cert, NID_authority_key_identifier, "keyid:always") < 0)
                return -1;
        if (t->crl_url && (asprintf(&dp, "URI:%s", t->crl_url) < 0 ||
                           add_text_ext(x, ca_cert, NID_crl_distribution_points, dp) < 0))
                return -1;
        if (in->sans && !X509_add1_ext_i2d(x, NID_subject_alt_name, (void *) in->sans, 0, X509V3_ADD_DEFAULT))
                return -1;
        return 0;
}

static int ref_validity(X509 *x, X509 *ca_cert, const issue_request *in) {
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *nb = ASN1_TIME_set(NULL, (time_t) (in->now - in->backdate));
        _cleanup_(ASN1_TIME_freep) ASN1_TIME *na = ASN1_TIME_set(NULL, (time_t) (in->now + in->validity));

        if (!nb || !na || !X509_set1_notBefore(x, nb))
                return -1;
        if (ASN1_TIME_compare(na, X509_get0_notAfter(ca_cert)) > 0)
                return X509_set1_notAfter(x, X509_get0_notAfter(ca_cert)) ? 0 : -1;
        return X509_set1_notAfter(x, na) ? 0 : -1;
}

/* x's key: a copy of spki's fields, as the old code's x509_set_spki() made
 * it (the test's keys have a named curve or NULL as parameters). */
static int ref_spki(X509 *x, const X509_PUBKEY *spki) {
        ASN1_OBJECT *obj = NULL;
        const unsigned char *pk = NULL;
        const void *pval = NULL;
        X509_ALGOR *alg = NULL;
        int pk_len = 0, ptype = V_ASN1_UNDEF;

        if (!X509_PUBKEY_get0_param(&obj, &pk, &pk_len, &alg, spki))
                return -1;
        X509_ALGOR_get0(NULL, &ptype, &pval, alg);
        if (ptype != V_ASN1_OBJECT && ptype != V_ASN1_NULL)
                return -1;
        /* Owned by x from here (a failure leaks, in a test). */
        return X509_PUBKEY_set0_param(X509_get_X509_PUBKEY(x), OBJ_dup(obj), ptype,
                                      ptype == V_ASN1_OBJECT ? OBJ_dup(pval) : NULL,
                                      OPENSSL_memdup(pk, (size_t) pk_len), pk_len) ? 0 : -1;
}

/* The certificate the old code made of in, with got's serial. */
static X509 *reference(ca *c, const issue_case *t, const issue_request *in, X509 *got) {
        _cleanup_(X509_freep) X509 *x = X509_new();
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();

        if (!x || !mctx || !X509_set_version(x, X509_VERSION_3) ||
            !X509_set_serialNumber(x, (ASN1_INTEGER *) X509_get0_serialNumber(got)) ||
            !X509_set_subject_name(x, in->subject) || !X509_set_issuer_name(x, X509_get_subject_name(c->cert)))
                return NULL;
        if (in->subject_spki ? ref_spki(x, in->subject_spki) < 0 : !X509_set_pubkey(x, in->subject_key))
                return NULL;
        if (ref_validity(x, c->cert, in) < 0 || ref_extensions(x, c->cert, t, in) < 0 ||
            hwid_key_sign_init(c->key, mctx, NULL) < 0 || X509_sign_ctx(x, mctx) <= 0)
                return NULL;
        return TAKE_PTR(x);
}

/* The TBSCertificate's bytes inside a certificate's DER. */
static bool tbs_of(const uint8_t *der, size_t len, const uint8_t **ret, size_t *ret_len) {
        const unsigned char *p = der, *tbs;
        long l = 0;
        int tag = 0, cls = 0;

        if (ASN1_get_object(&p, &l, &tag, &cls, (long) len) & 0x80 || tag != V_ASN1_SEQUENCE)
                return false;
        tbs = p;
        if (ASN1_get_object(&p, &l, &tag, &cls, (long) (len - (size_t) (p - der))) & 0x80 || tag != V_ASN1_SEQUENCE)
                return false;
        *ret = tbs;
        *ret_len = (size_t) (p - tbs) + (size_t) l;
        return true;
}

static int64_t unix_of(const ASN1_TIME *t) {
        struct tm tm;

        return ASN1_TIME_to_tm(t, &tm) ? (int64_t) timegm(&tm) : -1;
}

/* What issuer_sign() handed out is the certificate it describes. */
static void check_cert(ca *c, const issue_case *t, const issue_request *in, const issued_cert *ic, X509 *got) {
        _cleanup_(OPENSSL_freep) unsigned char *again = NULL;
        _cleanup_free_ char *hex = NULL;
        const ASN1_INTEGER *serial = X509_get0_serialNumber(got);
        int len = i2d_X509(got, &again);
        char **want = NULL, **have = NULL;
        size_t n_want = 0, n_have = 0;

        CHECK(len == (int) ic->der_len && memcmp(again, ic->der, ic->der_len) == 0);
        CHECK(X509_verify(got, X509_get0_pubkey(c->cert)) == 1);
        /* 16 bytes, positive, the 0x40 bit set: no byte ever dropped. */
        CHECK(ASN1_STRING_length(serial) == 16 && (ASN1_STRING_get0_data(serial)[0] & 0xc0) == 0x40);
        CHECK(serial_to_hex(serial, &hex) == 0);
        CHECK_STREQ(ic->serial, hex);
        CHECK(ic->not_before == unix_of(X509_get0_notBefore(got)) && ic->not_before == in->now - in->backdate);
        CHECK(ic->not_after == unix_of(X509_get0_notAfter(got)));
        CHECK(ASN1_STRING_type(X509_get0_notAfter(got)) == t->not_after_type);
        if (t->capped)
                CHECK(ASN1_STRING_cmp(X509_get0_notAfter(got), X509_get0_notAfter(c->cert)) == 0);
        else
                CHECK(ic->not_after == in->now + in->validity);
        /* The DNS names the store is given are the certificate's. */
        CHECK(general_names_dns(in->sans, &want, &n_want) == 0 && x509_dns_names(got, &have, &n_have) == 0);
        CHECK(n_want == n_have);
        for (size_t i = 0; i < n_want && i < n_have; i++)
                CHECK_STREQ(want[i], have[i]);
        strv_free_n(want, n_want);
        strv_free_n(have, n_have);
}

static void check_same_tbs(ca *c, const issue_case *t, const issue_request *in, const issued_cert *ic, X509 *got) {
        _cleanup_(X509_freep) X509 *ref = reference(c, t, in, got);
        _cleanup_(OPENSSL_freep) unsigned char *want = NULL;
        const X509_ALGOR *alg_got = NULL, *alg_ref = NULL;
        const uint8_t *tbs = NULL;
        size_t tbs_len = 0;
        int want_len;

        CHECK(ref != NULL);
        if (!ref)
                return;
        want_len = i2d_re_X509_tbs(ref, &want);
        CHECK(tbs_of(ic->der, ic->der_len, &tbs, &tbs_len));
        CHECK(want_len > 0 && (size_t) want_len == tbs_len && memcmp(want, tbs, tbs_len) == 0);
        if (want_len <= 0 || (size_t) want_len != tbs_len || memcmp(want, tbs, tbs_len) != 0)
                fprintf(stderr, "  %s: the TBS differs from the X509 object's (%d vs %zu bytes)\n", t->what,
                        want_len, tbs_len);
        X509_get0_signature(NULL, &alg_got, got);
        X509_get0_signature(NULL, &alg_ref, ref);
        CHECK(X509_ALGOR_cmp(alg_got, alg_ref) == 0);
}

static void issue_one(ca *c, const issue_case *t, EVP_PKEY *ec, EVP_PKEY *rsa) {
        EVP_PKEY *key = t->rsa_subject ? rsa : ec;
        _cleanup_(X509_NAME_freep) X509_NAME *subject = NULL;
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *sans = NULL;
        _cleanup_(X509_PUBKEY_freep) X509_PUBKEY *spki = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *spki_der = NULL;
        _cleanup_(X509_freep) X509 *got = NULL;
        issued_cert ic = { 0 };
        const unsigned char *p;
        int len;

        CHECK(dn_parse(t->subject, &subject) == 0);
        if (t->sans)
                CHECK(san_parse(t->sans, &sans) == 0);
        if (t->attested) {
                if (!sans)
                        sans = GENERAL_NAMES_new();
                CHECK(sans && attest_san_append(sans, "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08") == 0);
        }
        /* The key as a CSR carries it: parsed, not made from the key. */
        len = i2d_PUBKEY(key, &spki_der);
        p = spki_der;
        CHECK(len > 0 && (spki = d2i_X509_PUBKEY(NULL, &p, len)));
        issue_request in = {
                .subject_key = key, .subject_spki = t->use_spki ? spki : NULL, .subject = subject, .sans = sans,
                .key_usage = t->ku, .eku = t->eku, .validity = t->validity, .now = t->now ? t->now : time(NULL),
                .backdate = 300, .crl_url = t->crl_url,
        };
        int r = issuer_sign(c->is, &in, &ic);
        CHECK(r == 0);
        if (r < 0) {
                fprintf(stderr, "  %s: %s\n", t->what, hwid_strerror(r));
                return;
        }
        p = ic.der;
        got = d2i_X509(NULL, &p, (long) ic.der_len);
        CHECK(got && p == ic.der + ic.der_len);
        if (got) {
                check_cert(c, t, &in, &ic, got);
                check_same_tbs(c, t, &in, &ic, got);
        }
        issued_cert_clear(&ic);
}

#define CRL "http://ca.example:8080/crl"

/* Every CA (the shortest lives 30 days: every leaf here ends before it,
 * whenever the second turns between the CA's making and the leaf's): each
 * EKU choice, each SAN kind hwid allows, with and without
 * a CRL distribution point, the key from a CSR or from the key itself. */
static const issue_case common_cases[] = {
        { "ec, client, dns, CRL", false, true, "/CN=edge-0001/O=acme", "dns:edge-0001.example", false,
          KU_DIGITAL_SIGNATURE, "critical,digitalSignature", EKU_CLIENT_AUTH, "clientAuth", 0, 20 * DAY, CRL,
          V_ASN1_UTCTIME, false },
        { "rsa, server, every SAN kind", true, true, "/CN=api.acme.example/O=acme/OU=edge \\/ west",
          "dns:a.example,dns:b.example,ip:10.0.0.1,ip:2001:db8::1,uri:spiffe://acme/edge/1,email:ops@acme.example",
          false, KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT, "critical,digitalSignature,keyEncipherment",
          EKU_SERVER_AUTH, "serverAuth", 0, 7 * DAY, NULL, V_ASN1_UTCTIME, false },
        { "ec key only, both EKUs, no SANs", false, false, "/CN=node-7", NULL, false,
          KU_DIGITAL_SIGNATURE | KU_KEY_AGREEMENT, "critical,digitalSignature,keyAgreement",
          EKU_CLIENT_AUTH | EKU_SERVER_AUTH, "clientAuth,serverAuth", 0, DAY, CRL, V_ASN1_UTCTIME, false },
        { "rsa key only, no EKU, attested", true, false, "/CN=edge-0002/O=acme", "dns:edge-0002.example", true,
          KU_DIGITAL_SIGNATURE, "critical,digitalSignature", 0, NULL, 0, 3600, CRL, V_ASN1_UTCTIME, false },
        { "ec, no EKU, no SANs, no CRL", false, true, "/CN=x", NULL, false, KU_DIGITAL_SIGNATURE,
          "critical,digitalSignature", 0, NULL, 0, 60, NULL, V_ASN1_UTCTIME, false },
};

/* A CA valid past 2050: leaves into 2050 get a GeneralizedTime notAfter,
 * and one longer than the CA gets the CA's (a GeneralizedTime too). */
static const issue_case far_cases[] = {
        { "into 2050", false, true, "/CN=late", "dns:late.example", false, KU_DIGITAL_SIGNATURE,
          "critical,digitalSignature", EKU_CLIENT_AUTH, "clientAuth", Y2050 - 10 * DAY, 30 * DAY, CRL,
          V_ASN1_GENERALIZEDTIME, false },
        { "past the CA's end", true, true, "/CN=long", NULL, false, KU_DIGITAL_SIGNATURE,
          "critical,digitalSignature", EKU_SERVER_AUTH, "serverAuth", 0, 100 * 365 * DAY, NULL,
          V_ASN1_GENERALIZEDTIME, true },
};

/* A CA of 30 days: a longer leaf stops with it (a UTCTime). */
static const issue_case near_cases[] = {
        { "past the CA's end", false, true, "/CN=long", "dns:long.example", false, KU_DIGITAL_SIGNATURE,
          "critical,digitalSignature", EKU_CLIENT_AUTH, "clientAuth", 0, 365 * DAY, CRL, V_ASN1_UTCTIME, true },
};

static void issue_all(ca *c, const issue_case *cases, size_t n, EVP_PKEY *ec, EVP_PKEY *rsa) {
        for (size_t i = 0; i < n; i++)
                issue_one(c, &cases[i], ec, rsa);
}

int main(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ec = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *rsa = EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t) 2048);
        ca ec_ca = { 0 }, p384_ca = { 0 }, rsa_ca = { 0 };
        int r = ca_fixture_setup("test-issuer");

        if (r != 0)
                return r;
        CHECK(ec && rsa);
        CHECK(ca_make("ca-ec", HWID_KEY_EC_P256, "/CN=Test EC CA/O=hwid", 40 * 365, &ec_ca) == 0);
        CHECK(ca_make("ca-p384", HWID_KEY_EC_P384, "/CN=Test P-384 CA/O=hwid", 40 * 365, &p384_ca) == 0);
        CHECK(ca_make("ca-rsa", HWID_KEY_RSA_2048, "/CN=Test RSA CA/O=hwid", 30, &rsa_ca) == 0);
        if (ec_ca.is && p384_ca.is && rsa_ca.is) {
                ca *all[] = { &ec_ca, &p384_ca, &rsa_ca };
                for (size_t i = 0; i < ELEMENTSOF(all); i++)
                        issue_all(all[i], common_cases, ELEMENTSOF(common_cases), ec, rsa);
                issue_all(&ec_ca, far_cases, ELEMENTSOF(far_cases), ec, rsa);
                issue_all(&p384_ca, far_cases, ELEMENTSOF(far_cases), ec, rsa);
                issue_all(&rsa_ca, near_cases, ELEMENTSOF(near_cases), ec, rsa);
                /* The cached extensions serve a second round the same. */
                issue_all(&ec_ca, common_cases, ELEMENTSOF(common_cases), ec, rsa);
        }
        ca_done(&ec_ca);
        ca_done(&p384_ca);
        ca_done(&rsa_ca);
        ca_fixture_teardown();
        return check_done("test-issuer");
}
