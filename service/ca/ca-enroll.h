/* Inside the core's enrollment: ca-enroll.c decides and issues,
 * ca-enroll-who.c says who asks and whether they may, ca-replay.c
 * answers the same enrollment made before with what it got. */
#pragma once

#include "ca-internal.h"

/* A CN as ca_request_cn() copies it, and a stored identity equal to one. */
#define CA_IDENTITY_BUF 128

/* Authentication and the right to enroll.  A bootstrap token comes
 * first, before anything else is looked at; without one, only a TPM on
 * the EK allowlist, once its evidence is verified (by_ek: what it proved,
 * cn: the name it asks for), or (EST, CMP) the client certificate.  A
 * genuine token whose uses are spent may still replay its enrollment, and
 * an EST client its earlier request: then *ret_done, res answered. */
int ca_enroll_authorize(ca_service *ca, const ca_request *req, const ca_csr *c, const ca_attested *by_ek,
                        const char *cn, ca_auth *a, ca_result *res, bool *ret_done);

/* The same enrollment again -- the same token (or TPM), the same key (the
 * CSR proves it is held), the same name, within the token's lifetime --
 * gets the certificate it was issued (CA_AGAIN), as a renewal whose
 * answer was lost does.  *ret_done false when this is not that
 * enrollment; then ret_live (if not NULL) gets the identity of the name's
 * live certificate as stored, "" if it has none: the lookup made once. */
int ca_replay_enrollment(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                         const char *cn, int64_t now, ca_result *res, bool *ret_done,
                         char ret_live[CA_IDENTITY_BUF]);
/* The same enrollment (the same token or TPM, key and name) made before,
 * or a moment ago by an identical request that committed first: its
 * answer is this one's too -- the live certificate it got, or the request
 * it is held as (that request's state, as a poll answers it). */
int ca_answer_same_enrollment(ca_service *ca, const ca_auth *a, const policy_issue *iss, const csr_info *csr,
                              const char *cn, int64_t now, ca_result *res, bool *ret_done);
