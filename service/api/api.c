/* Routing of hwidd's HTTP API to its doors, and the small read-only
 * endpoints: GET /ca, GET /crl and /crl/N (a CA generation's),
 * GET /v1/identities/{name}.  OCSP's door (door/ocsp-door.c) is on both
 * listeners, as the CRLs are. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "admin-api.h"
#include "api.h"
#include "cmp.h"
#include "error.h"
#include "ocsp-door.h"

struct api {
        ca_service *ca;
        cmp_door *cmp;
        _Atomic(http_server *) transport; /* the HTTPS listener, for its connection metrics */
};

int api_new(ca_service *ca, api **ret) {
        _cleanup_(api_freep) api *a = calloc(1, sizeof(*a));
        int r;

        if (!a)
                return hwid_fail(HWID_E_NOMEM, NULL);
        a->ca = ca;
        if ((r = cmp_door_new(ca, &a->cmp)) < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

void api_free(api *a) {
        if (!a)
                return;
        cmp_door_free(a->cmp);
        free(a);
}

void api_set_transport(api *a, http_server *srv) {
        atomic_store(&a->transport, srv);
}

/* A read of the core into resp's body: 0, or refused and answered. */
static int read_into(ca_service *ca, const http_request *req, ca_read what, const char *arg, http_response *resp,
                     ca_result *res) {
        int64_t now = (int64_t) time(NULL);
        ca_request in = { .op = CA_OP_READ, .what = what, .now = now, .peer = door_peer(req), .out = &resp->body,
                          .arg = arg };

        if (ca_call(ca, &in, res) == CA_DONE)
                return 0;
        door_respond_refusal(resp, res, NULL, now);
        return -1;
}

static void get_ca(ca_service *ca, const http_request *req, http_response *resp) {
        ca_result res;

        if (read_into(ca, req, CA_READ_CA, NULL, resp, &res) >= 0)
                http_respond_pem(resp, 200, res.text);
        ca_result_clear(&res);
}

/* GET /crl (generation 1's, as ca.crl_url names it) and GET /crl/N
 * (generation N's: ca.crl_url with "/N"), gen: "N" or NULL. */
static void get_crl(ca_service *ca, const http_request *req, const char *gen, http_response *resp) {
        ca_result res;

        if (read_into(ca, req, CA_READ_CRL, gen, resp, &res) >= 0) {
                resp->status = 200;
                resp->content_type = "application/pkix-crl";
        }
        ca_result_clear(&res);
}

static const char *cert_status_name(store_cert_status s) {
        return s == CERT_VALID ? "valid" : s == CERT_REVOKED ? "revoked" : "superseded";
}

static void respond_identity(const ca_identity *id, http_response *resp) {
        const store_cert *c = &id->cert;
        json_object *o = json_object_new_object();

        json_object_object_add(o, "identity", json_object_new_string(c->identity));
        json_object_object_add(o, "serial", json_object_new_string(c->serial));
        json_object_object_add(o, "status", json_object_new_string(cert_status_name(c->status)));
        json_object_object_add(o, "profile", json_object_new_string(c->profile));
        json_object_object_add(o, "not_before", json_object_new_int64(c->not_before));
        json_object_object_add(o, "not_after", json_object_new_int64(c->not_after));
        json_object_object_add(o, "spki_sha256", json_object_new_string(c->spki_sha256));
        /* What a device needs to renew well (its profile's, if it still exists). */
        json_object_object_add(o, "attested", json_object_new_boolean(store_attested(&c->attestation)));
        if (id->has_profile) {
                json_object_object_add(o, "renew_after", json_object_new_int64(id->renew_after));
                json_object_object_add(o, "rotate_key", json_object_new_boolean(id->rotate_key));
                json_object_object_add(o, "attestation", json_object_new_string(id->attestation));
        }
        http_respond_json(resp, 200, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
}

/* GET /v1/identities/{name}: a node may read only its own status. */
static void get_identity(ca_service *ca, const http_request *req, const char *name, http_response *resp) {
        int64_t now = (int64_t) time(NULL);
        ca_request in = { .op = CA_OP_READ_IDENTITY, .now = now, .peer = door_peer(req), .arg = name };
        ca_result res;

        if (ca_call(ca, &in, &res) == CA_DONE)
                respond_identity(&res.id, resp);
        else
                door_respond_refusal(resp, &res, NULL, now);
        ca_result_clear(&res);
}

static bool is(const http_request *req, const char *method, const char *path) {
        return strcmp(req->method, method) == 0 && strcmp(req->path, path) == 0;
}

static const char *suffix(const http_request *req, const char *method, const char *prefix) {
        size_t n = strlen(prefix);

        if (strcmp(req->method, method) != 0 || strncmp(req->path, prefix, n) != 0 || !req->path[n] ||
            strchr(req->path + n, '/'))
                return NULL;
        return req->path + n;
}

static void route(api *a, const http_request *req, http_response *resp) {
        ca_service *ca = a->ca;
        const char *arg;

        if (is(req, "GET", "/ca"))
                get_ca(ca, req, resp);
        else if (is(req, "POST", "/csr"))
                api_enroll(ca, req, resp);
        else if ((arg = suffix(req, "GET", "/v1/requests/")))
                api_poll(ca, arg, resp);
        else if (is(req, "POST", "/v1/renew"))
                api_renew(ca, req, resp);
        else if (is(req, "POST", "/v1/attest"))
                api_attest(ca, req, resp);
        else if (is(req, "GET", "/crl"))
                get_crl(ca, req, NULL, resp);
        else if ((arg = suffix(req, "GET", "/crl/")))
                get_crl(ca, req, arg, resp);
        else if (is(req, "GET", "/healthz"))
                api_healthz(ca, req, resp);
        else if (is(req, "GET", "/readyz"))
                api_readyz(ca, req, resp);
        else if (is(req, "GET", "/metrics"))
                api_metrics(ca, atomic_load(&a->transport), req, resp);
        else if ((arg = suffix(req, "GET", "/v1/identities/")))
                get_identity(ca, req, arg, resp);
        else if (!admin_route(ca, req, resp) && !api_est_route(ca, req, resp) && !cmp_route(a->cmp, req, resp) &&
                 !door_ocsp_route(ca, req, resp))
                http_error(resp, 404, "not_found", "no such endpoint");
}

static void route_public(api *a, const http_request *req, http_response *resp) {
        const char *gen;

        if (is(req, "GET", "/crl"))
                get_crl(a->ca, req, NULL, resp);
        else if ((gen = suffix(req, "GET", "/crl/")))
                get_crl(a->ca, req, gen, resp);
        else if (is(req, "GET", "/ca"))
                get_ca(a->ca, req, resp);
        else if (!door_ocsp_route(a->ca, req, resp))
                http_error(resp, 404, "not_found", "this plain-HTTP listener serves GET /crl, /crl/N, /ca and OCSP only");
}

/* Every request is timed and counted by endpoint and outcome, and an
 * error by its slug, whichever door answered it. */
static void handle(api *a, const http_request *req, http_response *resp,
                   void (*router)(api *, const http_request *, http_response *)) {
        uint64_t t0 = histogram_now_ns();

        ca_service_enter(a->ca);
        router(a, req, resp);
        ca_service_leave(a->ca, metrics_endpoint_of(req->method, req->path), resp->status, resp->error,
                         histogram_now_ns() - t0);
}

void api_handle(void *userdata, const http_request *req, http_response *resp) {
        handle(userdata, req, resp, route);
}

void api_handle_public(void *userdata, const http_request *req, http_response *resp) {
        handle(userdata, req, resp, route_public);
}

void api_on_refusal(void *userdata, int status, const char *error) {
        api *a = userdata;

        (void) status;
        ca_service_count_refusal(a->ca, error);
}
