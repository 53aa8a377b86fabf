/* A request held for approval, asked about again (CA_OP_POLL: GET
 * /v1/requests/ID, CMP pollReq; and an EST client sending its request
 * again): pending, denied, or its certificate -- signed by whichever poll
 * comes first once it is approved. */
#include <string.h>

#include "ca-enroll.h"
#include "error.h"
#include "log.h"

/* An approved request is signed by whichever poll comes first. */
static int issue_approved(ca_service *ca, const store_request *rq, int64_t now, ca_result *res) {
        _cleanup_(csr_info_freep) csr_info *csr = NULL;
        _cleanup_free_ uint8_t *der = NULL;
        _cleanup_free_ char *serial = NULL;
        ca_auth a = { 0 };
        policy_attestation att;
        policy_csr facts;
        policy_issue iss;
        policy_decision d;
        char reason[64];
        size_t len = 0;
        int r;

        if ((r = csr_info_parse(rq->csr_der, rq->csr_der_len, &csr)) < 0)
                return r;
        snprintf(reason, sizeof(reason), "request " REQUEST_ID_FMT, rq->id);
        facts = *csr_info_facts(csr);
        facts.attestation = ca_attestation_fact(&rq->attestation, &att);
        a.who = (policy_requester) { .role = ROLE_TOKEN, .token_id = rq->token_id, .token_profile = rq->profile };
        if (store_token_get(ca->store, rq->token_id, &a.token) == 0)
                a.who.token_name_pattern = a.token.name_pattern;
        snprintf(a.actor, sizeof(a.actor), "token:%s", rq->token_id);
        policy_check_enroll(ca->cfg->policy, &a.who, &facts, &iss, &d);
        r = ca_decision(ca, &a, "issue-approved", rq->identity, &d);
        if (r >= 0 && !iss.profile)
                r = hwid_fail(HWID_E_FORBIDDEN, "profile %s no longer exists", rq->profile);
        if (r >= 0) {
                store_audit audit = { .at = now, .actor = a.actor, .action = "issue-approved",
                                      .target = rq->identity, .outcome = "allow", .reason = reason,
                                      .token_id = rq->token_id };
                store_issue how = { .request_id = rq->id, .replace_live = iss.profile->allow_reenroll,
                                    .audit = &audit };
                r = ca_issue(ca, csr, &iss, &how, rq->identity, now, &der, &len, &serial);
        }
        ca_auth_clear(&a);
        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_issued, 1);
        log_info("issued %s to %s (approved %s)", serial, rq->identity, reason);
        return ca_result_cert(res, CA_ISSUED, &der, len, &serial);
}

static int answer_issued(ca_service *ca, const store_request *rq, ca_result *res) {
        store_cert c = { 0 };
        int r;

        if ((r = store_cert_get(ca->store, rq->serial, &c)) >= 0)
                r = ca_result_cert(res, CA_AGAIN, &c.der, c.der_len, &c.serial);
        store_cert_clear(&c);
        return r;
}

static bool valid_request_id(const char *id) {
        if (!id || strlen(id) != 32)
                return false;
        for (const char *p = id; *p; p++)
                if (!strchr("0123456789abcdef", *p))
                        return false;
        return true;
}

static int do_poll(ca_service *ca, const char *id, int64_t now, ca_result *res) {
        store_request rq = { 0 };
        int r;

        if (!valid_request_id(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such request");
        if ((r = store_request_get(ca->store, id, &rq)) < 0)
                return r == -HWID_E_NOT_FOUND ? hwid_fail(HWID_E_NOT_FOUND, "no such request") : r;
        switch (rq.status) {
        case REQUEST_PENDING:
                ca_result_pending(ca, res, &rq);
                break;
        case REQUEST_DENIED:
                r = hwid_fail(HWID_E_FORBIDDEN, "request " REQUEST_ID_FMT " was denied by an administrator%s%s", id,
                              rq.reason ? ": " : "", rq.reason ? rq.reason : "");
                break;
        case REQUEST_ISSUED:
                r = answer_issued(ca, &rq, res);
                break;
        case REQUEST_APPROVED:
                r = issue_approved(ca, &rq, now, res);
                /* Another poll may have issued it a moment ago. */
                if (r == -HWID_E_CONFLICT) {
                        store_request_clear(&rq);
                        if (store_request_get(ca->store, id, &rq) == 0 && rq.status == REQUEST_ISSUED)
                                r = answer_issued(ca, &rq, res);
                }
                break;
        }
        store_request_clear(&rq);
        return r;
}

void ca_poll(ca_service *ca, const char *id, int64_t now, ca_result *res) {
        ca_auth a = { .who = { .role = ROLE_ANONYMOUS } };
        policy_decision d;
        int r;

        /* Anyone holding the (unguessable) request id may poll it. */
        snprintf(a.actor, sizeof(a.actor), "anonymous");
        policy_authorize(ca->cfg->policy, &a.who, ACTION_POLL_REQUEST, NULL, &d);
        r = ca_decision(ca, &a, "poll", NULL, &d);
        if (r >= 0)
                r = do_poll(ca, id, now, res);
        if (r < 0)
                ca_refuse(ca, res, r);
}

int ca_answer_request_of(ca_service *ca, const char *token_id, const csr_info *csr, int64_t now, ca_result *res,
                         bool *ret_done) {
        _cleanup_(store_request_clear) store_request rq = { 0 };
        const policy_attr *cn = policy_csr_cn(csr_info_facts(csr));
        int r;

        *ret_done = false;
        r = store_request_find(ca->store, token_id, csr_info_facts(csr)->spki_sha256, &rq);
        if (r == -HWID_E_NOT_FOUND)
                return 0;
        if (r < 0)
                return r;
        if (!cn || !policy_identity_equal(cn->value, cn->len, rq.identity))
                return 0;
        ca_poll(ca, rq.id, now, res);
        *ret_done = true;
        return 0;
}
