/* The same enrollment again (ca-enroll.h): a device whose answer was lost
 * -- a join cut off after the CA committed -- asks again, by any front
 * door, and gets what it got: the certificate, or the request it is held
 * as.  It never burns its token for nothing. */
#include <string.h>

#include "ca-enroll.h"
#include "error.h"

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

int ca_replay_enrollment(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                         const char *cn, int64_t now, ca_result *res, bool *ret_done,
                         char ret_live[CA_IDENTITY_BUF]) {
        store_cert live = { 0 };
        int r = store_reads_cert_live_for(ca->store, a->reads, cn, now, &live);

        *ret_done = false;
        if (ret_live)
                ret_live[0] = '\0';
        if (r == -HWID_E_NOT_FOUND)
                return 0;
        if (r >= 0 && same_enroller(a, iss, &live) &&
            strcmp(live.spki_sha256, csr_info_facts(csr)->spki_sha256) == 0 &&
            (r = ca_result_cert(res, CA_AGAIN, &live.der, live.der_len, &live.serial)) >= 0) {
                if (replay_audit_due(ca, res->serial, now))
                        ca_audit(ca, a->actor, "enroll-replay", cn, "allow", res->serial, a->who.token_id);
                *ret_done = true;
        }
        if (r >= 0 && !*ret_done && ret_live)
                snprintf(ret_live, CA_IDENTITY_BUF, "%s", live.identity);
        store_cert_clear(&live);
        return r < 0 ? r : 0;
}

int ca_answer_same_enrollment(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                              const char *cn, int64_t now, ca_result *res, bool *ret_done) {
        int r = ca_replay_enrollment(ca, a, iss, csr, cn, now, res, ret_done, NULL);

        /* A token used up has no role, but its secret matched. */
        if (r < 0 || *ret_done || !a->token_genuine)
                return r;
        return ca_answer_request_of(ca, a->token.id, csr, now, res, ret_done);
}
