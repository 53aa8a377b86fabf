/* A CA rollover's certificates: the links the issuer makes
 * (ca_link_sign()), the one check of them hwidd and devices both make
 * (ca_link_verify(), common/ca-link.c), a device's adoption of a new CA
 * only through a link (trust_adopt(), provisioning/trust.c), and the
 * warning before the active CA's end (rollover_expiry_warning()).
 *
 * The CA keys are in SoftHSM2 (ca-fixture.c), signing through hwid's
 * provider as hwidd does. */
#include <string.h>
#include <time.h>

#include <openssl/x509v3.h>

#include "ca-fixture.h"
#include "ca-link.h"
#include "check.h"
#include "error.h"
#include "ossl-util.h"
#include "rollover.h"
#include "trust.h"
#include "x509-util.h"

#define DAY INT64_C(86400)

static int64_t not_after(X509 *x) {
        int64_t t = 0;

        return x509_not_after(x, &t) >= 0 ? t : -1;
}

/* ca's key in a certificate that is no CA (CA:FALSE), signed by signer. */
static X509 *leaf_of(ca *signer, X509 *ca_cert) {
        issue_request in = { .subject_key = X509_get0_pubkey(ca_cert), .subject = X509_get_subject_name(ca_cert),
                             .key_usage = KU_DIGITAL_SIGNATURE, .validity = 30 * DAY, .now = (int64_t) time(NULL) };
        issued_cert c = { 0 };
        const unsigned char *p;
        X509 *x = NULL;

        if (issuer_sign(signer->is, &in, &c) == 0 && (p = c.der))
                x = d2i_X509(NULL, &p, (long) c.der_len);
        issued_cert_clear(&c);
        return x;
}

static void test_links(ca *old, ca *g2, ca *twin, ca *forger) {
        _cleanup_(X509_freep) X509 *nwo = NULL, *own = NULL, *by_twin = NULL, *leafish = NULL;
        int64_t now = (int64_t) time(NULL);
        int r;

        CHECK(ca_link_sign(old->key, old->cert, g2->cert, &nwo) == 0);
        CHECK(ca_link_sign(g2->key, g2->cert, old->cert, &own) == 0);
        if (!nwo || !own)
                return;
        CHECK(ca_link_verify(nwo, old->cert, g2->cert, now) == 0);
        CHECK(ca_link_verify(own, g2->cert, old->cert, now) == 0);
        /* Each ends where the old CA does (the shorter-lived). */
        CHECK(not_after(nwo) == not_after(old->cert) && not_after(own) == not_after(old->cert));
        CHECK(X509_check_ca(nwo) > 0 && (X509_get_key_usage(nwo) & KU_KEY_CERT_SIGN));
        /* Signed with another key of the old CA's name: the signature. */
        CHECK(ca_link_sign(twin->key, twin->cert, g2->cert, &by_twin) == 0);
        r = ca_link_verify(by_twin, old->cert, g2->cert, now);
        CHECK(r == -HWID_E_UNTRUSTED);
        CHECK_CONTAINS(hwid_strerror(r), "not signed by the trusted CA's key");
        /* A genuine link, but for another key of the new CA's name. */
        r = ca_link_verify(nwo, old->cert, forger->cert, now);
        CHECK(r == -HWID_E_UNTRUSTED);
        CHECK_CONTAINS(hwid_strerror(r), "another key than the new CA's");
        /* The new key certified by the old, as no CA. */
        CHECK((leafish = leaf_of(old, g2->cert)) != NULL);
        r = ca_link_verify(leafish, old->cert, g2->cert, now);
        CHECK(r == -HWID_E_UNTRUSTED);
        CHECK_CONTAINS(hwid_strerror(r), "CA:TRUE, keyCertSign");
        /* Outside its validity. */
        CHECK(ca_link_verify(nwo, old->cert, g2->cert, not_after(old->cert) + DAY) == -HWID_E_UNTRUSTED);
        CHECK(ca_link_verify(nwo, old->cert, g2->cert, now - 2 * DAY) == -HWID_E_UNTRUSTED);
        CHECK(ca_link_verify(NULL, old->cert, g2->cert, now) == -HWID_E_UNTRUSTED);
}

static STACK_OF(X509) *stack_of(X509 *a, X509 *b, X509 *c) {
        STACK_OF(X509) *sk = sk_X509_new_null();
        X509 *v[] = { a, b, c };

        for (size_t i = 0; sk && i < 3; i++)
                if (v[i] && !X509_add_cert(sk, v[i], X509_ADD_FLAG_UP_REF))
                        CHECK(false);
        return sk;
}

/* A device that trusts old adopts g2 through its link, and nothing else. */
static void test_adopt(ca *old, ca *g2, ca *forger) {
        _cleanup_(X509_freep) X509 *nwo = NULL, *own = NULL;
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *set = NULL, *pool = NULL, *anchors = NULL;
        unsigned adopted = 9, unproven = 9;
        int64_t now = (int64_t) time(NULL);

        CHECK(ca_link_sign(old->key, old->cert, g2->cert, &nwo) == 0);
        CHECK(ca_link_sign(g2->key, g2->cert, old->cert, &own) == 0);
        set = stack_of(old->cert, NULL, NULL);
        pool = stack_of(forger->cert, nwo, NULL); /* the forger's CA bears g2's name */
        CHECK(trust_adopt(set, pool, now, &adopted, &unproven) == 0);
        CHECK(adopted == 0 && unproven == 2 && sk_X509_num(set) == 1);
        sk_X509_pop_free(pool, X509_free);
        pool = stack_of(g2->cert, nwo, own);
        CHECK(trust_adopt(set, pool, now, &adopted, &unproven) == 0);
        CHECK(adopted == 1 && unproven == 0 && sk_X509_num(set) == 2);
        CHECK(sk_X509_num(set) == 2 && X509_cmp(sk_X509_value(set, 1), g2->cert) == 0);
        CHECK(trust_anchors(set, &anchors) == 0 && sk_X509_num(anchors) == 2);
        /* Too late: the link has expired. */
        sk_X509_pop_free(set, X509_free);
        sk_X509_pop_free(pool, X509_free);
        set = stack_of(old->cert, NULL, NULL);
        pool = stack_of(g2->cert, nwo, own);
        CHECK(trust_adopt(set, pool, not_after(old->cert) + DAY, &adopted, &unproven) == 0);
        CHECK(adopted == 0 && unproven == 2);
}

static void test_warning(void) {
        int64_t now = INT64_C(1800000000), longest = 365 * DAY, warn = 90 * DAY;
        char out[512];

        CHECK(!rollover_expiry_warning(2, now + 400 * DAY, now, longest, warn, out, sizeof(out)));
        CHECK(rollover_expiry_warning(2, now + 300 * DAY, now, longest, warn, out, sizeof(out)));
        CHECK_CONTAINS(out, "sooner than the longest profile validity (365 days)");
        CHECK_CONTAINS(out, "the active CA (generation 2)");
        CHECK(rollover_expiry_warning(2, now + 80 * DAY, now, 30 * DAY, warn, out, sizeof(out)));
        CHECK_CONTAINS(out, "in less than 90 days: roll the CA over");
        CHECK(!rollover_expiry_warning(2, now + 80 * DAY, now, 30 * DAY, 0, out, sizeof(out)));
}

int main(void) {
        ca old = { 0 }, g2 = { 0 }, twin = { 0 }, forger = { 0 };
        int r = ca_fixture_setup("test-rollover");

        if (r != 0)
                return r;
        CHECK(ca_make("old", HWID_KEY_EC_P256, "/CN=rollover CA", 30, &old) == 0);
        CHECK(ca_make("g2", HWID_KEY_EC_P256, "/CN=rollover CA G2", 3650, &g2) == 0);
        CHECK(ca_make("twin", HWID_KEY_EC_P256, "/CN=rollover CA", 30, &twin) == 0);
        CHECK(ca_make("forger", HWID_KEY_EC_P256, "/CN=rollover CA G2", 3650, &forger) == 0);
        if (old.is && g2.is && twin.is && forger.is) {
                test_links(&old, &g2, &twin, &forger);
                test_adopt(&old, &g2, &forger);
        }
        test_warning();
        ca_done(&old);
        ca_done(&g2);
        ca_done(&twin);
        ca_done(&forger);
        ca_fixture_teardown();
        return check_done("test-rollover");
}
