/* hwid_key: a backend object plus its provider-backed EVP_PKEY.  Picks the
 * backend from the URI scheme; everything above signs through the EVP_PKEY. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/provider.h>

#include "backend.h"
#include "error.h"
#include "ossl-util.h"
#include "provider.h"

struct hwid_key {
        hsm_obj *obj;
        EVP_PKEY *pkey; /* provider-backed: signs in the device */
        char *uri;
};

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_result;
static OSSL_PROVIDER *prov_hwid, *prov_default;

static void unload_providers(void) {
        OSSL_PROVIDER_unload(prov_hwid);
        OSSL_PROVIDER_unload(prov_default);
}

static void load_providers(void) {
        /* The default library context is used so that libssl (inside
         * libcurl) can sign with device keys too.  Loading a provider
         * explicitly stops OpenSSL from auto-loading "default", so both are
         * loaded here.  The default properties keep every fetch that does
         * not ask for hwid (key generation, parsing, verification) on the
         * default provider; hwid's signing asks with HSM_PROPQ, and libssl
         * reaches hwid's signature because our keys refuse to export their
         * private half to any other provider. */
        if (!OSSL_PROVIDER_add_builtin(NULL, "hwid", hwid_provider_init) ||
            !(prov_hwid = OSSL_PROVIDER_load(NULL, "hwid")) ||
            !(prov_default = OSSL_PROVIDER_load(NULL, "default")) ||
            !EVP_set_default_properties(NULL, "?provider=default"))
                init_result = hwid_fail_ossl(HWID_E_CRYPTO, "cannot load OpenSSL providers");
        /* Runs before OpenSSL's own exit handler (registered earlier). */
        atexit(unload_providers);
}

int hsm_init(void) {
        pthread_once(&init_once, load_providers);
        return init_result;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(hsm_obj *, hsm_obj_unref)

char *hsm_display_uri(const char *uri) {
        const char *p = strstr(uri, "pin-value=");
        char *out;

        if (!p)
                return strdup(uri);
        p += strlen("pin-value=");
        if (asprintf(&out, "%.*s***%s", (int) (p - uri), uri, p + strcspn(p, "&;")) < 0)
                return NULL;
        return out;
}

static const hsm_backend *backend_for(const key_uri *u) {
        return u->scheme == KEY_URI_PKCS11 ? &hsm_backend_pkcs11 : &hsm_backend_tpm2;
}

/* Wraps a freshly created or opened backend object into a hwid_key. */
static int key_wrap(const char *uri, const hsm_backend *be, void *bobj, EVP_PKEY *pub, hwid_key **ret) {
        _cleanup_(hsm_obj_unrefp) hsm_obj *o = calloc(1, sizeof(*o));
        _cleanup_(hwid_key_freep) hwid_key *k = calloc(1, sizeof(*k));
        int r;

        if (!o || !k) {
                be->free(bobj);
                EVP_PKEY_free(pub);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *o = (hsm_obj) { .backend = be, .obj = bobj, .pub = pub, .refs = 1 };
        r = hwid_key_type_of_pkey(pub, &o->type);
        if (r < 0)
                return r;
        r = hsm_provider_pkey(o, &k->pkey);
        if (r < 0)
                return r;
        k->uri = hsm_display_uri(uri);
        if (!k->uri)
                return hwid_fail(HWID_E_NOMEM, NULL);
        k->obj = TAKE_PTR(o);
        *ret = TAKE_PTR(k);
        return 0;
}

/* Opens the key at uri, or creates one there when create is set. */
static int key_acquire(const char *uri, bool create, hwid_key_type type, bool force,
                       const hsm_options *opts, hwid_key **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        const hsm_options none = { 0 };
        const hsm_backend *be;
        EVP_PKEY *pub = NULL;
        void *bobj = NULL;
        int r;

        if ((r = hsm_init()) < 0 || (r = key_uri_parse(uri, &u)) < 0)
                return r;
        be = backend_for(u);
        if (!opts)
                opts = &none;
        r = create ? be->create(u, type, force, opts, &bobj, &pub) : be->open(u, opts, &bobj, &pub);
        if (r < 0)
                return r;
        return key_wrap(uri, be, bobj, pub, ret);
}

int hwid_key_create(const char *uri, hwid_key_type type, bool force,
                    const hsm_options *opts, hwid_key **ret) {
        if (type < 0 || type >= _HWID_KEY_TYPE_MAX)
                return hwid_fail(HWID_E_KEY_TYPE, "unsupported key type");
        return key_acquire(uri, true, type, force, opts, ret);
}

int hwid_key_open(const char *uri, const hsm_options *opts, hwid_key **ret) {
        return key_acquire(uri, false, HWID_KEY_TYPE_DEFAULT, false, opts, ret);
}

int hwid_key_delete(hwid_key *k) {
        return k->obj->backend->remove(k->obj->obj);
}

int hwid_key_custody(hwid_key *k, hwid_custody *ret) {
        hwid_custody c = { .backend = k->obj->backend->name };
        int r = k->obj->backend->custody(k->obj->obj, &c);

        if (r < 0)
                return r;
        *ret = c;
        return 0;
}

void *hsm_key_backend_obj(hwid_key *k, const hsm_backend *be) {
        return k->obj->backend == be ? k->obj->obj : NULL;
}

EVP_PKEY *hwid_key_pkey(hwid_key *k) {
        return k->pkey;
}

EVP_PKEY *hwid_key_public(hwid_key *k) {
        return k->obj->pub;
}

hwid_key_type hwid_key_get_type(const hwid_key *k) {
        return k->obj->type;
}

const char *hwid_key_uri(const hwid_key *k) {
        return k->uri;
}

const char *hwid_key_default_digest(const hwid_key *k) {
        return k->obj->type == HWID_KEY_EC_P384 ? "SHA384" : "SHA256";
}

int hwid_key_sign_init(hwid_key *k, EVP_MD_CTX *mctx, const char *md) {
        if (EVP_DigestSignInit_ex(mctx, NULL, md ? md : hwid_key_default_digest(k), NULL,
                                  HSM_PROPQ, k->pkey, NULL) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot start signing with %s", k->uri);
        return 0;
}

void hwid_key_sign_stats(const hwid_key *k, hwid_sign_stats *ret) {
        histogram_snapshot_take(&k->obj->sign_duration, &histogram_bounds_sign, &ret->duration);
        ret->errors = atomic_load_explicit(&k->obj->sign_errors, memory_order_relaxed);
}

int hwid_fail_signing(const char *what) {
        int r = hwid_last_error();

        if (r < 0) {
                ERR_clear_error();
                return r;
        }
        return hwid_fail_ossl(HWID_E_CRYPTO, "signing %s failed", what);
}

int hwid_key_release(hwid_key *k) {
        if (k && k->obj->backend->release)
                return k->obj->backend->release(k->obj->obj);
        return 0;
}

void hwid_key_free(hwid_key *k) {
        if (!k)
                return;
        EVP_PKEY_free(k->pkey);
        hsm_obj_unref(k->obj);
        free(k->uri);
        free(k);
}
