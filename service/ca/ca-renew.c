/* Renewal, for every front door (CA_OP_RENEW: POST /v1/renew, EST
 * simplereenroll, CMP cr and kur by signature): the certificate presented
 * authenticates, the policy decides, the new certificate supersedes it. */
#include <string.h>

#include "ca-enroll.h"
#include "error.h"
#include "log.h"

/* The identity's live certificate again (CA_AGAIN), if it is for csr's
 * key: *ret_done false (nothing answered) otherwise. */
static int renewal_again(ca_service *ca, const csr_info *csr, int64_t now, ca_auth *a, ca_result *res,
                         bool *ret_done) {
        store_cert live = { 0 };
        int r = store_cert_live_for(ca->store, a->cert.identity, now, &live);

        *ret_done = false;
        if (r < 0 || strcmp(live.spki_sha256, csr_info_facts(csr)->spki_sha256) != 0) {
                store_cert_clear(&live);
                return r >= 0 || r == -HWID_E_NOT_FOUND ? 0 : r;
        }
        r = ca_result_cert(res, CA_AGAIN, &live.der, live.der_len, &live.serial);
        if (r >= 0) {
                ca_audit(ca, a->actor, "renew-replay", a->cert.identity, "allow", res->serial, NULL);
                *ret_done = true;
        }
        store_cert_clear(&live);
        return r;
}

/* A device whose renewal answer was lost comes back with the certificate
 * that renewal superseded.  If its CSR carries the key of the identity's
 * live certificate -- proof it holds both keys -- it gets that
 * certificate again: nothing hwidd issued is lost to a dropped
 * connection. */
static int replay_renewal(ca_service *ca, const ca_csr *c, int64_t now, ca_auth *a, ca_result *res) {
        const csr_info *csr;
        bool done = false;
        int r;

        if ((r = ca_csr_get(c, &csr)) < 0 || (r = renewal_again(ca, csr, now, a, res, &done)) < 0 || done)
                return r;
        return hwid_fail(HWID_E_REVOKED, "certificate %s of %s was replaced by one for a key this request does not "
                         "carry: bootstrap again with a new token", a->cert.serial, a->cert.identity);
}

/* The renewal's commit failed with r.  When an identical renewal (the
 * same certificate, the same new key) committed first, its certificate
 * is this one's answer too; one for another key leaves r (409). */
static int renew_lost_race(ca_service *ca, const csr_info *csr, int64_t now, ca_auth *a, ca_result *res, int r) {
        char why[512];
        bool done = false;
        int r2;

        if (r != -HWID_E_CONFLICT)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        if ((r2 = renewal_again(ca, csr, now, a, res, &done)) < 0)
                return r2;
        return done ? 0 : hwid_fail((hwid_err) -r, "%s", why);
}

/* Who renews: the node (or admin) whose certificate is presented, with
 * the attestation recorded with that certificate. */
static int renew_authenticate(ca_service *ca, const ca_request *req, ca_auth *a) {
        int r = ca_auth_peer(ca, &req->peer, req->now, a);

        if (r < 0)
                return r;
        /* Authentication is not policy: audit-only mode never lets an
         * unauthenticated renewal through. */
        if (a->who.role == ROLE_ANONYMOUS)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "renewal needs mutual TLS with the current certificate");
        a->who.cert_attestation = ca_attestation_fact(&a->cert.attestation, &a->cert_attestation);
        return 0;
}

/* EST: a label must be the profile of the certificate presented, and that
 * profile's proof-of-possession linking holds. */
static int est_front(ca_service *ca, const ca_request *req, const ca_csr *c, const ca_auth *a, ca_result *res) {
        if (req->door != CA_DOOR_EST)
                return 0;
        if (req->label && strcmp(a->cert.profile, req->label) != 0) {
                res->about_label = true;
                return hwid_fail(HWID_E_FORBIDDEN, "certificate %s is of profile %s, not of EST label %s",
                                 a->cert.serial, a->cert.profile, req->label);
        }
        return ca_pop_check(req, c, policy_profile_find(ca->cfg->policy, a->cert.profile));
}

/* Signs the renewal policy allowed, superseding the current certificate. */
static int renew_issue(ca_service *ca, const ca_auth *a, const csr_info *csr, const policy_issue *iss,
                       const char *cn, int64_t now, ca_result *res) {
        _cleanup_free_ uint8_t *der = NULL;
        _cleanup_free_ char *serial = NULL;
        store_audit audit = { .at = now, .actor = a->actor, .action = "renew", .target = cn, .outcome = "allow",
                              .reason = a->cert.serial };
        store_issue how = { .supersedes_serial = a->cert.serial, .audit = &audit };
        size_t len = 0;
        int r = ca_issue(ca, csr, iss, &how, cn, now, &der, &len, &serial);

        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_renewed, 1);
        log_info("renewed %s: %s replaces %s%s", cn, serial, a->cert.serial, iss->attestation ? " (TPM attested)" : "");
        return ca_result_cert(res, CA_ISSUED, &der, len, &serial);
}

/* The renewal policy's decision for csr (attested as att): *ret_iss; on
 * -HWID_E_TOO_EARLY, res says when the window opens. */
static int renew_decide(ca_service *ca, const ca_request *req, ca_auth *a, const csr_info *csr,
                        const ca_attested *att, const char *cn, ca_result *res, policy_issue *ret_iss) {
        policy_csr facts = *csr_info_facts(csr);
        policy_decision d;
        int r;

        facts.attestation = ca_attested_fact(att);
        policy_check_renew(ca->cfg->policy, &a->who, &facts, req->now, ret_iss, &d);
        if ((r = ca_decision(ca, a, "renew", cn, &d)) < 0) {
                /* Too early says until when, for the device to wait instead of guessing. */
                if (r == -HWID_E_TOO_EARLY && d.retry_at > req->now)
                        res->retry_at = d.retry_at;
                return r;
        }
        if (!ret_iss->profile)
                return hwid_fail(HWID_E_FORBIDDEN, "no profile to renew %s under", cn);
        return 0;
}

static int do_renew(ca_service *ca, const ca_request *req, ca_csr *c, ca_auth *a, ca_result *res) {
        const csr_info *csr = NULL;
        ca_attested att = { 0 };
        policy_issue iss;
        policy_decision d;
        char cn[CA_IDENTITY_BUF];
        int r;

        if (req->refused)
                return ca_door_refusal(req);
        ca_csr_parse(req, c);
        ca_reads_fetch(ca, req, c->csr, CA_READS_PEER, a);
        r = renew_authenticate(ca, req, a);
        if (r == -HWID_E_SUPERSEDED) {
                a->who.role = ROLE_NODE;
                snprintf(a->actor, sizeof(a->actor), "%s:%s", a->cert.role[0] ? a->cert.role : "node",
                         a->cert.identity);
                return replay_renewal(ca, c, req->now, a, res);
        }
        if (r < 0 || (r = est_front(ca, req, c, a, res)) < 0 || (r = ca_csr_get(c, &csr)) < 0 ||
            (r = store_reads_key_blocked(ca->store, a->reads, csr_info_facts(csr)->spki_sha256)) < 0)
                return r;
        ca_request_cn(csr, cn, sizeof(cn));
        policy_authorize(ca->cfg->policy, &a->who, ACTION_RENEW, cn, &d);
        if ((r = ca_decision(ca, a, "renew", cn, &d)) < 0 ||
            (req->evidence && (r = ca_attest_verify(ca, req->evidence, csr, req->now, &att)) < 0) ||
            (r = renew_decide(ca, req, a, csr, &att, cn, res, &iss)) < 0)
                return r;
        r = renew_issue(ca, a, csr, &iss, cn, req->now, res);
        return r < 0 ? renew_lost_race(ca, csr, req->now, a, res, r) : 0;
}

void ca_renew(ca_service *ca, const ca_request *req, ca_result *res) {
        ca_auth a = { 0 };
        ca_csr c = { 0 };
        int r;

        snprintf(a.actor, sizeof(a.actor), "anonymous");
        r = do_renew(ca, req, &c, &a, res);
        if (r < 0)
                ca_fail(ca, &a, "renew", NULL, res, r);
        ca_auth_clear(&a);
        ca_csr_clear(&c);
}
