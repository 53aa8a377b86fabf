/* The admin API (/v1/admin/..., docs/OPERATIONS.md), as api.c's router
 * sees it: one route function.  Inside, admin-internal.h. */
#pragma once

#include <stdbool.h>

#include "ca.h"
#include "http.h"

/* Answers every request under /v1/admin/ and returns true; false for any
 * other path. */
bool admin_route(ca_service *ca, const http_request *req, http_response *resp);
