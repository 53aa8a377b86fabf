/* A provisioner's scope as recorded with its certificate (store_cert.scope):
 * JSON {"profiles": [...], "name_patterns": [...]}, written at issuance
 * from the profile and read back at every request; never taken from
 * what the client presents. */
#pragma once

#include "policy.h"

/* The scope of certificates issued under prof, or *ret NULL when the
 * profile gives none (every role but provisioner). */
int cert_scope_encode(const policy_profile *prof, char **ret);

/* The lists of a recorded scope (NULL json: both NULL).  Each is
 * NULL-terminated and freed with cert_scope_strv_free().
 * -HWID_E_INVALID if json is not a scope. */
int cert_scope_decode(const char *json, char ***ret_profiles, char ***ret_name_patterns);
void cert_scope_strv_free(char **v);
