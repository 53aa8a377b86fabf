/* hwid_mac_key: a backend's MAC key object (p11-mac.c, tpm-mac.c) and the
 * URI it was opened at.  Picks the backend from the URI scheme, as
 * key.c does for signing keys. */
#include <string.h>

#include "backend.h"
#include "error.h"

struct hwid_mac_key {
        const hsm_mac_backend *backend;
        void *obj;
        char *uri; /* for messages: any pin-value= masked */
};

static int mac_acquire(const char *uri, bool create, bool force, const hsm_options *opts, hwid_mac_key **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        _cleanup_(hwid_mac_key_freep) hwid_mac_key *k = calloc(1, sizeof(*k));
        const hsm_options none = { 0 };
        int r;

        if (!k || !(k->uri = hsm_display_uri(uri)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = key_uri_parse(uri, &u)) < 0)
                return r;
        k->backend = u->scheme == KEY_URI_PKCS11 ? &hsm_mac_pkcs11 : &hsm_mac_tpm2;
        if (!opts)
                opts = &none;
        r = create ? k->backend->create(u, force, opts, &k->obj) : k->backend->open(u, opts, &k->obj);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(k);
        return 0;
}

int hwid_mac_key_create(const char *uri, bool force, const hsm_options *opts, hwid_mac_key **ret) {
        return mac_acquire(uri, true, force, opts, ret);
}

int hwid_mac_key_open(const char *uri, const hsm_options *opts, hwid_mac_key **ret) {
        return mac_acquire(uri, false, false, opts, ret);
}

int hwid_mac_key_hmac_sha256(hwid_mac_key *k, const void *data, size_t len, uint8_t ret[HWID_MAC_LEN]) {
        if (!data || len == 0 || len > HWID_MAC_DATA_MAX)
                return hwid_fail(HWID_E_INVALID, "an HMAC with %s takes 1..%d bytes, not %zu", k->uri,
                                 HWID_MAC_DATA_MAX, len);
        return k->backend->hmac_sha256(k->obj, data, len, ret);
}

int hwid_mac_key_custody(hwid_mac_key *k, hwid_custody *ret) {
        hwid_custody c = { .backend = k->backend->name };
        int r = k->backend->custody(k->obj, &c);

        if (r < 0)
                return r;
        c.backend = k->backend->name;
        *ret = c;
        return 0;
}

int hwid_mac_key_delete(hwid_mac_key *k) {
        return k->backend->remove(k->obj);
}

const char *hwid_mac_key_uri(const hwid_mac_key *k) {
        return k->uri;
}

void hwid_mac_key_free(hwid_mac_key *k) {
        if (!k)
                return;
        if (k->obj)
                k->backend->free(k->obj);
        free(k->uri);
        free(k);
}
