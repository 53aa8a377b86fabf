/* A rollover's first steps (rollover.h): the plan, the new subject, the
 * prepared generation (its CA certificate and links), and the import of
 * the certificate an offline root signed. */
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "ca-link.h"
#include "error.h"
#include "issuer.h"
#include "ossl-util.h"
#include "rollover-internal.h"
#include "x509-util.h"

void rollover_plan_clear(rollover_plan *p) {
        X509_free(p->active_cert);
        free(p->active_chain);
        free(p->active_key_uri);
        *p = (rollover_plan) { 0 };
}

/* The plan from the recorded rows (none: generation 1 from the
 * configuration). */
static int plan_from(const rollover_ctx *c, const store_ca_gen *rows, size_t n, rollover_plan *p) {
        const store_ca_gen *a = rollover_row_active(rows, n);
        const char *chain = a ? a->chain : c->ca_chain_pem;
        int r;

        p->generation = n ? rows[n - 1].generation + 1 : 2;
        p->active = a ? a->generation : 1;
        if (!a)
                p->active_cert = X509_dup(c->ca_cert);
        else if ((r = rollover_cert_of(a->cert, a->cert_len, &p->active_cert)) < 0)
                return r;
        if (!p->active_cert)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!(p->active_key_uri = strdup(a && a->key_uri ? a->key_uri : c->ca_key_uri)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (chain && !(p->active_chain = strdup(chain)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        p->offline = chain != NULL;
        return 0;
}

int rollover_plan_get(const rollover_ctx *c, bool replace, rollover_plan *ret) {
        _cleanup_(rollover_rows_clear) rollover_rows rows = { 0 };
        rollover_plan p = { 0 };
        const store_ca_gen *prep;
        int r = rollover_rows_read(c, &rows);

        if (r < 0)
                return r;
        prep = rollover_row_prepared(rows.v, rows.n);
        if (prep && !replace)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d is prepared already: activate it (hwid ca rollover "
                                 "activate), or prepare again with --force to replace it", prep->generation);
        /* A prepared generation is the newest: replaced, the next takes its
         * number. */
        if ((r = plan_from(c, rows.v, prep ? rows.n - 1 : rows.n, &p)) < 0) {
                rollover_plan_clear(&p);
                return r;
        }
        *ret = p;
        return 0;
}

/* cn with its " G<k>" suffix, if any, replaced by " G<n>". */
static void suffixed(const char *cn, int n, char *out, size_t size) {
        const char *g = strrchr(cn, ' ');
        size_t keep = strlen(cn);

        if (g && g[1] == 'G' && g[2] && strspn(g + 2, "0123456789") == strlen(g + 2))
                keep = (size_t) (g - cn);
        snprintf(out, size, "%.*s G%d", (int) keep, cn, n);
}

static int default_subject(const rollover_plan *p, X509_NAME **ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_dup(X509_get_subject_name(p->active_cert));
        int i = name ? X509_NAME_get_index_by_NID(name, NID_commonName, -1) : -1, last = i;
        char cn[256] = "hwid CA", next[300];

        if (!name)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while (i >= 0 && (i = X509_NAME_get_index_by_NID(name, NID_commonName, i)) >= 0)
                last = i;
        if (last >= 0) {
                X509_NAME_get_text_by_NID(name, NID_commonName, cn, sizeof(cn));
                X509_NAME_ENTRY_free(X509_NAME_delete_entry(name, last));
        }
        suffixed(cn, p->generation, next, sizeof(next));
        if (!X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8, (unsigned char *) next, -1,
                                        last >= 0 ? last : -1, 0))
                return hwid_fail_ossl(HWID_E_INVALID, "cannot name CA generation %d '%s'", p->generation, next);
        *ret = TAKE_PTR(name);
        return 0;
}

int rollover_subject(const rollover_plan *p, const char *dn, X509_NAME **ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        int r = dn ? dn_parse(dn, &name) : default_subject(p, &name);

        if (r < 0)
                return r;
        if (X509_NAME_cmp(name, X509_get_subject_name(p->active_cert)) == 0)
                return hwid_fail(HWID_E_INVALID, "the new CA needs a subject of its own, not the active CA's: link "
                                 "certificates between two CAs of one name are self-issued, which many relying "
                                 "parties' path building mishandles (--subject)");
        *ret = TAKE_PTR(name);
        return 0;
}

void rollover_prepared_clear(rollover_prepared *p) {
        X509_free(p->cert);
        *p = (rollover_prepared) { 0 };
}

/* Generation 1 as the first rollover records it: ca.certificate, from
 * its notBefore. */
static int first_row(const rollover_ctx *c, rollover_rowbuf *b) {
        struct tm tm;
        int64_t since = ASN1_TIME_to_tm(X509_get0_notBefore(c->ca_cert), &tm) ? (int64_t) timegm(&tm) : c->now;
        int r = rollover_rowbuf_fill(b, 1, CA_GEN_ACTIVE, c->ca_cert, c->ca_chain_pem, NULL, NULL, NULL);

        b->row.prepared_at = b->row.activated_at = since;
        return r;
}

/* Online: the new CA certificate and the links, with the old key. */
static int make_certs(const rollover_ctx *c, const rollover_plan *p, hwid_key *key, const X509_NAME *subject,
                      int days, X509 **ret_cert, X509 **ret_nwo, X509 **ret_own) {
        _cleanup_(hwid_key_freep) hwid_key *old = NULL;
        int r;

        if ((r = rollover_key_open(c, p->active_key_uri, &old)) < 0)
                return r;
        if (EVP_PKEY_eq(hwid_key_public(old), hwid_key_public(key)) == 1)
                return hwid_fail(HWID_E_INVALID, "the new key is the active CA's key: a rollover needs a new key");
        if ((r = ca_self_sign(key, subject, days, ret_cert)) < 0)
                return r;
        if ((r = ca_link_sign(old, p->active_cert, *ret_cert, ret_nwo)) < 0)
                return r;
        return ca_link_sign(key, *ret_cert, p->active_cert, ret_own);
}

int rollover_prepare(const rollover_ctx *c, const rollover_plan *p, hwid_key *key, const char *key_uri,
                     const X509_NAME *subject, int days, bool replace, rollover_prepared *ret) {
        _cleanup_(X509_freep) X509 *cert = NULL, *nwo = NULL, *own = NULL;
        _cleanup_(rollover_rowbuf_clear) rollover_rowbuf first = { 0 }, next = { 0 };
        char reason[512];
        int r = first_row(c, &first);

        if (r >= 0 && !p->offline)
                r = make_certs(c, p, key, subject, days, &cert, &nwo, &own);
        if (r >= 0)
                r = rollover_rowbuf_fill(&next, p->generation, CA_GEN_PREPARED, cert, NULL, nwo, own, key_uri);
        if (r >= 0 && p->offline)
                r = rollover_rowbuf_subject(&next, subject);
        if (r < 0)
                return r;
        snprintf(reason, sizeof(reason), "%s key %s%s", next.row.subject, key_uri,
                 p->offline ? "; its certificate to come from the offline root" : "");
        r = rollover_write(c, "ca.rollover.prepare", p->generation, reason, &(rollover_op) {
                .kind = ROLLOVER_PREPARE, .first = &first.row, .next = &next.row, .replace = replace });
        if (r < 0)
                return r;
        *ret = (rollover_prepared) { .generation = p->generation, .cert = TAKE_PTR(cert) };
        return 0;
}

/* Self-signed certificates of the chain are the roots it may reach. */
static int chains_to_root(X509 *cert, STACK_OF(X509) *chain) {
        _cleanup_(X509_STORE_freep) X509_STORE *st = X509_STORE_new();
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        int ok;

        if (!st || !ctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (int i = 0; i < sk_X509_num(chain); i++)
                if (X509_self_signed(sk_X509_value(chain, i), 0) == 1)
                        X509_STORE_add_cert(st, sk_X509_value(chain, i));
        if (!X509_STORE_CTX_init(ctx, st, cert, chain))
                return hwid_fail(HWID_E_NOMEM, NULL);
        ok = X509_verify_cert(ctx) == 1;
        ERR_clear_error();
        if (!ok)
                return hwid_fail(HWID_E_INVALID, "the certificate does not chain to a root of the chain: %s",
                                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        return 0;
}

/* The certificate the root signed is the prepared key's, a CA's, and
 * under the root. */
static int import_check(X509 *cert, hwid_key *key, const char *chain_pem) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL;
        int r;

        if (EVP_PKEY_eq(X509_get0_pubkey(cert), hwid_key_public(key)) != 1)
                return hwid_fail(HWID_E_INVALID, "the certificate is not for the prepared key %s", hwid_key_uri(key));
        if (X509_check_ca(cert) <= 0 || !(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN))
                return hwid_fail(HWID_E_INVALID, "the certificate is not a CA certificate (CA:TRUE, keyCertSign)");
        if (!chain_pem)
                return hwid_fail(HWID_E_INVALID, "no chain to check the certificate against (--chain)");
        if ((r = rollover_certs_of(chain_pem, &chain)) < 0)
                return r;
        return chains_to_root(cert, chain);
}

/* The import's certificate and its links, into b. */
static int import_row(const rollover_ctx *c, const rollover_plan *p, const store_ca_gen *prep, X509 *cert,
                      const char *chain_pem, rollover_rowbuf *b) {
        _cleanup_(hwid_key_freep) hwid_key *key = NULL, *old = NULL;
        _cleanup_(X509_freep) X509 *nwo = NULL, *own = NULL;
        int r;

        if ((r = rollover_key_open(c, prep->key_uri, &key)) < 0 || (r = import_check(cert, key, chain_pem)) < 0 ||
            (r = rollover_key_open(c, p->active_key_uri, &old)) < 0 ||
            (r = ca_link_sign(old, p->active_cert, cert, &nwo)) < 0 || (r = ca_link_sign(key, cert, p->active_cert, &own)) < 0)
                return r;
        return rollover_rowbuf_fill(b, prep->generation, CA_GEN_PREPARED, cert, chain_pem, nwo, own, prep->key_uri);
}

int rollover_import(const rollover_ctx *c, const char *cert_pem, const char *chain_pem, int *ret_generation) {
        _cleanup_(rollover_plan_clear) rollover_plan p = { 0 };
        _cleanup_(rollover_rowbuf_clear) rollover_rowbuf b = { 0 };
        _cleanup_(rollover_rows_clear) rollover_rows rows = { 0 };
        _cleanup_(X509_freep) X509 *cert = NULL;
        const store_ca_gen *prep;
        int r;

        if ((r = rollover_rows_read(c, &rows)) < 0 || (r = rollover_plan_get(c, true, &p)) < 0 ||
            (r = pem_first_x509(cert_pem, &cert)) < 0)
                return r;
        if (!(prep = rollover_row_prepared(rows.v, rows.n)) || prep->cert)
                return hwid_fail(HWID_E_NOT_FOUND, "no prepared CA generation waits for its certificate (hwid ca "
                                 "rollover prepare under an offline root makes one)");
        if ((r = import_row(c, &p, prep, cert, chain_pem ? chain_pem : p.active_chain, &b)) < 0 ||
            (r = rollover_write(c, "ca.rollover.import", prep->generation, b.row.subject,
                                &(rollover_op) { .kind = ROLLOVER_IMPORT, .next = &b.row })) < 0)
                return r;
        *ret_generation = prep->generation;
        return 0;
}
