/* The PKCS#11 MAC key backend: a generic secret generated on the token
 * (C_GenerateKey, CKM_GENERIC_SECRET_KEY_GEN, 32 bytes), sensitive, never
 * extractable, good for signing (an HMAC) and nothing else; each HMAC is
 * C_SignInit + C_Sign with CKM_SHA256_HMAC on a pooled session of the
 * token, as a signature is (p11.c).
 *
 * The key's handle is found at open and found again after a recovery of
 * its token (p11-recover.c), whose module reinitialisation voids every
 * handle: the handle is kept with the module set's generation it belongs
 * to, and looked up again once that moved on. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/rand.h>

#include "backend.h"
#include "error.h"
#include "p11-internal.h"

#define OLD_MAX 16 /* keys a forced create may replace */
#define ID_LEN 16  /* random CKA_ID when the URI gives none */

typedef struct p11_mac {
        p11_token *tok;
        char *desc;   /* "labelled 'x'", for messages */
        char *object; /* the URI's object= and id=: how it is found again */
        uint8_t *id;
        size_t id_len;
        pthread_mutex_t lock; /* guards h and gen */
        CK_OBJECT_HANDLE h;
        unsigned gen; /* the module set's generation h belongs to */
} p11_mac;

static void p11_mac_free(void *obj) {
        p11_mac *m = obj;

        if (!m)
                return;
        if (m->tok)
                p11_token_release(m->tok);
        pthread_mutex_destroy(&m->lock);
        free(m->desc);
        free(m->object);
        free(m->id);
        free(m);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(p11_mac *, p11_mac_free)

static int mac_new(const key_uri *uri, p11_mac **ret) {
        _cleanup_(p11_mac_freep) p11_mac *m = calloc(1, sizeof(*m));

        if (!m)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&m->lock, NULL);
        m->h = CK_INVALID_HANDLE;
        if (!(m->desc = p11_key_desc(uri)) || (uri->object && !(m->object = strdup(uri->object))) ||
            (uri->id && !(m->id = malloc(uri->id_len))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (uri->id) {
                memcpy(m->id, uri->id, uri->id_len);
                m->id_len = uri->id_len;
        }
        *ret = TAKE_PTR(m);
        return 0;
}

/* The secret keys matching the URI (up to P11_MATCH_MAX). */
static int find_secrets(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri,
                        CK_OBJECT_HANDLE found[P11_MATCH_MAX], CK_ULONG *ret_n) {
        CK_OBJECT_CLASS cls = CKO_SECRET_KEY;
        CK_ATTRIBUTE tmpl[3];

        return p11_find_objects(t, s, tmpl, p11_uri_template(uri, &cls, tmpl), found, ret_n);
}

/* Exactly one secret key matching the URI, and an HMAC-SHA256 one. */
static int find_one(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri, const char *desc, CK_OBJECT_HANDLE *ret) {
        CK_OBJECT_HANDLE found[P11_MATCH_MAX];
        CK_KEY_TYPE kt = 0;
        CK_BBOOL sign = CK_FALSE;
        CK_ATTRIBUTE a[2] = { { CKA_KEY_TYPE, &kt, sizeof(kt) }, { CKA_SIGN, &sign, sizeof(sign) } };
        CK_ULONG n;
        CK_RV rv;
        int r = find_secrets(t, s, uri, found, &n);

        if (r < 0)
                return r;
        if (n == 0)
                return hwid_fail(HWID_E_KEY_NOT_FOUND, "no secret key %s on token '%s'", desc, t->label);
        if (n > 1)
                return hwid_fail(HWID_E_INVALID, "the secret key %s on token '%s' matches %s%lu keys; add id= to "
                                 "the URI", desc, t->label, n == P11_MATCH_MAX ? "at least " : "", (unsigned long) n);
        rv = t->mod->C_GetAttributeValue(s, found[0], a, 2);
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "reading the secret key's type");
        if ((kt != CKK_GENERIC_SECRET && kt != CKK_SHA256_HMAC) || !sign)
                return hwid_fail(HWID_E_KEY_TYPE, "the secret key %s on token '%s' is not an HMAC key that may "
                                 "sign (CKK 0x%lx, CKA_SIGN %s)", desc, t->label, (unsigned long) kt,
                                 sign ? "true" : "false");
        *ret = found[0];
        return 0;
}

static int p11_mac_open(const key_uri *uri, const hsm_options *opts, void **ret_obj) {
        _cleanup_(p11_mac_freep) p11_mac *m = NULL;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        int r;

        (void) opts;
        if ((r = mac_new(uri, &m)) < 0 || (r = p11_token_acquire(uri, &m->tok)) < 0 ||
            (r = p11_sess_get(m->tok, &s)) < 0 || (r = find_one(m->tok, s.h, uri, m->desc, &m->h)) < 0)
                return r;
        m->gen = p11_token_gen(m->tok);
        *ret_obj = TAKE_PTR(m);
        return 0;
}

/* ---- create ---- */

/* Storage for the generation template; attributes point into it. */
typedef struct gen_tmpl {
        CK_OBJECT_CLASS cls;
        CK_KEY_TYPE kt;
        CK_ULONG value_len;
        CK_BBOOL yes, no;
        uint8_t id[ID_LEN];
        CK_ATTRIBUTE a[16];
        CK_ULONG n;
} gen_tmpl;

static int gen_tmpl_init(gen_tmpl *g, const key_uri *uri) {
        *g = (gen_tmpl) { .cls = CKO_SECRET_KEY, .kt = CKK_GENERIC_SECRET, .value_len = HWID_MAC_LEN,
                          .yes = CK_TRUE, .no = CK_FALSE };
        CK_ATTRIBUTE a[] = {
                { CKA_CLASS, &g->cls, sizeof(g->cls) },  { CKA_KEY_TYPE, &g->kt, sizeof(g->kt) },
                { CKA_VALUE_LEN, &g->value_len, sizeof(g->value_len) },
                { CKA_TOKEN, &g->yes, 1 },  { CKA_PRIVATE, &g->yes, 1 }, { CKA_SENSITIVE, &g->yes, 1 },
                { CKA_EXTRACTABLE, &g->no, 1 }, { CKA_SIGN, &g->yes, 1 },
                /* An HMAC and nothing else: tokens default some of these to TRUE. */
                { CKA_VERIFY, &g->no, 1 },  { CKA_ENCRYPT, &g->no, 1 },  { CKA_DECRYPT, &g->no, 1 },
                { CKA_WRAP, &g->no, 1 },    { CKA_UNWRAP, &g->no, 1 },   { CKA_DERIVE, &g->no, 1 },
        };
        const void *id = uri->id;
        size_t id_len = uri->id_len;

        memcpy(g->a, a, sizeof(a));
        g->n = ELEMENTSOF(a);
        if (!id) {
                if (RAND_bytes(g->id, sizeof(g->id)) != 1)
                        return hwid_fail(HWID_E_CRYPTO, "cannot make a random CKA_ID");
                id = g->id;
                id_len = sizeof(g->id);
        }
        g->a[g->n++] = (CK_ATTRIBUTE) { CKA_ID, (void *) id, id_len };
        if (uri->object)
                g->a[g->n++] = (CK_ATTRIBUTE) { CKA_LABEL, uri->object, strlen(uri->object) };
        return 0;
}

/* The new key first, the old ones after: a failed generation leaves the
 * old key in place, and a failure to remove them removes the new one. */
static int generate(p11_mac *m, CK_SESSION_HANDLE s, const key_uri *uri, bool force) {
        CK_MECHANISM mech = { CKM_GENERIC_SECRET_KEY_GEN, NULL, 0 };
        CK_OBJECT_HANDLE old[P11_MATCH_MAX], h = CK_INVALID_HANDLE;
        CK_ULONG n_old;
        gen_tmpl g;
        CK_RV rv;
        int r;

        if ((r = find_secrets(m->tok, s, uri, old, &n_old)) < 0 || (r = gen_tmpl_init(&g, uri)) < 0)
                return r;
        if (n_old > 0 && !force)
                return hwid_fail(HWID_E_KEY_EXISTS, "token '%s' already holds a secret key %s (use --force to "
                                 "replace it)", m->tok->label, m->desc);
        rv = m->tok->mod->C_GenerateKey(s, &mech, g.a, g.n, &h);
        if (rv != CKR_OK)
                return p11_fail(rv, m->tok->label, "C_GenerateKey (CKM_GENERIC_SECRET_KEY_GEN)");
        for (CK_ULONG i = 0; i < n_old; i++) {
                rv = m->tok->mod->C_DestroyObject(s, old[i]);
                if (rv != CKR_OK) {
                        m->tok->mod->C_DestroyObject(s, h);
                        return p11_fail(rv, m->tok->label, "removing the secret key being replaced");
                }
        }
        m->h = h;
        m->gen = p11_token_gen(m->tok);
        return 0;
}

static int p11_mac_create(const key_uri *uri, bool force, const hsm_options *opts, void **ret_obj) {
        _cleanup_(p11_mac_freep) p11_mac *m = NULL;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        int r;

        (void) opts;
        if ((r = mac_new(uri, &m)) < 0 || (r = p11_token_acquire(uri, &m->tok)) < 0 ||
            (r = p11_sess_get(m->tok, &s)) < 0 || (r = generate(m, s.h, uri, force)) < 0)
                return r;
        *ret_obj = TAKE_PTR(m);
        return 0;
}

/* ---- HMAC ---- */

/* The key's handle in the module set's generation of now, found again
 * if a recovery voided it.  With a session borrowed: no recovery runs
 * until it is returned, so the generation cannot move meanwhile. */
static int mac_handle(p11_mac *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE *ret) {
        key_uri u = { .scheme = KEY_URI_PKCS11, .object = m->object, .id = m->id, .id_len = m->id_len };
        unsigned gen = p11_token_gen(m->tok);
        int r = 0;

        pthread_mutex_lock(&m->lock);
        if (m->gen != gen || m->h == CK_INVALID_HANDLE) {
                r = find_one(m->tok, s, &u, m->desc, &m->h);
                m->gen = gen;
                if (r < 0)
                        m->h = CK_INVALID_HANDLE;
        }
        *ret = m->h;
        pthread_mutex_unlock(&m->lock);
        return r;
}

/* One C_SignInit + C_Sign on a pooled session: the token's answer in
 * *ret_rv, or (r < 0) the key could not be found again. */
static int hmac_attempt(p11_mac *m, const uint8_t *data, size_t len, uint8_t out[HWID_MAC_LEN], CK_RV *ret_rv) {
        CK_MECHANISM mech = { CKM_SHA256_HMAC, NULL, 0 };
        CK_ULONG out_len = HWID_MAC_LEN;
        CK_OBJECT_HANDLE h = CK_INVALID_HANDLE;
        CK_SESSION_HANDLE s;
        CK_RV rv = p11_session_borrow(m->tok, &s);
        int r = 0;

        if (rv == CKR_OK) {
                r = mac_handle(m, s, &h);
                if (r >= 0)
                        rv = m->tok->mod->C_SignInit(s, &mech, h);
                if (r >= 0 && rv == CKR_OK)
                        rv = m->tok->mod->C_Sign(s, (CK_BYTE *) data, len, out, &out_len);
                p11_session_put(m->tok, s, rv == CKR_BUFFER_TOO_SMALL || rv == CKR_OPERATION_ACTIVE);
        }
        if (r >= 0 && rv == CKR_OK && out_len != HWID_MAC_LEN)
                r = hwid_fail(HWID_E_HSM, "an HMAC with the key %s: token '%s' returned %lu bytes, not %d", m->desc,
                              m->tok->label, (unsigned long) out_len, HWID_MAC_LEN);
        *ret_rv = rv;
        return r;
}

/* Tried once more after a recovery when the token was lost, as a
 * signature is (p11.c's sign_raw()). */
static int p11_mac_hmac(void *obj, const uint8_t *data, size_t len, uint8_t out[HWID_MAC_LEN]) {
        p11_mac *m = obj;
        char what[300];
        CK_RV rv = CKR_OK;
        int r;

        for (int attempt = 0; attempt < 2; attempt++) {
                unsigned gen = p11_token_gen(m->tok);

                if ((r = hmac_attempt(m, data, len, out, &rv)) < 0)
                        return r;
                if (!p11_rv_recoverable(rv) || attempt > 0)
                        break;
                if ((r = p11_recover(m->tok, gen)) < 0)
                        return r;
        }
        if (rv == CKR_OK)
                return 0;
        snprintf(what, sizeof(what), "an HMAC with the key %s", m->desc);
        if (p11_rv_recoverable(rv))
                return hwid_fail(HWID_E_HSM, "%s: token '%s' is unavailable (%s, 0x%lx); it is reopened as soon as "
                                 "it is back", what, m->tok->label, p11_kit_strerror(rv), (unsigned long) rv);
        return p11_fail(rv, m->tok->label, what);
}

/* ---- custody, remove ---- */

/* Asks for CKA_VALUE's length only (as p11.c does for private keys): a
 * token that keeps the secret answers CKR_ATTRIBUTE_SENSITIVE. */
static bool value_readable(p11_mac *m, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h) {
        CK_ATTRIBUTE a = { CKA_VALUE, NULL, 0 };
        CK_RV rv = m->tok->mod->C_GetAttributeValue(s, h, &a, 1);

        return rv == CKR_OK && a.ulValueLen != CK_UNAVAILABLE_INFORMATION && a.ulValueLen > 0;
}

static int p11_mac_custody(void *obj, hwid_custody *ret) {
        p11_mac *m = obj;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        CK_OBJECT_HANDLE h;
        CK_BBOOL v[6] = { 0 };
        CK_ATTRIBUTE a[6] = {
                { CKA_SENSITIVE, &v[0], 1 },   { CKA_ALWAYS_SENSITIVE, &v[1], 1 }, { CKA_EXTRACTABLE, &v[2], 1 },
                { CKA_NEVER_EXTRACTABLE, &v[3], 1 }, { CKA_LOCAL, &v[4], 1 },   { CKA_SIGN, &v[5], 1 },
        };
        hwid_custody c = { .backend = "pkcs11" };
        CK_RV rv;
        int r;

        if ((r = p11_sess_get(m->tok, &s)) < 0 || (r = mac_handle(m, s.h, &h)) < 0)
                return r;
        /* An attribute the token lacks comes back unavailable and reads false. */
        rv = m->tok->mod->C_GetAttributeValue(s.h, h, a, ELEMENTSOF(a));
        if (rv != CKR_OK && rv != CKR_ATTRIBUTE_TYPE_INVALID && rv != CKR_ATTRIBUTE_SENSITIVE)
                return p11_fail(rv, m->tok->label, "reading the secret key's attributes");
        c.sensitive = a[0].ulValueLen == 1 && v[0];
        c.always_sensitive = a[1].ulValueLen == 1 && v[1];
        c.extractable = a[2].ulValueLen == 1 && v[2];
        c.never_extractable = a[3].ulValueLen == 1 && v[3];
        c.local = a[4].ulValueLen == 1 && v[4];
        c.sign = a[5].ulValueLen == 1 && v[5];
        c.value_readable = value_readable(m, s.h, h);
        snprintf(c.location, sizeof(c.location), "PKCS#11 module %s, slot 0x%lx, token '%s', secret key %s",
                 m->tok->module_desc, (unsigned long) m->tok->slot, m->tok->label, m->desc);
        *ret = c;
        return 0;
}

static int p11_mac_remove(void *obj) {
        p11_mac *m = obj;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        CK_OBJECT_HANDLE h;
        CK_RV rv;
        int r;

        if ((r = p11_sess_get(m->tok, &s)) < 0 || (r = mac_handle(m, s.h, &h)) < 0)
                return r;
        rv = m->tok->mod->C_DestroyObject(s.h, h);
        if (rv != CKR_OK)
                return p11_fail(rv, m->tok->label, "removing the secret key");
        pthread_mutex_lock(&m->lock);
        m->h = CK_INVALID_HANDLE;
        pthread_mutex_unlock(&m->lock);
        return 0;
}

const hsm_mac_backend hsm_mac_pkcs11 = {
        .name = "pkcs11",
        .create = p11_mac_create,
        .open = p11_mac_open,
        .hmac_sha256 = p11_mac_hmac,
        .custody = p11_mac_custody,
        .remove = p11_mac_remove,
        .free = p11_mac_free,
};
