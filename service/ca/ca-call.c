/* The one call of the CA core (ca.h): each operation by its file.  Also
 * what a request is counted as, for /metrics. */
#include <string.h>
#include <time.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"

ca_outcome ca_call(ca_service *ca, const ca_request *req, ca_result *res) {
        *res = (ca_result) { .outcome = CA_DONE, .op = req->op };
        switch (req->op) {
        case CA_OP_ENROLL:
                ca_enroll(ca, req, res);
                break;
        case CA_OP_RENEW:
                ca_renew(ca, req, res);
                break;
        case CA_OP_POLL:
                ca_poll(ca, req->arg, req->now, res);
                break;
        case CA_OP_REVOKE_OWN:
                ca_revoke_own(ca, req, res);
                break;
        case CA_OP_CONFIRM:
                ca_confirm(ca, req, res);
                break;
        case CA_OP_CHALLENGE:
                ca_challenge(ca, req, res);
                break;
        case CA_OP_READ_IDENTITY:
                ca_read_identity(ca, req, res);
                break;
        case CA_OP_READ:
                ca_read_call(ca, req, res);
                break;
        case CA_OP_ADMIN:
                ca_admin(ca, req, res);
                break;
        case CA_OP_OCSP:
                ca_ocsp(ca, req, res);
                break;
        default:
                ca_refuse(ca, res, hwid_fail(HWID_E_INTERNAL, "no such operation"));
        }
        return res->outcome;
}

/* ---------- counting ---------- */

void ca_service_enter(ca_service *ca) {
        atomic_fetch_add(&ca->n_requests, 1);
        /* A SIGHUP reload waits until no request uses the old policy. */
        pthread_rwlock_rdlock(&ca->cfg_lock);
}

void ca_service_leave(ca_service *ca, ca_endpoint ep, int status, const char *error, uint64_t ns) {
        pthread_rwlock_unlock(&ca->cfg_lock);
        metrics_request(ca->metrics, ep, status, status >= 400 ? error : NULL, ns);
}

void ca_service_count_refusal(ca_service *ca, const char *error) {
        metrics_refusal(ca->metrics, error);
}

void ca_service_count_error(ca_service *ca, const char *what, int r) {
        if (hwid_err_http_status(r) < 500)
                return;
        atomic_fetch_add(&ca->n_errors, 1);
        log_error("%s failed: %s", what, hwid_strerror(r));
}

void ca_service_count_pbm(ca_service *ca, bool computed) {
        metrics_event_count(ca->metrics, computed ? EVENT_PBM_COMPUTED : EVENT_PBM_REFUSED);
}

bool ca_profile_exists(ca_service *ca, const char *name) {
        return policy_profile_find(ca->cfg->policy, name) != NULL;
}
