/* The admin API's EK allowlist (list, add, import, remove): what `hwid ek`
 * makes on the CA host, checked the same way (ek-entry.h).  Adding or
 * removing an entry is for admin alone; an auditor may list them. */
#include <stdlib.h>
#include <string.h>

#include "admin-internal.h"
#include "base64.h"
#include "ek-entry.h"
#include "error.h"
#include "tpm-attest.h"

/* base64 of the certificate file as `hwid ek add` reads it (DER or PEM,
 * at most twice TPM_EK_CERT_MAX bytes). */
#define EK_CERT_B64_MAX ((2 * TPM_EK_CERT_MAX + 2) / 3 * 4)
#define EK_KEY_MAX 72 /* "sha256:" and 64 hex digits, or a name */
/* A manifest is bounded by the request body's limit (limits.max_body). */
#define MANIFEST_B64_MAX (64u << 20)

static const char *const no_keys[] = { NULL };

/* Without attestation.ek_roots no entry would ever be used. */
static int need_attestation(const admin_call *c) {
        if (c->ca->cfg->ek_roots)
                return 0;
        return hwid_fail(HWID_E_WRONG_STATE, "this CA does not verify TPM attestation (no attestation.ek_roots "
                         "in its configuration): an EK allowlist entry would never be used");
}

int admin_ek_list(admin_call *c) {
        json_object *answer, *list = NULL;
        store_ek *v = NULL;
        size_t n = 0;
        int r;

        if ((r = admin_body_keys(c, no_keys)) < 0 || (r = store_ek_list(c->ca->store, &v, &n)) < 0)
                return r;
        answer = admin_list_object("entries", &list);
        for (size_t i = 0; answer && i < n; i++)
                if (json_object_array_add(list, admin_json_ek(&v[i])) < 0)
                        r = -1;
        store_ek_list_free(v, n);
        if (!answer || r < 0) {
                json_object_put(answer);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        snprintf(c->note, sizeof(c->note), "%zu entries", n);
        return admin_respond(c, 200, answer);
}

/* The entry the body describes: {"cn", "profile", and "ek_cert" (base64
 * of the certificate, DER or PEM) or "ek_pub_sha256"}. */
static int read_entry(admin_call *c, store_ek *e) {
        static const char *const keys[] = { "cn", "profile", "ek_cert", "ek_pub_sha256", NULL };
        const char *cn = NULL, *profile = "default", *cert = NULL, *hash = NULL;
        _cleanup_free_ uint8_t *der = NULL;
        size_t len;
        int r;

        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "cn", EK_NAME_MAX, &cn)) < 0 ||
            (r = admin_body_str(c, "profile", 64, &profile)) < 0 ||
            (r = admin_body_str(c, "ek_cert", EK_CERT_B64_MAX, &cert)) < 0 ||
            (r = admin_body_str(c, "ek_pub_sha256", EK_KEY_MAX, &hash)) < 0)
                return r;
        if (!cn || !cert == !hash)
                return hwid_fail(HWID_E_INVALID, "an EK allowlist entry needs \"cn\" and one of \"ek_cert\" "
                                 "(base64) or \"ek_pub_sha256\"");
        if ((r = need_attestation(c)) < 0)
                return r;
        if (cert) {
                if (base64_decode(cert, strlen(cert), false, &der, &len) < 0)
                        return hwid_fail(HWID_E_INVALID, "\"ek_cert\" is not base64 (of the certificate)");
                r = ek_entry_from_cert(c->ca->cfg, der, len, "the EK certificate", e);
        } else
                r = ek_entry_pub_hash(hash, "\"ek_pub_sha256\"", e);
        return r < 0 ? r : ek_entry_names(c->ca->cfg, cn, profile, cn, e);
}

int admin_ek_add(admin_call *c) {
        _cleanup_(store_ek_clear) store_ek e = { 0 };
        json_object *answer;
        int r;

        if ((r = read_entry(c, &e)) < 0)
                return r;
        snprintf(c->target, sizeof(c->target), "%s", e.identity);
        for (char *p = c->target; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = '?';
        e.added_at = c->now;
        if ((r = store_ek_add(c->ca->store, &e, 1, NULL, c->now)) < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "profile %s, EK sha256:%s", e.profile,
                 e.ek_pub_sha256[0] ? e.ek_pub_sha256 : e.ek_cert_sha256);
        if (!(answer = admin_json_ek(&e)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return admin_respond(c, 201, answer);
}

/* {"manifest": base64 of a manifest file, "profile"}: all entries or none. */
int admin_ek_import(admin_call *c) {
        static const char *const keys[] = { "manifest", "profile", NULL };
        const char *b64 = NULL, *profile = "default";
        _cleanup_free_ uint8_t *raw = NULL;
        _cleanup_free_ char *text = NULL;
        store_ek *v = NULL;
        json_object *answer;
        size_t len, n = 0;
        int r;

        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "manifest", MANIFEST_B64_MAX, &b64)) < 0 ||
            (r = admin_body_str(c, "profile", 64, &profile)) < 0)
                return r;
        if (!b64)
                return hwid_fail(HWID_E_INVALID, "\"manifest\" (base64 of the manifest file) is missing");
        if ((r = need_attestation(c)) < 0)
                return r;
        if (base64_decode(b64, strlen(b64), false, &raw, &len) < 0)
                return hwid_fail(HWID_E_INVALID, "\"manifest\" is not base64 (of the manifest file)");
        if (!(text = malloc(len + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        memcpy(text, raw, len);
        text[len] = '\0';
        if ((r = ek_manifest_parse(c->ca->cfg, "the manifest", text, len, profile, &v, &n)) < 0)
                return r;
        r = store_ek_add(c->ca->store, v, n, NULL, c->now);
        store_ek_list_free(v, n);
        if (r < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "%zu entr%s", n, n == 1 ? "y" : "ies");
        if (!(answer = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(answer, "added", json_object_new_int64((int64_t) n));
        return admin_respond(c, 201, answer);
}

int admin_ek_remove(admin_call *c) {
        const char *key = c->arg;
        json_object *answer;
        int r;

        if ((r = admin_body_keys(c, no_keys)) < 0)
                return r;
        if (strncmp(key, "sha256:", 7) == 0)
                key += 7;
        if (!key[0] || strlen(key) > EK_KEY_MAX)
                return hwid_fail(HWID_E_INVALID, "an EK allowlist entry is named by its CN or the SHA-256 of its "
                                 "EK public key or certificate");
        if ((r = store_ek_remove(c->ca->store, key, NULL, c->now)) < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "taken off the EK allowlist");
        if (!(answer = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(answer, "removed", key);
        return admin_respond(c, 200, answer);
}
