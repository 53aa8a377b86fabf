/* The admin operations (ca-admin.h), for the holders of certificates hwid
 * issued under operator profiles (role admin, approver, provisioner or
 * auditor, as recorded with the certificate).
 *
 * Per call, one way: authenticate the client certificate against our
 * records -> the authorizer chain decides the action for the recorded
 * role (policy/roles.c) -> what the door could not parse is refused ->
 * the operation -> an audit record naming the actor, whatever the
 * outcome.  And the bootstrap tokens: create (admin; a provisioner within
 * its scope), list, revoke.  A token's secret is in the answer to its
 * creation and nowhere else: it is derived with hwidd's token key (the
 * store keeps a nonce, token.h), the audit record and the log name its
 * id, and every copy the core made is wiped (ca_result_clear()). */
#include <string.h>

#include "ca-admin-internal.h"
#include "error.h"
#include "secret.h"
#include "token.h"
#include "x509-util.h"

/* reads: changes nothing (the CA host's administrator reads unaudited). */
static const struct {
        policy_action action;
        admin_fn fn;
        bool reads;
} ops[] = {
        [CA_ADMIN_TOKEN_LIST] = { ACTION_TOKEN_LIST, admin_token_list, true },
        [CA_ADMIN_TOKEN_CREATE] = { ACTION_TOKEN_CREATE, admin_token_create, false },
        [CA_ADMIN_TOKEN_REVOKE] = { ACTION_TOKEN_REVOKE, admin_token_revoke, false },
        [CA_ADMIN_REQUEST_LIST] = { ACTION_REQUEST_LIST, admin_request_list, true },
        [CA_ADMIN_REQUEST_APPROVE] = { ACTION_REQUEST_APPROVE, admin_request_approve, false },
        [CA_ADMIN_REQUEST_DENY] = { ACTION_REQUEST_DENY, admin_request_deny, false },
        [CA_ADMIN_CERT_LIST] = { ACTION_CERT_LIST, admin_cert_list, true },
        [CA_ADMIN_CERT_SHOW] = { ACTION_CERT_SHOW, admin_cert_show, true },
        [CA_ADMIN_CERT_REVOKE] = { ACTION_CERT_REVOKE, admin_cert_revoke, false },
        [CA_ADMIN_IDENTITY_REVOKE] = { ACTION_CERT_REVOKE, admin_identity_revoke, false },
        [CA_ADMIN_AUDIT_READ] = { ACTION_AUDIT_READ, admin_audit_read, true },
        [CA_ADMIN_EK_LIST] = { ACTION_EK_LIST, admin_ek_list, true },
        [CA_ADMIN_EK_ADD] = { ACTION_EK_ADD, admin_ek_add, false },
        [CA_ADMIN_EK_IMPORT] = { ACTION_EK_IMPORT, admin_ek_import, false },
        [CA_ADMIN_EK_REMOVE] = { ACTION_EK_REMOVE, admin_ek_remove, false },
        [CA_ADMIN_IDENTITY_LIST] = { ACTION_IDENTITY_LIST, admin_identity_list, true },
        [CA_ADMIN_IDENTITY_RELEASE] = { ACTION_IDENTITY_RELEASE, admin_identity_release, false },
};

/* What the audit record names: the parameter as sent, but one line of
 * printable text whatever the path held, and of a request id (a poll
 * capability) only its prefix. */
static void initial_target(admin_call *c) {
        char id[16];

        if (c->in->arg && (c->in->op == CA_ADMIN_REQUEST_APPROVE || c->in->op == CA_ADMIN_REQUEST_DENY)) {
                snprintf(id, sizeof(id), REQUEST_ID_FMT, c->in->arg);
                admin_set_target(c, id);
        } else {
                admin_set_target(c, c->in->arg);
        }
}

/* An allowed call's record says why it was allowed unless the operation
 * has something more telling. */
static int authorize(admin_call *c, policy_action action) {
        policy_decision d;

        policy_authorize(c->ca->cfg->policy, &c->auth.who, action, c->in->arg, &d);
        snprintf(c->note, sizeof(c->note), "%s", d.reason);
        return ca_decision(c->ca, &c->auth, policy_action_name(action), c->target[0] ? c->target : NULL, &d);
}

/* A serial the door could not parse the rest of names the certificate
 * as the store spells it. */
static void serial_target(admin_call *c) {
        char serial[130];

        if (c->in->op != CA_ADMIN_CERT_SHOW && c->in->op != CA_ADMIN_CERT_REVOKE)
                return;
        normalize_serial(c->in->arg ? c->in->arg : "", serial, sizeof(serial));
        snprintf(c->target, sizeof(c->target), "%s", serial);
}

/* Who asks: the client certificate, or the CA host's administrator (a
 * service of ca_service_new_host() only), who may do anything. */
static int who_asks(ca_service *ca, const ca_request *req, int64_t now, ca_auth *ret) {
        if (!req->host_admin)
                return ca_auth_peer(ca, &req->peer, now, ret);
        if (!ca->host)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "only the CA host's own commands ask as its administrator");
        ret->who = (policy_requester) { .role = ROLE_ADMIN };
        snprintf(ret->actor, sizeof(ret->actor), "%s", req->host_admin);
        return 0;
}

void ca_admin(ca_service *ca, const ca_request *req, ca_result *res) {
        const ca_admin_args *in = req->admin;
        admin_call c = { .ca = ca, .in = in, .out = &res->admin, .now = req->now };
        bool known = in && (size_t) in->op < ELEMENTSOF(ops);
        policy_action action = known ? ops[in->op].action : ACTION_ADMIN;
        const char *name = policy_action_name(action);
        int r = known ? 0 : hwid_fail(HWID_E_INTERNAL, "no such admin operation");

        if (r >= 0)
                initial_target(&c);
        if (r >= 0 && (r = who_asks(ca, req, c.now, &c.auth)) >= 0)
                r = authorize(&c, action);
        if (r >= 0 && req->refused) {
                serial_target(&c);
                r = ca_door_refusal(req);
        }
        if (r >= 0)
                r = ops[in->op].fn(&c);
        /* The CA host's administrator reads its own store unaudited. */
        if (known && ops[in->op].reads && req->host_admin && ca->host)
                c.audited = c.auth.audited = true;
        if (r < 0)
                ca_fail(ca, &c.auth, name, c.target[0] ? c.target : NULL, res, r);
        else if (!c.audited)
                ca_audit(ca, c.auth.actor, name, c.target[0] ? c.target : NULL, "allow", c.note[0] ? c.note : NULL,
                         NULL);
        ca_auth_clear(&c.auth);
}

/* ---------- tokens ---------- */

/* Tokens per request: a station asks for more in several requests. */
#define TOKEN_BATCH_MAX 1000

int admin_token_list(admin_call *c) {
        int r = store_token_list(c->ca->store, &c->out->tokens, &c->out->n_tokens);

        if (r < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "%zu tokens", c->out->n_tokens);
        return 0;
}

/* A new token, derived with hwidd's token key: its row (its nonce, no
 * secret; the strings are the call's), and "<id>.<secret>" in *ret_full
 * (a secret: wiped with the result). */
static int make_token(const admin_call *c, store_token *row, char **ret_full) {
        const ca_admin_args *t = c->in;
        int r = token_new(c->ca->token_key, row, ret_full);

        row->profile = (char *) t->profile;
        row->name_pattern = (char *) t->name_pattern;
        row->description = (char *) t->description;
        row->created_at = c->now;
        row->expires_at = c->now + t->ttl;
        row->uses_total = row->uses_left = (int) t->uses;
        return r;
}

/* Each stored token is audited by its id. */
static void audit_created(admin_call *c) {
        const ca_admin_args *t = c->in;
        char note[400];

        snprintf(note, sizeof(note), "profile %s, name pattern %s, %lld use%s, valid for %llds", t->profile,
                 t->name_pattern ? t->name_pattern : "(any)", (long long) t->uses, t->uses == 1 ? "" : "s",
                 (long long) t->ttl);
        for (size_t i = 0; i < c->out->n_tokens; i++)
                ca_audit(c->ca, c->auth.actor, "token.create", c->out->tokens[i].id, "allow", note, NULL);
}

/* All the tokens asked for are stored in one transaction, or none: a
 * failure leaves no token whose secret nobody was given. */
int admin_token_create(admin_call *c) {
        const ca_admin_args *t = c->in;
        size_t count = t->count > 0 && t->count <= TOKEN_BATCH_MAX ? (size_t) t->count : 1, n = 0;
        ca_admin_result *out = c->out;
        policy_decision d;
        int r;

        snprintf(c->target, sizeof(c->target), "%s", t->profile);
        policy_check_token_create(c->ca->cfg->policy, &c->auth.who, t->profile, t->name_pattern, &d);
        if ((r = ca_decision(c->ca, &c->auth, "token.create", c->target, &d)) < 0)
                return r;
        out->tokens_made = true;
        out->n_tokens = count; /* every row is wiped, one may hold a nonce made before its token failed */
        if (!(out->tokens = calloc(count, sizeof(*out->tokens))) ||
            !(out->secrets = calloc(count, sizeof(*out->secrets))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < count; n += r >= 0)
                r = make_token(c, &out->tokens[n], &out->secrets[n]);
        if (r >= 0)
                r = store_token_insert(c->ca->store, out->tokens, n);
        if (r < 0)
                return r;
        /* Stored: each is audited by its id, whatever happens next. */
        c->audited = true;
        audit_created(c);
        return 0;
}

int admin_token_revoke(admin_call *c) {
        return store_token_revoke(c->ca->store, c->in->arg);
}
