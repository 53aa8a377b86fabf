/* The reads ahead (store.h's store_reads, store-reads.h): what a backend
 * that reads ahead fills in, below the backends; store-dispatch.c gives
 * the answers out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
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
