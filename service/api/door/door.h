/* What every front door of hwidd's HTTP API shares (the native API, EST,
 * CMP, the admin API): the credentials of an HTTP request as the CA core
 * takes them, and a refusal of the core as a JSON error. */
#pragma once

#include <stdint.h>

#include "ca.h"
#include "http.h"

/* The client certificate of the request, with the transport's verdict. */
ca_peer door_peer(const http_request *req);
/* The refusal in res as a JSON error ({"error", "message"}; "not yet
 * valid" adds the server's clock), and, with retry_key (e.g.
 * "renewal_opens_at"), when asking again can succeed: res->retry_at as
 * that member and Retry-After. */
void door_respond_refusal(http_response *resp, const ca_result *res, const char *retry_key, int64_t now);
