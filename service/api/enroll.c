/* The native API's doors to enrollment (POST /csr), polling (GET
 * /v1/requests/{id}) and renewal (POST /v1/renew): the body (a PKCS#10
 * request, or JSON with TPM evidence: ca_body_parse()) and the
 * credentials (a Bearer token, the client certificate) into one call of
 * the CA core, its answer back as PEM or JSON. */
#include <time.h>

#include "api.h"
#include "attest-api.h"

/* The request for the core: the body's CSR and evidence, the Bearer token
 * and the client certificate. */
static void native_request(ca_op op, const http_request *req, ca_body *body, int64_t now, ca_request *ret) {
        int r = ca_body_parse(req, body);

        *ret = (ca_request) {
                .op = op,
                .now = now,
                .authorization = req->authorization,
                .bearer = true,
                .peer = door_peer(req),
                .csr = body->csr,
                .csr_len = body->csr_len,
                .evidence = body->has_evidence ? &body->ev : NULL,
        };
        if (r < 0)
                ca_request_refuse(ret, r);
}

static void certificate_call(ca_service *ca, ca_op op, const http_request *req, http_response *resp) {
        _cleanup_(ca_body_clear) ca_body body = { 0 };
        int64_t now = (int64_t) time(NULL);
        ca_result res;
        ca_request in;

        native_request(op, req, &body, now, &in);
        ca_call(ca, &in, &res);
        api_respond_certificate(resp, &res, now);
        ca_result_clear(&res);
}

void api_enroll(ca_service *ca, const http_request *req, http_response *resp) {
        certificate_call(ca, CA_OP_ENROLL, req, resp);
}

void api_renew(ca_service *ca, const http_request *req, http_response *resp) {
        certificate_call(ca, CA_OP_RENEW, req, resp);
}

void api_poll(ca_service *ca, const char *id, http_response *resp) {
        int64_t now = (int64_t) time(NULL);
        ca_request in = { .op = CA_OP_POLL, .now = now, .arg = id };
        ca_result res;

        ca_call(ca, &in, &res);
        api_respond_certificate(resp, &res, now);
        ca_result_clear(&res);
}
