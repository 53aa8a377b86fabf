/* Inside the core's admin operations: ca-admin.c authenticates,
 * authorizes, audits and does the tokens; ca-admin-records.c the
 * requests, certificates and the audit log; ca-admin-ek.c the EK
 * allowlist and the identities bound to a TPM. */
#pragma once

#include "ca-internal.h"

typedef struct admin_call {
        ca_service *ca;
        const ca_admin_args *in;
        ca_admin_result *out;
        ca_auth auth;
        int64_t now;
        /* Filled by the operation for the audit record of a success. */
        char target[160];      /* defaults to the path parameter */
        char note[512];        /* the record's reason */
        bool audited;          /* the operation wrote its records itself */
} admin_call;

typedef int (*admin_fn)(admin_call *c);

int admin_token_list(admin_call *c);
int admin_token_create(admin_call *c);
int admin_token_revoke(admin_call *c);
int admin_request_list(admin_call *c);  /* ca-admin-records.c */
int admin_request_approve(admin_call *c);
int admin_request_deny(admin_call *c);
int admin_cert_list(admin_call *c);
int admin_cert_show(admin_call *c);
int admin_cert_revoke(admin_call *c);
int admin_identity_revoke(admin_call *c);
int admin_audit_read(admin_call *c);
int admin_ek_list(admin_call *c);       /* ca-admin-ek.c */
int admin_ek_add(admin_call *c);
int admin_ek_import(admin_call *c);
int admin_ek_remove(admin_call *c);
int admin_identity_list(admin_call *c);
int admin_identity_release(admin_call *c);

/* Not pending is the request's state, not an identity's live certificate:
 * -HWID_E_CONFLICT becomes -HWID_E_WRONG_STATE. */
int admin_state_error(int r);
/* The target an audit record names: s, one line of printable text. */
void admin_set_target(admin_call *c, const char *s);
