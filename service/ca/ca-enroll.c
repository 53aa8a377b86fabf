/* Enrollment, for every front door (CA_OP_ENROLL): by a bootstrap token
 * (presented, or proven by CMP's MAC), by a TPM's attestation without
 * one, or (EST, CMP) by a client certificate a profile accepts.  What
 * only EST and CMP add -- a label must be the credential's profile, an
 * EST client asks again for what it asked before, proof-of-possession
 * linking -- is decided here too, once. */
#include <string.h>

#include <openssl/rand.h>

#include "ca-enroll.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"
#include "x509-util.h"

static int random_request_id(char ret[33]) {
        unsigned char raw[16];

        if (RAND_bytes(raw, sizeof(raw)) != 1)
                return hwid_fail(HWID_E_CRYPTO, "no randomness for a request id");
        for (int i = 0; i < 16; i++)
                snprintf(ret + 2 * i, 3, "%02x", raw[i]);
        return 0;
}

/* Manual approval: record the request (consuming a token use) and tell
 * the device to come back. */
static int enroll_pending(ca_service *ca, const ca_auth *a, const csr_info *csr, const policy_issue *iss,
                          const char *cn, int64_t now, ca_result *res) {
        store_request rq = { 0 };
        char reason[64];
        size_t der_len;
        uint64_t t0;
        int r;

        if ((r = random_request_id(rq.id)) < 0)
                return r;
        rq.identity = (char *) cn;
        rq.profile = a->token.profile;
        snprintf(rq.token_id, sizeof(rq.token_id), "%s", a->token.id);
        snprintf(rq.spki_sha256, sizeof(rq.spki_sha256), "%s", csr_info_facts(csr)->spki_sha256);
        rq.csr_der = (uint8_t *) csr_info_der(csr, &der_len);
        rq.csr_der_len = der_len;
        rq.status = REQUEST_PENDING;
        rq.created_at = rq.updated_at = now;
        /* The evidence is used up now: what it proved waits with the request. */
        ca_attestation_record(iss->attestation, &rq.attestation);
        t0 = histogram_now_ns();
        r = store_request_create(ca->store, &rq, now);
        metrics_commit_observe(ca->metrics, COMMIT_REQUEST, histogram_now_ns() - t0);
        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_pending, 1);
        snprintf(reason, sizeof(reason), "request " REQUEST_ID_FMT, rq.id);
        ca_audit(ca, a->actor, "enroll", cn, "pending", reason, a->token.id);
        ca_result_pending(ca, res, &rq);
        return 0;
}

/* Who enrolled, for the log: "token abc", "EK allowlist entry x", "certificate 1f.. of x". */
static const char *enroller(const ca_auth *a, char *out, size_t size) {
        if (a->who.role == ROLE_EK)
                snprintf(out, size, "EK allowlist entry %s", a->ek.identity);
        else if (a->who.role == ROLE_TOKEN)
                snprintf(out, size, "token %s", a->token.id);
        else
                snprintf(out, size, "certificate %s of %s, profile %s", a->cert.serial, a->cert.identity,
                         a->cert.profile);
        return out;
}

/* A profile that allows re-enrollment, or a device coming back by
 * attestation in place of the certificate that superseded its own. */
static bool replaces_live(const ca_auth *a, const policy_issue *iss) {
        return iss->profile->allow_reenroll || a->reenroll_replace;
}

static int enroll_issue(ca_service *ca, const ca_auth *a, const csr_info *csr, const policy_issue *iss,
                        const char *cn, int64_t now, ca_result *res) {
        _cleanup_free_ uint8_t *der = NULL;
        _cleanup_free_ char *serial = NULL;
        char reason[600], by[200];
        store_audit audit = { .at = now, .actor = a->actor, .action = a->reenroll[0] ? "reenroll" : "enroll",
                              .target = cn, .outcome = "allow", .reason = reason,
                              .token_id = a->who.role == ROLE_TOKEN ? a->token.id : NULL };
        store_issue how = { .consume_token_id = a->who.role == ROLE_TOKEN ? a->token.id : NULL,
                            .replace_live = replaces_live(a, iss), .audit = &audit };
        size_t len = 0;
        int r;

        enroller(a, by, sizeof(by));
        if (a->reenroll[0])
                snprintf(reason, sizeof(reason), "issued under profile %s: %s", iss->profile->name, a->reenroll);
        else if (policy_role_has_certificate(a->who.role))
                snprintf(reason, sizeof(reason), "issued under profile %s by %s", iss->profile->name, by);
        else
                snprintf(reason, sizeof(reason), "issued under profile %s", iss->profile->name);
        r = ca_issue(ca, csr, iss, &how, cn, now, &der, &len, &serial);
        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_issued, 1);
        if (a->reenroll[0])
                log_info("issued %s to %s, coming back: %s", serial, cn, a->reenroll);
        else
                log_info("issued %s to %s (%s)%s", serial, cn, by, iss->attestation ? ", TPM attested" : "");
        return ca_result_cert(res, CA_ISSUED, &der, len, &serial);
}

/* The commit of an enrollment failed with r.  When an identical request
 * committed between our checks and our commit, spending the token's last
 * use (401) or taking the name (409), its answer is ours: retries sent
 * at once get what the first one got, never "used up". */
static int enroll_lost_race(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                            const char *cn, int64_t now, ca_result *res, int r) {
        char why[512];
        bool done = false;
        int r2;

        if (r != -HWID_E_TOKEN_INVALID && r != -HWID_E_CONFLICT)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        if ((r2 = ca_answer_same_enrollment(ca, a, iss, csr, cn, now, res, &done)) < 0)
                return r2;
        return done ? 0 : hwid_fail((hwid_err) -r, "%s", why);
}

/* Cheap early answers (the store enforces both again at commit): the
 * identity's live certificate (live: its identity as stored, "" for none,
 * as ca_replay_enrollment() found it; a profile that allows re-enrollment
 * replaces it), and DNS names another identity holds. */
static int check_names_free(ca_service *ca, const ca_auth *a, const policy_issue *iss, const char *cn,
                            const char *live, int64_t now) {
        int r;

        /* Identities ignore ASCII case: the store found it however spelt. */
        if (live[0] && !replaces_live(a, iss))
                return strcmp(live, cn) == 0
                       ? hwid_fail(HWID_E_CONFLICT, "%s already has a live certificate; revoke it first", cn)
                       : hwid_fail(HWID_E_CONFLICT, "%s already has a live certificate (as %s: names differing only "
                                   "in case are one identity); revoke it first", cn, live);
        for (size_t i = 0; i < iss->n_sans; i++) {
                _cleanup_free_ char *name = NULL, *owner = NULL;

                if (iss->sans[i].type != SAN_DNS)
                        continue;
                if (!(name = strndup(iss->sans[i].value, iss->sans[i].len)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
                r = store_reads_dns_owner(ca->store, a->reads, name, now, &owner);
                if (r == -HWID_E_NOT_FOUND || (r == 0 && policy_identity_equal(owner, strlen(owner), cn)))
                        continue;
                if (r < 0)
                        return r;
                return hwid_fail(HWID_E_CONFLICT, "DNS name %s already belongs to the live certificate of %s", name,
                                 owner);
        }
        return 0;
}

/* The CSR (parsed once already), and what its attestation (if any) proved. */
static int enroll_request(ca_service *ca, const ca_request *req, const ca_auth *a, const ca_csr *c,
                          const csr_info **ret_csr, ca_attested *ret_att) {
        int r;

        if ((r = ca_csr_get(c, ret_csr)) < 0 ||
            (r = store_reads_key_blocked(ca->store, a->reads, csr_info_facts(*ret_csr)->spki_sha256)) < 0)
                return r;
        if (req->evidence && (r = ca_attest_verify(ca, req->evidence, *ret_csr, req->now, ret_att)) < 0)
                return r;
        return 0;
}

/* What the policy decides for the request, as who (a) asks: *ret_iss. */
static int enroll_decide(ca_service *ca, const ca_request *req, ca_auth *a, const csr_info *csr,
                         const ca_attested *att, const char *cn, policy_issue *ret_iss) {
        policy_csr facts = *csr_info_facts(csr);
        policy_decision d;
        int r;

        facts.attestation = ca_attested_fact(att);
        if (req->by_certificate)
                facts.requested_profile = req->label;
        policy_check_enroll(ca->cfg->policy, &a->who, &facts, ret_iss, &d);
        if ((r = ca_decision(ca, a, "enroll", cn, &d)) < 0)
                return r;
        if (!ret_iss->profile)
                return hwid_fail(HWID_E_FORBIDDEN, "no profile to issue %s under", cn);
        return 0;
}

static int do_enroll(ca_service *ca, const ca_request *req, ca_csr *c, ca_auth *a, ca_result *res) {
        bool by_ek = !req->by_certificate && !req->token_id && !req->authorization && req->evidence, done = false;
        const csr_info *csr = NULL;
        ca_attested att = { 0 };
        policy_issue iss;
        char cn[CA_IDENTITY_BUF], live[CA_IDENTITY_BUF] = "";
        int r;

        if (req->refused)
                return ca_door_refusal(req);
        ca_csr_parse(req, c);
        ca_reads_fetch(ca, req, c->csr, (req->by_certificate ? CA_READS_PEER : CA_READS_TOKEN) | CA_READS_NAMES, a);
        if (!by_ek && ((r = ca_enroll_authorize(ca, req, c, NULL, NULL, a, res, &done)) < 0 || done))
                return r;
        if ((r = enroll_request(ca, req, a, c, &csr, &att)) < 0)
                return r;
        ca_request_cn(csr, cn, sizeof(cn));
        if (by_ek && (r = ca_enroll_authorize(ca, req, c, &att, cn, a, res, &done)) < 0)
                return r;
        if ((r = enroll_decide(ca, req, a, csr, &att, cn, &iss)) < 0)
                return r;
        /* Where a second certificate would be refused (409), the same
         * enrollment gets its own back; a profile that allows
         * re-enrollment issues anew, as for any re-enrollment. */
        if (!iss.profile->allow_reenroll &&
            ((r = ca_replay_enrollment(ca, a, &iss, csr, cn, req->now, res, &done, live)) < 0 || done))
                return r;
        /* A name bound to a TPM, before anything is signed or held. */
        if ((r = ca_binding_check(ca, a, cn, iss.attestation)) < 0 ||
            (r = check_names_free(ca, a, &iss, cn, live, req->now)) < 0)
                return r;
        r = iss.manual_approval ? enroll_pending(ca, a, csr, &iss, cn, req->now, res)
                                : enroll_issue(ca, a, csr, &iss, cn, req->now, res);
        return r < 0 ? enroll_lost_race(ca, a, &iss, csr, cn, req->now, res, r) : 0;
}

void ca_enroll(ca_service *ca, const ca_request *req, ca_result *res) {
        ca_auth a = { 0 };
        ca_csr c = { 0 };
        int r;

        if (req->token_id)
                snprintf(a.actor, sizeof(a.actor), "token:%s", req->token_id);
        else
                snprintf(a.actor, sizeof(a.actor), "anonymous");
        r = do_enroll(ca, req, &c, &a, res);
        if (r < 0)
                ca_fail(ca, &a, "enroll", NULL, res, r);
        ca_auth_clear(&a);
        ca_csr_clear(&c);
}
