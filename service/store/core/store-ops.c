/* store.h's calls on an open store: each one call through the store's
 * table of operations (store-backend.h), whichever backend answers. */
#include "store-backend.h"

void store_free(store *s) {
        if (s)
                s->ops->free(s);
}

int store_ping(store *s) {
        return s->ops->ping(s);
}

int store_probe_write(store *s, int64_t now) {
        return s->ops->probe_write(s, now);
}

int store_stats_get(store *s, int64_t now, store_stats *ret) {
        return s->ops->stats_get(s, now, ret);
}

int store_backup(store *s, const char *path) {
        return s->ops->backup(s, path);
}

int store_integrity_check(store *s) {
        return s->ops->integrity_check(s);
}

int store_token_insert(store *s, const store_token *t, size_t n) {
        return s->ops->token_insert(s, t, n);
}

int store_token_get(store *s, const char *id, store_token *ret) {
        return s->ops->token_get(s, id, ret);
}

int store_token_list(store *s, store_token **ret, size_t *ret_n) {
        return s->ops->token_list(s, ret, ret_n);
}

int store_token_revoke(store *s, const char *id) {
        return s->ops->token_revoke(s, id);
}

int store_request_create(store *s, const store_request *r, int64_t now) {
        return s->ops->request_create(s, r, now);
}

int store_request_get(store *s, const char *id, store_request *ret) {
        return s->ops->request_get(s, id, ret);
}

int store_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret) {
        return s->ops->request_find(s, token_id, spki_sha256, ret);
}

int store_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n) {
        return s->ops->request_list(s, pending_only, ret, ret_n);
}

int store_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now) {
        return s->ops->request_decide(s, id, approve, reason, now);
}

int store_cert_commit(store *s, const store_issue *in, int64_t now) {
        return s->ops->cert_commit(s, in, now);
}

int store_cert_get(store *s, const char *serial, store_cert *ret) {
        return s->ops->cert_get(s, serial, ret);
}

int store_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret) {
        return s->ops->cert_live_for(s, identity, now, ret);
}

int store_cert_list(store *s, const char *identity, store_cert **ret, size_t *ret_n) {
        return s->ops->cert_list(s, identity, ret, ret_n);
}

int store_dns_owner(store *s, const char *name, int64_t now, char **ret_identity) {
        return s->ops->dns_owner(s, name, now, ret_identity);
}

int store_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                            size_t *ret_skipped) {
        return s->ops->cert_dns_backfill(s, now, names_of, ret_recorded, ret_skipped);
}

int store_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit) {
        return s->ops->cert_revoke(s, serial, reason, now, audit);
}

int store_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now, const store_audit *audit,
                               size_t *ret_n) {
        return s->ops->cert_revoke_identity(s, identity, reason, now, audit, ret_n);
}

int store_key_blocked(store *s, const char *spki_sha256) {
        return s->ops->key_blocked(s, spki_sha256);
}

int store_cert_foreach_revoked(store *s, int generation, int64_t now, store_revoked_fn fn, void *userdata) {
        return s->ops->cert_foreach_revoked(s, generation, now, fn, userdata);
}

int store_revocation_seq(store *s, int64_t *ret) {
        return s->ops->revocation_seq(s, ret);
}

int store_crl_number_next(store *s, int64_t now, int64_t *ret) {
        return s->ops->crl_number_next(s, now, ret);
}

int store_audit_append(store *s, const store_audit *a) {
        return s->ops->audit_append(s, a);
}

int store_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata) {
        return s->ops->audit_foreach(s, limit, fn, userdata);
}

int store_audit_prune(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                      size_t *ret_n) {
        return s->ops->audit_prune(s, before, max_rows, sign, userdata, ret_n);
}

int store_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                           store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata) {
        return s->ops->audit_chain_read(s, ret_anchor, ret_head, cpfn, fn, userdata);
}

int store_audit_head(store *s, store_audit_link *ret) {
        return s->ops->audit_head(s, ret);
}

int store_audit_chain_pending(store *s, size_t *ret_n) {
        return s->ops->audit_chain_pending(s, ret_n);
}

int store_audit_pending(store *s, size_t *ret_n) {
        return s->ops->audit_pending(s, ret_n);
}

int store_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp) {
        return s->ops->audit_checkpoint_add(s, cp);
}

int store_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                        size_t max_per_requester, size_t *ret_replaced) {
        return s->ops->challenge_put(s, c, now, max_pending, max_per_requester, ret_replaced);
}

int store_challenge_take(store *s, const char *id, store_challenge *ret) {
        return s->ops->challenge_take(s, id, ret);
}

int store_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now) {
        return s->ops->ek_add(s, v, n, audit, now);
}

int store_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret) {
        return s->ops->ek_find(s, ek_cert_sha256, ek_pub_sha256, ret);
}

int store_ek_list(store *s, store_ek **ret, size_t *ret_n) {
        return s->ops->ek_list(s, ret, ret_n);
}

int store_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now) {
        return s->ops->ek_remove(s, key, audit, now);
}

int store_binding_get(store *s, const char *identity, store_binding *ret) {
        return s->ops->binding_get(s, identity, ret);
}

int store_binding_list(store *s, store_binding **ret, size_t *ret_n) {
        return s->ops->binding_list(s, ret, ret_n);
}

int store_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now) {
        return s->ops->binding_release(s, b, audit, now);
}

int store_ca_gen_list(store *s, store_ca_gen **ret, size_t *ret_n) {
        return s->ops->ca_gen_list(s, ret, ret_n);
}

int store_ca_gen_seq(store *s, int64_t *ret) {
        return s->ops->ca_gen_seq(s, ret);
}

int store_ca_gen_prepare(store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                         const store_audit *audit, int64_t now) {
        return s->ops->ca_gen_prepare(s, first, next, replace, audit, now);
}

int store_ca_gen_import(store *s, int generation, const store_ca_gen *g, const store_audit *audit, int64_t now) {
        return s->ops->ca_gen_import(s, generation, g, audit, now);
}

int store_ca_gen_activate(store *s, int generation, const store_audit *audit, int64_t now) {
        return s->ops->ca_gen_activate(s, generation, audit, now);
}

int store_ca_gen_retire(store *s, int generation, const store_audit *audit, int64_t now) {
        return s->ops->ca_gen_retire(s, generation, audit, now);
}

int store_ca_gen_unexpired(store *s, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last) {
        return s->ops->ca_gen_unexpired(s, generation, now, ret_n, ret_last);
}

void store_set_audit_sink(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *)) {
        s->ops->set_audit_sink(s, fn, userdata, free_userdata);
}
