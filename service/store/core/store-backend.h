/* What a store backend implements: store.h's calls on one database, as a
 * table of operations (as hsm/backend.h does for keys).
 *
 * A store is opaque above the store: struct store holds only its
 * operations, and each backend's own object begins with one (its `base`),
 * which its operations turn back into the backend's object.  store.h's
 * functions are one call through the table each (store-ops.c), so that
 * nothing outside a backend knows which one answers.  store_open() picks
 * the backend from the database string (the table in store-open.c, one
 * level up: the first backend that takes it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

/* One member per call of store.h on an open store, with its contract. */
typedef struct store_ops {
        void (*free)(store *s);
        int (*ping)(store *s);
        int (*probe_write)(store *s, int64_t now);
        int (*stats_get)(store *s, int64_t now, store_stats *ret);
        int (*backup)(store *s, const char *path);
        int (*integrity_check)(store *s);

        int (*token_insert)(store *s, const store_token *t, size_t n);
        int (*token_get)(store *s, const char *id, store_token *ret);
        int (*token_list)(store *s, store_token **ret, size_t *ret_n);
        int (*token_revoke)(store *s, const char *id);

        int (*request_create)(store *s, const store_request *r, int64_t now);
        int (*request_get)(store *s, const char *id, store_request *ret);
        int (*request_find)(store *s, const char *token_id, const char *spki_sha256, store_request *ret);
        int (*request_list)(store *s, bool pending_only, store_request **ret, size_t *ret_n);
        int (*request_decide)(store *s, const char *id, bool approve, const char *reason, int64_t now);

        int (*cert_commit)(store *s, const store_issue *in, int64_t now);
        int (*cert_get)(store *s, const char *serial, store_cert *ret);
        int (*cert_live_for)(store *s, const char *identity, int64_t now, store_cert *ret);
        int (*cert_list)(store *s, const char *identity, store_cert **ret, size_t *ret_n);
        int (*dns_owner)(store *s, const char *name, int64_t now, char **ret_identity);
        int (*cert_dns_backfill)(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                                 size_t *ret_skipped);
        int (*cert_revoke)(store *s, const char *serial, int reason, int64_t now, const store_audit *audit);
        int (*cert_revoke_identity)(store *s, const char *identity, int reason, int64_t now, const store_audit *audit,
                                    size_t *ret_n);
        int (*key_blocked)(store *s, const char *spki_sha256);
        int (*cert_foreach_revoked)(store *s, int generation, int64_t now, store_revoked_fn fn, void *userdata);
        int (*revocation_seq)(store *s, int64_t *ret);
        int (*crl_number_next)(store *s, int64_t now, int64_t *ret);

        int (*ca_gen_list)(store *s, store_ca_gen **ret, size_t *ret_n);
        int (*ca_gen_seq)(store *s, int64_t *ret);
        int (*ca_gen_prepare)(store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                              const store_audit *audit, int64_t now);
        int (*ca_gen_import)(store *s, int generation, const store_ca_gen *g, const store_audit *audit, int64_t now);
        int (*ca_gen_activate)(store *s, int generation, const store_audit *audit, int64_t now);
        int (*ca_gen_retire)(store *s, int generation, const store_audit *audit, int64_t now);
        int (*ca_gen_unexpired)(store *s, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last);

        /* Whether reads_fetch reads anything ahead (store_reads_ahead()). */
        bool reads_ahead;
        /* Fills in the answers of rd that it reads ahead (store-reads.h);
         * the others are read when they are asked for. */
        int (*reads_fetch)(store *s, store_reads *rd);

        int (*audit_append)(store *s, const store_audit *a);
        int (*audit_foreach)(store *s, size_t limit, store_audit_fn fn, void *userdata);
        int (*audit_prune)(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                           size_t *ret_n);
        int (*audit_chain_read)(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                                store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata);
        int (*audit_head)(store *s, store_audit_link *ret);
        int (*audit_chain_pending)(store *s, size_t *ret_n);
        int (*audit_pending)(store *s, size_t *ret_n);
        int (*audit_checkpoint_add)(store *s, const store_audit_checkpoint *cp);
        void (*set_audit_sink)(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *));

        int (*challenge_put)(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                             size_t max_per_requester, size_t *ret_replaced);
        int (*challenge_take)(store *s, const char *id, store_challenge *ret);
        int (*ek_add)(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now);
        int (*ek_find)(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret);
        int (*ek_list)(store *s, store_ek **ret, size_t *ret_n);
        int (*ek_remove)(store *s, const char *key, const store_audit *audit, int64_t now);

        int (*binding_get)(store *s, const char *identity, store_binding *ret);
        int (*binding_list)(store *s, store_binding **ret, size_t *ret_n);
        int (*binding_release)(store *s, const store_binding *b, const store_audit *audit, int64_t now);
} store_ops;

/* The head of every backend's store object. */
struct store {
        const store_ops *ops;
};

/* A backend as store_open() sees it. */
typedef struct store_backend {
        const char *name;
        /* Whether database names a database of this backend; NULL: any
         * that no backend before it takes (a file path). */
        bool (*takes)(const char *database);
        /* Opens it (connections: as store_open_pooled() says). */
        int (*open)(const char *database, unsigned connections, store **ret);
} store_backend;
