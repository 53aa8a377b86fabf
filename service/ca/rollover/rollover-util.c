/* What a rollover's steps share (rollover-internal.h). */
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "error.h"
#include "ossl-util.h"
#include "rollover-internal.h"
#include "x509-util.h"

/* Most certificates a chain given to an import holds. */
#define CHAIN_MAX 16

int rollover_rows_read(const rollover_ctx *c, rollover_rows *ret) {
        return store_ca_gen_list(c->store, &ret->v, &ret->n);
}

void rollover_rows_clear(rollover_rows *r) {
        store_ca_gen_list_free(r->v, r->n);
        *r = (rollover_rows) { 0 };
}

static const store_ca_gen *row_in(const store_ca_gen *v, size_t n, store_ca_state st) {
        for (size_t i = 0; i < n; i++)
                if (v[i].state == st)
                        return &v[i];
        return NULL;
}

const store_ca_gen *rollover_row_active(const store_ca_gen *v, size_t n) {
        return row_in(v, n, CA_GEN_ACTIVE);
}

const store_ca_gen *rollover_row_prepared(const store_ca_gen *v, size_t n) {
        return row_in(v, n, CA_GEN_PREPARED);
}

int rollover_cert_of(const uint8_t *der, size_t len, X509 **ret) {
        const unsigned char *p = der;
        X509 *x = der ? d2i_X509(NULL, &p, (long) len) : NULL;

        if (!x || p != der + len) {
                X509_free(x);
                ERR_clear_error();
                return hwid_fail(HWID_E_STORE, "a CA certificate the store holds cannot be read");
        }
        *ret = x;
        return 0;
}

int pem_first_x509(const char *pem, X509 **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, -1);
        X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

        ERR_clear_error();
        if (!x)
                return hwid_fail(HWID_E_INVALID, "no PEM certificate found");
        *ret = x;
        return 0;
}

int rollover_certs_of(const char *pem, STACK_OF(X509) **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, -1);
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *sk = sk_X509_new_null();
        X509 *x;

        if (!b || !sk)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while (sk_X509_num(sk) < CHAIN_MAX && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                if (!sk_X509_push(sk, x)) {
                        X509_free(x);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
        ERR_clear_error();
        if (sk_X509_num(sk) == 0)
                return hwid_fail(HWID_E_INVALID, "the chain holds no PEM certificate");
        *ret = TAKE_PTR(sk);
        return 0;
}

int rollover_key_open(const rollover_ctx *c, const char *uri, hwid_key **ret) {
        hsm_options ho = { .tcti = c->tcti };

        return hwid_key_open(uri, &ho, ret);
}

/* x's DER in a buffer of malloc's (the row's owner frees it with free()). */
static int der_of(X509 *x, uint8_t **ret, size_t *ret_len) {
        unsigned char *der = NULL;
        int len = x ? i2d_X509(x, &der) : 0;

        if (!x)
                return 0;
        if (len <= 0 || !(*ret = malloc((size_t) len))) {
                OPENSSL_free(der);
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode a CA certificate");
        }
        memcpy(*ret, der, (size_t) len);
        *ret_len = (size_t) len;
        OPENSSL_free(der);
        return 0;
}

int rollover_rowbuf_fill(rollover_rowbuf *b, int n, store_ca_state state, X509 *cert, const char *chain,
                         X509 *new_with_old, X509 *old_with_new, const char *key_uri) {
        store_ca_gen *g = &b->row;
        int r;

        g->generation = n;
        g->state = state;
        if ((r = der_of(cert, &g->cert, &g->cert_len)) < 0 ||
            (r = der_of(new_with_old, &g->new_with_old, &g->new_with_old_len)) < 0 ||
            (r = der_of(old_with_new, &g->old_with_new, &g->old_with_new_len)) < 0 ||
            (cert && (r = name_to_string(X509_get_subject_name(cert), &g->subject)) < 0))
                return r;
        if ((chain && !(g->chain = strdup(chain))) || (key_uri && !(g->key_uri = strdup(key_uri))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

int rollover_rowbuf_subject(rollover_rowbuf *b, const X509_NAME *subject) {
        free(b->row.subject);
        b->row.subject = NULL;
        return name_to_string(subject, &b->row.subject);
}

void rollover_rowbuf_clear(rollover_rowbuf *b) {
        store_ca_gen_clear(&b->row);
}

static int write_op(const rollover_ctx *c, int n, const rollover_op *op, const store_audit *a) {
        switch (op->kind) {
        case ROLLOVER_PREPARE:
                return store_ca_gen_prepare(c->store, op->first, op->next, op->replace, a, c->now);
        case ROLLOVER_IMPORT:
                return store_ca_gen_import(c->store, n, op->next, a, c->now);
        case ROLLOVER_ACTIVATE:
                return store_ca_gen_activate(c->store, n, a, c->now);
        case ROLLOVER_RETIRE:
                return store_ca_gen_retire(c->store, n, a, c->now);
        }
        return hwid_fail(HWID_E_INTERNAL, "no such rollover step");
}

int rollover_write(const rollover_ctx *c, const char *action, int n, const char *reason, const rollover_op *op) {
        char target[32];
        store_audit a = { .at = c->now, .actor = c->actor, .action = action, .target = target, .outcome = "allow",
                          .reason = reason };

        snprintf(target, sizeof(target), "generation %d", n);
        return write_op(c, n, op, &a);
}
