/* TPM attestation in the CA core (docs/ATTESTATION.md): a challenge for a
 * TPM (CA_OP_CHALLENGE: POST /v1/attest), and the evidence that answers
 * it, verified for the key of an enrollment's or a renewal's CSR
 * (ca_attest_verify()): what it proved becomes a fact for policy/ and a
 * record for the store. */
#include <stdio.h>
#include <string.h>

#include <openssl/sha.h>

#include "ca-internal.h"
#include "error.h"

static void hex(const uint8_t *p, size_t n, char *out) {
        for (size_t i = 0; i < n; i++)
                snprintf(out + 2 * i, 3, "%02x", p[i]);
}

static int not_configured(void) {
        return hwid_fail(HWID_E_ATTESTATION, "this CA does not verify TPM attestation (its configuration has no "
                         "attestation.ek_roots)");
}

/* A verifier for this request, with the roots of the configuration it
 * runs under and the store's table of challenges; a new challenge is
 * requester's (NULL: an answer), *replaced how many of its older ones
 * it replaced. */
static int verifier(ca_service *ca, const char *requester, size_t *replaced, attest_fresh **ret_fresh,
                    attest_verifier **ret) {
        const hwidd_config *cfg = ca->cfg;
        attest_bounds b = { .max = cfg->attest_max_pending, .max_per_requester = cfg->attest_max_per_requester,
                            .requester = requester, .replaced = replaced };
        int r;

        if (!cfg->ek_roots)
                return not_configured();
        r = attest_fresh_new_store(ca->store, &b, ret_fresh);
        if (r >= 0)
                r = attest_verifier_new(cfg->ek_roots, *ret_fresh, (unsigned) cfg->attest_ttl, ret);
        return r;
}

int ca_attest_verify(ca_service *ca, const ca_evidence *ev, const csr_info *csr, int64_t now, ca_attested *ret) {
        _cleanup_(attest_fresh_freep) attest_fresh *fresh = NULL;
        _cleanup_(attest_verifier_freep) attest_verifier *v = NULL;
        attest_evidence e = {
                .id = ev->id, .activated = ev->activated, .activated_len = ev->activated_len,
                .certify_info = ev->certify_info, .certify_info_len = ev->certify_info_len,
                .signature = ev->signature, .signature_len = ev->signature_len,
                .key_public = ev->key_public, .key_public_len = ev->key_public_len,
        };
        attest_fact f;
        ca_attested a = { .present = true };
        int r = verifier(ca, NULL, NULL, &fresh, &v);

        if (r >= 0)
                r = attest_evidence_verify(v, &e, csr_info_pubkey(csr), (uint64_t) now, &f);
        if (r < 0)
                return r;
        hex(f.ek_cert_sha256, sizeof(f.ek_cert_sha256), a.rec.ek_cert_sha256);
        hex(f.ek_pub_sha256, sizeof(f.ek_pub_sha256), a.rec.ek_pub_sha256);
        hex(f.ak_name.name, f.ak_name.size, a.rec.ak_name);
        *ret = a;
        ca_attestation_fact(&ret->rec, &ret->fact);
        return 0;
}

int ca_auth_ek(ca_service *ca, const ca_attested *att, const char *cn, int64_t now, ca_auth *a) {
        if (!att->present)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "enrollment needs a bootstrap token (or TPM attestation "
                                 "by a TPM on the CA's EK allowlist)");
        return ca_auth_returning(ca, att->rec.ek_cert_sha256, att->rec.ek_pub_sha256, cn, now, a);
}

/* ---------- a challenge ---------- */

#define REQUESTER_MAX 80

/* The bootstrap token, the client certificate (a renewal), or else the
 * EK allowlist or the name coming back, and the name's binding to a TPM
 * (looked up before the CA spends a MakeCredential on it).
 * ret_requester: the credential, which bounds its challenges. */
static int challenge_auth(ca_service *ca, const ca_request *req, ca_auth *a, char ret_requester[REQUESTER_MAX]) {
        const ca_attest_ask *in = req->attest;
        uint8_t cert_sha[32], pub_sha[32];
        char cert_hex[65], pub_hex[65];
        int r;

        if (req->authorization) {
                r = ca_auth_token(ca, req->authorization, req->bearer, req->now, a);
                snprintf(ret_requester, REQUESTER_MAX, "token:%s", a->token.id);
                return r;
        }
        if (req->peer.der) {
                r = ca_auth_peer(ca, &req->peer, req->now, a);
                snprintf(ret_requester, REQUESTER_MAX, "cert:%s", a->cert.serial ? a->cert.serial : "");
                return r < 0 || a->who.role != ROLE_ANONYMOUS ? r : 0;
        }
        if ((r = attest_ek_pub_sha256(in->ek_cert, in->ek_cert_len, pub_sha)) < 0)
                return r;
        SHA256(in->ek_cert, in->ek_cert_len, cert_sha);
        hex(cert_sha, sizeof(cert_sha), cert_hex);
        hex(pub_sha, sizeof(pub_sha), pub_hex);
        snprintf(ret_requester, REQUESTER_MAX, "ek:%s", pub_hex);
        if ((r = ca_auth_returning(ca, cert_hex, pub_hex, in->identity, req->now, a)) < 0)
                return r;
        /* A name bound to another TPM costs no MakeCredential. */
        return ca_binding_check(ca, a, in->identity ? in->identity : a->ek.identity,
                                &(policy_attestation) { .ek_pub_sha256 = pub_hex });
}

static int do_challenge(ca_service *ca, const ca_request *req, ca_auth *a, ca_result *res) {
        _cleanup_(attest_fresh_freep) attest_fresh *fresh = NULL;
        _cleanup_(attest_verifier_freep) attest_verifier *v = NULL;
        const ca_attest_ask *in = req->attest;
        char requester[REQUESTER_MAX] = "";
        size_t replaced = 0;
        attest_request areq;
        policy_decision d;
        int r;

        if (!ca->cfg->ek_roots)
                return not_configured();
        if (req->refused)
                return ca_door_refusal(req);
        if ((r = challenge_auth(ca, req, a, requester)) < 0)
                return r;
        policy_authorize(ca->cfg->policy, &a->who, ACTION_ATTEST, NULL, &d);
        if ((r = ca_decision(ca, a, "attest", NULL, &d)) < 0 || (r = verifier(ca, requester, &replaced, &fresh, &v)) < 0)
                return r;
        areq = (attest_request) { in->ek_cert, in->ek_cert_len, in->ek_public, in->ek_public_len, in->ak_public,
                                  in->ak_public_len };
        r = attest_challenge_new(v, &areq, (uint64_t) req->now, &res->challenge);
        ca_challenge_note(ca, requester, r, replaced, req->now);
        return r;
}

void ca_challenge(ca_service *ca, const ca_request *req, ca_result *res) {
        ca_auth a = { 0 };
        int r;

        snprintf(a.actor, sizeof(a.actor), "anonymous");
        r = do_challenge(ca, req, &a, res);
        if (r < 0)
                ca_fail(ca, &a, "attest", NULL, res, r);
        ca_auth_clear(&a);
}
