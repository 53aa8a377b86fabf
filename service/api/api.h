/* The front doors of hwidd's HTTP API.  api.c routes each request to the
 * door of its endpoint; a door parses the request in its own wire format
 * into a ca_request, makes one ca_call() (ca.h) and answers the
 * ca_result: it decides nothing.  The native API is here (enroll.c,
 * attest-api.c, health.c, api.c), EST too (est.c); CMP (api/cmp/) and the
 * admin API (api/admin/) are rooms of their own. */
#pragma once

#include <stdbool.h>

#include "ca.h"
#include "door.h"
#include "http.h"

typedef struct api api;

/* The doors of one CA service (borrowed for the api's lifetime). */
int api_new(ca_service *ca, api **ret);
void api_free(api *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(api *, api_free)

/* For the transport (hwidd.c; userdata is the api).  The HTTPS listener's
 * handler: routes every endpoint. */
void api_handle(void *userdata, const http_request *req, http_response *resp);
/* The handler of the plain-HTTP listener: GET /crl, GET /ca and OCSP
 * (POST /ocsp, GET /ocsp/...), as for anyone; everything else is 404. */
void api_handle_public(void *userdata, const http_request *req, http_response *resp);
/* Counts a refusal the transport made before any handler ran (413, 429,
 * 431): an http_options.on_refusal for the service's listeners. */
void api_on_refusal(void *userdata, int status, const char *error);
/* The HTTPS listener whose connections /metrics shows (NULL: none);
 * unset only once it has stopped. */
void api_set_transport(api *a, http_server *srv);

/* What a request is, for /metrics: a fixed set of endpoints (a path a
 * client made up must not become a label value). */
ca_endpoint metrics_endpoint_of(const char *method, const char *path);

/* ---- the doors' answers (api-respond.c) ---- */

/* An enrollment's, renewal's or poll's answer in the native API's terms:
 * 201 a new certificate, 200 one given again (PEM), 202 pending (JSON),
 * or the refusal. */
void api_respond_certificate(http_response *resp, const ca_result *res, int64_t now);

/* ---- the native doors ---- */

/* POST /csr, GET /v1/requests/{id}, POST /v1/renew (enroll.c). */
void api_enroll(ca_service *ca, const http_request *req, http_response *resp);
void api_poll(ca_service *ca, const char *id, http_response *resp);
void api_renew(ca_service *ca, const http_request *req, http_response *resp);
/* POST /v1/attest (attest-api.c). */
void api_attest(ca_service *ca, const http_request *req, http_response *resp);
/* Health and metrics (health.c); the transport's connections (NULL:
 * none) follow the CA's own series. */
void api_healthz(ca_service *ca, const http_request *req, http_response *resp);
void api_readyz(ca_service *ca, const http_request *req, http_response *resp);
void api_metrics(ca_service *ca, http_server *transport, const http_request *req, http_response *resp);

/* EST, RFC 7030 (est.c): answers every request under /.well-known/est/
 * and returns true; false for any other path. */
bool api_est_route(ca_service *ca, const http_request *req, http_response *resp);
