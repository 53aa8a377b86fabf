/* What store_reads_fetch() read ahead (store.h), for the backends that
 * read ahead (store-pg-reads.c) and for store-reads.c, which hands the
 * answers out.  A backend that reads nothing ahead leaves every answer
 * unset: each is then read from the store when it is asked for. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct store_answer {
        bool ready;        /* read ahead, and not given out yet */
        int r;             /* what the store function returned */
        char detail[512];  /* r < 0: its detail */
} store_answer;

struct store_reads {
        int64_t now;
        char *token_id, *serial, *spki_sha256, *identity;
        char **dns;        /* canonical (store_dns_canonical()); NULL where a name is not one */
        size_t n_dns;
        store_answer token_a, cert_a, key_a, live_a, bind_a;
        store_answer *dns_a;
        store_token token;
        store_cert cert, live;
        store_binding bind;   /* the identity's binding to a TPM */
        char **owner;
};

/* A store_reads with copies of k's keys and nothing read yet. */
int store_reads_new(const store_reads_keys *k, store_reads **ret);
/* a's answer is r, and the thread's error detail if r < 0. */
void store_answer_set(store_answer *a, int r);
/* Every answer that has a key is r (the store could not be read). */
void store_reads_fail_all(store_reads *rd, int r);
