/* The admin operations on the EK allowlist (list, add, import, remove),
 * each entry checked by ek-entry.h;
 * and on the identities bound to the TPM that attested them (list,
 * release: docs/ATTESTATION.md, "A name is bound to its TPM"). */
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "ca-admin-internal.h"
#include "ek-entry.h"
#include "error.h"

#define EK_KEY_MAX 72 /* "sha256:" and 64 hex digits, or a name */

/* Without attestation.ek_roots no entry would ever be used. */
static int need_attestation(const admin_call *c) {
        if (c->ca->cfg->ek_roots)
                return 0;
        return hwid_fail(HWID_E_WRONG_STATE, "this CA does not verify TPM attestation (no attestation.ek_roots "
                         "in its configuration): an EK allowlist entry would never be used");
}

int admin_ek_list(admin_call *c) {
        int r = store_ek_list(c->ca->store, &c->out->eks, &c->out->n_eks);

        if (r < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "%zu entries", c->out->n_eks);
        return 0;
}

/* The entry the call describes: "cn", "profile", and "ek_cert" (base64
 * of the certificate, DER or PEM) or "ek_pub_sha256". */
static int read_entry(admin_call *c, store_ek *e) {
        const ca_admin_args *in = c->in;
        _cleanup_free_ uint8_t *der = NULL;
        size_t len;
        int r;

        if ((r = need_attestation(c)) < 0)
                return r;
        if (in->ek_cert) {
                if (base64_decode(in->ek_cert, strlen(in->ek_cert), false, &der, &len) < 0)
                        return hwid_fail(HWID_E_INVALID, "\"ek_cert\" is not base64 (of the certificate)");
                r = ek_entry_from_cert(c->ca->cfg, der, len, in->file ? in->file : "the EK certificate", e);
        } else
                r = ek_entry_pub_hash(in->ek_pub_sha256, "\"ek_pub_sha256\"", e);
        return r < 0 ? r : ek_entry_names(c->ca->cfg, in->cn, in->profile, in->cn, e);
}

int admin_ek_add(admin_call *c) {
        store_ek *e = &c->out->ek;
        int r;

        if ((r = read_entry(c, e)) < 0)
                return r;
        admin_set_target(c, e->identity);
        e->added_at = c->now;
        if ((r = store_ek_add(c->ca->store, e, 1, NULL, c->now)) < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "profile %s, EK sha256:%s", e->profile,
                 e->ek_pub_sha256[0] ? e->ek_pub_sha256 : e->ek_cert_sha256);
        return 0;
}

/* A manifest (base64 of the file) and the profile of entries that name
 * none: all entries or none. */
int admin_ek_import(admin_call *c) {
        _cleanup_free_ uint8_t *raw = NULL;
        _cleanup_free_ char *text = NULL;
        store_ek *v = NULL;
        size_t len, n = 0;
        int r;

        if ((r = need_attestation(c)) < 0)
                return r;
        if (base64_decode(c->in->manifest, strlen(c->in->manifest), false, &raw, &len) < 0)
                return hwid_fail(HWID_E_INVALID, "\"manifest\" is not base64 (of the manifest file)");
        if (!(text = malloc(len + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        memcpy(text, raw, len);
        text[len] = '\0';
        if ((r = ek_manifest_parse(c->ca->cfg, c->in->file ? c->in->file : "the manifest", text, len, c->in->profile,
                                   &v, &n)) < 0)
                return r;
        r = store_ek_add(c->ca->store, v, n, NULL, c->now);
        store_ek_list_free(v, n);
        if (r < 0)
                return r;
        c->out->count = n;
        snprintf(c->note, sizeof(c->note), "%zu entr%s", n, n == 1 ? "y" : "ies");
        return 0;
}

/* An entry by its CN or the SHA-256 of its EK public key or certificate
 * ("sha256:" optional). */
int admin_ek_remove(admin_call *c) {
        const char *key = c->in->arg;
        int r;

        if (strncmp(key, "sha256:", 7) == 0)
                key += 7;
        if (!key[0] || strlen(key) > EK_KEY_MAX)
                return hwid_fail(HWID_E_INVALID, "an EK allowlist entry is named by its CN or the SHA-256 of its "
                                 "EK public key or certificate");
        if ((r = store_ek_remove(c->ca->store, key, NULL, c->now)) < 0)
                return r;
        c->out->key = key;
        snprintf(c->note, sizeof(c->note), "taken off the EK allowlist");
        return 0;
}

/* ---------- identities bound to a TPM ---------- */

int admin_identity_list(admin_call *c) {
        int r = store_binding_list(c->ca->store, &c->out->bindings, &c->out->n_bindings);

        if (r < 0)
                return r;
        snprintf(c->note, sizeof(c->note), "%zu bound", c->out->n_bindings);
        return 0;
}

/* Its binding goes, audited in the same transaction with the TPM it was
 * bound to; 404 if it is bound to none. */
int admin_identity_release(admin_call *c) {
        store_binding *b = &c->out->binding;
        char reason[200];
        store_audit a = { .at = c->now, .actor = c->auth.actor, .action = "identity.release", .outcome = "allow",
                          .target = c->in->arg, .reason = reason };
        int r;

        if ((r = store_binding_get(c->ca->store, c->in->arg, b)) < 0)
                return r;
        admin_release_reason(b, reason, sizeof(reason));
        if ((r = store_binding_release(c->ca->store, b, &a, c->now)) < 0)
                return r;
        c->audited = true;
        return 0;
}
