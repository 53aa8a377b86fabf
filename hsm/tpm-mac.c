/* The TPM 2.0 MAC key backend: a keyedHash object with an HMAC-SHA256
 * scheme, made by the TPM (sensitiveDataOrigin: its 32-byte key never
 * existed outside it), fixedTPM|fixedParent, usable for TPM2_HMAC only
 * (sign, neither restricted nor decrypt), with an empty auth value and
 * noDA like hwid's signing keys (tpm_key_template()).  It is kept the way
 * a signing key is (tpm.c): a TSS2 key file under the parent signing keys
 * use, or a persistent handle; so are its loading, flushing (every
 * transient object before an operation returns), custody and removal.
 *
 * An HMAC of a key file's key: ContextLoad, HMAC, FlushContext (the first
 * time through the parent instead of ContextLoad); of a persistent key:
 * HMAC. */
#include <stdio.h>
#include <string.h>

#include <tss2/tss2_esys.h>

#include "backend.h"
#include "error.h"
#include "secret.h"
#include "tpm-internal.h"

#define MAC_ATTRS                                                                                   \
        (TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |         \
         TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_NODA)

_Static_assert(sizeof(((TPM2B_MAX_BUFFER *) NULL)->buffer) >= HWID_MAC_DATA_MAX, "HWID_MAC_DATA_MAX too large");

static void mac_template(TPM2B_PUBLIC *ret) {
        *ret = (TPM2B_PUBLIC) {
                .publicArea = {
                        .type = TPM2_ALG_KEYEDHASH,
                        .nameAlg = TPM2_ALG_SHA256,
                        .objectAttributes = MAC_ATTRS,
                        .parameters.keyedHashDetail.scheme = {
                                .scheme = TPM2_ALG_HMAC,
                                .details.hmac.hashAlg = TPM2_ALG_SHA256,
                        },
                },
        };
}

static void uri_desc(const key_uri *uri, char *out, size_t size) {
        if (uri->path)
                snprintf(out, size, "key file %s", uri->path);
        else
                snprintf(out, size, "TPM handle 0x%08x", uri->handle);
}

/* An HMAC-SHA256 key that may sign and do nothing else. */
static int check_mac_key(const TPMT_PUBLIC *pub, const key_uri *uri) {
        const TPMS_SCHEME_HASH *h = &pub->parameters.keyedHashDetail.scheme.details.hmac;
        TPMA_OBJECT a = pub->objectAttributes;
        char desc[300];

        if (pub->type == TPM2_ALG_KEYEDHASH && pub->parameters.keyedHashDetail.scheme.scheme == TPM2_ALG_HMAC &&
            h->hashAlg == TPM2_ALG_SHA256 && (a & TPMA_OBJECT_SIGN_ENCRYPT) &&
            !(a & (TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT)))
                return 0;
        uri_desc(uri, desc, sizeof(desc));
        return hwid_fail(HWID_E_KEY_TYPE, "%s is not an HMAC-SHA256 key (type 0x%04x, attributes 0x%08x)", desc,
                         pub->type, a);
}

static int tpm_mac_open(const key_uri *uri, const hsm_options *opts, void **ret_obj) {
        void *obj = NULL;
        int r = tpm_obj_open(uri, opts, &obj);

        if (r < 0)
                return r;
        r = check_mac_key(tpm_obj_public(obj), uri);
        if (r < 0) {
                hsm_backend_tpm2.free(obj);
                return r;
        }
        *ret_obj = obj;
        return 0;
}

static int tpm_mac_create(const key_uri *uri, bool force, const hsm_options *opts, void **ret_obj) {
        TPM2B_PUBLIC tmpl;
        hsm_options o = opts ? *opts : (hsm_options) { 0 };

        /* Nothing is held: each HMAC loads the key and flushes it. */
        o.hold = false;
        o.before_keeping = NULL;
        mac_template(&tmpl);
        return tpm_obj_create(uri, &tmpl, force, &o, ret_obj);
}

typedef struct hmac_args {
        const uint8_t *data;
        size_t len;
        uint8_t *out;
} hmac_args;

/* With the key loaded (or looked up) and the connection locked. */
static int hmac_loaded(tpm_conn *c, ESYS_TR key, const TPMT_PUBLIC *pub, const char *desc, void *userdata) {
        _cleanup_(esys_freep) TPM2B_DIGEST *d = NULL;
        hmac_args *a = userdata;
        TPM2B_MAX_BUFFER in = { .size = (UINT16) a->len };
        TSS2_RC rc;

        (void) pub;
        memcpy(in.buffer, a->data, a->len);
        rc = Esys_HMAC(c->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in, TPM2_ALG_SHA256, &d);
        secret_wipe(&in, sizeof(in));
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "the TPM cannot compute an HMAC with %s", desc);
        if (d->size != HWID_MAC_LEN) {
                secret_wipe(d->buffer, d->size);
                return hwid_fail(HWID_E_TPM, "the TPM returned an HMAC of %u bytes with %s, not %d", d->size, desc,
                                 HWID_MAC_LEN);
        }
        memcpy(a->out, d->buffer, HWID_MAC_LEN);
        secret_wipe(d->buffer, d->size);
        return 0;
}

static int tpm_mac_hmac(void *obj, const uint8_t *data, size_t len, uint8_t out[HWID_MAC_LEN]) {
        hmac_args a = { .data = data, .len = len, .out = out };

        /* A flush lost after the HMAC fails it too: the TPM went away. */
        return tpm_conn_left_report(tpm_obj_conn(obj), tpm_key_with_loaded(obj, hmac_loaded, &a));
}

static int tpm_mac_custody(void *obj, hwid_custody *ret) {
        return hsm_backend_tpm2.custody(obj, ret);
}

static int tpm_mac_remove(void *obj) {
        return hsm_backend_tpm2.remove(obj);
}

static void tpm_mac_free(void *obj) {
        hsm_backend_tpm2.free(obj);
}

const hsm_mac_backend hsm_mac_tpm2 = {
        .name = "tpm2",
        .create = tpm_mac_create,
        .open = tpm_mac_open,
        .hmac_sha256 = tpm_mac_hmac,
        .custody = tpm_mac_custody,
        .remove = tpm_mac_remove,
        .free = tpm_mac_free,
};
