/* The TPM 2.0 key backend, on tpm2-tss ESYS.
 *
 * A key lives either in a TSS2 key file (tpm2:file=), wrapped by the TCG
 * SRK at 0x81000001 if the TPM has a usable one when the key is made, else
 * by the owner storage primary, re-created from a fixed template whenever
 * the key must be loaded and never persisted (tpm-parent.c); or at a
 * persistent handle (tpm2:handle=).  swtpm and /dev/tpm0 have no resource manager, so:
 *   - every key shares its process's one connection to the TPM, and holds
 *     its lock across each operation (tpm-conn.c);
 *   - every transient object is flushed before an operation returns, on
 *     every path (Invariant 5), through _cleanup_ guards;
 *   - no auth sessions: every auth value is empty, ESYS_TR_PASSWORD does.
 * A key file's key, once loaded, is kept as a saved context (a blob in our
 * memory, nothing in the TPM), so that each later signature costs three
 * commands (ContextLoad, Sign, FlushContext) and no trip through its parent.  With
 * hsm_options.hold it stays loaded instead, from its first load (or its
 * creation) until hwid_key_release(): one command per operation, for a
 * burst such as a join's CSR signature and attestation Certify. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <tss2/tss2_esys.h>

#include "backend.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "tpm-internal.h"

typedef struct tpm_key {
        tpm_conn *conn;
        char *path;         /* tpm2:file= key, else NULL */
        uint32_t handle;    /* tpm2:handle= key, else 0 */
        char *desc;         /* "key file PATH" or "TPM handle 0x…", for messages */
        TPM2B_PUBLIC pub;
        TPM2B_PRIVATE priv; /* key files only */
        uint32_t parent;    /* key files: TPM_KEYFILE_PARENT or TPM_SRK_HANDLE */
        /* The rest under conn->lock. */
        ESYS_TR persistent;  /* ESYS's record of the handle, valid in conn->gen */
        unsigned persistent_gen;
        TPM2B_NAME name;     /* the persistent key's TPM name */
        TPMS_CONTEXT *saved; /* a key file's loaded object, saved */
        bool removed;
        bool hold;           /* keep a key file's key loaded (hsm_options.hold) */
        tpm_held held;       /* ...here */
} tpm_key;

static void tpm_key_free(tpm_key *k) {
        if (!k)
                return;
        if (k->conn) {
                pthread_mutex_lock(&k->conn->lock);
                tpm_held_flush(k->conn, &k->held);
                Esys_Free(k->saved);
                /* A record from before a reconnect died with its context. */
                if (k->persistent != ESYS_TR_NONE && k->persistent_gen == k->conn->gen && !k->conn->broken)
                        (void) Esys_TR_Close(k->conn->esys, &k->persistent);
                pthread_mutex_unlock(&k->conn->lock);
                tpm_conn_unref(k->conn);
        }
        free(k->desc);
        free(k->path);
        free(k);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(tpm_key *, tpm_key_free)

static int tpm_key_new(const key_uri *uri, tpm_key **ret) {
        _cleanup_(tpm_key_freep) tpm_key *k = calloc(1, sizeof(*k));
        int n;

        if (!k)
                return hwid_fail(HWID_E_NOMEM, NULL);
        k->persistent = ESYS_TR_NONE;
        k->held = (tpm_held) TPM_HELD;
        if (uri->path) {
                k->path = strdup(uri->path);
                if (!k->path)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                n = asprintf(&k->desc, "key file %s", uri->path);
        } else {
                k->handle = uri->handle;
                n = asprintf(&k->desc, "TPM handle 0x%08x", uri->handle);
        }
        if (n < 0) {
                k->desc = NULL; /* asprintf() leaves it undefined */
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = TAKE_PTR(k);
        return 0;
}

static int tpm_key_connect(tpm_key *k, const hsm_options *opts) {
        const char *tcti = opts && opts->tcti ? opts->tcti : getenv("HWID_TCTI");

        k->hold = opts && opts->hold;
        return tpm_conn_get(tcti && *tcti ? tcti : NULL, &k->conn);
}

static int load_key(tpm_key *k, ESYS_TR parent, tpm_tr *ret) {
        ESYS_TR tr = ESYS_TR_NONE;
        TSS2_RC rc;

        rc = Esys_Load(k->conn->esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                       &k->priv, &k->pub, &tr);
        /* An integrity failure is what a blob from another TPM, or from
         * before the owner hierarchy was cleared, looks like. */
        if (tpm_rc_is_fmt1(rc, TPM2_RC_INTEGRITY))
                return tpm_fail(k->conn, rc, "the TPM cannot load %s (made by another TPM, "
                                "or before the TPM was cleared?)", k->desc);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "the TPM cannot load %s", k->desc);
        ret->tr = tr;
        return 0;
}

/* Loads a key file's key for one command; the caller flushes it.  The
 * first load goes through the parent (ReadPublic of the SRK, or a
 * CreatePrimary); later ones restore the saved context. */
static int file_key_load(tpm_key *k, tpm_tr *ret) {
        _cleanup_(tpm_parent_done) tpm_parent parent = TPM_PARENT(k->conn, k->parent);
        _cleanup_(tpm_tr_flush) tpm_tr key = TPM_TR(k->conn);
        TPMS_CONTEXT *saved = NULL;
        ESYS_TR tr = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        if (k->saved) {
                rc = Esys_ContextLoad(k->conn->esys, k->saved, &tr);
                if (rc == TSS2_RC_SUCCESS) {
                        ret->tr = tr;
                        return 0;
                }
                if ((rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER)
                        return tpm_fail(k->conn, rc, "cannot restore %s", k->desc);
                /* A TPM reset or owner clear voids saved contexts: load afresh. */
                Esys_Free(TAKE_PTR(k->saved));
        }
        r = tpm_parent_get(k->conn, &parent);
        if (r < 0)
                return r;
        r = load_key(k, parent.tr, &key);
        if (r < 0)
                return r;
        tpm_parent_done(&parent);
        /* Only a shortcut for next time: if it fails, the next operation
         * goes through the primary again.  A held key needs none. */
        if (!k->hold) {
                rc = Esys_ContextSave(k->conn->esys, key.tr, &saved);
                tpm_conn_check(k->conn, rc);
                if (rc == TSS2_RC_SUCCESS)
                        k->saved = saved;
        }
        ret->tr = key.tr;
        key.tr = ESYS_TR_NONE;
        return 0;
}

/* Flushes the held key (hsm_options.hold), or records it as possibly left. */
static void held_release(tpm_key *k) {
        pthread_mutex_lock(&k->conn->lock);
        tpm_held_flush(k->conn, &k->held);
        pthread_mutex_unlock(&k->conn->lock);
}

/* ESYS's record of whatever is at k->handle, or ESYS_TR_NONE if vacant. */
static int lookup_persistent(tpm_key *k, ESYS_TR *ret) {
        ESYS_TR tr = ESYS_TR_NONE;
        TSS2_RC rc;

        rc = Esys_TR_FromTPMPublic(k->conn->esys, k->handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &tr);
        if (rc == TSS2_RC_SUCCESS) {
                *ret = tr;
                return 0;
        }
        if (tpm_rc_is_fmt1(rc, TPM2_RC_HANDLE)) {
                *ret = ESYS_TR_NONE;
                return 0;
        }
        return tpm_fail(k->conn, rc, "cannot look up %s", k->desc);
}

/* Makes tr (ours now) k's persistent object.  Once k knows its key's TPM
 * name, the object must have that name: a handle that now holds another
 * key must not sign for this one. */
static int persistent_bind(tpm_key *k, ESYS_TR tr) {
        _cleanup_(tpm_tr_close) tpm_tr guard = { .conn = k->conn, .tr = tr };
        _cleanup_(esys_freep) TPM2B_NAME *name = NULL;
        TSS2_RC rc;

        rc = Esys_TR_GetName(k->conn->esys, tr, &name);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "cannot read the name of %s", k->desc);
        if (k->name.size > 0 &&
            (name->size != k->name.size || memcmp(name->name, k->name.name, name->size) != 0))
                return hwid_fail(HWID_E_KEY_NOT_FOUND, "%s now holds a different key", k->desc);
        k->name = *name;
        k->persistent = tr;
        k->persistent_gen = k->conn->gen;
        guard.tr = ESYS_TR_NONE;
        return 0;
}

/* k's persistent object, looked up again after a reconnect, whose
 * context took ESYS's old record with it. */
static int persistent_get(tpm_key *k, ESYS_TR *ret) {
        ESYS_TR tr = ESYS_TR_NONE;
        int r;

        if (k->persistent == ESYS_TR_NONE || k->persistent_gen != k->conn->gen) {
                k->persistent = ESYS_TR_NONE;
                r = lookup_persistent(k, &tr);
                if (r < 0)
                        return r;
                if (tr == ESYS_TR_NONE)
                        return hwid_fail(HWID_E_KEY_NOT_FOUND, "no key at %s", k->desc);
                r = persistent_bind(k, tr);
                if (r < 0)
                        return r;
        }
        *ret = k->persistent;
        return 0;
}

/* The ESYS handle to run one command on k: the persistent object, or the
 * key file's key loaded into *loaded (which the caller's guard flushes).
 * Called with conn->lock held. */
static int key_acquire(tpm_key *k, tpm_tr *loaded, ESYS_TR *ret) {
        int r;

        if (k->removed)
                return hwid_fail(HWID_E_KEY_NOT_FOUND, "%s was removed", k->desc);
        if (!k->path)
                return persistent_get(k, ret);
        if (tpm_held_live(k->conn, &k->held)) {
                *ret = k->held.tr;
                return 0;
        }
        r = file_key_load(k, loaded);
        if (r < 0)
                return r;
        *ret = loaded->tr;
        if (k->hold) /* ours now, not the caller's guard's */
                tpm_held_keep(k->conn, &k->held, loaded);
        return 0;
}

/* The hook of the attestation module (tpm-attest.c), which certifies a key
 * with its AK: runs fn with k's key loaded (a key file's, from its saved
 * context when it has one) or looked up (a persistent one), under the
 * connection's lock; a loaded key is flushed afterwards, whatever fn did. */
int tpm_key_with_loaded(void *obj, tpm_key_fn fn, void *userdata) {
        tpm_key *k = obj;
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(tpm_tr_flush) tpm_tr loaded = TPM_TR(k->conn);
        ESYS_TR key = ESYS_TR_NONE;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = key_acquire(k, &loaded, &key);
        if (r < 0)
                return r;
        return fn(k->conn, key, &k->pub.publicArea, k->desc, userdata);
}

static int check_signing_key(const tpm_key *k) {
        TPMA_OBJECT a = k->pub.publicArea.objectAttributes;

        /* A restricted key signs only digests the TPM hashed itself, and
         * hwid hashes in software. */
        if (!(a & TPMA_OBJECT_SIGN_ENCRYPT) || (a & TPMA_OBJECT_RESTRICTED))
                return hwid_fail(HWID_E_KEY_TYPE, "%s is not an unrestricted signing key "
                                                  "(attributes 0x%08x)", k->desc, a);
        return 0;
}

/* tpm2:file=, under the SRK: ReadPublic (the SRK), CreateLoaded; else
 * ReadPublic (refused), CreatePrimary, CreateLoaded, FlushContext
 * (primary).  Then held (hsm_options.hold), or ContextSave and
 * FlushContext: the TPM keeps nothing.  The new key is loaded while its
 * parent still is, so that its first signature (the CSR, usually) needs
 * no second trip through the parent. */
static int create_blob(tpm_key *k, const TPM2B_PUBLIC *tmpl) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(tpm_parent_done) tpm_parent parent = TPM_PARENT(k->conn, 0);
        _cleanup_(tpm_tr_flush) tpm_tr key = TPM_TR(k->conn);
        TPMS_CONTEXT *saved = NULL;
        TSS2_RC rc;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = tpm_parent_create_key(k->conn, &parent, tmpl, &k->pub, &k->priv, &key);
        if (r < 0)
                return r;
        k->parent = parent.handle;
        tpm_parent_done(&parent);
        if (k->hold) { /* kept loaded for the operations to come */
                tpm_held_keep(k->conn, &k->held, &key);
                return 0;
        }
        /* Only a shortcut: without it the first signature loads the key
         * through the primary, as after hwid_key_open(). */
        rc = Esys_ContextSave(k->conn->esys, key.tr, &saved);
        tpm_conn_check(k->conn, rc);
        if (rc == TSS2_RC_SUCCESS)
                k->saved = saved;
        return 0;
}

/* What the caller records of a new signing key's public part before it
 * is kept (hsm_options.before_keeping); with ret_pub NULL (a MAC key,
 * tpm-mac.c), nothing: there is no public key. */
static int public_of_new(tpm_key *k, const hsm_options *opts, EVP_PKEY **ret_pub) {
        int r;

        if (!ret_pub)
                return 0;
        r = tpm_pub_to_pkey(&k->pub.publicArea, k->desc, ret_pub);
        if (r >= 0 && opts && opts->before_keeping)
                r = opts->before_keeping(opts->userdata, *ret_pub);
        return r;
}

static int create_file(tpm_key *k, const TPM2B_PUBLIC *tmpl, const hsm_options *opts, EVP_PKEY **ret_pub) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pub = NULL;
        _cleanup_free_ char *pem = NULL;
        size_t len;
        int r;

        r = create_blob(k, tmpl);
        if (r >= 0)
                r = tpm_keyfile_encode(&k->pub, &k->priv, k->parent, &pem, &len);
        if (r >= 0)
                r = public_of_new(k, opts, ret_pub ? &pub : NULL);
        if (r < 0)
                return r;
        r = write_file_atomic(k->path, pem, len, 0600);
        if (r < 0)
                return r;
        if (ret_pub)
                *ret_pub = TAKE_PTR(pub);
        return 0;
}

/* Moves the loaded key to k->handle, evicting old (if any) first: only
 * once the new key is safely loaded does the old one go. */
static int persist(tpm_key *k, ESYS_TR key, ESYS_TR old) {
        ESYS_TR none = ESYS_TR_NONE, tr = ESYS_TR_NONE;
        TSS2_RC rc;

        if (old != ESYS_TR_NONE) {
                rc = Esys_EvictControl(k->conn->esys, ESYS_TR_RH_OWNER, old, ESYS_TR_PASSWORD,
                                       ESYS_TR_NONE, ESYS_TR_NONE, k->handle, &none);
                if (rc != TSS2_RC_SUCCESS)
                        return tpm_fail(k->conn, rc, "cannot evict the old key at %s", k->desc);
        }
        rc = Esys_EvictControl(k->conn->esys, ESYS_TR_RH_OWNER, key, ESYS_TR_PASSWORD,
                               ESYS_TR_NONE, ESYS_TR_NONE, k->handle, &tr);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "cannot make the key persistent at %s", k->desc);
        return persistent_bind(k, tr);
}

/* tpm2:handle=: ReadPublic (the handle), the parent as for a key file,
 * CreateLoaded, [FlushContext(primary)], [EvictControl(old)],
 * EvictControl, FlushContext(key). */
static int create_persistent(tpm_key *k, const TPM2B_PUBLIC *tmpl, bool force, const hsm_options *opts,
                             EVP_PKEY **ret_pub) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(tpm_tr_close) tpm_tr old = TPM_TR(k->conn);
        /* A key that is to replace whatever is at the SRK's handle is not
         * made under it. */
        _cleanup_(tpm_parent_done) tpm_parent parent =
                TPM_PARENT(k->conn, k->handle == TPM_SRK_HANDLE ? TPM_KEYFILE_PARENT : 0);
        _cleanup_(tpm_tr_flush) tpm_tr key = TPM_TR(k->conn);
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pub = NULL;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = lookup_persistent(k, &old.tr);
        if (r < 0)
                return r;
        if (old.tr != ESYS_TR_NONE && !force)
                return hwid_fail(HWID_E_KEY_EXISTS, "a key already exists at %s "
                                                    "(use --force to replace it)", k->desc);
        r = tpm_parent_create_key(k->conn, &parent, tmpl, &k->pub, &k->priv, &key);
        if (r >= 0) /* before anything persists, so a failure leaves nothing */
                r = public_of_new(k, opts, ret_pub ? &pub : NULL);
        if (r < 0)
                return r;
        tpm_parent_done(&parent);
        r = persist(k, key.tr, old.tr);
        if (r < 0)
                return r;
        if (ret_pub)
                *ret_pub = TAKE_PTR(pub);
        return 0;
}

/* A new object from tmpl at uri; ret_pub: a signing key's public part,
 * NULL for a MAC key. */
static int key_create(const key_uri *uri, const TPM2B_PUBLIC *tmpl, bool force, const hsm_options *opts,
                      void **ret_obj, EVP_PKEY **ret_pub) {
        _cleanup_(tpm_key_freep) tpm_key *k = NULL;
        struct stat st;
        int r;

        /* Refused before the TPM does any work. */
        if (uri->path && !force && lstat(uri->path, &st) == 0)
                return hwid_fail(HWID_E_KEY_EXISTS, "a key file already exists at %s "
                                                    "(use --force to replace it)", uri->path);
        r = tpm_key_new(uri, &k);
        if (r >= 0)
                r = tpm_key_connect(k, opts);
        if (r < 0)
                return r;
        /* Made, a flush lost on the way is reported by the key's next
         * operation (its signature).  Not made, what the TPM may still
         * hold is said now, the held key's flush included. */
        r = k->path ? create_file(k, tmpl, opts, ret_pub) : create_persistent(k, tmpl, force, opts, ret_pub);
        if (r < 0) {
                held_release(k);
                return tpm_conn_left_report(k->conn, r);
        }
        *ret_obj = TAKE_PTR(k);
        return 0;
}

static int tpm2_create(const key_uri *uri, hwid_key_type type, bool force,
                       const hsm_options *opts, void **ret_obj, EVP_PKEY **ret_pub) {
        TPM2B_PUBLIC tmpl;
        int r = tpm_key_template(type, &tmpl);

        return r < 0 ? r : key_create(uri, &tmpl, force, opts, ret_obj, ret_pub);
}

int tpm_obj_create(const key_uri *uri, const TPM2B_PUBLIC *tmpl, bool force, const hsm_options *opts,
                   void **ret_obj) {
        return key_create(uri, tmpl, force, opts, ret_obj, NULL);
}

static int open_file(tpm_key *k) {
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r;

        r = read_file_capped(k->path, TPM_KEYFILE_MAX, &data, &len);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_KEY_NOT_FOUND, "no key file at %s", k->path);
        if (r == -HWID_E_TOO_LARGE)
                return hwid_fail(HWID_E_INVALID, "%s is too large to be a TSS2 key file", k->path);
        if (r < 0)
                return r;
        return tpm_keyfile_decode(k->path, data, len, &k->pub, &k->priv, &k->parent);
}

/* TR_FromTPMPublic and ReadPublic: two ReadPublic commands. */
static int open_persistent(tpm_key *k) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        ESYS_TR tr = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = persistent_get(k, &tr);
        if (r < 0)
                return r;
        rc = Esys_ReadPublic(k->conn->esys, tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                             &pub, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "cannot read the public key at %s", k->desc);
        k->pub = *pub;
        return 0;
}

/* A key file is only read here: the TPM sees it at the first operation. */
int tpm_obj_open(const key_uri *uri, const hsm_options *opts, void **ret_obj) {
        _cleanup_(tpm_key_freep) tpm_key *k = NULL;
        int r;

        r = tpm_key_new(uri, &k);
        if (r >= 0 && k->path)
                r = open_file(k);
        if (r >= 0)
                r = tpm_key_connect(k, opts);
        if (r >= 0 && !k->path)
                r = open_persistent(k);
        if (r < 0)
                return r;
        *ret_obj = TAKE_PTR(k);
        return 0;
}

const TPMT_PUBLIC *tpm_obj_public(void *obj) {
        return &((tpm_key *) obj)->pub.publicArea;
}

tpm_conn *tpm_obj_conn(void *obj) {
        return ((tpm_key *) obj)->conn;
}

static int tpm2_open(const key_uri *uri, const hsm_options *opts, void **ret_obj, EVP_PKEY **ret_pub) {
        _cleanup_(tpm_key_freep) tpm_key *k = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pub = NULL;
        int r;

        r = tpm_obj_open(uri, opts, (void **) &k);
        if (r >= 0)
                r = check_signing_key(k);
        if (r >= 0)
                r = tpm_pub_to_pkey(&k->pub.publicArea, k->desc, &pub);
        if (r < 0)
                return r;
        *ret_obj = TAKE_PTR(k);
        *ret_pub = TAKE_PTR(pub);
        return 0;
}

/* Persistent key: Sign.  Key file: ContextLoad, Sign, FlushContext (or,
 * the first time, the parent (ReadPublic of the SRK, or CreatePrimary),
 * Load, [FlushContext (primary)], ContextSave, Sign, FlushContext); held:
 * Sign. */
static int sign_locked(tpm_key *k, const TPMT_SIG_SCHEME *scheme, const TPM2B_DIGEST *digest,
                       TPMT_SIGNATURE **ret) {
        static const TPMT_TK_HASHCHECK null_ticket = { .tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL };
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(tpm_tr_flush) tpm_tr loaded = TPM_TR(k->conn);
        ESYS_TR key = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = key_acquire(k, &loaded, &key);
        if (r < 0)
                return r;
        rc = Esys_Sign(k->conn->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                       digest, scheme, &null_ticket, ret);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "the TPM cannot sign with %s", k->desc);
        return 0;
}

static int tpm2_sign(void *obj, hsm_sig_scheme scheme, int md_nid, const uint8_t *digest,
                     size_t digest_len, uint8_t *sig, size_t *siglen) {
        tpm_key *k = obj;
        _cleanup_(esys_freep) TPMT_SIGNATURE *signature = NULL;
        TPMT_SIG_SCHEME s;
        TPM2B_DIGEST d = { .size = (UINT16) digest_len };
        int r;

        r = tpm_sig_scheme(k->pub.publicArea.type, scheme, md_nid, digest_len, &s);
        if (r < 0)
                return r;
        memcpy(d.buffer, digest, digest_len); /* at most 64 bytes, checked above */
        /* A flush lost after the signature fails it too: the TPM went away. */
        r = tpm_conn_left_report(k->conn, sign_locked(k, &s, &d, &signature));
        if (r < 0)
                return r;
        return tpm_sig_encode(signature, sig, siglen);
}

/* The public area as the TPM holds it: ReadPublic on the persistent
 * object, or on the key file's key loaded for the purpose. */
static int read_public(tpm_key *k, TPM2B_PUBLIC **ret) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(tpm_tr_flush) tpm_tr loaded = TPM_TR(k->conn);
        ESYS_TR key = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = key_acquire(k, &loaded, &key);
        if (r < 0)
                return r;
        rc = Esys_ReadPublic(k->conn->esys, key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ret, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "cannot read the public area of %s", k->desc);
        return 0;
}

static int tpm2_custody(void *obj, hwid_custody *ret) {
        tpm_key *k = obj;
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        hwid_custody c = { .backend = "tpm2" };
        TPMA_OBJECT a;
        int r;

        r = tpm_conn_left_report(k->conn, read_public(k, &pub));
        if (r < 0)
                return r;
        a = pub->publicArea.objectAttributes;
        c.tpm_attributes = a;
        c.fixed_tpm = a & TPMA_OBJECT_FIXEDTPM;
        c.fixed_parent = a & TPMA_OBJECT_FIXEDPARENT;
        c.sensitive_data_origin = a & TPMA_OBJECT_SENSITIVEDATAORIGIN;
        c.user_with_auth = a & TPMA_OBJECT_USERWITHAUTH;
        c.sign = a & TPMA_OBJECT_SIGN_ENCRYPT;
        c.decrypt = a & TPMA_OBJECT_DECRYPT;
        c.restricted = a & TPMA_OBJECT_RESTRICTED;
        c.no_da = a & TPMA_OBJECT_NODA;
        if (k->path)
                snprintf(c.location, sizeof(c.location), "TPM at %s, key file %s, parent 0x%08x",
                         tpm_conn_name(k->conn), k->path, k->parent);
        else
                snprintf(c.location, sizeof(c.location), "TPM at %s, persistent handle 0x%08x",
                         tpm_conn_name(k->conn), k->handle);
        *ret = c;
        return 0;
}

/* Needs no TPM: the blob is useless without the file. */
static int remove_file(tpm_key *k) {
        if (unlink(k->path) < 0)
                return hwid_fail(errno == ENOENT ? HWID_E_KEY_NOT_FOUND : HWID_E_IO,
                                 "cannot remove %s: %s", k->path, strerror(errno));
        pthread_mutex_lock(&k->conn->lock);
        tpm_held_flush(k->conn, &k->held);
        Esys_Free(TAKE_PTR(k->saved));
        k->removed = true;
        pthread_mutex_unlock(&k->conn->lock);
        return fsync_parent_dir(k->path);
}

static int remove_persistent(tpm_key *k) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        ESYS_TR key = ESYS_TR_NONE, none = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        r = tpm_conn_lock(k->conn, &locked);
        if (r >= 0)
                r = key_acquire(k, NULL, &key);
        if (r < 0)
                return r;
        rc = Esys_EvictControl(k->conn->esys, ESYS_TR_RH_OWNER, key, ESYS_TR_PASSWORD,
                               ESYS_TR_NONE, ESYS_TR_NONE, k->handle, &none);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(k->conn, rc, "cannot remove the key at %s", k->desc);
        /* Some tpm2-tss versions forget the evicted object themselves, some
         * do not; closing an unknown handle is harmless. */
        (void) Esys_TR_Close(k->conn->esys, &k->persistent);
        k->persistent = ESYS_TR_NONE;
        k->removed = true;
        return 0;
}

static int tpm2_remove(void *obj) {
        tpm_key *k = obj;

        return k->path ? remove_file(k) : remove_persistent(k);
}

static int tpm2_release(void *obj) {
        tpm_key *k = obj;

        if (!k->conn)
                return 0;
        held_release(k);
        return tpm_conn_left_report(k->conn, 0);
}

static void tpm2_free(void *obj) {
        tpm_key_free(obj);
}

const hsm_backend hsm_backend_tpm2 = {
        .name = "tpm2",
        .create = tpm2_create,
        .open = tpm2_open,
        .sign = tpm2_sign,
        .custody = tpm2_custody,
        .remove = tpm2_remove,
        .release = tpm2_release,
        .free = tpm2_free,
};
