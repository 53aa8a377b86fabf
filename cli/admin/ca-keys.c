/* The key URIs of hwid ca init and hwid ca import: the CA key made or
 * opened, hwidd's TLS key and the token key next to it, and the URIs
 * hwidd.yaml names. */
#include <stdio.h>
#include <string.h>

#include <p11-kit/uri.h>

#include "ca-setup.h"
#include "ca-stage.h"
#include "error.h"
#include "fsutil.h"
#include "secret.h"
#include "uri.h"

int ca_key_open_or_create(const char *uri, hwid_key_type type, const hsm_options *o, hwid_key **ret,
                          bool *ret_created) {
        int r = hwid_key_open(uri, o, ret);

        *ret_created = false;
        if (r != -HWID_E_KEY_NOT_FOUND)
                return r;
        r = hwid_key_create(uri, type, false, o, ret);
        if (r >= 0)
                *ret_created = true;
        return r;
}

int ca_mac_key_open_or_create(const char *uri, const hsm_options *o, hwid_mac_key **ret, bool *ret_created) {
        int r = hwid_mac_key_open(uri, o, ret);

        *ret_created = false;
        if (r != -HWID_E_KEY_NOT_FOUND)
                return r;
        r = hwid_mac_key_create(uri, false, o, ret);
        if (r >= 0)
                *ret_created = true;
        return r;
}

/* u as a string, with its pin-value (key_uri_parse() took it out of
 * p11-kit's copy), which is wiped again at once. */
static int format_pkcs11(key_uri *u, char **ret) {
        const char *pin;
        int rc;

        if (u->pin_value)
                p11_kit_uri_set_pin_value(u->p11, u->pin_value);
        rc = p11_kit_uri_format(u->p11, P11_KIT_URI_FOR_ANY, ret);
        if ((pin = p11_kit_uri_get_pin_value(u->p11))) {
                secret_wipe((char *) pin, strlen(pin));
                p11_kit_uri_set_pin_value(u->p11, NULL);
        }
        return rc == P11_KIT_URI_OK ? 0 : hwid_fail(HWID_E_URI, "cannot format a PKCS#11 URI for token '%s'", u->token);
}

/* A key next to the CA key at ca_uri: in its token, labelled
 * "<CA key's label>-<suffix>" (module, PIN and all as the CA key's URI
 * says), or for a TPM CA key the key file DIR/file. */
static int sibling_uri(const char *ca_uri, const char *dir, const char *suffix, const char *file, char **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        char label[256];
        CK_ATTRIBUTE attr = { CKA_LABEL, label, 0 };
        int r;

        if ((r = key_uri_parse(ca_uri, &u)) < 0)
                return r;
        if (u->scheme == KEY_URI_TPM2) {
                _cleanup_free_ char *path = path_join(dir, file);
                return path && asprintf(ret, "tpm2:file=%s", path) >= 0 ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        snprintf(label, sizeof(label), "%s-%s", u->object ? u->object : "hwidd", suffix);
        attr.ulValueLen = strlen(label);
        p11_kit_uri_clear_attribute(u->p11, CKA_ID);
        if (p11_kit_uri_set_attribute(u->p11, &attr) != P11_KIT_URI_OK)
                return hwid_fail(HWID_E_URI, "cannot derive the %s key URI from %s", suffix, u->token);
        return format_pkcs11(u, ret);
}

int ca_tls_uri(const char *ca_uri, const char *dir, char **ret) {
        return sibling_uri(ca_uri, dir, "tls", "tls.tss2.pem", ret);
}

int ca_token_key_uri(const char *ca_uri, const char *dir, char **ret) {
        return sibling_uri(ca_uri, dir, "tokens", "tokens.tss2.pem", ret);
}

/* The PIN of a pin-value= into DIR/pin_name (0600): hwidd.yaml then names
 * it with pin-source=, the way production URIs name a PIN. */
static int pin_to_file(const ca_setup *s, key_uri *u, const char *pin_name) {
        _cleanup_free_ char *staged = ca_stage_path(s->stage, pin_name), *final = path_join(s->dir, pin_name);
        _cleanup_free_ char *source = NULL;
        int r;

        if (!staged || !final || asprintf(&source, "file:%s", final) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = write_file_atomic(staged, u->pin_value, strlen(u->pin_value), 0600)) < 0)
                return r;
        p11_kit_uri_set_pin_source(u->p11, source);
        secret_locked_free(TAKE_PTR(u->pin_value));
        printf("wrote the PIN of token '%s' (pin-value= in the key URI) to %s (mode 0600); hwidd.yaml names "
               "it with pin-source=\n", u->token, final);
        return 0;
}

int ca_config_uri(const ca_setup *s, const char *uri, hwid_key *k, const char *pin_name, char **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        hwid_custody c;
        int r;

        if ((r = key_uri_parse(uri, &u)) < 0)
                return r;
        if (u->scheme != KEY_URI_PKCS11 || (!u->pin_value && (u->module_path || u->module_name)))
                return (*ret = strdup(uri)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        if (u->pin_value && (r = pin_to_file(s, u, pin_name)) < 0)
                return r;
        /* hwidd then loads that module alone instead of every module
         * registered with p11-kit (less memory, less start-up work, no
         * surprise from unrelated modules). */
        if (!u->module_path && !u->module_name) {
                if ((r = hwid_key_custody(k, &c)) < 0)
                        return r;
                if (c.module_path[0])
                        p11_kit_uri_set_module_path(u->p11, c.module_path);
        }
        return format_pkcs11(u, ret);
}
