/* The admin operations on requests (list, approve, deny), certificates
 * (list, show, revoke one or every one of an identity) and the audit log
 * (read): `hwid request|cert|audit list`'s, remotely or on the CA host,
 * with four eyes (policy_check_request_decide()). */
#include <string.h>

#include "ca-admin-internal.h"
#include "error.h"
#include "x509-util.h"

#define IDENTITY_MAX 255
#define AUDIT_READ_MAX 100000

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

/* What the caller may do with rq, by the very rule that decides it: so
 * that an operator sees which requests are theirs to decide before
 * trying. */
static void may_of(const admin_call *c, const decider *who, const store_request *rq, ca_may *ret) {
        policy_pending pd = pending_of(rq);
        policy_decision approve = { 0 }, deny = { 0 };

        *ret = (ca_may) { 0 };
        if (rq->status != REQUEST_PENDING)
                return;
        policy_check_request_decide(c->ca->cfg->policy, &who->who, ACTION_REQUEST_APPROVE, &pd, &approve);
        policy_check_request_decide(c->ca->cfg->policy, &who->who, ACTION_REQUEST_DENY, &pd, &deny);
        ret->approve = approve.verdict == VERDICT_ALLOW;
        ret->deny = deny.verdict == VERDICT_ALLOW;
        if (!ret->approve)
                snprintf(ret->approve_refused, sizeof(ret->approve_refused), "%s", approve.reason);
}

/* Only the requests in the caller's scope (policy_request_in_scope()),
 * kept at the front of rq: a scoped approver is not shown another
 * team's. */
static int keep_in_scope(admin_call *c, const decider *who, store_request *rq, size_t n) {
        ca_admin_result *out = c->out;
        size_t kept = 0;

        if (!(out->may = calloc(n ? n : 1, sizeof(*out->may))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < n; i++) {
                policy_pending pd = pending_of(&rq[i]);

                if (!policy_request_in_scope(&c->auth.who, &pd)) {
                        store_request_clear(&rq[i]);
                        continue;
                }
                may_of(c, who, &rq[i], &out->may[kept]);
                if (kept != i) {
                        rq[kept] = rq[i];
                        rq[i] = (store_request) { 0 };
                }
                kept++;
        }
        out->n_requests = kept;
        return 0;
}

int admin_request_list(admin_call *c) {
        store_request *rq = NULL;
        size_t n = 0;
        decider who;
        int r;

        if ((r = decider_load(c, &who)) < 0)
                return r;
        if ((r = store_request_list(c->ca->store, !c->in->all, &rq, &n)) < 0) {
                decider_clear(&who);
                return r;
        }
        r = keep_in_scope(c, &who, rq, n);
        decider_clear(&who);
        if (r < 0) {
                store_request_list_free(rq, n);
                return r;
        }
        c->out->requests = rq; /* filtered in place */
        if (c->out->n_requests < n)
                snprintf(c->note, sizeof(c->note), "%zu requests (%zu outside the approver's scope not shown)",
                         c->out->n_requests, n - c->out->n_requests);
        else
                snprintf(c->note, sizeof(c->note), "%zu requests", n);
        return 0;
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

        if ((r = store_request_get(c->ca->store, c->in->arg, &rq)) < 0 || (r = decider_load(c, &who)) < 0)
                return r;
        pd = pending_of(&rq);
        policy_check_request_decide(c->ca->cfg->policy, &who.who,
                                    approve ? ACTION_REQUEST_APPROVE : ACTION_REQUEST_DENY, &pd, &d);
        decider_clear(&who);
        return ca_decision(c->ca, &c->auth, approve ? "request.approve" : "request.deny", c->target, &d);
}

static int decide(admin_call *c, bool approve) {
        const char *reason = approve ? NULL : c->in->reason;
        int r;

        if ((r = may_decide(c, approve)) < 0)
                return r;
        if ((r = store_request_decide(c->ca->store, c->in->arg, approve, reason, c->now)) < 0)
                return admin_state_error(r);
        if (reason)
                snprintf(c->note, sizeof(c->note), "%s", reason);
        return 0;
}

int admin_request_approve(admin_call *c) {
        return decide(c, true);
}

int admin_request_deny(admin_call *c) {
        return decide(c, false);
}

/* ---------- certificates ---------- */

int admin_cert_list(admin_call *c) {
        int r = store_cert_list(c->ca->store, c->in->identity, &c->out->certs, &c->out->n_certs);

        if (r < 0)
                return r;
        if (c->in->identity)
                snprintf(c->target, sizeof(c->target), "%s", c->in->identity);
        snprintf(c->note, sizeof(c->note), "%zu certificates", c->out->n_certs);
        return 0;
}

int admin_cert_show(admin_call *c) {
        char serial[130];
        int r;

        normalize_serial(c->in->arg, serial, sizeof(serial));
        snprintf(c->target, sizeof(c->target), "%s", serial);
        r = store_cert_get(c->ca->store, serial, &c->out->cert);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial);
        return r;
}

int admin_cert_revoke(admin_call *c) {
        ca_admin_result *out = c->out;
        store_audit a = { .at = c->now, .actor = c->auth.actor, .action = "cert.revoke", .outcome = "allow",
                          .target = out->serial, .reason = c->in->reason };
        int r;

        normalize_serial(c->in->arg, out->serial, sizeof(out->serial));
        snprintf(c->target, sizeof(c->target), "%s", out->serial);
        r = store_cert_revoke(c->ca->store, out->serial, c->in->reason_code, c->now, &a);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", out->serial);
        if (r < 0)
                return admin_state_error(r);
        c->audited = true; /* in the revocation's own transaction */
        return 0;
}

/* Every unexpired certificate of the identity (the live one and the
 * generations renewals superseded), as `hwid cert revoke --identity`. */
int admin_identity_revoke(admin_call *c) {
        store_audit a = { .at = c->now, .actor = c->auth.actor, .action = "cert.revoke", .outcome = "allow",
                          .target = c->in->arg, .reason = c->in->reason };
        int r = store_cert_revoke_identity(c->ca->store, c->in->arg, c->in->reason_code, c->now, &a, &c->out->count);

        if (r < 0)
                return r;
        c->audited = true;
        return 0;
}

/* ---------- audit ---------- */

typedef struct audit_counter {
        const ca_admin_args *in;
        size_t n;
} audit_counter;

static int count_record(const store_audit *a, void *userdata) {
        audit_counter *k = userdata;
        int r = k->in->audit_fn ? k->in->audit_fn(a, k->in->audit_userdata) : 0;

        k->n += r >= 0;
        return r;
}

/* The last `limit` records, oldest first (0: as many as AUDIT_READ_MAX,
 * which bounds the answer), handed to the door one by one. */
int admin_audit_read(admin_call *c) {
        audit_counter k = { .in = c->in };
        size_t limit = c->in->limit && c->in->limit <= AUDIT_READ_MAX ? c->in->limit : AUDIT_READ_MAX;
        int r = store_audit_foreach(c->ca->store, limit, count_record, &k);

        if (r < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "%zu records", k.n);
        return 0;
}
