/* store.h's functions, sent to the store behind them: SQLite (a file
 * path) or PostgreSQL (a postgresql:// URI), chosen by store_open(). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"
#include "store-reads.h"
#include "store-rows.h"
#include "store-sqlite.h"

int store_open(const char *database, store **ret) {
        return store_open_pooled(database, 0, ret);
}

int store_open_pooled(const char *database, unsigned connections, store **ret) {
        store_pg *pg = NULL;
        store *s;
        int r;

        if (!store_pg_is_uri(database))
                return store_sqlite_open(database, ret);
        if ((r = store_pg_open(database, connections, &pg)) < 0)
                return r;
        if (!(s = calloc(1, sizeof(*s)))) {
                store_pg_free(pg);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        s->pg = pg;
        *ret = s;
        return 0;
}

void store_free(store *s) {
        if (s && s->pg) {
                store_pg_free(s->pg);
                free(s);
                return;
        }
        store_sqlite_free(s);
}

int store_ping(store *s) {
        if (s->pg)
                return store_pg_ping(s->pg);
        return store_sqlite_ping(s);
}

int store_probe_write(store *s, int64_t now) {
        if (s->pg)
                return store_pg_probe_write(s->pg, now);
        return store_sqlite_probe_write(s, now);
}

int store_stats_get(store *s, int64_t now, store_stats *ret) {
        if (s->pg)
                return store_pg_stats_get(s->pg, now, ret);
        return store_sqlite_stats_get(s, now, ret);
}

int store_backup(store *s, const char *path) {
        if (s->pg)
                return store_pg_backup(s->pg, path);
        return store_sqlite_backup(s, path);
}

int store_integrity_check(store *s) {
        if (s->pg)
                return store_pg_integrity_check(s->pg);
        return store_sqlite_integrity_check(s);
}

int store_token_insert(store *s, const store_token *t, size_t n) {
        if (s->pg)
                return store_pg_token_insert(s->pg, t, n);
        return store_sqlite_token_insert(s, t, n);
}

int store_token_get(store *s, const char *id, store_token *ret) {
        if (s->pg)
                return store_pg_token_get(s->pg, id, ret);
        return store_sqlite_token_get(s, id, ret);
}

int store_token_list(store *s, store_token **ret, size_t *ret_n) {
        if (s->pg)
                return store_pg_token_list(s->pg, ret, ret_n);
        return store_sqlite_token_list(s, ret, ret_n);
}

int store_token_revoke(store *s, const char *id) {
        if (s->pg)
                return store_pg_token_revoke(s->pg, id);
        return store_sqlite_token_revoke(s, id);
}

int store_request_create(store *s, const store_request *r, int64_t now) {
        if (s->pg)
                return store_pg_request_create(s->pg, r, now);
        return store_sqlite_request_create(s, r, now);
}

int store_request_get(store *s, const char *id, store_request *ret) {
        if (s->pg)
                return store_pg_request_get(s->pg, id, ret);
        return store_sqlite_request_get(s, id, ret);
}

int store_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret) {
        if (s->pg)
                return store_pg_request_find(s->pg, token_id, spki_sha256, ret);
        return store_sqlite_request_find(s, token_id, spki_sha256, ret);
}

int store_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n) {
        if (s->pg)
                return store_pg_request_list(s->pg, pending_only, ret, ret_n);
        return store_sqlite_request_list(s, pending_only, ret, ret_n);
}

int store_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now) {
        if (s->pg)
                return store_pg_request_decide(s->pg, id, approve, reason, now);
        return store_sqlite_request_decide(s, id, approve, reason, now);
}

int store_cert_commit(store *s, const store_issue *in, int64_t now) {
        if (s->pg)
                return store_pg_cert_commit(s->pg, in, now);
        return store_sqlite_cert_commit(s, in, now);
}

int store_cert_get(store *s, const char *serial, store_cert *ret) {
        if (s->pg)
                return store_pg_cert_get(s->pg, serial, ret);
        return store_sqlite_cert_get(s, serial, ret);
}

int store_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret) {
        if (s->pg)
                return store_pg_cert_live_for(s->pg, identity, now, ret);
        return store_sqlite_cert_live_for(s, identity, now, ret);
}

int store_cert_list(store *s, const char *identity, store_cert **ret, size_t *ret_n) {
        if (s->pg)
                return store_pg_cert_list(s->pg, identity, ret, ret_n);
        return store_sqlite_cert_list(s, identity, ret, ret_n);
}

int store_dns_owner(store *s, const char *name, int64_t now, char **ret_identity) {
        if (s->pg)
                return store_pg_dns_owner(s->pg, name, now, ret_identity);
        return store_sqlite_dns_owner(s, name, now, ret_identity);
}

int store_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                            size_t *ret_skipped) {
        if (s->pg)
                return store_pg_cert_dns_backfill(s->pg, now, names_of, ret_recorded, ret_skipped);
        return store_sqlite_cert_dns_backfill(s, now, names_of, ret_recorded, ret_skipped);
}

int store_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit) {
        if (s->pg)
                return store_pg_cert_revoke(s->pg, serial, reason, now, audit);
        return store_sqlite_cert_revoke(s, serial, reason, now, audit);
}

int store_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now, const store_audit *audit,
                               size_t *ret_n) {
        if (s->pg)
                return store_pg_cert_revoke_identity(s->pg, identity, reason, now, audit, ret_n);
        return store_sqlite_cert_revoke_identity(s, identity, reason, now, audit, ret_n);
}

int store_key_blocked(store *s, const char *spki_sha256) {
        if (s->pg)
                return store_pg_key_blocked(s->pg, spki_sha256);
        return store_sqlite_key_blocked(s, spki_sha256);
}

int store_cert_foreach_revoked(store *s, int64_t now, store_revoked_fn fn, void *userdata) {
        if (s->pg)
                return store_pg_cert_foreach_revoked(s->pg, now, fn, userdata);
        return store_sqlite_cert_foreach_revoked(s, now, fn, userdata);
}

int store_revocation_seq(store *s, int64_t *ret) {
        if (s->pg)
                return store_pg_revocation_seq(s->pg, ret);
        return store_sqlite_revocation_seq(s, ret);
}

int store_crl_number_next(store *s, int64_t now, int64_t *ret) {
        if (s->pg)
                return store_pg_crl_number_next(s->pg, now, ret);
        return store_sqlite_crl_number_next(s, now, ret);
}

int store_audit_append(store *s, const store_audit *a) {
        if (s->pg)
                return store_pg_audit_append(s->pg, a);
        return store_sqlite_audit_append(s, a);
}

int store_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata) {
        if (s->pg)
                return store_pg_audit_foreach(s->pg, limit, fn, userdata);
        return store_sqlite_audit_foreach(s, limit, fn, userdata);
}

int store_audit_prune(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                      size_t *ret_n) {
        if (s->pg)
                return store_pg_audit_prune(s->pg, before, max_rows, sign, userdata, ret_n);
        return store_sqlite_audit_prune(s, before, max_rows, sign, userdata, ret_n);
}

int store_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                           store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata) {
        if (s->pg)
                return store_pg_audit_chain_read(s->pg, ret_anchor, ret_head, cpfn, fn, userdata);
        return store_sqlite_audit_chain_read(s, ret_anchor, ret_head, cpfn, fn, userdata);
}

int store_audit_head(store *s, store_audit_link *ret) {
        if (s->pg)
                return store_pg_audit_head(s->pg, ret);
        return store_sqlite_audit_head(s, ret);
}

int store_audit_chain_pending(store *s, size_t *ret_n) {
        *ret_n = 0;
        return s->pg ? store_pg_audit_chain_pending(s->pg, ret_n) : 0;
}

int store_audit_pending(store *s, size_t *ret_n) {
        *ret_n = 0;
        return s->pg ? store_pg_audit_pending(s->pg, ret_n) : 0;
}

int store_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp) {
        if (s->pg)
                return store_pg_audit_checkpoint_add(s->pg, cp);
        return store_sqlite_audit_checkpoint_add(s, cp);
}

void store_set_audit_sink(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *)) {
        if (s->pg)
                store_pg_set_audit_sink(s->pg, fn, userdata, free_userdata);
        else
                store_sqlite_set_audit_sink(s, fn, userdata, free_userdata);
}

int store_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                        size_t max_per_requester, size_t *ret_replaced) {
        if (s->pg)
                return store_pg_challenge_put(s->pg, c, now, max_pending, max_per_requester, ret_replaced);
        return store_sqlite_challenge_put(s, c, now, max_pending, max_per_requester, ret_replaced);
}

int store_challenge_take(store *s, const char *id, store_challenge *ret) {
        if (s->pg)
                return store_pg_challenge_take(s->pg, id, ret);
        return store_sqlite_challenge_take(s, id, ret);
}

int store_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now) {
        if (s->pg)
                return store_pg_ek_add(s->pg, v, n, audit, now);
        return store_sqlite_ek_add(s, v, n, audit, now);
}

int store_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret) {
        if (s->pg)
                return store_pg_ek_find(s->pg, ek_cert_sha256, ek_pub_sha256, ret);
        return store_sqlite_ek_find(s, ek_cert_sha256, ek_pub_sha256, ret);
}

int store_ek_list(store *s, store_ek **ret, size_t *ret_n) {
        if (s->pg)
                return store_pg_ek_list(s->pg, ret, ret_n);
        return store_sqlite_ek_list(s, ret, ret_n);
}

int store_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now) {
        if (s->pg)
                return store_pg_ek_remove(s->pg, key, audit, now);
        return store_sqlite_ek_remove(s, key, audit, now);
}

int store_binding_get(store *s, const char *identity, store_binding *ret) {
        if (s->pg)
                return store_pg_binding_get(s->pg, identity, ret);
        return store_sqlite_binding_get(s, identity, ret);
}

int store_binding_list(store *s, store_binding **ret, size_t *ret_n) {
        if (s->pg)
                return store_pg_binding_list(s->pg, ret, ret_n);
        return store_sqlite_binding_list(s, ret, ret_n);
}

int store_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now) {
        if (s->pg)
                return store_pg_binding_release(s->pg, b, audit, now);
        return store_sqlite_binding_release(s, b, audit, now);
}

bool store_reads_ahead(const store *s) {
        return s->pg != NULL;
}

/* SQLite reads nothing ahead: in-process, a read costs no round trip. */
int store_reads_fetch(store *s, const store_reads_keys *k, store_reads **ret) {
        store_reads *rd = NULL;
        int r = store_reads_new(k, &rd);

        if (r >= 0 && s->pg && (r = store_pg_reads_fetch(s->pg, rd)) < 0)
                store_reads_free(TAKE_PTR(rd));
        if (r >= 0)
                *ret = rd;
        return r;
}

/* ---- the reads ahead, given out once per key, as the store function
 * would have given them; anything else is read from the store when it is
 * asked for ---- */

/* Whether a holds the answer for key (read ahead for want). */
static bool answer_for(const store_answer *a, const char *want, const char *key) {
        return a->ready && want && key && strcmp(want, key) == 0;
}

/* a's answer, given out once: its result, its detail set again. */
static int answer_take(store_answer *a) {
        a->ready = false;
        return a->r < 0 ? hwid_fail((hwid_err) -a->r, "%s", a->detail) : a->r;
}

/* The same, and the value read (size bytes at held) moved to ret. */
static int answer_move(store_answer *a, void *held, void *ret, size_t size) {
        if (a->r >= 0) {
                memcpy(ret, held, size);
                memset(held, 0, size);
        }
        return answer_take(a);
}

int store_reads_token_get(store *s, store_reads *rd, const char *id, store_token *ret) {
        if (!rd || !answer_for(&rd->token_a, rd->token_id, id))
                return store_token_get(s, id, ret);
        return answer_move(&rd->token_a, &rd->token, ret, sizeof(*ret));
}

int store_reads_cert_get(store *s, store_reads *rd, const char *serial, store_cert *ret) {
        if (!rd || !answer_for(&rd->cert_a, rd->serial, serial))
                return store_cert_get(s, serial, ret);
        return answer_move(&rd->cert_a, &rd->cert, ret, sizeof(*ret));
}

int store_reads_key_blocked(store *s, store_reads *rd, const char *spki_sha256) {
        if (!rd || !answer_for(&rd->key_a, rd->spki_sha256, spki_sha256))
                return store_key_blocked(s, spki_sha256);
        return answer_take(&rd->key_a);
}

int store_reads_cert_live_for(store *s, store_reads *rd, const char *identity, int64_t now, store_cert *ret) {
        if (!rd || now != rd->now || !answer_for(&rd->live_a, rd->identity, identity))
                return store_cert_live_for(s, identity, now, ret);
        return answer_move(&rd->live_a, &rd->live, ret, sizeof(*ret));
}

int store_reads_dns_owner(store *s, store_reads *rd, const char *name, int64_t now, char **ret_identity) {
        char canon[STORE_DNS_NAME_MAX + 1];

        if (rd && now == rd->now && name && store_dns_canonical(name, canon, sizeof(canon)) >= 0)
                for (size_t i = 0; i < rd->n_dns; i++)
                        if (answer_for(&rd->dns_a[i], rd->dns[i], canon))
                                return answer_move(&rd->dns_a[i], &rd->owner[i], ret_identity,
                                                   sizeof(*ret_identity));
        return store_dns_owner(s, name, now, ret_identity);
}

int store_reads_binding_get(store *s, store_reads *rd, const char *identity, store_binding *ret) {
        if (!rd || !answer_for(&rd->bind_a, rd->identity, identity))
                return store_binding_get(s, identity, ret);
        return answer_move(&rd->bind_a, &rd->bind, ret, sizeof(*ret));
}
