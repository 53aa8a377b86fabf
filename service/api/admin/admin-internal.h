/* Inside the admin API (/v1/admin/...): admin-api.c routes, authenticates,
 * authorizes and audits; admin-tokens.c, admin-records.c, admin-ek.c and
 * admin-identities.c do the work, reading the call and answering it with
 * admin-call.c.
 * Every handler runs after the authorizer chain allowed its action to the
 * certificate's recorded role; what it does is audited with the actor
 * ("admin:root", "provisioner:station-3"), allowed or not. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "admin-api.h"
#include "admin-json.h"
#include "ca-internal.h"

typedef struct admin_call {
        ca_service *ca;
        const http_request *req;
        http_response *resp;
        ca_auth auth;
        policy_action action;
        const char *arg;       /* the path parameter (token id, request id, serial, identity), or NULL */
        json_object *body;     /* the request body: a JSON object (empty body: {}) */
        int64_t now;
        /* Filled by the handler for the audit record of a success. */
        char target[160];      /* defaults to arg */
        char note[512];        /* the record's reason */
        bool audited;          /* the handler wrote its records itself */
} admin_call;

typedef int (*admin_fn)(admin_call *c);

/* Handlers (admin-tokens.c, admin-records.c): 0 after filling c->resp,
 * or -hwid_err for the caller to answer and audit. */
int admin_token_create(admin_call *c);
int admin_token_list(admin_call *c);
int admin_token_revoke(admin_call *c);
int admin_request_list(admin_call *c);
int admin_request_approve(admin_call *c);
int admin_request_deny(admin_call *c);
int admin_cert_list(admin_call *c);
int admin_cert_show(admin_call *c);
int admin_cert_revoke(admin_call *c);
int admin_identity_revoke(admin_call *c);
int admin_audit_read(admin_call *c);
int admin_ek_list(admin_call *c);   /* admin-ek.c */
int admin_ek_add(admin_call *c);
int admin_ek_import(admin_call *c);
int admin_ek_remove(admin_call *c);
int admin_identity_list(admin_call *c);    /* admin-identities.c */
int admin_identity_release(admin_call *c);

/* ---- admin-call.c ---- */

/* The body's fields, type-checked: keys outside `allowed` (NULL-terminated)
 * are -HWID_E_INVALID; a missing optional field leaves *ret alone. */
int admin_body_keys(const admin_call *c, const char *const *allowed);
int admin_body_str(const admin_call *c, const char *key, size_t max, const char **ret);
int admin_body_int(const admin_call *c, const char *key, int64_t min, int64_t max, int64_t *ret);
/* A query parameter, percent-decoded (NULL if absent). */
int admin_query(const admin_call *c, const char *key, size_t max, char **ret);
/* Sends o (taken) as the JSON answer with status. */
int admin_respond(admin_call *c, int status, json_object *o);
/* { key: [items...] } with the array filled by the caller. */
json_object *admin_list_object(const char *key, json_object **ret_array);
