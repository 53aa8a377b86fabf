/* The admin API (/v1/admin/..., docs/OPERATIONS.md), as api.c's router
 * sees it: one route function.  Inside, admin-internal.h. */
#pragma once

#include <stdbool.h>

#include "ca.h"
#include "http.h"

/* Answers every request under /v1/admin/ and returns true; false for any
 * other path. */
bool admin_route(ca_service *ca, const http_request *req, http_response *resp);
/* The same call made in process by the CA host's administrator (hwid's
 * admin commands with --config, run by hwid-admin: no TLS, no client
 * certificate) as actor ("admin:<login>"), on a service of
 * ca_service_new_host(). */
bool admin_route_host(ca_service *ca, const char *actor, const http_request *req, http_response *resp);
