/* What every operation's result is made of (ca.h's ca_result), and a
 * door's refusal of what it could not parse.  Below the operations. */
#include <string.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"
#include "secret.h"
#include "x509-util.h"

void ca_request_refuse(ca_request *req, int r) {
        req->refused = r < 0 ? r : -HWID_E_INTERNAL;
        snprintf(req->refused_why, sizeof(req->refused_why), "%s", hwid_strerror(req->refused));
}

int ca_door_refusal(const ca_request *req) {
        return hwid_fail((hwid_err) -req->refused, "%s", req->refused_why);
}

void ca_result_clear(ca_result *res) {
        if (!res)
                return;
        free(res->pem);
        free(res->der);
        free(res->serial);
        /* What the union holds is the operation's. */
        if (res->op == CA_OP_READ_IDENTITY)
                store_cert_clear(&res->id.cert);
        else if (res->op == CA_OP_ADMIN)
                ca_admin_result_clear(&res->admin);
        *res = (ca_result) { 0 };
}

void ca_refuse(ca_service *ca, ca_result *res, int r) {
        if (r >= 0)
                r = -HWID_E_INTERNAL;
        if (hwid_err_http_status(r) >= 500) {
                atomic_fetch_add(&ca->n_errors, 1);
                log_error("request failed: %s", hwid_strerror(r));
        }
        res->outcome = CA_REFUSED;
        res->error = r;
        /* The CA host's administrator is told what the log would say. */
        snprintf(res->message, sizeof(res->message), "%s", ca->host ? hwid_strerror(r) : hwid_public_message(r));
}

int ca_result_cert(ca_result *res, ca_outcome outcome, uint8_t **der, size_t der_len, char **serial) {
        _cleanup_free_ char *pem = NULL;
        /* A certificate given again comes from the store: checked as one. */
        int r = outcome == CA_AGAIN ? cert_der_to_pem(*der, der_len, &pem) : der_to_pem(*der, der_len, "CERTIFICATE", &pem);

        if (r < 0)
                return r;
        res->outcome = outcome;
        res->pem = TAKE_PTR(pem);
        res->der = TAKE_PTR(*der);
        res->der_len = der_len;
        res->serial = TAKE_PTR(*serial);
        return 0;
}

void ca_result_pending(ca_service *ca, ca_result *res, const store_request *rq) {
        res->outcome = CA_PENDING;
        snprintf(res->request_id, sizeof(res->request_id), "%s", rq->id);
        snprintf(res->identity, sizeof(res->identity), "%s", rq->identity);
        snprintf(res->spki_sha256, sizeof(res->spki_sha256), "%s", rq->spki_sha256);
        res->retry_after = ca->cfg->retry_after;
}


void ca_admin_result_clear(ca_admin_result *r) {
        for (size_t i = 0; r->secrets && i < r->n_tokens; i++)
                secret_free(r->secrets[i]);
        free(r->secrets);
        if (r->tokens_made) {
                secret_wipe(r->tokens, r->n_tokens * sizeof(*r->tokens));
                free(r->tokens);
        } else {
                store_token_list_free(r->tokens, r->n_tokens);
        }
        store_request_list_free(r->requests, r->n_requests);
        free(r->may);
        store_cert_list_free(r->certs, r->n_certs);
        store_ek_list_free(r->eks, r->n_eks);
        store_binding_list_free(r->bindings, r->n_bindings);
        store_cert_clear(&r->cert);
        store_ek_clear(&r->ek);
        store_binding_clear(&r->binding);
        *r = (ca_admin_result) { 0 };
}
