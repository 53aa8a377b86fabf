/* Who enrolls, and whether they may (ca-enroll.h): a bootstrap token, a
 * TPM on the EK allowlist (or coming back), a client certificate; what
 * the labels of EST and CMP say; EST's proof-of-possession linking. */
#include <string.h>

#include "ca-enroll.h"
#include "error.h"

/* EST simpleenroll (CMP ir) by the client certificate: a live one this
 * CA issued and recorded, as for renewal (ca_auth_peer()).  One that was
 * renewed away is no credential here: there is no enrollment to replay
 * for it. */
static int auth_by_certificate(ca_service *ca, const ca_request *req, ca_auth *a) {
        int r = ca_auth_peer(ca, &req->peer, req->now, a);
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

/* Without credentials in the header, a client certificate the profile
 * accepts (est.enroll_by_certificate): on EST, that profile's
 * proof-of-possession linking holds.  Whether it may enroll is the
 * policy's to say (policy_check_enroll()). */
static int certificate_front(ca_service *ca, const ca_request *req, const ca_csr *c, const ca_auth *a) {
        const policy_profile *p;

        if (req->door != CA_DOOR_EST || !a->cert.profile)
                return 0;
        p = req->label ? policy_profile_find(ca->cfg->policy, req->label)
                       : policy_cert_enroll_target(ca->cfg->policy, a->cert.profile, NULL);
        if (!policy_cert_enroll_accepts(p, a->cert.profile))
                return 0; /* policy refuses it, with the reason */
        return ca_pop_check(req, c, p);
}

/* An EST or CMP label names the profile a request is for: a token's
 * must be it. */
static int label_check(const ca_request *req, const ca_auth *a, ca_result *res) {
        if (!req->label || strcmp(a->token.profile, req->label) == 0)
                return 0;
        res->about_label = true;
        return hwid_fail(HWID_E_FORBIDDEN, "bootstrap token %s is for profile %s, not for %s label %s", a->token.id,
                         a->token.profile, req->door == CA_DOOR_CMP ? "CMP" : "EST", req->label);
}

/* What EST and CMP add for a genuine token (auth_r: whether it may be
 * used now): its label.  EST: the request it made before for this key and
 * name is the answer (RFC 7030 §4.2.3: a client told 202 sends the same
 * request again, maybe over another connection: it was linked when it
 * was made), and the profile's proof-of-possession linking holds. */
static int token_front(ca_service *ca, const ca_request *req, const ca_csr *c, int auth_r, ca_auth *a,
                       ca_result *res, bool *ret_done) {
        int r;

        if (req->door == CA_DOOR_NATIVE || !a->token_genuine)
                return 0;
        if ((r = label_check(req, a, res)) < 0 || req->door != CA_DOOR_EST)
                return r;
        if (c->csr && ((r = ca_answer_request_of(ca, a->token.id, c->csr, req->now, res, ret_done)) < 0 || *ret_done))
                return r;
        /* A spent or expired token is refused for that first (401). */
        if (auth_r < 0)
                return 0;
        return ca_pop_check(req, c, policy_profile_find(ca->cfg->policy, a->token.profile));
}

/* A genuine token whose uses are spent may still replay its enrollment;
 * anything else gets the token's refusal (refused). */
static int enroll_spent(ca_service *ca, const ca_csr *c, int64_t now, ca_auth *a, int refused, ca_result *res,
                        bool *ret_done) {
        char why[512], cn[CA_IDENTITY_BUF];
        int r;

        snprintf(why, sizeof(why), "%s", hwid_strerror(refused));
        if (c->csr && (r = ca_answer_same_enrollment(ca, a, NULL, c->csr, ca_request_cn(c->csr, cn, sizeof(cn)), now,
                                                     res, ret_done)) < 0)
                return r;
        return *ret_done ? 0 : hwid_fail((hwid_err) -refused, "%s", why);
}

/* A bootstrap token: presented, or proven by the door (CMP's MAC). */
static int by_token(ca_service *ca, const ca_request *req, const ca_csr *c, ca_auth *a, ca_result *res,
                    bool *ret_done) {
        int r = req->token_id ? ca_auth_token_id(ca, req->token_id, req->now, a)
                              : ca_auth_token(ca, req->authorization, req->bearer, req->now, a);
        char why[512] = "";
        int r2;

        if (r < 0)
                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        if ((r2 = token_front(ca, req, c, r, a, res, ret_done)) < 0 || *ret_done)
                return r2;
        return r < 0 ? hwid_fail((hwid_err) -r, "%s", why) : 0;
}

int ca_enroll_authorize(ca_service *ca, const ca_request *req, const ca_csr *c, const ca_attested *by_ek,
                        const char *cn, ca_auth *a, ca_result *res, bool *ret_done) {
        policy_decision d;
        int r;

        *ret_done = false;
        if (by_ek) {
                r = ca_auth_ek(ca, by_ek, cn, req->now, a);
        } else if (req->by_certificate) {
                if ((r = auth_by_certificate(ca, req, a)) >= 0)
                        r = certificate_front(ca, req, c, a);
        } else {
                r = by_token(ca, req, c, a, res, ret_done);
                if (*ret_done)
                        return r;
                if (r < 0 && a->token_spent && !res->about_label)
                        return enroll_spent(ca, c, req->now, a, r, res, ret_done);
        }
        if (r < 0)
                return r;
        policy_authorize(ca->cfg->policy, &a->who, ACTION_ENROLL, NULL, &d);
        return ca_decision(ca, a, "enroll", NULL, &d);
}
