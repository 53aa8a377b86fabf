/* The CA's generations as hwidd holds them (ca-gens.h): loaded from the
 * store's rows, and what is served of them. */
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "ca-gens.h"
#include "ca-link.h"
#include "error.h"
#include "ossl-util.h"
#include "x509-util.h"

static void gen_clear(ca_gen *g) {
        issuer_free(g->issuer);
        if (g->key_owned)
                hwid_key_free(g->key);
        X509_free(g->cert);
        X509_free(g->new_with_old);
        X509_free(g->old_with_new);
        free(g->chain_pem);
        *g = (ca_gen) { 0 };
}

void ca_gens_free(ca_gens *g) {
        if (!g)
                return;
        for (size_t i = 0; i < g->n; i++)
                gen_clear(&g->v[i]);
        free(g->v);
        free(g->ca_pem);
        free(g->client_ca_pem);
        free(g);
}

/* A certificate stored as DER: all of it, nothing after it. */
static int cert_of(const uint8_t *der, size_t len, int n, const char *what, X509 **ret) {
        const unsigned char *p = der;
        X509 *x = der ? d2i_X509(NULL, &p, (long) len) : NULL;

        if (!x || p != der + len) {
                X509_free(x);
                ERR_clear_error();
                return hwid_fail(HWID_E_STORE, "the %s of CA generation %d in the store cannot be read", what, n);
        }
        *ret = x;
        return 0;
}

/* The key of generation n: ca.key for 1 (whose certificate must be
 * ca.certificate), else the one its row names. */
static int gen_key(const store_ca_gen *row, const ca_gens_source *src, ca_gen *g) {
        hsm_options ho = { .tcti = src->tcti };

        if (row->generation == 1) {
                if (X509_cmp(g->cert, src->ca_cert) != 0)
                        return hwid_fail(HWID_E_CONFIG, "ca.certificate is not the certificate of CA generation 1 "
                                         "that the store records (the CA hwid ca init made)");
                g->key = src->ca_key;
                return 0;
        }
        g->key_owned = true;
        return hwid_key_open(row->key_uri, &ho, &g->key);
}

static int gen_from_row(const store_ca_gen *row, const ca_gens_source *src, ca_gen *g) {
        int r;

        *g = (ca_gen) { .n = row->generation, .state = row->state };
        if ((r = cert_of(row->cert, row->cert_len, g->n, "certificate", &g->cert)) < 0 ||
            (row->new_with_old && (r = cert_of(row->new_with_old, row->new_with_old_len, g->n, "link certificate",
                                               &g->new_with_old)) < 0) ||
            (row->old_with_new && (r = cert_of(row->old_with_new, row->old_with_new_len, g->n, "link certificate",
                                               &g->old_with_new)) < 0) ||
            (r = x509_not_after(g->cert, &g->not_after)) < 0)
                return r;
        if (row->chain && !(g->chain_pem = strdup(row->chain)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = gen_key(row, src, g)) < 0)
                return r;
        return issuer_new(g->key, g->cert, &g->issuer);
}

/* The time a link is checked at: its own start, so that a link past its
 * end (its old CA expired, not yet retired) still loads. */
static int64_t link_time(X509 *link) {
        struct tm tm;

        return ASN1_TIME_to_tm(X509_get0_notBefore(link), &tm) ? (int64_t) timegm(&tm) : 0;
}

/* Generation g's links with the one before it, prev (NULL: not served,
 * so neither is served). */
static int gen_links(ca_gen *g, const ca_gen *prev) {
        char why[256];
        int r = 0;

        if (!prev || !g->new_with_old || !g->old_with_new) {
                X509_free(TAKE_PTR(g->new_with_old));
                X509_free(TAKE_PTR(g->old_with_new));
                return 0;
        }
        r = ca_link_verify(g->new_with_old, prev->cert, g->cert, link_time(g->new_with_old));
        if (r >= 0)
                r = ca_link_verify(g->old_with_new, g->cert, prev->cert, link_time(g->old_with_new));
        if (r >= 0)
                return 0;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        return hwid_fail(HWID_E_STORE, "the link certificates of CA generation %d in the store do not hold: %s",
                         g->n, why);
}

/* Generation 1 alone, as the configuration names it (no rollover yet). */
static int load_first(const ca_gens_source *src, ca_gens *gs) {
        ca_gen *g;

        if (!(gs->v = calloc(1, sizeof(*gs->v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        g = &gs->v[gs->n++];
        *g = (ca_gen) { .n = 1, .state = CA_GEN_ACTIVE, .key = src->ca_key };
        if (!(g->cert = X509_dup(src->ca_cert)) || (src->ca_chain_pem && !(g->chain_pem = strdup(src->ca_chain_pem))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        gs->active = g;
        if (x509_not_after(g->cert, &g->not_after) < 0)
                return -HWID_E_CRYPTO;
        return issuer_new(g->key, g->cert, &g->issuer);
}

static bool served(const store_ca_gen *row) {
        return row->state != CA_GEN_RETIRED && row->cert;
}

static int load_rows(const store_ca_gen *rows, size_t n, const ca_gens_source *src, ca_gens *gs) {
        int r = 0;

        if (!(gs->v = calloc(n, sizeof(*gs->v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                ca_gen *g = &gs->v[gs->n];

                if (!served(&rows[i]))
                        continue;
                gs->n++;
                if ((r = gen_from_row(&rows[i], src, g)) >= 0)
                        r = gen_links(g, ca_gens_find(gs, g->n - 1));
                if (r >= 0 && g->state == CA_GEN_ACTIVE)
                        r = gs->active ? hwid_fail(HWID_E_STORE, "the store has two active CA generations")
                                       : (gs->active = g, 0);
        }
        if (r >= 0 && !gs->active)
                r = hwid_fail(HWID_E_STORE, "the store records CA generations, none of them active");
        return r;
}

/* pem (a file's text, perhaps without its last newline) after *acc. */
static int append_pem(char **acc, const char *pem) {
        size_t len = pem ? strlen(pem) : 0;
        char *s = NULL;

        if (!len)
                return 0;
        if (asprintf(&s, "%s%s%s", *acc ? *acc : "", pem, pem[len - 1] == '\n' ? "" : "\n") < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        free(*acc);
        *acc = s;
        return 0;
}

static int append_cert(char **acc, X509 *x) {
        _cleanup_free_ char *pem = NULL;
        int r;

        if (!x)
                return 0;
        return (r = cert_to_pem(x, &pem)) < 0 ? r : append_pem(acc, pem);
}

/* GET /ca: the active CA and its chain, then the other served
 * generations (each chain once) and the links. */
static int build_served(ca_gens *gs) {
        ca_gen *a = gs->active;
        int r = append_cert(&gs->ca_pem, a->cert);

        if (r >= 0)
                r = append_pem(&gs->ca_pem, a->chain_pem);
        for (size_t i = 0; r >= 0 && i < gs->n; i++) {
                ca_gen *g = &gs->v[i];

                r = append_cert(&gs->client_ca_pem, g->cert);
                if (r < 0 || g == a)
                        continue;
                r = append_cert(&gs->ca_pem, g->cert);
                /* An offline root above both is served once. */
                if (r >= 0 && g->chain_pem && (!a->chain_pem || strcmp(g->chain_pem, a->chain_pem) != 0))
                        r = append_pem(&gs->ca_pem, g->chain_pem);
        }
        for (size_t i = 0; r >= 0 && i < gs->n; i++)
                if ((r = append_cert(&gs->ca_pem, gs->v[i].new_with_old)) >= 0)
                        r = append_cert(&gs->ca_pem, gs->v[i].old_with_new);
        return r;
}

int ca_gens_load(store *s, const ca_gens_source *src, ca_gens **ret) {
        _cleanup_(ca_gens_freep) ca_gens *gs = calloc(1, sizeof(*gs));
        store_ca_gen *rows = NULL;
        size_t n = 0;
        int r;

        if (!gs)
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* The sequence first: a write between the two is seen next time. */
        if ((r = store_ca_gen_seq(s, &gs->seq)) < 0 || (r = store_ca_gen_list(s, &rows, &n)) < 0)
                return r;
        r = n == 0 ? load_first(src, gs) : load_rows(rows, n, src, gs);
        store_ca_gen_list_free(rows, n);
        if (r >= 0)
                r = build_served(gs);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(gs);
        return 0;
}

ca_gen *ca_gens_find(const ca_gens *g, int n) {
        for (size_t i = 0; g && i < g->n; i++)
                if (g->v[i].n == n)
                        return &g->v[i];
        return NULL;
}

ca_gen *ca_gens_signer_of(const ca_gens *g, X509 *x) {
        for (size_t i = 0; x && i < g->n; i++) {
                X509 *ca = g->v[i].cert;
                bool ok = X509_NAME_cmp(X509_get_issuer_name(x), X509_get_subject_name(ca)) == 0 &&
                          X509_verify(x, X509_get0_pubkey(ca)) == 1;

                ERR_clear_error();
                if (ok)
                        return &g->v[i];
        }
        return NULL;
}

/* The generation whose key certifies signer's in a link, and that link:
 * the next generation's OldWithNew, else signer's own NewWithOld. */
static X509 *tls_link(const ca_gens *g, const ca_gen *signer, const ca_gen **ret_other) {
        const ca_gen *next = ca_gens_find(g, signer->n + 1), *prev = ca_gens_find(g, signer->n - 1);

        if (next && next->old_with_new) {
                *ret_other = next;
                return next->old_with_new;
        }
        if (prev && signer->new_with_old) {
                *ret_other = prev;
                return signer->new_with_old;
        }
        return NULL;
}

int ca_gens_tls_chain(const ca_gens *g, const char *tls_pem, char **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(tls_pem, -1);
        _cleanup_(X509_freep) X509 *leaf = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        _cleanup_free_ char *chain = NULL;
        const ca_gen *signer = leaf ? ca_gens_signer_of(g, leaf) : NULL, *other = NULL;
        X509 *link = signer ? tls_link(g, signer, &other) : NULL;
        int r;

        ERR_clear_error();
        if (!link)
                return (*ret = strdup(tls_pem)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        /* leaf, the link, the other CA and its chain: each issued by the next. */
        if ((r = append_cert(&chain, leaf)) < 0 || (r = append_cert(&chain, link)) < 0 ||
            (r = append_cert(&chain, other->cert)) < 0 || (r = append_pem(&chain, other->chain_pem)) < 0)
                return r;
        *ret = TAKE_PTR(chain);
        return 0;
}

void ca_gens_update_get(const ca_gens *g, ca_gens_update *ret) {
        const ca_gen *newest = g->n ? &g->v[g->n - 1] : NULL;

        *ret = (ca_gens_update) { 0 };
        if (!newest || !newest->new_with_old || !ca_gens_find(g, newest->n - 1))
                return;
        *ret = (ca_gens_update) { .new_with_new = newest->cert, .new_with_old = newest->new_with_old,
                                  .old_with_new = newest->old_with_new };
}

int ca_gen_crl_url(const char *base, int n, char **ret) {
        *ret = NULL;
        if (!base)
                return 0;
        if (n == 1)
                return (*ret = strdup(base)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        return asprintf(ret, "%s/%d", base, n) < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
}
