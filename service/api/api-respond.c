/* What the native doors send back for a ca_result, and what a request is
 * for /metrics. */
#include <string.h>

#include <json-c/json.h>

#include "api.h"
#include "door.h"
#include "error.h"

typedef struct route {
        const char *method; /* NULL: any */
        const char *path;
        bool prefix;
        ca_endpoint ep;
} route;

static const route routes[] = {
        { "GET", "/ca", false, CA_EP_CA },
        { "POST", "/csr", false, CA_EP_ENROLL },
        { "GET", "/v1/requests/", true, CA_EP_POLL },
        { "POST", "/v1/renew", false, CA_EP_RENEW },
        { "GET", "/crl", false, CA_EP_CRL },
        { "GET", "/healthz", false, CA_EP_HEALTHZ },
        { "GET", "/readyz", false, CA_EP_READYZ },
        { "GET", "/metrics", false, CA_EP_METRICS },
        { "GET", "/v1/identities/", true, CA_EP_IDENTITY },
        { NULL, "/v1/admin/", true, CA_EP_ADMIN },
        { NULL, "/.well-known/est/", true, CA_EP_EST },
        { NULL, "/v1/attest", true, CA_EP_ATTEST },
        { NULL, "/.well-known/cmp", true, CA_EP_CMP },
        { NULL, "/ocsp", true, CA_EP_OCSP },
};

ca_endpoint metrics_endpoint_of(const char *method, const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                const route *r = &routes[i];
                bool path_ok = r->prefix ? strncmp(path, r->path, strlen(r->path)) == 0 : strcmp(path, r->path) == 0;

                if (path_ok && (!r->method || strcmp(method, r->method) == 0))
                        return r->ep;
        }
        return CA_EP_OTHER;
}

static void respond_pending(http_response *resp, const ca_result *res) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "status", json_object_new_string("pending"));
        json_object_object_add(o, "request_id", json_object_new_string(res->request_id));
        json_object_object_add(o, "identity", json_object_new_string(res->identity));
        json_object_object_add(o, "spki_sha256", json_object_new_string(res->spki_sha256));
        resp->retry_after = res->retry_after;
        snprintf(resp->location, sizeof(resp->location), "/v1/requests/%s", res->request_id);
        http_respond_json(resp, 202, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
}

void api_respond_certificate(http_response *resp, const ca_result *res, int64_t now) {
        switch (res->outcome) {
        case CA_ISSUED:
                http_respond_pem(resp, 201, res->pem);
                break;
        case CA_AGAIN:
                http_respond_pem(resp, 200, res->pem);
                break;
        case CA_PENDING:
                respond_pending(resp, res);
                break;
        default:
                door_respond_refusal(resp, res, "renewal_opens_at", now);
        }
}
