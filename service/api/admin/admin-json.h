/* The records of the admin API as JSON: encoded by the admin door
 * (admin-encode.c) for a remote hwid, and in process for the CA host's
 * (hwid-admin), so that `hwid token list --dir` prints exactly what
 * `hwid token list --config` does: hwid's admin commands print these
 * members (cli/common/).  A certificate's is read back into the store's
 * struct too (the round trip of the tests).
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

/* A certificate's record read back (-HWID_E_INVALID naming the member
 * when o is none); store_cert_clear() frees it. */
int admin_json_to_cert(json_object *o, store_cert *ret);

/* The names of store states ("active", "pending", "valid", ...). */
const char *admin_token_state_name(store_token_state s);
const char *admin_request_status_name(store_request_status s);
const char *admin_cert_status_name(store_cert_status s);
