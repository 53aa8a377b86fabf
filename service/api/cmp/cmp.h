/* CMP (RFC 9483, the Lightweight CMP Profile) in hwidd: the third front
 * door, a room of its own (service/api/cmp/, on OpenSSL's
 * OSSL_CMP_SRV_CTX).  Each message becomes one call of the CA core
 * (ca.h); its result becomes the PKIStatusInfo of the answer.  Inside:
 * cmp-internal.h. */
#pragma once

#include <stdbool.h>

#include "ca.h"
#include "http.h"

/* The door of one CA service: its open transactions and the
 * transactionIDs seen lately, and each address's share of signed answers
 * to unauthenticated messages. */
typedef struct cmp_door cmp_door;

int cmp_door_new(ca_service *ca, cmp_door **ret);
void cmp_door_free(cmp_door *d);

/* CMP over HTTP: answers every request to /.well-known/cmp and under
 * /.well-known/cmp/p/, and returns true; false for any other path. */
bool cmp_route(cmp_door *d, const http_request *req, http_response *resp);
