/* Parts of a renewal that a device coming back by attestation
 * (reenroll.c) does the same way: the request and the servers.  Defined
 * in renew.c. */
#pragma once

#include "attest.h"
#include "client.h"
#include "device.h"
#include "renew.h"

/* The CSR for k (CN: the identity of s) as PEM, or with att the JSON body
 * with the answer to its challenge beside it; k is released in the TPM
 * whatever happens. */
int renew_request_body(const renew_opts *o, const device_state *s, hwid_key *k, device_attest *att,
                       char **ret_body);

/* The client options for the servers of s, the one that answered last
 * first, with failover told through o's note (or progress) callback. */
void renew_failover_opts(const renew_opts *o, const device_state *s, const char *order[DEVICE_ORDER_MAX],
                         client_opts *co);
