/* The CA's generations as hwidd holds them (docs/OPERATIONS.md, "Rolling
 * the CA over"): loaded from the store (store.h, "CA generations") at
 * start and whenever the store's sequence moves, so that every replica
 * switches within a second of `hwid ca rollover activate`.  Generation 1
 * is the configuration's ca.certificate and ca.key; until the first
 * rollover it is the only one.
 *
 * What is served of them: GET /ca and EST's cacerts (the active CA and
 * its chain first, then every other served generation's CA certificate
 * and the link certificates), the client certificates' trust anchors
 * (every served generation's CA certificate), hwidd's TLS chain (its
 * certificate and the link from its issuer to the newest other served
 * generation), and what CMP's rootCaKeyUpdate answers.  A retired
 * generation, and a prepared one without its certificate yet, is not
 * served and its key is not opened. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "hsm.h"
#include "issuer.h"
#include "store.h"

typedef struct ca_gen {
        int n;                       /* 1, 2, ... */
        store_ca_state state;
        X509 *cert;                  /* its CA certificate */
        char *chain_pem;             /* the certificates above it (an offline root's), NULL: none */
        X509 *new_with_old;          /* its key certified by generation n-1's (NULL for 1) */
        X509 *old_with_new;          /* generation n-1's key certified by its own (NULL for 1) */
        hwid_key *key;               /* opened; generation 1's is ca.key (borrowed) */
        bool key_owned;
        issuer *issuer;              /* signs with key as cert */
        int64_t not_after;
} ca_gen;

typedef struct ca_gens {
        ca_gen *v;                   /* the served generations, ascending */
        size_t n;
        ca_gen *active;
        int64_t seq;                 /* the store's sequence they were loaded at */
        char *ca_pem;                /* GET /ca, EST cacerts */
        char *client_ca_pem;         /* every served generation's CA certificate */
} ca_gens;

/* What generation 1 is, from the configuration. */
typedef struct ca_gens_source {
        X509 *ca_cert;               /* ca.certificate */
        const char *ca_chain_pem;    /* ca.chain's PEM, NULL: none */
        hwid_key *ca_key;            /* ca.key, opened (borrowed: outlives the generations) */
        const char *tcti;            /* for the keys of the other generations */
} ca_gens_source;

/* Loads the generations the store records (or generation 1 alone, when it
 * records none): opens the key of each served one, checks that each key
 * is its certificate's, that generation 1 is ca.certificate, that exactly
 * one is active, and that every served link certificate holds
 * (ca_link_verify(), its time aside). */
int ca_gens_load(store *s, const ca_gens_source *src, ca_gens **ret);
void ca_gens_free(ca_gens *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(ca_gens *, ca_gens_free)

/* Generation n if it is served, else NULL. */
ca_gen *ca_gens_find(const ca_gens *g, int n);
/* The served generation whose key signed x (its issuer named as that
 * generation's subject), else NULL. */
ca_gen *ca_gens_signer_of(const ca_gens *g, X509 *x);

/* hwidd's TLS chain: the first certificate of tls_pem, then the link
 * from its issuer's generation to the newest other served generation
 * (leaf by the old CA: OldWithNew; by the new: NewWithOld), so that a
 * device trusting either verifies it; without another served generation,
 * tls_pem as it is. */
int ca_gens_tls_chain(const ca_gens *g, const char *tls_pem, char **ret);

/* What a rollover offers a client that asks (CMP's rootCaKeyUpdate, RFC
 * 4210 §5.3.19.15): the newest served generation (newWithNew) and its
 * links with the one before it, if that one is served too.  NULL each
 * when no rollover is under way. */
typedef struct ca_gens_update {
        X509 *new_with_new, *new_with_old, *old_with_new;
} ca_gens_update;
void ca_gens_update_get(const ca_gens *g, ca_gens_update *ret);

/* The CRL distribution point of generation n: base (ca.crl_url) for
 * generation 1, base with "/<n>" appended for the others; NULL when base
 * is NULL.  The caller frees it. */
int ca_gen_crl_url(const char *base, int n, char **ret);
