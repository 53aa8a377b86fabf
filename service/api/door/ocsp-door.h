/* The OCSP door (RFC 6960 appendix A, RFC 5019): POST /ocsp with the DER
 * request as its body, GET /ocsp/<base64 of it>, on both listeners.  It
 * reads the request with ocsp-wire.h, makes one ca_call() (CA_OP_OCSP,
 * which decides and signs) and answers application/ocsp-response: 200,
 * or 400 with the unsigned malformedRequest for what it could not read. */
#pragma once

#include <stdbool.h>

#include "ca.h"
#include "http.h"

/* Answers a request for /ocsp or /ocsp/... and returns true; false for
 * any other path. */
bool door_ocsp_route(ca_service *ca, const http_request *req, http_response *resp);
