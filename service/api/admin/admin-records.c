/* The admin API's requests (list, approve, deny), certificates (list,
 * show, revoke one or every one of an identity) and audit log (read):
 * the same store calls the CA host's `hwid request|cert|audit` make. */
#include <string.h>

#include "admin-internal.h"
#include "error.h"
#include "x509-util.h"

#define REASON_MAX 256
#define IDENTITY_MAX 255
#define AUDIT_READ_MAX 100000

static const char *const no_keys[] = { NULL };

/* ---------- requests ---------- */

static policy_pending pending_of(const store_request *rq) {
        return (policy_pending) { .identity = rq->identity, .profile = rq->profile, .spki_sha256 = rq->spki_sha256 };
}

/* Who decides held requests: the caller, with the keys of every
 * certificate its identity was ever issued (four eyes: a key it rotated
 * away is still its own, policy_check_request_decide()). */
typedef struct decider {
        policy_requester who;
        store_cert *certs;
        size_t n_certs;
        const char **keys; /* NULL-terminated, into certs */
} decider;

static void decider_clear(decider *d) {
        store_cert_list_free(d->certs, d->n_certs);
        free(d->keys);
}

static int decider_load(const admin_call *c, decider *ret) {
        decider d = { .who = c->auth.who };
        int r;

        if (policy_role_has_certificate(d.who.role) && d.who.identity) {
                if ((r = store_cert_list(c->ca->store, d.who.identity, &d.certs, &d.n_certs)) < 0)
                        return r;
                if (!(d.keys = calloc(d.n_certs + 1, sizeof(*d.keys)))) {
                        decider_clear(&d);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
                for (size_t i = 0; i < d.n_certs; i++)
                        d.keys[i] = d.certs[i].spki_sha256;
                d.who.identity_spki_sha256 = d.keys;
        }
        *ret = d;
        return 0;
}

/* What the caller may do with rq, by the very rule that decides it
 * (policy_check_request_decide()): "may_approve", "may_deny", and why
 * not approve ("approve_refused"), so that an operator sees which
 * requests are theirs to decide before trying. */
static int add_may(const admin_call *c, const decider *who, const store_request *rq, json_object *o) {
        bool pending = rq->status == REQUEST_PENDING;
        policy_pending pd = pending_of(rq);
        policy_decision approve = { 0 }, deny = { 0 };

        if (pending) {
                policy_check_request_decide(c->ca->cfg->policy, &who->who, ACTION_REQUEST_APPROVE, &pd, &approve);
                policy_check_request_decide(c->ca->cfg->policy, &who->who, ACTION_REQUEST_DENY, &pd, &deny);
        }
        if (json_object_object_add(o, "may_approve", json_object_new_boolean(approve.verdict == VERDICT_ALLOW)) < 0 ||
            json_object_object_add(o, "may_deny", json_object_new_boolean(deny.verdict == VERDICT_ALLOW)) < 0)
                return -1;
        if (pending && approve.verdict != VERDICT_ALLOW)
                json_set_str(o, "approve_refused", approve.reason);
        return 0;
}

/* A scoped approver is shown the requests within its scope only
 * (policy_request_in_scope()): the others are another team's. */
int admin_request_list(admin_call *c) {
        _cleanup_free_ char *all = NULL;
        json_object *answer, *list = NULL, *o;
        store_request *rq = NULL;
        size_t n = 0, shown = 0;
        decider who;
        int r;

        if ((r = admin_query(c, "all", 8, &all)) < 0)
                return r;
        if (all && strcmp(all, "true") != 0 && strcmp(all, "false") != 0)
                return hwid_fail(HWID_E_INVALID, "query parameter all must be true or false");
        if ((r = decider_load(c, &who)) < 0)
                return r;
        if ((r = store_request_list(c->ca->store, !(all && strcmp(all, "true") == 0), &rq, &n)) < 0) {
                decider_clear(&who);
                return r;
        }
        answer = admin_list_object("requests", &list);
        for (size_t i = 0; answer && r >= 0 && i < n; i++) {
                policy_pending pd = pending_of(&rq[i]);

                if (!policy_request_in_scope(&c->auth.who, &pd))
                        continue;
                o = admin_json_request(&rq[i]);
                if (!o || add_may(c, &who, &rq[i], o) < 0 || json_object_array_add(list, o) < 0) {
                        json_object_put(o);
                        r = -1;
                }
                shown++;
        }
        store_request_list_free(rq, n);
        decider_clear(&who);
        if (!answer || r < 0) {
                json_object_put(answer);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (shown < n)
                snprintf(c->note, sizeof(c->note), "%zu requests (%zu outside the approver's scope not shown)", shown,
                         n - shown);
        else
                snprintf(c->note, sizeof(c->note), "%zu requests", n);
        return admin_respond(c, 200, answer);
}

/* Not pending is the request's state, not an identity's live certificate. */
static int state_error(int r) {
        char why[512];

        if (r != -HWID_E_CONFLICT)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        return hwid_fail(HWID_E_WRONG_STATE, "%s", why);
}

/* Four eyes and an approver's scope (policy_check_request_decide()): who
 * may decide this request, by its key, identity and profile; a refusal
 * is audited. */
static int may_decide(admin_call *c, bool approve) {
        _cleanup_(store_request_clear) store_request rq = { 0 };
        policy_pending pd;
        policy_decision d;
        decider who;
        int r;

        if ((r = store_request_get(c->ca->store, c->arg, &rq)) < 0 || (r = decider_load(c, &who)) < 0)
                return r;
        pd = pending_of(&rq);
        policy_check_request_decide(c->ca->cfg->policy, &who.who,
                                    approve ? ACTION_REQUEST_APPROVE : ACTION_REQUEST_DENY, &pd, &d);
        decider_clear(&who);
        return ca_decision(c->ca, &c->auth, approve ? "request.approve" : "request.deny", c->target, &d);
}

static int decide(admin_call *c, bool approve) {
        static const char *const keys[] = { "reason", NULL };
        const char *reason = NULL;
        json_object *answer;
        int r;

        if ((r = admin_body_keys(c, approve ? no_keys : keys)) < 0 ||
            (r = admin_body_str(c, "reason", REASON_MAX, &reason)) < 0 || (r = may_decide(c, approve)) < 0)
                return r;
        r = store_request_decide(c->ca->store, c->arg, approve, reason, c->now);
        if (r < 0)
                return state_error(r);
        if (reason)
                snprintf(c->note, sizeof(c->note), "%s", reason);
        answer = json_object_new_object();
        json_set_str(answer, "id", c->arg);
        json_set_str(answer, "status", approve ? "approved" : "denied");
        return admin_respond(c, 200, answer);
}

int admin_request_approve(admin_call *c) {
        return decide(c, true);
}

int admin_request_deny(admin_call *c) {
        return decide(c, false);
}

/* ---------- certificates ---------- */

int admin_cert_list(admin_call *c) {
        _cleanup_free_ char *identity = NULL;
        json_object *answer, *list = NULL;
        store_cert *certs = NULL;
        size_t n = 0;
        int r;

        if ((r = admin_query(c, "identity", IDENTITY_MAX, &identity)) < 0 ||
            (r = store_cert_list(c->ca->store, identity, &certs, &n)) < 0)
                return r;
        answer = admin_list_object("certificates", &list);
        for (size_t i = 0; answer && i < n; i++)
                if (json_object_array_add(list, admin_json_cert(&certs[i], false)) < 0)
                        r = -1;
        store_cert_list_free(certs, n);
        if (!answer || r < 0) {
                json_object_put(answer);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (identity)
                snprintf(c->target, sizeof(c->target), "%s", identity);
        snprintf(c->note, sizeof(c->note), "%zu certificates", n);
        return admin_respond(c, 200, answer);
}

int admin_cert_show(admin_call *c) {
        store_cert cert = { 0 };
        char serial[130];
        json_object *o;
        int r;

        normalize_serial(c->arg, serial, sizeof(serial));
        snprintf(c->target, sizeof(c->target), "%s", serial);
        r = store_cert_get(c->ca->store, serial, &cert);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial);
        if (r < 0)
                return r;
        o = admin_json_cert(&cert, true);
        store_cert_clear(&cert);
        return o ? admin_respond(c, 200, o) : hwid_fail(HWID_E_NOMEM, NULL);
}

/* The body of a revocation: {"reason": NAME}, default unspecified. */
static int revocation_reason(admin_call *c, int *ret_code, const char **ret_name) {
        static const char *const keys[] = { "reason", NULL };
        const char *name = "unspecified";
        int r;

        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "reason", 64, &name)) < 0 ||
            (r = revocation_reason_parse(name, ret_code)) < 0)
                return r;
        *ret_name = name;
        return 0;
}

int admin_cert_revoke(admin_call *c) {
        store_audit a = { .at = c->now, .actor = c->auth.actor, .action = "cert.revoke", .outcome = "allow" };
        char serial[130];
        json_object *answer;
        int code, r;

        normalize_serial(c->arg, serial, sizeof(serial));
        snprintf(c->target, sizeof(c->target), "%s", serial);
        if ((r = revocation_reason(c, &code, &a.reason)) < 0)
                return r;
        a.target = serial;
        r = store_cert_revoke(c->ca->store, serial, code, c->now, &a);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial);
        if (r < 0)
                return state_error(r);
        c->audited = true; /* in the revocation's own transaction */
        answer = json_object_new_object();
        json_set_str(answer, "serial", serial);
        json_set_str(answer, "reason", a.reason);
        json_object_object_add(answer, "revoked", json_object_new_int(1));
        return admin_respond(c, 200, answer);
}

/* Every unexpired certificate of the identity (the live one and the
 * generations renewals superseded), as `hwid cert revoke --identity`. */
int admin_identity_revoke(admin_call *c) {
        store_audit a = { .at = c->now, .actor = c->auth.actor, .action = "cert.revoke", .outcome = "allow",
                          .target = c->arg };
        json_object *answer;
        size_t n = 0;
        int code, r;

        if (strlen(c->arg) > IDENTITY_MAX)
                return hwid_fail(HWID_E_INVALID, "an identity has at most %d bytes", IDENTITY_MAX);
        if ((r = revocation_reason(c, &code, &a.reason)) < 0 ||
            (r = store_cert_revoke_identity(c->ca->store, c->arg, code, c->now, &a, &n)) < 0)
                return r;
        c->audited = true;
        answer = json_object_new_object();
        json_set_str(answer, "identity", c->arg);
        json_set_str(answer, "reason", a.reason);
        json_object_object_add(answer, "revoked", json_object_new_int64((int64_t) n));
        return admin_respond(c, 200, answer);
}

/* ---------- audit ---------- */

static int add_record(const store_audit *a, void *userdata) {
        json_object *o = admin_json_audit(a);

        if (!o || json_object_array_add(userdata, o) < 0) {
                json_object_put(o);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* The last `limit` records, oldest first (default 50; 0: as many as
 * AUDIT_READ_MAX, which bounds the answer). */
int admin_audit_read(admin_call *c) {
        _cleanup_free_ char *limit_s = NULL;
        json_object *answer, *list = NULL;
        long long limit = 50;
        char *end;
        int r;

        if ((r = admin_query(c, "limit", 12, &limit_s)) < 0)
                return r;
        if (limit_s) {
                limit = strtoll(limit_s, &end, 10);
                if (*end || limit < 0 || limit > AUDIT_READ_MAX)
                        return hwid_fail(HWID_E_INVALID, "limit must be 0 to %d (0: up to %d)", AUDIT_READ_MAX,
                                         AUDIT_READ_MAX);
        }
        if (!(answer = admin_list_object("records", &list)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = store_audit_foreach(c->ca->store, limit ? (size_t) limit : AUDIT_READ_MAX, add_record, list);
        if (r < 0) {
                json_object_put(answer);
                return r;
        }
        snprintf(c->note, sizeof(c->note), "%zu records", json_object_array_length(list));
        return admin_respond(c, 200, answer);
}
