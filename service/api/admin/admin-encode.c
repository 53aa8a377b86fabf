/* The admin API's answers (admin-internal.h): the core's result as the
 * records' JSON (admin-json.c).  A token's secret is in the answer to its
 * creation and nowhere else: the JSON strings that held it are wiped once
 * the answer is made (admin_respond() wipes the serialization). */
#include <string.h>

#include "admin-internal.h"
#include "error.h"

typedef json_object *(*row_fn)(const void *row, const admin_call *c);

/* { key: [each of the n rows of size bytes at rows, as fn makes it] }. */
static int respond_list(admin_call *c, const char *key, const void *rows, size_t n, size_t size, row_fn fn) {
        json_object *answer = NULL, *list = NULL;
        int r = 0;

        if (!(answer = admin_list_object(key, &list)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; r >= 0 && i < n; i++)
                if (json_object_array_add(list, fn((const uint8_t *) rows + i * size, c)) < 0)
                        r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r < 0) {
                json_object_put(answer);
                return r;
        }
        return admin_respond(c, 200, answer);
}

static json_object *token_row(const void *row, const admin_call *c) {
        return admin_json_token(row, c->now);
}

int admin_encode_tokens(admin_call *c, const ca_admin_result *res) {
        return respond_list(c, "tokens", res->tokens, res->n_tokens, sizeof(*res->tokens), token_row);
}

/* Each token made, with its secret ("token"). */
int admin_encode_token_create(admin_call *c, const ca_admin_result *res) {
        json_object *answer = NULL, *list = NULL, *o, *tok;
        json_object **secrets = calloc(res->n_tokens ? res->n_tokens : 1, sizeof(*secrets));
        int r = secrets && (answer = admin_list_object("tokens", &list)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);

        for (size_t i = 0; r >= 0 && i < res->n_tokens; i++) {
                o = NULL;
                if (!(tok = json_object_new_string(res->secrets[i])) ||
                    !(o = admin_json_token(&res->tokens[i], c->now)) || json_object_array_add(list, o) < 0) {
                        json_object_put(o);
                        json_wipe_string(tok);
                        json_object_put(tok);
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                json_object_object_add(o, "token", json_object_get(tok));
                secrets[i] = tok;
        }
        if (r >= 0)
                r = admin_respond(c, 201, TAKE_PTR(answer));
        json_object_put(answer);
        for (size_t i = 0; secrets && i < res->n_tokens; i++) {
                json_wipe_string(secrets[i]);
                json_object_put(secrets[i]);
        }
        free(secrets);
        return r;
}

int admin_encode_token_revoke(admin_call *c, const ca_admin_result *res) {
        json_object *answer = json_object_new_object();

        (void) res;
        json_set_str(answer, "id", c->args.arg);
        json_object_object_add(answer, "revoked", json_object_new_boolean(true));
        return admin_respond(c, 200, answer);
}

/* A request as listed: and what the caller may do with it. */
static json_object *request_row(const ca_admin_result *res, size_t i) {
        json_object *o = admin_json_request(&res->requests[i]);
        const ca_may *may = &res->may[i];

        if (!o || json_object_object_add(o, "may_approve", json_object_new_boolean(may->approve)) < 0 ||
            json_object_object_add(o, "may_deny", json_object_new_boolean(may->deny)) < 0) {
                json_object_put(o);
                return NULL;
        }
        if (may->approve_refused[0])
                json_set_str(o, "approve_refused", may->approve_refused);
        return o;
}

int admin_encode_requests(admin_call *c, const ca_admin_result *res) {
        json_object *answer = NULL, *list = NULL, *o;

        if (!(answer = admin_list_object("requests", &list)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < res->n_requests; i++)
                if (!(o = request_row(res, i)) || json_object_array_add(list, o) < 0) {
                        json_object_put(o);
                        json_object_put(answer);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
        return admin_respond(c, 200, answer);
}

static int decided(admin_call *c, const char *status) {
        json_object *answer = json_object_new_object();

        json_set_str(answer, "id", c->args.arg);
        json_set_str(answer, "status", status);
        return admin_respond(c, 200, answer);
}

int admin_encode_approve(admin_call *c, const ca_admin_result *res) {
        (void) res;
        return decided(c, "approved");
}

int admin_encode_deny(admin_call *c, const ca_admin_result *res) {
        (void) res;
        return decided(c, "denied");
}

static json_object *cert_row(const void *row, const admin_call *c) {
        (void) c;
        return admin_json_cert(row, false);
}

int admin_encode_certs(admin_call *c, const ca_admin_result *res) {
        return respond_list(c, "certificates", res->certs, res->n_certs, sizeof(*res->certs), cert_row);
}

int admin_encode_cert(admin_call *c, const ca_admin_result *res) {
        json_object *o = admin_json_cert(&res->cert, true);

        return o ? admin_respond(c, 200, o) : hwid_fail(HWID_E_NOMEM, NULL);
}

int admin_encode_cert_revoke(admin_call *c, const ca_admin_result *res) {
        json_object *answer = json_object_new_object();

        json_set_str(answer, "serial", res->serial);
        json_set_str(answer, "reason", c->args.reason);
        json_object_object_add(answer, "revoked", json_object_new_int(1));
        return admin_respond(c, 200, answer);
}

int admin_encode_identity_revoke(admin_call *c, const ca_admin_result *res) {
        json_object *answer = json_object_new_object();

        json_set_str(answer, "identity", c->args.arg);
        json_set_str(answer, "reason", c->args.reason);
        json_object_object_add(answer, "revoked", json_object_new_int64((int64_t) res->count));
        return admin_respond(c, 200, answer);
}

/* The records were added one by one as the core read them
 * (admin_parse_audit_read()). */
int admin_encode_audit(admin_call *c, const ca_admin_result *res) {
        (void) res;
        return admin_respond(c, 200, TAKE_PTR(c->answer));
}

static json_object *ek_row(const void *row, const admin_call *c) {
        (void) c;
        return admin_json_ek(row);
}

int admin_encode_eks(admin_call *c, const ca_admin_result *res) {
        return respond_list(c, "entries", res->eks, res->n_eks, sizeof(*res->eks), ek_row);
}

int admin_encode_ek(admin_call *c, const ca_admin_result *res) {
        json_object *answer = admin_json_ek(&res->ek);

        return answer ? admin_respond(c, 201, answer) : hwid_fail(HWID_E_NOMEM, NULL);
}

int admin_encode_ek_import(admin_call *c, const ca_admin_result *res) {
        json_object *answer = json_object_new_object();

        if (!answer)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(answer, "added", json_object_new_int64((int64_t) res->count));
        return admin_respond(c, 201, answer);
}

int admin_encode_ek_remove(admin_call *c, const ca_admin_result *res) {
        json_object *answer = json_object_new_object();

        if (!answer)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(answer, "removed", res->key);
        return admin_respond(c, 200, answer);
}

static json_object *binding_row(const void *row, const admin_call *c) {
        (void) c;
        return admin_json_binding(row);
}

int admin_encode_bindings(admin_call *c, const ca_admin_result *res) {
        return respond_list(c, "identities", res->bindings, res->n_bindings, sizeof(*res->bindings), binding_row);
}

int admin_encode_release(admin_call *c, const ca_admin_result *res) {
        json_object *answer = json_object_new_object();

        if (!answer)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(answer, "released", admin_json_binding(&res->binding));
        return admin_respond(c, 200, answer);
}
