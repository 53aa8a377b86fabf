/* The OCSP door (ocsp-door.h). */
#include <string.h>
#include <time.h>

#include "door.h"
#include "error.h"
#include "ocsp-door.h"

/* The request's DER: POST's body, or GET's path decoded (*ret_owned then
 * holds it).  Reading it is the door's; what it means is the core's. */
static int request_der(const http_request *req, const char *tail, const uint8_t **ret, size_t *ret_len,
                       uint8_t **ret_owned) {
        int r;

        if (strcmp(req->method, "POST") == 0) {
                if (tail)
                        return hwid_fail(HWID_E_INVALID, "malformed OCSP request: POST it to /ocsp");
                *ret = req->body;
                *ret_len = req->body_len;
                return 0;
        }
        if (!tail)
                return hwid_fail(HWID_E_INVALID, "malformed OCSP request: GET /ocsp/ needs the base64 of a request");
        if ((r = ocsp_get_decode(tail, ret_owned, ret_len)) < 0)
                return r;
        *ret = *ret_owned;
        return 0;
}

static void answer(ca_service *ca, const http_request *req, const char *tail, http_response *resp) {
        _cleanup_free_ uint8_t *owned = NULL;
        const uint8_t *der = NULL;
        size_t len = 0;
        ocsp_query q = { 0 };
        ca_request in = { .op = CA_OP_OCSP, .now = (int64_t) time(NULL), .out = &resp->body,
                          .client = req->peer_addr };
        ca_result res;
        int r = request_der(req, tail, &der, &len, &owned);

        if (r >= 0)
                r = ocsp_query_parse(der, len, &q);
        if (r < 0)
                ca_request_refuse(&in, r);
        else
                in.ocsp = &q;
        if (ca_call(ca, &in, &res) == CA_DONE) {
                resp->status = res.ocsp == CA_OCSP_MALFORMED ? 400 : 200;
                resp->content_type = "application/ocsp-response";
        } else {
                door_respond_refusal(resp, &res, NULL, in.now);
        }
        ca_result_clear(&res);
        ocsp_query_clear(&q);
}

bool door_ocsp_route(ca_service *ca, const http_request *req, http_response *resp) {
        const char *tail = NULL;

        if (strncmp(req->path, "/ocsp", 5) != 0 || (req->path[5] && req->path[5] != '/'))
                return false;
        if (req->path[5] == '/')
                tail = req->path + 6;
        if (strcmp(req->method, "POST") != 0 && strcmp(req->method, "GET") != 0) {
                http_error(resp, 405, "method_not_allowed", "OCSP is POST /ocsp or GET /ocsp/<base64 request>");
                return true;
        }
        answer(ca, req, tail, resp);
        return true;
}
