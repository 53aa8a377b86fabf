/* The admin operations of the CA core (/v1/admin/..., docs/OPERATIONS.md),
 * as a front door hands them in and gets them back: the door parses the
 * path, the query and the JSON body into ca_admin_args, makes one
 * ca_call() (ca.h) with CA_OP_ADMIN, and encodes the ca_admin_result.
 * Who may (the authorizer chain for the client certificate's recorded
 * role, a provisioner's scope, four eyes), the store's writes and the
 * audit record naming the actor are the core's (ca-admin*.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef enum ca_admin_op {
        CA_ADMIN_TOKEN_LIST,
        CA_ADMIN_TOKEN_CREATE,
        CA_ADMIN_TOKEN_REVOKE,
        CA_ADMIN_REQUEST_LIST,
        CA_ADMIN_REQUEST_APPROVE,
        CA_ADMIN_REQUEST_DENY,
        CA_ADMIN_CERT_LIST,
        CA_ADMIN_CERT_SHOW,
        CA_ADMIN_CERT_REVOKE,
        CA_ADMIN_IDENTITY_REVOKE, /* every unexpired certificate of identity arg */
        CA_ADMIN_AUDIT_READ,
        CA_ADMIN_EK_LIST,
        CA_ADMIN_EK_ADD,
        CA_ADMIN_EK_IMPORT,
        CA_ADMIN_EK_REMOVE,
        CA_ADMIN_IDENTITY_LIST,
        CA_ADMIN_IDENTITY_RELEASE,
} ca_admin_op;

/* Reads the audit records out one by one (CA_ADMIN_AUDIT_READ). */
typedef int (*ca_audit_fn)(const store_audit *a, void *userdata);

/* What the door parsed; strings are borrowed for the call. */
typedef struct ca_admin_args {
        ca_admin_op op;
        const char *arg;              /* the path parameter as sent (token id, request id, serial,
                                       * identity, EK key), NULL: none */
        /* CA_ADMIN_TOKEN_CREATE (profile also for the EK allowlist) */
        const char *profile;
        const char *name_pattern;     /* NULL: any */
        const char *description;      /* NULL: none */
        int64_t ttl, uses, count;
        bool all;                     /* CA_ADMIN_REQUEST_LIST: the decided ones too */
        const char *reason;           /* a denial's why; a revocation's reason, by name */
        int reason_code;              /* a revocation's CRLReason */
        const char *identity;         /* CA_ADMIN_CERT_LIST: of this identity only (NULL: all) */
        const char *cn;               /* CA_ADMIN_EK_ADD: the entry's name, and ... */
        const char *ek_cert;          /* ... base64 of its EK certificate (DER or PEM), or ... */
        const char *ek_pub_sha256;    /* ... the SHA-256 of its EK public key */
        const char *manifest;         /* CA_ADMIN_EK_IMPORT: base64 of the manifest file */
        const char *file;             /* EK_ADD, EK_IMPORT: the file's name for messages (NULL:
                                       * "the EK certificate", "the manifest") */
        size_t limit;                 /* CA_ADMIN_AUDIT_READ: the last so many records */
        ca_audit_fn audit_fn;
        void *audit_userdata;
} ca_admin_args;

/* What the caller may do with a listed request, by the rule that decides
 * it: approve, deny, and why not approve (for a pending one). */
typedef struct ca_may {
        bool approve, deny;
        char approve_refused[256];    /* "": nothing to say */
} ca_may;

/* The answer; ca_result_clear() releases it (and wipes the secrets). */
typedef struct ca_admin_result {
        store_token *tokens;          /* TOKEN_LIST, TOKEN_CREATE */
        char **secrets;               /* TOKEN_CREATE: "<id>.<secret>" of each (wiped) */
        size_t n_tokens;
        bool tokens_made;             /* tokens are TOKEN_CREATE's rows: their strings are the args' */
        store_request *requests;      /* REQUEST_LIST */
        ca_may *may;
        size_t n_requests;
        store_cert *certs;            /* CERT_LIST */
        size_t n_certs;
        store_ek *eks;                /* EK_LIST */
        size_t n_eks;
        store_binding *bindings;      /* IDENTITY_LIST */
        size_t n_bindings;
        store_cert cert;              /* CERT_SHOW */
        store_ek ek;                  /* EK_ADD */
        store_binding binding;        /* IDENTITY_RELEASE: the binding released */
        size_t count;                 /* EK_IMPORT: entries added; IDENTITY_REVOKE: revoked */
        char serial[130];             /* CERT_REVOKE: the serial as the store spells it */
        const char *key;              /* EK_REMOVE: what was removed (into the args) */
} ca_admin_result;

/* The audit record's reason for releasing b (`hwid identity release`,
 * on the CA host or through the admin API): which TPM it was bound to. */
void admin_release_reason(const store_binding *b, char *out, size_t size);
