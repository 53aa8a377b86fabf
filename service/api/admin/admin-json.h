/* The records of the admin API as JSON: encoded by hwidd (admin-api*.c),
 * decoded by the hwid CLI, so that a remote `hwid token list` prints
 * exactly what a local one does.  One file for both directions keeps the
 * field names in one place.
 *
 *   token       {"id", "state", "profile", "name_pattern"|null, "description"|null,
 *                "created_at", "expires_at", "uses_total", "uses_left", "revoked"}
 *   request     {"id", "status", "identity", "profile", "token_id", "spki_sha256",
 *                "reason"|null, "serial"|null, "created_at", "updated_at"}; in a
 *               listing also "may_approve", "may_deny" (for the caller) and
 *               "approve_refused" (why not, for a pending one it may not approve)
 *   certificate {"serial", "status", "identity", "subject", "profile", "role",
 *                "scope"|null, "spki_sha256", "not_before", "not_after", "revoked_at",
 *                "revocation_reason", "request_id"|null, "created_at",
 *                "attestation": {"ek_pub_sha256", "ek_cert_sha256", "ak_name"}|null[, "pem"]}
 *   audit       {"at", "actor", "action", "target"|null, "outcome", "reason"|null,
 *                "token_id"|null}
 *   ek          {"identity", "profile", "ek_pub_sha256"|null, "ek_cert_sha256"|null,
 *                "added_at"}  (an EK allowlist entry)
 *   binding     {"identity", "ek_pub_sha256", "ek_cert_sha256"|null, "serial",
 *                "bound_at"}  (an identity bound to the TPM that attested it)
 * Times are Unix seconds. */
#pragma once

#include <json-c/json.h>

#include "ca-admin.h"   /* admin_release_reason() */
#include "cleanup.h"
#include "crl-reason.h" /* the revocation reasons' names */
#include "json-write.h" /* json_set_str(), json_wipe_string() */
#include "store.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put)

json_object *admin_json_token(const store_token *t, int64_t now);
json_object *admin_json_request(const store_request *r);
/* with_pem: add the certificate itself ("pem"). */
json_object *admin_json_cert(const store_cert *c, bool with_pem);
json_object *admin_json_audit(const store_audit *a);
json_object *admin_json_ek(const store_ek *e);
json_object *admin_json_binding(const store_binding *b);

/* Decoders: -HWID_E_INVALID naming the field when o is not such a record.
 * Strings are copied (store_*_clear() frees them), except the audit
 * record's, which point into o. */
int admin_json_to_token(json_object *o, store_token *ret);
int admin_json_to_request(json_object *o, store_request *ret);
int admin_json_to_cert(json_object *o, store_cert *ret);
int admin_json_to_audit(json_object *o, store_audit *ret);
int admin_json_to_ek(json_object *o, store_ek *ret);
int admin_json_to_binding(json_object *o, store_binding *ret);

/* The names of store states ("active", "pending", "valid", ...). */
const char *admin_token_state_name(store_token_state s);
const char *admin_request_status_name(store_request_status s);
const char *admin_cert_status_name(store_cert_status s);
