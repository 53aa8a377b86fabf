#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "client.h"
#include "error.h"
#include "est-client.h"
#include "ossl-util.h"
#include "pinned.h"
#include "trust.h"
#include "x509-util.h"

/* The first certificate of pem and, after it, those of pem that chain
 * above it; *ret_first is that first certificate (the caller checks it). */
static int first_and_chain(const char *pem, X509 **ret_first, STACK_OF(X509) **ret_chain, unsigned *ret_dropped) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *pool = NULL, *chain = sk_X509_new_null();
        X509 *first;
        int r;

        if (!chain)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = trust_read_certs(pem, &pool)) < 0)
                return r;
        first = sk_X509_shift(pool);
        if (!sk_X509_push(chain, first)) {
                X509_free(first);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if ((r = trust_chain_up(first, pool, chain)) < 0)
                return r;
        *ret_first = first;
        *ret_dropped = (unsigned) sk_X509_num(pool);
        *ret_chain = TAKE_PTR(chain);
        return 0;
}

/* The anchors of set as PEM. */
static int anchors_pem(STACK_OF(X509) *set, char **ret) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *anchors = NULL;
        int r = trust_anchors(set, &anchors);

        return r < 0 ? r : trust_certs_pem(anchors, ret);
}

int pinned_anchor(const char *bundle_pem, char **ret_anchor_pem) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *set = NULL;

        if (trust_read_certs(bundle_pem, &set) < 0)
                return hwid_fail(HWID_E_INVALID, "the stored CA holds no certificate");
        return anchors_pem(set, ret_anchor_pem);
}

/* The certificate of pool whose key is the pin, taken out of it. */
static int take_pinned(STACK_OF(X509) *pool, const char *pin, X509 **ret) {
        char got[72], first[72] = "";
        int r;

        for (int i = 0; i < sk_X509_num(pool); i++) {
                if ((r = spki_sha256_pin(X509_get0_pubkey(sk_X509_value(pool, i)), got)) < 0)
                        return r;
                if (i == 0)
                        snprintf(first, sizeof(first), "%s", got);
                if (strcmp(got, pin) == 0) {
                        *ret = sk_X509_delete(pool, i);
                        return 0;
                }
        }
        return hwid_fail(HWID_E_PIN_MISMATCH, "the CA is %s, not the pinned %s (nor is any other certificate of "
                         "the answer): nothing was sent", first, pin);
}

int pinned_bundle(const char *served_pem, const char *pin, char **ret_bundle, char **ret_anchor,
                  unsigned *ret_dropped) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *pool = NULL, *set = sk_X509_new_null();
        _cleanup_free_ char *bundle = NULL, *anchors = NULL;
        X509 *ca = NULL;
        unsigned adopted, dropped;
        int r;

        if (!set)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = trust_read_certs(served_pem, &pool)) < 0)
                return hwid_fail(HWID_E_PIN_MISMATCH, "the server's CA answer is unusable: %s", hwid_strerror(r));
        if ((r = take_pinned(pool, pin, &ca)) < 0)
                return r;
        if (!sk_X509_push(set, ca)) {
                X509_free(ca);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        /* Above the pinned CA; then the CAs a rollover proves from it. */
        if ((r = trust_chain_up(ca, pool, set)) < 0 ||
            (r = trust_adopt(set, pool, (int64_t) time(NULL), &adopted, &dropped)) < 0 ||
            (r = trust_certs_pem(set, &bundle)) < 0 || (r = anchors_pem(set, &anchors)) < 0)
                return r;
        *ret_bundle = TAKE_PTR(bundle);
        *ret_anchor = TAKE_PTR(anchors);
        *ret_dropped = dropped;
        return 0;
}

int pinned_adopt(const char *bundle_pem, const char *served_pem, int64_t now, char **ret_bundle,
                 unsigned *ret_adopted, unsigned *ret_unproven) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *set = NULL, *pool = NULL;
        int r;

        *ret_bundle = NULL;
        if ((r = trust_read_certs(bundle_pem, &set)) < 0 || (r = trust_read_certs(served_pem, &pool)) < 0 ||
            (r = trust_adopt(set, pool, now, ret_adopted, ret_unproven)) < 0)
                return r;
        return *ret_adopted ? trust_certs_pem(set, ret_bundle) : 0;
}

static int fetch_ca(const client_opts *o, const char *pin, bool est, char **ret_bundle, char **ret_anchor,
                    unsigned *ret_dropped, const char **ret_server) {
        _cleanup_free_ char *served = NULL;
        const char *server = NULL;
        char why[512];
        int r;

        r = est ? est_fetch_ca_unverified(o, &served, &server) : client_fetch_ca_unverified(o, &served, &server);
        if (r < 0)
                return r;
        if ((r = pinned_bundle(served, pin, ret_bundle, ret_anchor, ret_dropped)) < 0) {
                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
                return hwid_fail((hwid_err) -r, "%s%s: %s", server, est ? EST_PATH "/cacerts" : "/ca", why);
        }
        if (ret_server)
                *ret_server = server;
        return 0;
}

int pinned_fetch_ca(const client_opts *o, const char *pin, char **ret_bundle, char **ret_anchor,
                    unsigned *ret_dropped, const char **ret_server) {
        return fetch_ca(o, pin, false, ret_bundle, ret_anchor, ret_dropped, ret_server);
}

int pinned_fetch_ca_est(const client_opts *o, const char *pin, char **ret_bundle, char **ret_anchor,
                        unsigned *ret_dropped, const char **ret_server) {
        return fetch_ca(o, pin, true, ret_bundle, ret_anchor, ret_dropped, ret_server);
}

/* The leaf of an answer is ours: signed by a CA the device trusts (one
 * of anchors), for key, named cn. */
static int check_leaf(X509 *x, STACK_OF(X509) *anchors, hwid_key *key, const char *cn) {
        char got[256] = "";
        bool signed_by_us = false;

        for (int i = 0; !signed_by_us && i < sk_X509_num(anchors); i++)
                signed_by_us = X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(sk_X509_value(anchors, i))) == 0 &&
                               X509_verify(x, X509_get0_pubkey(sk_X509_value(anchors, i))) == 1;
        ERR_clear_error();
        if (!signed_by_us)
                return hwid_fail(HWID_E_INVALID, "the returned certificate is not signed by the pinned CA, nor by a "
                                 "CA a link from it proved");
        if (EVP_PKEY_eq(X509_get0_pubkey(x), hwid_key_public(key)) != 1)
                return hwid_fail(HWID_E_INVALID, "the returned certificate is not for this device's key");
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, got, sizeof(got));
        if (strcmp(got, cn) != 0)
                return hwid_fail(HWID_E_INVALID, "the returned certificate is for '%s', not '%s'", got, cn);
        return 0;
}

int pinned_issued(const char *answer_pem, const char *anchor_pem, hwid_key *key, const char *cn, char **ret_pem,
                  unsigned *ret_dropped) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL, *anchors = NULL;
        X509 *leaf;
        unsigned dropped;
        int r;

        if (trust_read_certs(anchor_pem, &anchors) < 0)
                return hwid_fail(HWID_E_INVALID, "no pinned CA certificate");
        if (first_and_chain(answer_pem, &leaf, &chain, &dropped) < 0)
                return hwid_fail(HWID_E_INVALID, "the server returned no certificate");
        if ((r = check_leaf(leaf, anchors, key, cn)) < 0 || (r = trust_certs_pem(chain, ret_pem)) < 0)
                return r;
        *ret_dropped = dropped;
        return 0;
}
