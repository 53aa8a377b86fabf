/* The reads ahead (store.h's store_reads, store-reads.h): a backend that
 * reads ahead fills the answers in (its reads_fetch operation), and they
 * are given out here, each once, as the store function would have given
 * it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-backend.h"
#include "store-reads.h"
#include "store-rows.h"

void store_answer_set(store_answer *a, int r) {
        a->ready = true;
        a->r = r;
        a->detail[0] = '\0';
        if (r < 0)
                snprintf(a->detail, sizeof(a->detail), "%s", hwid_strerror(r));
}

/* Every answer still to read that has a key becomes r. */
void store_reads_fail_all(store_reads *rd, int r) {
        store_answer *keyed[] = { rd->token_id ? &rd->token_a : NULL, rd->serial ? &rd->cert_a : NULL,
                                  rd->spki_sha256 ? &rd->key_a : NULL, rd->identity ? &rd->live_a : NULL,
                                  rd->identity ? &rd->bind_a : NULL };

        for (size_t i = 0; i < ELEMENTSOF(keyed); i++)
                if (keyed[i] && !keyed[i]->ready)
                        store_answer_set(keyed[i], r);
        for (size_t i = 0; i < rd->n_dns; i++)
                if (rd->dns[i] && !rd->dns_a[i].ready)
                        store_answer_set(&rd->dns_a[i], r);
}

static bool dup_opt(const char *s, char **ret) {
        *ret = s ? strdup(s) : NULL;
        return !s || *ret;
}

/* The DNS names, canonical; one that is not a DNS name is not read ahead
 * (asked for, the store says why). */
static bool dns_copy(store_reads *rd, const store_reads_keys *k) {
        char name[STORE_DNS_NAME_MAX + 1];

        if (k->n_dns_names == 0)
                return true;
        rd->dns = calloc(k->n_dns_names, sizeof(*rd->dns));
        rd->dns_a = calloc(k->n_dns_names, sizeof(*rd->dns_a));
        rd->owner = calloc(k->n_dns_names, sizeof(*rd->owner));
        if (!rd->dns || !rd->dns_a || !rd->owner)
                return false;
        rd->n_dns = k->n_dns_names;
        for (size_t i = 0; i < k->n_dns_names; i++)
                if (store_dns_canonical(k->dns_names[i], name, sizeof(name)) >= 0 && !(rd->dns[i] = strdup(name)))
                        return false;
        return true;
}

int store_reads_new(const store_reads_keys *k, store_reads **ret) {
        _cleanup_(store_reads_freep) store_reads *rd = calloc(1, sizeof(*rd));

        if (!rd || !dup_opt(k->token_id, &rd->token_id) || !dup_opt(k->serial, &rd->serial) ||
            !dup_opt(k->spki_sha256, &rd->spki_sha256) || !dup_opt(k->identity, &rd->identity) || !dns_copy(rd, k))
                return hwid_fail(HWID_E_NOMEM, NULL);
        rd->now = k->now;
        *ret = TAKE_PTR(rd);
        return 0;
}

void store_reads_free(store_reads *rd) {
        if (!rd)
                return;
        store_token_clear(&rd->token);
        store_cert_clear(&rd->cert);
        store_cert_clear(&rd->live);
        store_binding_clear(&rd->bind);
        for (size_t i = 0; i < rd->n_dns; i++) {
                free(rd->dns[i]);
                free(rd->owner[i]);
        }
        free(rd->dns);
        free(rd->dns_a);
        free(rd->owner);
        free(rd->token_id);
        free(rd->serial);
        free(rd->spki_sha256);
        free(rd->identity);
        free(rd);
}

bool store_reads_ahead(const store *s) {
        return s->ops->reads_ahead;
}

int store_reads_fetch(store *s, const store_reads_keys *k, store_reads **ret) {
        store_reads *rd = NULL;
        int r = store_reads_new(k, &rd);

        if (r >= 0 && (r = s->ops->reads_fetch(s, rd)) < 0)
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
