/* What the files of a rollover's steps (rollover*.c) share: the rows as
 * read, certificates in and out of them, the keys of generations, and
 * the one audited write of each step. */
#pragma once

#include "rollover.h"

typedef struct rollover_rows {
        store_ca_gen *v;
        size_t n;
} rollover_rows;

int rollover_rows_read(const rollover_ctx *c, rollover_rows *ret);
void rollover_rows_clear(rollover_rows *r);
/* The active (prepared) generation's row, NULL if none. */
const store_ca_gen *rollover_row_active(const store_ca_gen *v, size_t n);
const store_ca_gen *rollover_row_prepared(const store_ca_gen *v, size_t n);

/* A certificate from its DER (as stored), or from a PEM text's first one;
 * every certificate of a PEM text (at least one). */
int rollover_cert_of(const uint8_t *der, size_t len, X509 **ret);
int pem_first_x509(const char *pem, X509 **ret);
int rollover_certs_of(const char *pem, STACK_OF(X509) **ret);

/* The key at uri (a generation's), opened on the CA host. */
int rollover_key_open(const rollover_ctx *c, const char *uri, hwid_key **ret);

/* A row to write, and the buffers it points into. */
typedef struct rollover_rowbuf {
        store_ca_gen row;
} rollover_rowbuf;
/* Generation n in state: cert (NULL: none yet; its subject is the row's),
 * chain, the links (NULL: none) and key_uri (NULL: ca.key). */
int rollover_rowbuf_fill(rollover_rowbuf *b, int n, store_ca_state state, X509 *cert, const char *chain,
                         X509 *new_with_old, X509 *old_with_new, const char *key_uri);
/* The subject of a row without a certificate yet. */
int rollover_rowbuf_subject(rollover_rowbuf *b, const X509_NAME *subject);
void rollover_rowbuf_clear(rollover_rowbuf *b);

typedef enum rollover_kind {
        ROLLOVER_PREPARE,
        ROLLOVER_IMPORT,
        ROLLOVER_ACTIVATE,
        ROLLOVER_RETIRE,
} rollover_kind;

typedef struct rollover_op {
        rollover_kind kind;
        const store_ca_gen *first, *next;  /* prepare; next: import */
        bool replace;
} rollover_op;

/* The step op on generation n, one store write with its audit record:
 * action ("ca.rollover.prepare", ...) by c->actor, target "generation n",
 * reason. */
int rollover_write(const rollover_ctx *c, const char *action, int n, const char *reason, const rollover_op *op);
