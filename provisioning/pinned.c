#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "client.h"
#include "error.h"
#include "est-client.h"
#include "ossl-util.h"
#include "pinned.h"
#include "x509-util.h"

/* Every certificate of a PEM text, in order (other PEM blocks are
 * skipped); at least one, at most PINNED_MAX_CERTS. */
static int read_certs(const char *pem, STACK_OF(X509) **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, -1);
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *sk = sk_X509_new_null();
        X509 *x;

        if (!b || !sk)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
                if (sk_X509_num(sk) >= PINNED_MAX_CERTS || !sk_X509_push(sk, x)) {
                        X509_free(x);
                        return hwid_fail(HWID_E_INVALID, "more than %d certificates in one answer",
                                         PINNED_MAX_CERTS);
                }
        }
        ERR_clear_error(); /* the end of the text */
        if (sk_X509_num(sk) == 0)
                return hwid_fail(HWID_E_INVALID, "no PEM certificate found");
        *ret = TAKE_PTR(sk);
        return 0;
}

/* parent issued child: names (and key identifiers) match, parent is a CA
 * allowed to sign certificates, and child's signature verifies with
 * parent's key. */
static bool issued_by(X509 *child, X509 *parent) {
        bool ok = X509_check_issued(parent, child) == X509_V_OK && X509_check_ca(parent) > 0 &&
                  X509_verify(child, X509_get0_pubkey(parent)) == 1;

        ERR_clear_error();
        return ok;
}

static bool self_signed(X509 *x) {
        bool ok = X509_check_issued(x, x) == X509_V_OK && X509_verify(x, X509_get0_pubkey(x)) == 1;

        ERR_clear_error();
        return ok;
}

/* Moves from pool to chain the certificates above start, issuer after
 * issuer, until a self-signed root or no issuer in the pool. */
static int chain_up(X509 *start, STACK_OF(X509) *pool, STACK_OF(X509) *chain) {
        X509 *cur = start;

        while (!self_signed(cur)) {
                X509 *parent = NULL;

                for (int i = 0; !parent && i < sk_X509_num(pool); i++)
                        if (issued_by(cur, sk_X509_value(pool, i)))
                                parent = sk_X509_delete(pool, i);
                if (!parent)
                        break;
                if (!sk_X509_push(chain, parent)) {
                        X509_free(parent);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
                cur = parent;
        }
        return 0;
}

static int certs_to_pem(STACK_OF(X509) *sk, char **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
        char *data = NULL, *s;
        long len;

        if (!b)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (int i = 0; i < sk_X509_num(sk); i++)
                if (!PEM_write_bio_X509(b, sk_X509_value(sk, i)))
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode a certificate");
        len = BIO_get_mem_data(b, &data);
        if (!(s = strndup(data, (size_t) len)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = s;
        return 0;
}

/* The first certificate of pem and, after it, those of pem that chain
 * above it; *ret_first is that first certificate (the caller checks it). */
static int first_and_chain(const char *pem, X509 **ret_first, STACK_OF(X509) **ret_chain, unsigned *ret_dropped) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *pool = NULL, *chain = sk_X509_new_null();
        X509 *first;
        int r;

        if (!chain)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = read_certs(pem, &pool)) < 0)
                return r;
        first = sk_X509_shift(pool);
        if (!sk_X509_push(chain, first)) {
                X509_free(first);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if ((r = chain_up(first, pool, chain)) < 0)
                return r;
        *ret_first = first;
        *ret_dropped = (unsigned) sk_X509_num(pool);
        *ret_chain = TAKE_PTR(chain);
        return 0;
}

int pinned_anchor(const char *bundle_pem, char **ret_anchor_pem) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(bundle_pem, -1);
        _cleanup_(X509_freep) X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

        if (!x) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "the stored CA holds no certificate");
        }
        return cert_to_pem(x, ret_anchor_pem);
}

int pinned_bundle(const char *served_pem, const char *pin, char **ret_bundle, char **ret_anchor,
                  unsigned *ret_dropped) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL;
        _cleanup_free_ char *bundle = NULL, *anchor = NULL;
        X509 *ca;
        char got[72];
        unsigned dropped;
        int r;

        if ((r = first_and_chain(served_pem, &ca, &chain, &dropped)) < 0)
                return hwid_fail(HWID_E_PIN_MISMATCH, "the server's CA answer is unusable: %s", hwid_strerror(r));
        if ((r = spki_sha256_pin(X509_get0_pubkey(ca), got)) < 0)
                return r;
        if (strcmp(got, pin) != 0)
                return hwid_fail(HWID_E_PIN_MISMATCH, "the CA is %s, not the pinned %s: nothing was sent", got, pin);
        if ((r = certs_to_pem(chain, &bundle)) < 0 || (r = cert_to_pem(ca, &anchor)) < 0)
                return r;
        *ret_bundle = TAKE_PTR(bundle);
        *ret_anchor = TAKE_PTR(anchor);
        *ret_dropped = dropped;
        return 0;
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

/* The leaf of an answer is ours: signed by the pinned CA, for key, named cn. */
static int check_leaf(X509 *x, X509 *ca, hwid_key *key, const char *cn) {
        char got[256] = "";

        if (X509_verify(x, X509_get0_pubkey(ca)) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "the returned certificate is not signed by the pinned CA");
        }
        if (EVP_PKEY_eq(X509_get0_pubkey(x), hwid_key_public(key)) != 1)
                return hwid_fail(HWID_E_INVALID, "the returned certificate is not for this device's key");
        X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, got, sizeof(got));
        if (strcmp(got, cn) != 0)
                return hwid_fail(HWID_E_INVALID, "the returned certificate is for '%s', not '%s'", got, cn);
        return 0;
}

int pinned_issued(const char *answer_pem, const char *anchor_pem, hwid_key *key, const char *cn, char **ret_pem,
                  unsigned *ret_dropped) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL;
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(anchor_pem, -1);
        _cleanup_(X509_freep) X509 *ca = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        X509 *leaf;
        unsigned dropped;
        int r;

        if (!ca) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "no pinned CA certificate");
        }
        if (first_and_chain(answer_pem, &leaf, &chain, &dropped) < 0)
                return hwid_fail(HWID_E_INVALID, "the server returned no certificate");
        if ((r = check_leaf(leaf, ca, key, cn)) < 0 || (r = certs_to_pem(chain, ret_pem)) < 0)
                return r;
        *ret_dropped = dropped;
        return 0;
}
