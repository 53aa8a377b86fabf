/* The front doors of hwidd's HTTP API: api.c routes each request to the
 * handler of its endpoint, which answers it whole (who asks, the CA's
 * decision, the response).  The handlers of api/ are declared here; the
 * admin API's are in api/admin/ (admin-api.h), POST /v1/attest's in
 * attest-api.h. */
#pragma once

#include <stdbool.h>

#include "ca-internal.h"

/* For the transport (hwidd.c).  The HTTPS listener's handler: routes
 * every endpoint. */
void ca_service_handle(void *userdata, const http_request *req, http_response *resp);
/* The handler of the plain-HTTP listener: GET /crl and GET /ca, as for
 * anyone; everything else is 404. */
void ca_service_handle_public(void *userdata, const http_request *req, http_response *resp);
/* Counts a refusal the transport made before any handler ran (413, 429,
 * 431): an http_options.on_refusal for the service's listeners. */
void ca_service_on_refusal(void *userdata, int status, const char *error);

/* Health and metrics (health.c). */
void ca_get_healthz(ca_service *ca, const http_request *req, http_response *resp);
void ca_get_readyz(ca_service *ca, const http_request *req, http_response *resp);
void ca_get_metrics(ca_service *ca, const http_request *req, http_response *resp);

/* EST, RFC 7030 (est.c): answers every request under /.well-known/est/
 * and returns true; false for any other path. */
bool ca_est_route(ca_service *ca, const http_request *req, http_response *resp);
/* CMP, RFC 9483 (cmp.c): answers every request to /.well-known/cmp and
 * under /.well-known/cmp/p/, and returns true; false for any other path. */
bool ca_cmp_route(ca_service *ca, const http_request *req, http_response *resp);

/* Native enrollment, polling and renewal (enroll.c). */
void ca_enroll(ca_service *ca, const http_request *req, http_response *resp);
/* EST simpleenroll without a token: by the client certificate, under
 * the profile label (NULL: the one that accepts that certificate's),
 * as est.enroll_by_certificate allows (policy_check_enroll()). */
void ca_enroll_by_certificate(ca_service *ca, const http_request *req, const char *label, http_response *resp);
/* POST /csr for a bootstrap token whose secret the caller has verified
 * itself (CMP's password-based MAC, EST's Basic credentials): its secret
 * is not checked again (an Authorization header only names what to read
 * ahead). */
void ca_enroll_token(ca_service *ca, const http_request *req, const char *token_id, http_response *resp);
void ca_poll(ca_service *ca, const char *id, http_response *resp);
/* The request token_id made for csr's key and name, if any, answered as a
 * poll of it would be (*ret_done); nothing and *ret_done false otherwise. */
int ca_answer_request_of(ca_service *ca, const char *token_id, const csr_info *csr, http_response *resp,
                         bool *ret_done);
void ca_renew(ca_service *ca, const http_request *req, http_response *resp);
