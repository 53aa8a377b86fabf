/* A holder revokes its own certificate (CMP rr, RFC 9483 §4.2): a device
 * that knows its key is lost, or is being retired, says so itself.  The
 * client certificate authenticates exactly as for renewal
 * (ca_auth_peer(): the very certificate this CA recorded, live), and it
 * can name nothing but itself: revoking anything else stays an
 * administrator's (hwid cert revoke). */
#include <strings.h>
#include <time.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"

static int revoke_own(ca_service *ca, const ca_peer *peer, const char *serial, int64_t now, ca_auth *a) {
        char reason[160];
        store_audit audit = { .at = now, .action = "cert.revoke", .outcome = "allow", .reason = reason };
        int r = ca_auth_peer(ca, peer, now, a);

        if (r < 0)
                return r;
        if (a->who.role == ROLE_ANONYMOUS)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "revocation needs the certificate to revoke as the "
                                 "client's credential");
        if (strcasecmp(a->cert.serial, serial) != 0) {
                ca_audit(ca, a->actor, "cert.revoke", serial, "deny", "a holder may revoke only its own certificate",
                         NULL);
                a->audited = true;
                return hwid_fail(HWID_E_FORBIDDEN, "certificate %s may revoke only itself, not %s", a->cert.serial,
                                 serial);
        }
        snprintf(reason, sizeof(reason), "by its holder, %s", a->cert.identity);
        audit.actor = a->actor;
        audit.target = a->cert.serial;
        if ((r = store_cert_revoke(ca->store, a->cert.serial, 0 /* unspecified */, now, &audit)) < 0)
                return r;
        a->audited = true; /* in the revocation's own transaction */
        log_info("revoked %s of %s at its holder's request", a->cert.serial, a->cert.identity);
        return 0;
}

void ca_revoke_own(ca_service *ca, const ca_request *req, ca_result *res) {
        ca_auth a = { 0 };
        int r;

        snprintf(a.actor, sizeof(a.actor), "anonymous");
        r = revoke_own(ca, &req->peer, req->arg, req->now, &a);
        if (r < 0)
                ca_fail(ca, &a, "cert.revoke", req->arg, res, r);
        ca_auth_clear(&a);
}

/* CMP's certConf (RFC 9483 §4.1.1): a certificate counts as issued when
 * it is committed, before its requester has seen it, exactly as for
 * POST /csr; a confirmation is recorded, and a certificate its requester
 * rejects is revoked, so that nothing valid is left that nobody uses.
 * Only one issued in the rejecting transaction, though: the caller says
 * when that transaction began, and a certificate recorded before (one
 * given again to a replay) stays as it is, whatever the caller believes.
 * The store keeps seconds, so within the second the transaction began the
 * caller's word (it rejects only what it got as newly issued) decides. */
static int revocable(ca_service *ca, const char *serial, int64_t issued_since) {
        store_cert c = { 0 };
        int r = store_cert_get(ca->store, serial, &c);

        if (r >= 0 && (issued_since <= 0 || c.created_at < issued_since))
                r = hwid_fail(HWID_E_FORBIDDEN, "certificate %s was issued before the CMP transaction that rejects "
                              "it began", serial);
        else if (r >= 0 && c.status != CERT_VALID)
                r = hwid_fail(HWID_E_CONFLICT, "certificate %s is no longer valid", serial);
        store_cert_clear(&c);
        return r;
}

void ca_confirm(ca_service *ca, const ca_request *req, ca_result *res) {
        char actor[32];
        store_audit audit = { .at = (int64_t) time(NULL), .actor = actor, .action = "cert.revoke",
                              .target = req->arg, .outcome = "allow",
                              .reason = "rejected by its requester in a CMP certConf" };
        int r;

        /* Who confirms: the token of its MAC, or the signer. */
        if (req->token_id)
                snprintf(actor, sizeof(actor), "token:%s", req->token_id);
        else
                snprintf(actor, sizeof(actor), "cmp-signer");
        if (req->accepted) {
                ca_audit(ca, actor, "confirm", req->arg, "allow", "accepted by its requester (CMP certConf)", NULL);
                return;
        }
        if ((r = revocable(ca, req->arg, req->since)) >= 0)
                r = store_cert_revoke(ca->store, req->arg, 0 /* unspecified */, audit.at, &audit);
        if (r < 0)
                log_notice("not revoking %s, which its requester rejected: %s", req->arg, hwid_strerror(r));
        else
                log_info("revoked %s: its requester rejected it (CMP certConf)", req->arg);
        (void) res;
}
