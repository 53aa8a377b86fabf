/* Enrollment with a bootstrap token, polling of pending requests, and
 * renewal over mutual TLS. */
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

#include "attest-api.h"
#include "api.h"
#include "error.h"
#include "identity-binding.h"
#include "log.h"
#include "ossl-util.h"
#include "x509-util.h"

/* A CN as request_cn() copies it, and a stored identity equal to one. */
#define IDENTITY_BUF 128

static void respond_pending(ca_service *ca, http_response *resp, const store_request *rq) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "status", json_object_new_string("pending"));
        json_object_object_add(o, "request_id", json_object_new_string(rq->id));
        json_object_object_add(o, "identity", json_object_new_string(rq->identity));
        json_object_object_add(o, "spki_sha256", json_object_new_string(rq->spki_sha256));
        resp->retry_after = ca->cfg->retry_after;
        snprintf(resp->location, sizeof(resp->location), "/v1/requests/%s", rq->id);
        http_respond_json(resp, 202, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
}

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
                          const char *cn, int64_t now, http_response *resp) {
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
        respond_pending(ca, resp, &rq);
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
                        const char *cn, int64_t now, http_response *resp) {
        _cleanup_free_ char *pem = NULL, *serial = NULL;
        char reason[600], by[200];
        store_audit audit = { .at = now, .actor = a->actor, .action = a->reenroll[0] ? "reenroll" : "enroll",
                              .target = cn, .outcome = "allow", .reason = reason,
                              .token_id = a->who.role == ROLE_TOKEN ? a->token.id : NULL };
        store_issue how = { .consume_token_id = a->who.role == ROLE_TOKEN ? a->token.id : NULL,
                            .replace_live = replaces_live(a, iss), .audit = &audit };
        int r;

        enroller(a, by, sizeof(by));
        if (a->reenroll[0])
                snprintf(reason, sizeof(reason), "issued under profile %s: %s", iss->profile->name, a->reenroll);
        else if (policy_role_has_certificate(a->who.role))
                snprintf(reason, sizeof(reason), "issued under profile %s by %s", iss->profile->name, by);
        else
                snprintf(reason, sizeof(reason), "issued under profile %s", iss->profile->name);
        r = ca_issue(ca, csr, iss, &how, cn, now, &pem, &serial);
        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_issued, 1);
        if (a->reenroll[0])
                log_info("issued %s to %s, coming back: %s", serial, cn, a->reenroll);
        else
                log_info("issued %s to %s (%s)%s", serial, cn, by, iss->attestation ? ", TPM attested" : "");
        http_respond_pem(resp, 201, pem);
        return 0;
}

/* The CN the request is for; policy has already insisted on exactly one. */
static const char *request_cn(const csr_info *csr, char *out, size_t n) {
        const policy_attr *cn = policy_csr_cn(csr_info_facts(csr));

        snprintf(out, n, "%.*s", cn ? (int) cn->len : 0, cn ? cn->value : "");
        return out;
}

/* Whether live was enrolled by the same requester: the same token, or
 * (a TPM on the EK allowlist, iss its verified attestation) the same TPM,
 * or (by certificate) the holder policy gave that very name. */
static bool same_enroller(const ca_auth *a, const policy_issue *iss, const store_cert *live) {
        if (policy_role_has_certificate(a->who.role))
                return iss != NULL; /* est.enroll_by_certificate.name ties the name to the holder */
        if (a->who.role == ROLE_EK)
                return iss && iss->attestation && store_attested(&live->attestation) &&
                       strcmp(live->attestation.ek_pub_sha256, iss->attestation->ek_pub_sha256) == 0;
        return live->token_id[0] && strcmp(live->token_id, a->token.id) == 0;
}

#define REPLAY_AUDIT_SLOTS 256
#define REPLAY_AUDIT_INTERVAL 3600

/* Whether a replay that got certificate serial is audited: once per
 * certificate and REPLAY_AUDIT_INTERVAL, per process (a device retrying
 * in a loop, or anyone replaying a token's enrollment, adds no record
 * each time); the rest are counted (hwid_enroll_replays_total).  A slot
 * per serial's hash: two serials on one slot are audited more often,
 * never less. */
static bool replay_audit_due(ca_service *ca, const char *serial, int64_t now) {
        static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
        static struct {
                char serial[48];
                int64_t at;
        } seen[REPLAY_AUDIT_SLOTS];
        uint32_t h = 2166136261u; /* FNV-1a */
        bool due;

        for (const char *c = serial; *c; c++)
                h = (h ^ (uint8_t) *c) * 16777619u;
        h %= REPLAY_AUDIT_SLOTS;
        pthread_mutex_lock(&lock);
        due = strcmp(seen[h].serial, serial) != 0 || now - seen[h].at >= REPLAY_AUDIT_INTERVAL || now < seen[h].at;
        if (due) {
                snprintf(seen[h].serial, sizeof(seen[h].serial), "%s", serial);
                seen[h].at = now;
        }
        pthread_mutex_unlock(&lock);
        metrics_event_count(ca->metrics, due ? EVENT_REPLAY_AUDITED : EVENT_REPLAY_UNAUDITED);
        return due;
}

/* The same enrollment again — the same token (or TPM), the same key (the
 * CSR proves it is held), the same name, within the token's lifetime —
 * gets the certificate it was issued (200), as a renewal whose answer was
 * lost does: a join cut off after the CA committed never burns its token
 * for nothing.  *ret_done is false when this is not that enrollment;
 * then ret_live (if not NULL) gets the identity of the name's live
 * certificate as stored, "" if it has none: the lookup made once. */
static int replay_enrollment(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                             const char *cn, int64_t now, http_response *resp, bool *ret_done,
                             char ret_live[IDENTITY_BUF]) {
        _cleanup_free_ char *pem = NULL;
        store_cert live = { 0 };
        int r = store_reads_cert_live_for(ca->store, a->reads, cn, now, &live);

        *ret_done = false;
        if (ret_live)
                ret_live[0] = '\0';
        if (r == -HWID_E_NOT_FOUND)
                return 0;
        if (r >= 0 && same_enroller(a, iss, &live) &&
            strcmp(live.spki_sha256, csr_info_facts(csr)->spki_sha256) == 0 &&
            (r = cert_der_to_pem(live.der, live.der_len, &pem)) >= 0) {
                if (replay_audit_due(ca, live.serial, now))
                        ca_audit(ca, a->actor, "enroll-replay", cn, "allow", live.serial, a->who.token_id);
                http_respond_pem(resp, 200, pem);
                *ret_done = true;
        }
        if (r >= 0 && !*ret_done && ret_live)
                snprintf(ret_live, IDENTITY_BUF, "%s", live.identity);
        store_cert_clear(&live);
        return r < 0 ? r : 0;
}

int ca_answer_request_of(ca_service *ca, const char *token_id, const csr_info *csr, http_response *resp,
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
        ca_poll(ca, rq.id, resp);
        *ret_done = true;
        return 0;
}

/* The same enrollment (the same token or TPM, key and name) made before,
 * or a moment ago by an identical request that committed first: its
 * answer is this one's too — the live certificate it got (200), or the
 * request it is held as (that request's state, as a poll answers it). */
static int answer_same_enrollment(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                                  const char *cn, int64_t now, http_response *resp, bool *ret_done) {
        int r = replay_enrollment(ca, a, iss, csr, cn, now, resp, ret_done, NULL);

        /* A token used up has no role, but its secret matched. */
        if (r < 0 || *ret_done || !a->token_genuine)
                return r;
        return ca_answer_request_of(ca, a->token.id, csr, resp, ret_done);
}

/* A genuine token whose uses are spent may still replay its enrollment;
 * anything else gets the token's refusal (refused). */
static int enroll_spent(ca_service *ca, const ca_body *body, int64_t now, ca_auth *a, int refused,
                        http_response *resp) {
        _cleanup_(csr_info_freep) csr_info *csr = NULL;
        char why[512], cn[128];
        bool done = false;
        int r;

        snprintf(why, sizeof(why), "%s", hwid_strerror(refused));
        if (csr_info_parse(body->csr, body->csr_len, &csr) >= 0 &&
            (r = answer_same_enrollment(ca, a, NULL, csr, request_cn(csr, cn, sizeof(cn)), now, resp, &done)) < 0)
                return r;
        return done ? 0 : hwid_fail((hwid_err) -refused, "%s", why);
}

/* The commit of an enrollment failed with r.  When an identical request
 * committed between our checks and our commit, spending the token's last
 * use (401) or taking the name (409), its answer is ours: retries sent
 * at once get what the first one got, never "used up". */
static int enroll_lost_race(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                            const char *cn, int64_t now, http_response *resp, int r) {
        char why[512];
        bool done = false;
        int r2;

        if (r != -HWID_E_TOKEN_INVALID && r != -HWID_E_CONFLICT)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        if ((r2 = answer_same_enrollment(ca, a, iss, csr, cn, now, resp, &done)) < 0)
                return r2;
        return done ? 0 : hwid_fail((hwid_err) -r, "%s", why);
}

/* Cheap early answers (the store enforces both again at commit): the
 * identity's live certificate (live: its identity as stored, "" for none,
 * as replay_enrollment() found it; a profile that allows re-enrollment
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

/* EST simpleenroll by the client certificate: a live one this CA issued
 * and recorded, as for renewal (ca_auth_peer()).  One that was renewed
 * away is no credential here: there is no enrollment to replay for it. */
static int auth_by_certificate(ca_service *ca, const http_request *req, int64_t now, ca_auth *a) {
        int r = ca_auth_peer(ca, req, now, a);
        char why[256];

        if (r == -HWID_E_SUPERSEDED) {
                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
                return hwid_fail(HWID_E_UNAUTHENTICATED, "%s: enroll with the current one", why);
        }
        if (r < 0)
                return r;
        if (a->who.role == ROLE_ANONYMOUS)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "enrollment needs a bootstrap token (HTTP Basic) or a client "
                                 "certificate this CA issued");
        return 0;
}

/* Authentication and the right to enroll.  A bootstrap token comes
 * first, before anything else is looked at; without one, only a TPM on
 * the EK allowlist, once its evidence is verified (by_ek), or (EST) the
 * client certificate (by_cert). */
static int enroll_authorize(ca_service *ca, const http_request *req, int64_t now, const ca_attested *by_ek,
                            const char *cn, bool by_cert, const char *token_id, ca_auth *a) {
        policy_decision d;
        int r = by_ek      ? ca_auth_ek(ca, by_ek, cn, now, a)
                : by_cert  ? auth_by_certificate(ca, req, now, a)
                : token_id ? ca_auth_token_id(ca, token_id, now, a)
                           : ca_auth_token(ca, req, now, a);

        if (r < 0)
                return r;
        policy_authorize(ca->cfg->policy, &a->who, ACTION_ENROLL, NULL, &d);
        return ca_decision(ca, a, "enroll", NULL, &d);
}

/* The CSR (*csr: parsed already, or NULL), and what its attestation (if
 * any) proved. */
static int enroll_request(ca_service *ca, const ca_auth *a, const ca_body *body, int64_t now, csr_info **csr,
                          ca_attested *ret_att) {
        int r;

        if ((!*csr && (r = csr_info_parse(body->csr, body->csr_len, csr)) < 0) ||
            (r = store_reads_key_blocked(ca->store, a->reads, csr_info_facts(*csr)->spki_sha256)) < 0)
                return r;
        if (body->has_evidence && (r = ca_attest_verify(ca, body, *csr, now, ret_att)) < 0)
                return r;
        return 0;
}

/* How the requester is authenticated, when not by the Authorization
 * header's token or a TPM's evidence. */
typedef struct enroll_by {
        bool cert;             /* the client certificate (EST) ... */
        const char *label;     /* ... for this profile (NULL: the one that accepts it) */
        const char *token_id;  /* a token whose secret the caller verified (CMP's MAC) */
} enroll_by;

static int do_enroll(ca_service *ca, const http_request *req, const enroll_by *via, int64_t now, ca_auth *a,
                     http_response *resp) {
        bool by_cert = via->cert;
        _cleanup_(csr_info_freep) csr_info *csr = NULL;
        _cleanup_(ca_body_clear) ca_body body = { 0 };
        ca_attested att = { 0 };
        policy_csr facts;
        policy_issue iss;
        policy_decision d;
        bool by_ek, replayed = false;
        char cn[IDENTITY_BUF], live[IDENTITY_BUF] = "";
        int r;

        if ((r = ca_body_parse(req, &body)) < 0)
                return r;
        by_ek = !by_cert && !via->token_id && !req->authorization && body.has_evidence;
        ca_reads_fetch(ca, req, body.csr, body.csr_len, (by_cert ? CA_READS_PEER : CA_READS_TOKEN) | CA_READS_NAMES,
                       now, a, &csr);
        if (!by_ek && (r = enroll_authorize(ca, req, now, NULL, NULL, by_cert, via->token_id, a)) < 0)
                return a->token_spent ? enroll_spent(ca, &body, now, a, r, resp) : r;
        if ((r = enroll_request(ca, a, &body, now, &csr, &att)) < 0)
                return r;
        request_cn(csr, cn, sizeof(cn));
        if (by_ek && (r = enroll_authorize(ca, req, now, &att, cn, false, NULL, a)) < 0)
                return r;
        facts = *csr_info_facts(csr);
        facts.attestation = ca_attested_fact(&att);
        if (by_cert)
                facts.requested_profile = via->label;
        policy_check_enroll(ca->cfg->policy, &a->who, &facts, &iss, &d);
        if ((r = ca_decision(ca, a, "enroll", cn, &d)) < 0)
                return r;
        if (!iss.profile)
                return hwid_fail(HWID_E_FORBIDDEN, "no profile to issue %s under", cn);
        /* Where a second certificate would be refused (409), the same
         * enrollment gets its own back; a profile that allows
         * re-enrollment issues anew, as for any re-enrollment. */
        if (!iss.profile->allow_reenroll &&
            ((r = replay_enrollment(ca, a, &iss, csr, cn, now, resp, &replayed, live)) < 0 || replayed))
                return r;
        /* A name bound to a TPM, before anything is signed or held. */
        if ((r = ca_binding_check(ca, a, cn, iss.attestation)) < 0 ||
            (r = check_names_free(ca, a, &iss, cn, live, now)) < 0)
                return r;
        r = iss.manual_approval ? enroll_pending(ca, a, csr, &iss, cn, now, resp)
                                : enroll_issue(ca, a, csr, &iss, cn, now, resp);
        return r < 0 ? enroll_lost_race(ca, a, &iss, csr, cn, now, resp, r) : 0;
}

/* One enrollment through do_enroll(), by the means in via; a refusal is
 * audited as actor's and answered. */
static void enroll_via(ca_service *ca, const http_request *req, const char *actor, const enroll_by *via,
                       http_response *resp) {
        ca_auth a = { 0 };
        int r;

        snprintf(a.actor, sizeof(a.actor), "%s", actor);
        r = do_enroll(ca, req, via, (int64_t) time(NULL), &a, resp);
        if (r < 0)
                ca_fail_request(ca, &a, "enroll", NULL, resp, r);
        ca_auth_clear(&a);
}

void ca_enroll(ca_service *ca, const http_request *req, http_response *resp) {
        enroll_via(ca, req, "anonymous", &(enroll_by) { 0 }, resp);
}

void ca_enroll_token(ca_service *ca, const http_request *req, const char *token_id, http_response *resp) {
        char actor[96];

        snprintf(actor, sizeof(actor), "token:%s", token_id);
        enroll_via(ca, req, actor, &(enroll_by) { .token_id = token_id }, resp);
}

void ca_enroll_by_certificate(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        enroll_via(ca, req, "anonymous", &(enroll_by) { .cert = true, .label = label }, resp);
}

/* An approved request is signed by whichever poll comes first. */
static int issue_approved(ca_service *ca, const store_request *rq, int64_t now, http_response *resp) {
        _cleanup_(csr_info_freep) csr_info *csr = NULL;
        _cleanup_free_ char *pem = NULL, *serial = NULL;
        ca_auth a = { 0 };
        policy_attestation att;
        policy_csr facts;
        policy_issue iss;
        policy_decision d;
        char reason[64];
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
                r = ca_issue(ca, csr, &iss, &how, rq->identity, now, &pem, &serial);
        }
        ca_auth_clear(&a);
        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_issued, 1);
        log_info("issued %s to %s (approved %s)", serial, rq->identity, reason);
        http_respond_pem(resp, 201, pem);
        return 0;
}

static int respond_issued(ca_service *ca, const store_request *rq, http_response *resp) {
        _cleanup_free_ char *pem = NULL;
        store_cert c = { 0 };
        int r;

        if ((r = store_cert_get(ca->store, rq->serial, &c)) >= 0)
                r = cert_der_to_pem(c.der, c.der_len, &pem);
        store_cert_clear(&c);
        if (r < 0)
                return r;
        http_respond_pem(resp, 200, pem);
        return 0;
}

static bool valid_request_id(const char *id) {
        if (strlen(id) != 32)
                return false;
        for (const char *p = id; *p; p++)
                if (!strchr("0123456789abcdef", *p))
                        return false;
        return true;
}

static int do_poll(ca_service *ca, const char *id, int64_t now, http_response *resp) {
        store_request rq = { 0 };
        int r;

        if (!valid_request_id(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such request");
        if ((r = store_request_get(ca->store, id, &rq)) < 0)
                return r == -HWID_E_NOT_FOUND ? hwid_fail(HWID_E_NOT_FOUND, "no such request") : r;
        switch (rq.status) {
        case REQUEST_PENDING:
                respond_pending(ca, resp, &rq);
                break;
        case REQUEST_DENIED:
                r = hwid_fail(HWID_E_FORBIDDEN, "request " REQUEST_ID_FMT " was denied by an administrator%s%s", id,
                              rq.reason ? ": " : "", rq.reason ? rq.reason : "");
                break;
        case REQUEST_ISSUED:
                r = respond_issued(ca, &rq, resp);
                break;
        case REQUEST_APPROVED:
                r = issue_approved(ca, &rq, now, resp);
                /* Another poll may have issued it a moment ago. */
                if (r == -HWID_E_CONFLICT) {
                        store_request_clear(&rq);
                        if (store_request_get(ca->store, id, &rq) == 0 && rq.status == REQUEST_ISSUED)
                                r = respond_issued(ca, &rq, resp);
                }
                break;
        }
        store_request_clear(&rq);
        return r;
}

void ca_poll(ca_service *ca, const char *id, http_response *resp) {
        ca_auth a = { .who = { .role = ROLE_ANONYMOUS } };
        policy_decision d;
        int r;

        /* Anyone holding the (unguessable) request id may poll it. */
        snprintf(a.actor, sizeof(a.actor), "anonymous");
        policy_authorize(ca->cfg->policy, &a.who, ACTION_POLL_REQUEST, NULL, &d);
        r = ca_decision(ca, &a, "poll", NULL, &d);
        if (r >= 0)
                r = do_poll(ca, id, (int64_t) time(NULL), resp);
        if (r < 0)
                ca_respond_error(ca, resp, r);
}

/* The identity's live certificate again (200), if it is for csr's key:
 * *ret_done false (nothing sent) otherwise. */
static int renewal_again(ca_service *ca, const csr_info *csr, int64_t now, ca_auth *a, http_response *resp,
                         bool *ret_done) {
        _cleanup_free_ char *pem = NULL;
        store_cert live = { 0 };
        int r = store_cert_live_for(ca->store, a->cert.identity, now, &live);

        *ret_done = false;
        if (r < 0 || strcmp(live.spki_sha256, csr_info_facts(csr)->spki_sha256) != 0) {
                store_cert_clear(&live);
                return r >= 0 || r == -HWID_E_NOT_FOUND ? 0 : r;
        }
        r = cert_der_to_pem(live.der, live.der_len, &pem);
        if (r >= 0) {
                ca_audit(ca, a->actor, "renew-replay", a->cert.identity, "allow", live.serial, NULL);
                http_respond_pem(resp, 200, pem);
                *ret_done = true;
        }
        store_cert_clear(&live);
        return r;
}

/* A device whose renewal answer was lost comes back with the certificate
 * that renewal superseded.  If its CSR carries the key of the identity's
 * live certificate -- proof it holds both keys -- it gets that
 * certificate again (200): nothing hwidd issued is lost to a dropped
 * connection. */
static int replay_renewal(ca_service *ca, const ca_body *body, int64_t now, ca_auth *a, http_response *resp) {
        _cleanup_(csr_info_freep) csr_info *csr = NULL;
        bool done = false;
        int r;

        if ((r = csr_info_parse(body->csr, body->csr_len, &csr)) < 0 ||
            (r = renewal_again(ca, csr, now, a, resp, &done)) < 0 || done)
                return r;
        return hwid_fail(HWID_E_REVOKED, "certificate %s of %s was replaced by one for a key this request does not "
                         "carry: bootstrap again with a new token", a->cert.serial, a->cert.identity);
}

/* The renewal's commit failed with r.  When an identical renewal (the
 * same certificate, the same new key) committed first, its certificate
 * is this one's answer too; one for another key leaves r (409). */
static int renew_lost_race(ca_service *ca, const csr_info *csr, int64_t now, ca_auth *a, http_response *resp,
                           int r) {
        char why[512];
        bool done = false;
        int r2;

        if (r != -HWID_E_CONFLICT)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        if ((r2 = renewal_again(ca, csr, now, a, resp, &done)) < 0)
                return r2;
        return done ? 0 : hwid_fail((hwid_err) -r, "%s", why);
}

/* Who renews: the node (or admin) whose certificate is presented, with
 * the attestation recorded with that certificate. */
static int renew_authenticate(ca_service *ca, const http_request *req, int64_t now, ca_auth *a) {
        int r = ca_auth_peer(ca, req, now, a);

        if (r < 0)
                return r;
        /* Authentication is not policy: audit-only mode never lets an
         * unauthenticated renewal through. */
        if (a->who.role == ROLE_ANONYMOUS)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "renewal needs mutual TLS with the current certificate");
        a->who.cert_attestation = ca_attestation_fact(&a->cert.attestation, &a->cert_attestation);
        return 0;
}

/* Signs the renewal policy allowed, superseding the current certificate. */
static int renew_issue(ca_service *ca, const ca_auth *a, const csr_info *csr, const policy_issue *iss,
                       const char *cn, int64_t now, http_response *resp) {
        _cleanup_free_ char *pem = NULL, *serial = NULL;
        store_audit audit = { .at = now, .actor = a->actor, .action = "renew", .target = cn, .outcome = "allow",
                              .reason = a->cert.serial };
        store_issue how = { .supersedes_serial = a->cert.serial, .audit = &audit };
        int r = ca_issue(ca, csr, iss, &how, cn, now, &pem, &serial);

        if (r < 0)
                return r;
        atomic_fetch_add(&ca->n_renewed, 1);
        log_info("renewed %s: %s replaces %s%s", cn, serial, a->cert.serial, iss->attestation ? " (TPM attested)" : "");
        http_respond_pem(resp, 201, pem);
        return 0;
}

/* *ret_opens_at: on -HWID_E_TOO_EARLY, when the renewal window opens. */
static int do_renew(ca_service *ca, const http_request *req, int64_t now, ca_auth *a, http_response *resp,
                    int64_t *ret_opens_at) {
        _cleanup_(csr_info_freep) csr_info *csr = NULL;
        _cleanup_(ca_body_clear) ca_body body = { 0 };
        ca_attested att = { 0 };
        policy_csr facts;
        policy_issue iss;
        policy_decision d;
        char cn[128];
        int r;

        if ((r = ca_body_parse(req, &body)) < 0)
                return r;
        ca_reads_fetch(ca, req, body.csr, body.csr_len, CA_READS_PEER, now, a, &csr);
        r = renew_authenticate(ca, req, now, a);
        if (r == -HWID_E_SUPERSEDED) {
                a->who.role = ROLE_NODE;
                snprintf(a->actor, sizeof(a->actor), "%s:%s", a->cert.role[0] ? a->cert.role : "node",
                         a->cert.identity);
                return replay_renewal(ca, &body, now, a, resp);
        }
        if (r < 0 || (!csr && (r = csr_info_parse(body.csr, body.csr_len, &csr)) < 0) ||
            (r = store_reads_key_blocked(ca->store, a->reads, csr_info_facts(csr)->spki_sha256)) < 0)
                return r;
        request_cn(csr, cn, sizeof(cn));
        policy_authorize(ca->cfg->policy, &a->who, ACTION_RENEW, cn, &d);
        if ((r = ca_decision(ca, a, "renew", cn, &d)) < 0 ||
            (body.has_evidence && (r = ca_attest_verify(ca, &body, csr, now, &att)) < 0))
                return r;
        facts = *csr_info_facts(csr);
        facts.attestation = ca_attested_fact(&att);
        policy_check_renew(ca->cfg->policy, &a->who, &facts, now, &iss, &d);
        if ((r = ca_decision(ca, a, "renew", cn, &d)) < 0) {
                if (r == -HWID_E_TOO_EARLY)
                        *ret_opens_at = d.retry_at;
                return r;
        }
        if (!iss.profile)
                return hwid_fail(HWID_E_FORBIDDEN, "no profile to renew %s under", cn);
        r = renew_issue(ca, a, csr, &iss, cn, now, resp);
        return r < 0 ? renew_lost_race(ca, csr, now, a, resp, r) : 0;
}

void ca_renew(ca_service *ca, const http_request *req, http_response *resp) {
        int64_t now = (int64_t) time(NULL), opens_at = 0;
        ca_auth a = { 0 };
        int r;

        snprintf(a.actor, sizeof(a.actor), "anonymous");
        r = do_renew(ca, req, now, &a, resp, &opens_at);
        if (r < 0)
                ca_fail_request(ca, &a, "renew", NULL, resp, r);
        /* Too early says until when, for the device to wait instead of guessing. */
        if (r == -HWID_E_TOO_EARLY && opens_at > now)
                http_error_retry_at(resp, "renewal_opens_at", opens_at, now);
        ca_auth_clear(&a);
}
