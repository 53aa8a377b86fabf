/* Inside the admin API's door (/v1/admin/...): admin-api.c routes each
 * call and makes it one call of the CA core (CA_OP_ADMIN: who may, the
 * store's writes and the audit record are the core's, ca-admin.h);
 * admin-parse.c reads the path, the query and the JSON body into the
 * call's arguments, with admin-call.c's readers; admin-encode.c answers
 * the core's result as the records' JSON (admin-json.c, which hwid's
 * admin commands print too). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "admin-api.h"
#include "admin-json.h"
#include "ca.h"
#include "door.h"
#include "http.h"

typedef struct admin_call {
        const http_request *req;
        http_response *resp;
        json_object *body;     /* the request body: a JSON object (empty body: {}) */
        ca_admin_args args;    /* what the core is asked (its strings into body, or ...) */
        char *identity;        /* ... the ?identity= of a certificate listing, owned */
        json_object *answer;   /* the audit log's answer, filled as the core reads the records */
        int64_t now;
} admin_call;

/* Reads what the call's route needs into c->args: 0 or -HWID_E_INVALID
 * naming what is wrong (admin-parse.c). */
typedef int (*admin_parse_fn)(admin_call *c);
/* Answers the core's result (admin-encode.c). */
typedef int (*admin_encode_fn)(admin_call *c, const ca_admin_result *res);

int admin_parse_token_create(admin_call *c);
int admin_parse_no_keys(admin_call *c);
int admin_parse_request_list(admin_call *c);
int admin_parse_deny(admin_call *c);
int admin_parse_cert_list(admin_call *c);
int admin_parse_cert_revoke(admin_call *c);
int admin_parse_identity_revoke(admin_call *c);
int admin_parse_audit_read(admin_call *c);
int admin_parse_ek_add(admin_call *c);
int admin_parse_ek_import(admin_call *c);

int admin_encode_tokens(admin_call *c, const ca_admin_result *res);
int admin_encode_token_create(admin_call *c, const ca_admin_result *res);
int admin_encode_token_revoke(admin_call *c, const ca_admin_result *res);
int admin_encode_requests(admin_call *c, const ca_admin_result *res);
int admin_encode_approve(admin_call *c, const ca_admin_result *res);
int admin_encode_deny(admin_call *c, const ca_admin_result *res);
int admin_encode_certs(admin_call *c, const ca_admin_result *res);
int admin_encode_cert(admin_call *c, const ca_admin_result *res);
int admin_encode_cert_revoke(admin_call *c, const ca_admin_result *res);
int admin_encode_identity_revoke(admin_call *c, const ca_admin_result *res);
int admin_encode_audit(admin_call *c, const ca_admin_result *res);
int admin_encode_eks(admin_call *c, const ca_admin_result *res);
int admin_encode_ek(admin_call *c, const ca_admin_result *res);
int admin_encode_ek_import(admin_call *c, const ca_admin_result *res);
int admin_encode_ek_remove(admin_call *c, const ca_admin_result *res);
int admin_encode_bindings(admin_call *c, const ca_admin_result *res);
int admin_encode_release(admin_call *c, const ca_admin_result *res);

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
