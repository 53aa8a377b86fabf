/* What the admin door reads of each call (admin-internal.h): the path
 * parameter, the query and the JSON body, checked and bounded, into the
 * arguments of the core's admin operation.  Whatever is refused here is
 * answered by the core after authentication, as it always was. */
#include <stdlib.h>
#include <string.h>

#include "admin-internal.h"
#include "ek-entry.h"
#include "error.h"
#include "tpm-attest.h"

#define TOKEN_BATCH_MAX 1000
#define TOKEN_TTL_MAX (3650LL * 86400)
#define TOKEN_USES_MAX 1000000
#define DESCRIPTION_MAX 256
#define REASON_MAX 256
#define IDENTITY_MAX 255
#define AUDIT_READ_MAX 100000
/* base64 of the certificate file as `hwid ek add` reads it (DER or PEM,
 * at most twice TPM_EK_CERT_MAX bytes). */
#define EK_CERT_B64_MAX ((2 * TPM_EK_CERT_MAX + 2) / 3 * 4)
#define EK_KEY_MAX 72 /* "sha256:" and 64 hex digits, or a name */
/* A file's name, which messages about what it holds name. */
#define FILE_NAME_MAX 1024
/* A manifest is bounded by the request body's limit (limits.max_body). */
#define MANIFEST_B64_MAX (64u << 20)

static const char *const no_keys[] = { NULL };

int admin_parse_no_keys(admin_call *c) {
        return admin_body_keys(c, no_keys);
}

/* {"profile", "name_pattern", "ttl", "uses", "description", "count"}. */
int admin_parse_token_create(admin_call *c) {
        static const char *const keys[] = { "profile", "name_pattern", "ttl", "uses", "description", "count", NULL };
        ca_admin_args *t = &c->args;
        int r;

        t->profile = "default";
        t->ttl = 86400;
        t->uses = 1;
        t->count = 1;
        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "profile", 64, &t->profile)) < 0 ||
            (r = admin_body_str(c, "name_pattern", 255, &t->name_pattern)) < 0 ||
            (r = admin_body_str(c, "description", DESCRIPTION_MAX, &t->description)) < 0 ||
            (r = admin_body_int(c, "ttl", 1, TOKEN_TTL_MAX, &t->ttl)) < 0 ||
            (r = admin_body_int(c, "uses", 1, TOKEN_USES_MAX, &t->uses)) < 0 ||
            (r = admin_body_int(c, "count", 1, TOKEN_BATCH_MAX, &t->count)) < 0)
                return r;
        return 0;
}

/* ?all=true: the decided requests too. */
int admin_parse_request_list(admin_call *c) {
        _cleanup_free_ char *all = NULL;
        int r;

        if ((r = admin_query(c, "all", 8, &all)) < 0)
                return r;
        if (all && strcmp(all, "true") != 0 && strcmp(all, "false") != 0)
                return hwid_fail(HWID_E_INVALID, "query parameter all must be true or false");
        c->args.all = all && strcmp(all, "true") == 0;
        return 0;
}

/* A denial may say why: {"reason"}. */
int admin_parse_deny(admin_call *c) {
        static const char *const keys[] = { "reason", NULL };
        int r;

        if ((r = admin_body_keys(c, keys)) < 0)
                return r;
        return admin_body_str(c, "reason", REASON_MAX, &c->args.reason);
}

/* ?identity=NAME: of this identity only. */
int admin_parse_cert_list(admin_call *c) {
        int r = admin_query(c, "identity", IDENTITY_MAX, &c->identity);

        c->args.identity = c->identity;
        return r;
}

/* The body of a revocation: {"reason": NAME}, default unspecified. */
int admin_parse_cert_revoke(admin_call *c) {
        static const char *const keys[] = { "reason", NULL };
        const char *name = "unspecified";
        int r;

        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "reason", 64, &name)) < 0 ||
            (r = revocation_reason_parse(name, &c->args.reason_code)) < 0)
                return r;
        c->args.reason = name;
        return 0;
}

int admin_parse_identity_revoke(admin_call *c) {
        if (strlen(c->args.arg) > IDENTITY_MAX)
                return hwid_fail(HWID_E_INVALID, "an identity has at most %d bytes", IDENTITY_MAX);
        return admin_parse_cert_revoke(c);
}

static int add_record(const store_audit *a, void *userdata) {
        json_object *o = admin_json_audit(a);

        if (!o || json_object_array_add(userdata, o) < 0) {
                json_object_put(o);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* ?limit=N: the last N records (default 50; 0: as many as the answer may
 * hold), added to the answer as the core reads them. */
int admin_parse_audit_read(admin_call *c) {
        _cleanup_free_ char *limit_s = NULL;
        json_object *list = NULL;
        long long limit = 50;
        char *end;
        int r;

        if ((r = admin_query(c, "limit", 12, &limit_s)) < 0)
                return r;
        if (limit_s) {
                limit = strtoll(limit_s, &end, 10);
                if (*end || limit < 0 || limit > AUDIT_READ_MAX)
                        return hwid_fail(HWID_E_INVALID, "limit must be 0 to %d (0: up to %d)", AUDIT_READ_MAX,
                                         AUDIT_READ_MAX);
        }
        c->args.limit = (size_t) limit;
        if (!(c->answer = admin_list_object("records", &list)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        c->args.audit_fn = add_record;
        c->args.audit_userdata = list;
        return 0;
}

/* {"cn", "profile", and "ek_cert" (base64 of the certificate, DER or PEM)
 * or "ek_pub_sha256"; "file": the certificate's file name, for messages}. */
int admin_parse_ek_add(admin_call *c) {
        static const char *const keys[] = { "cn", "profile", "ek_cert", "ek_pub_sha256", "file", NULL };
        ca_admin_args *a = &c->args;
        int r;

        a->profile = "default";
        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "cn", EK_NAME_MAX, &a->cn)) < 0 ||
            (r = admin_body_str(c, "profile", 64, &a->profile)) < 0 ||
            (r = admin_body_str(c, "ek_cert", EK_CERT_B64_MAX, &a->ek_cert)) < 0 ||
            (r = admin_body_str(c, "ek_pub_sha256", EK_KEY_MAX, &a->ek_pub_sha256)) < 0 ||
            (r = admin_body_str(c, "file", FILE_NAME_MAX, &a->file)) < 0)
                return r;
        if (!a->cn || !a->ek_cert == !a->ek_pub_sha256)
                return hwid_fail(HWID_E_INVALID, "an EK allowlist entry needs \"cn\" and one of \"ek_cert\" "
                                 "(base64) or \"ek_pub_sha256\"");
        return 0;
}

/* {"manifest": base64 of a manifest file, "profile", "file": its name,
 * for messages}. */
int admin_parse_ek_import(admin_call *c) {
        static const char *const keys[] = { "manifest", "profile", "file", NULL };
        int r;

        c->args.profile = "default";
        if ((r = admin_body_keys(c, keys)) < 0 ||
            (r = admin_body_str(c, "manifest", MANIFEST_B64_MAX, &c->args.manifest)) < 0 ||
            (r = admin_body_str(c, "profile", 64, &c->args.profile)) < 0 ||
            (r = admin_body_str(c, "file", FILE_NAME_MAX, &c->args.file)) < 0)
                return r;
        if (!c->args.manifest)
                return hwid_fail(HWID_E_INVALID, "\"manifest\" (base64 of the manifest file) is missing");
        return 0;
}
