/* What a device trusts, as a set (trust.h): its anchors, the chains
 * above them, and CAs adopted only through a link from a trusted key. */
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "ca-link.h"
#include "error.h"
#include "ossl-util.h"
#include "trust.h"

int trust_read_certs(const char *pem, STACK_OF(X509) **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, -1);
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *sk = sk_X509_new_null();
        X509 *x;

        if (!b || !sk)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
                if (sk_X509_num(sk) >= TRUST_MAX_CERTS || !sk_X509_push(sk, x)) {
                        X509_free(x);
                        return hwid_fail(HWID_E_INVALID, "more than %d certificates in one answer", TRUST_MAX_CERTS);
                }
        }
        ERR_clear_error(); /* the end of the text */
        if (sk_X509_num(sk) == 0)
                return hwid_fail(HWID_E_INVALID, "no PEM certificate found");
        *ret = TAKE_PTR(sk);
        return 0;
}

int trust_certs_pem(STACK_OF(X509) *sk, char **ret) {
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

bool trust_issued_by(X509 *child, X509 *parent) {
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

/* The certificate of sk identical to x, or NULL. */
static X509 *held(STACK_OF(X509) *sk, X509 *x) {
        for (int i = 0; i < sk_X509_num(sk); i++)
                if (X509_cmp(sk_X509_value(sk, i), x) == 0)
                        return sk_X509_value(sk, i);
        return NULL;
}

int trust_chain_up(X509 *start, STACK_OF(X509) *pool, STACK_OF(X509) *out) {
        X509 *cur = start;

        while (!self_signed(cur)) {
                X509 *parent = NULL, *same;

                for (int i = 0; !parent && i < sk_X509_num(pool); i++)
                        if (trust_issued_by(cur, sk_X509_value(pool, i)))
                                parent = sk_X509_delete(pool, i);
                if (!parent)
                        break;
                if ((same = held(out, parent))) { /* a chain two CAs share (an offline root's): once */
                        X509_free(parent);
                        cur = same;
                        continue;
                }
                if (!sk_X509_push(out, parent)) {
                        X509_free(parent);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
                cur = parent;
        }
        return 0;
}

/* Whether some other certificate of set was issued by x. */
static bool above_another(STACK_OF(X509) *set, X509 *x) {
        for (int i = 0; i < sk_X509_num(set); i++) {
                X509 *y = sk_X509_value(set, i);

                if (X509_cmp(x, y) != 0 && trust_issued_by(y, x))
                        return true;
        }
        return false;
}

int trust_anchors(STACK_OF(X509) *set, STACK_OF(X509) **ret) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *a = sk_X509_new_null();

        if (!a)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (int i = 0; i < sk_X509_num(set); i++) {
                X509 *x = sk_X509_value(set, i);

                if (!above_another(set, x) && !X509_add_cert(a, x, X509_ADD_FLAG_UP_REF))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (sk_X509_num(a) == 0)
                return hwid_fail(HWID_E_INVALID, "the stored CA holds no trust anchor");
        *ret = TAKE_PTR(a);
        return 0;
}

/* Whether a certificate of set has x's key. */
static bool key_trusted(STACK_OF(X509) *set, X509 *x) {
        for (int i = 0; i < sk_X509_num(set); i++)
                if (EVP_PKEY_eq(X509_get0_pubkey(sk_X509_value(set, i)), X509_get0_pubkey(x)) == 1)
                        return true;
        ERR_clear_error();
        return false;
}

/* Whether a link of pool certifies ca's key with an anchor's. */
static bool proven(STACK_OF(X509) *anchors, STACK_OF(X509) *pool, X509 *ca, int64_t now) {
        for (int i = 0; i < sk_X509_num(pool); i++)
                for (int j = 0; j < sk_X509_num(anchors); j++)
                        if (sk_X509_value(pool, i) != ca &&
                            ca_link_verify(sk_X509_value(pool, i), sk_X509_value(anchors, j), ca, now) >= 0)
                                return true;
        return false;
}

/* One CA of pool adopted into set (with its chain), if one is proven:
 * 1; else 0. */
static int adopt_one(STACK_OF(X509) *set, STACK_OF(X509) *pool, int64_t now) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *anchors = NULL;
        int r = trust_anchors(set, &anchors);

        for (int i = 0; r >= 0 && i < sk_X509_num(pool); i++) {
                X509 *ca = sk_X509_value(pool, i);

                if (X509_check_ca(ca) <= 0 || key_trusted(set, ca) || !proven(anchors, pool, ca, now))
                        continue;
                sk_X509_delete(pool, i);
                if (!sk_X509_push(set, ca)) {
                        X509_free(ca);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
                return (r = trust_chain_up(ca, pool, set)) < 0 ? r : 1;
        }
        return r < 0 ? r : 0;
}

int trust_adopt(STACK_OF(X509) *set, STACK_OF(X509) *pool, int64_t now, unsigned *ret_adopted,
                unsigned *ret_unproven) {
        unsigned adopted = 0, unproven = 0;
        int r;

        while ((r = adopt_one(set, pool, now)) > 0)
                adopted++;
        if (r < 0)
                return r;
        hwid_error_clear(); /* the links that did not hold said why; none of it is the answer */
        for (int i = 0; i < sk_X509_num(pool); i++)
                unproven += !key_trusted(set, sk_X509_value(pool, i));
        *ret_adopted = adopted;
        *ret_unproven = unproven;
        return 0;
}
