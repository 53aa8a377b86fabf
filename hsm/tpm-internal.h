/* Shared by the TPM 2.0 backend's files: tpm.c (the hsm_backend),
 * tpm-conn.c (connections, locking, errors, handle guards) and
 * tpm-keyfile.c (pure data: object templates, public areas as EVP_PKEYs,
 * signature schemes and encodings, and the TSS2 PEM key file format that
 * tpm2-tools and the tpm2 OpenSSL provider share). */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <openssl/evp.h>
#include <tss2/tss2_esys.h>

#include "backend.h"
#include "cleanup.h"

/* ---- tpm-conn.c ---- */

typedef struct tpm_conn {
        struct tpm_conn *next;
        char *tcti;           /* NULL: the tpm2-tss default */
        unsigned refs;        /* guarded by the process-wide list's lock */
        pthread_mutex_t lock; /* serialises every ESYS call; guards the rest */
        TSS2_TCTI_CONTEXT *tcti_ctx;
        ESYS_CONTEXT *esys;
        bool broken;  /* esys is unusable: reconnect before the next call */
        unsigned gen; /* bumped by each reconnect; ESYS_TRs die with it */
        /* Transient objects whose flush was lost with the connection: the
         * TPM may still hold them (unless it restarted), until reported. */
        uint32_t left[8];
        size_t n_left;
} tpm_conn;

/* The process's connection for tcti (NULL: the tpm2-tss default), opened
 * on first use; -HWID_E_TPM_UNREACHABLE if it cannot be. */
int tpm_conn_get(const char *tcti, tpm_conn **ret);
/* Drops a reference; the last one closes the connection, so that another
 * client of a single-connection TPM can get in. */
void tpm_conn_unref(tpm_conn *c);
/* Takes c->lock, first rebuilding a broken connection, so that a TPM that
 * went away and came back works again without restarting the process. */
int tpm_conn_lock(tpm_conn *c, tpm_conn **ret_locked);
void tpm_conn_unlockp(tpm_conn **c);
#define _cleanup_unlock_ _cleanup_(tpm_conn_unlockp)
const char *tpm_conn_name(const tpm_conn *c);

/* For a failed ESYS call, with c->lock held: -HWID_E_TPM_UNREACHABLE for
 * a transport failure ("<what>: the TPM at T went away"), else
 * -HWID_E_TPM with "<what>: <decoded rc>".  Anything but a TPM response
 * code marks the connection broken. */
int tpm_fail(tpm_conn *c, TSS2_RC rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* An ESYS call whose failure the caller can live with (a cleanup, a
 * shortcut), with c->lock held: anything but a TPM response code still
 * marks the connection broken, so that the next command reconnects
 * instead of failing with ESYS's BAD_SEQUENCE. */
void tpm_conn_check(tpm_conn *c, TSS2_RC rc);
/* With c->lock held: the TPM may still hold the transient object at
 * handle, whose flush was lost with the connection. */
void tpm_conn_left(tpm_conn *c, uint32_t handle);
/* Takes c->lock: r when no flush was lost; else the objects that may be
 * left, appended to r's detail (r < 0) or as -HWID_E_TPM_UNREACHABLE
 * (r >= 0: the operation itself worked).  They are reported once. */
int tpm_conn_left_report(tpm_conn *c, int r);
/* A TPM format-one response code, whichever handle or parameter it names. */
bool tpm_rc_is_fmt1(TSS2_RC rc, TSS2_RC code);

/* An ESYS handle on a connection, for cleanup guards: tpm_tr_flush() for
 * transient objects (TPM2_FlushContext), tpm_tr_close() for persistent ones
 * (forgets ESYS's record; the TPM keeps the object).  Declare guards after
 * the lock so that they run before it is released. */
typedef struct tpm_tr {
        tpm_conn *conn;
        ESYS_TR tr;
} tpm_tr;
#define TPM_TR(c) { .conn = (c), .tr = ESYS_TR_NONE }
void tpm_tr_flush(tpm_tr *t);
void tpm_tr_close(tpm_tr *t);
/* Takes the handle out of a guard (which then has nothing to flush). */
static inline ESYS_TR tpm_tr_take(tpm_tr *t) {
        ESYS_TR tr = t->tr;

        t->tr = ESYS_TR_NONE;
        return tr;
}

/* A transient object kept loaded across operations (hsm_options.hold, a
 * held AK), valid on the connection of generation gen only; handle names
 * it when its flush is lost.  All with the connection's lock held. */
typedef struct tpm_held {
        ESYS_TR tr;
        unsigned gen;
        uint32_t handle;
} tpm_held;
#define TPM_HELD { .tr = ESYS_TR_NONE }
/* Keeps the object of guard t (which then has nothing to flush). */
void tpm_held_keep(tpm_conn *c, tpm_held *h, tpm_tr *t);
/* Whether h holds an object on c's current connection; one loaded on a
 * connection since lost is forgotten, as possibly left in the TPM. */
bool tpm_held_live(tpm_conn *c, tpm_held *h);
/* Flushes h's object (or records it as possibly left); h is empty after. */
void tpm_held_flush(tpm_conn *c, tpm_held *h);

static inline void esys_freep(void *p) {
        Esys_Free(*(void **) p);
}

/* ---- tpm-parent.c ---- */

/* The TCG storage root key's persistent handle (TCG TPM v2.0 Provisioning
 * Guidance), a key file's parent when the TPM has a usable one there. */
#define TPM_SRK_HANDLE 0x81000001u

/* A key file's parent, loaded for as long as the key needs it.  handle:
 * in, 0 to make a new key (the SRK if the TPM has a usable one, else the
 * owner storage primary), or the parent a key file names; out, the
 * parent used.  tpm_parent_done() closes the SRK's record or flushes the
 * primary: declare guards after the lock. */
typedef struct tpm_parent {
        uint32_t handle;
        ESYS_TR tr;
        tpm_tr srk, primary;
} tpm_parent;
#define TPM_PARENT(c, h) { .handle = (h), .tr = ESYS_TR_NONE, .srk = TPM_TR(c), .primary = TPM_TR(c) }
/* One ReadPublic with a usable SRK; with none (or, when making a key, an
 * SRK that is not a noDA storage key with an empty-password user role) a
 * ReadPublic refused and a CreatePrimary.  -HWID_E_KEY_NOT_FOUND if a key
 * file's SRK is gone. */
int tpm_parent_get(tpm_conn *c, tpm_parent *p);
void tpm_parent_done(tpm_parent *p);
/* Whether a persistent object's public area is an SRK hwid makes keys under. */
bool tpm_srk_usable(const TPMT_PUBLIC *pub);
/* CreatePrimary of the owner storage primary (tpm_primary_template()). */
int tpm_primary_create(tpm_conn *c, tpm_tr *ret);
/* A new key, loaded (ret_key: flush it), under the parent p gets
 * (tpm_parent_get(); p->handle says which): TPM2_CreateLoaded, or Create
 * and Load on a TPM without it.  An SRK that refuses the empty password
 * (it has an auth value) is passed over for the owner storage primary. */
int tpm_parent_create_key(tpm_conn *c, tpm_parent *p, const TPM2B_PUBLIC *tmpl, TPM2B_PUBLIC *ret_pub,
                          TPM2B_PRIVATE *ret_priv, tpm_tr *ret_key);

/* ---- tpm.c ---- */

/* Called with c locked and a hwid TPM key at `key` (its public area `pub`,
 * described as `desc` in messages); see tpm_key_with_loaded(). */
typedef int (*tpm_key_fn)(tpm_conn *c, ESYS_TR key, const TPMT_PUBLIC *pub, const char *desc,
                          void *userdata);
/* obj: the tpm2 backend's object of a hwid_key (hsm_key_backend_obj()),
 * or of a MAC key (tpm-mac.c). */
int tpm_key_with_loaded(void *obj, tpm_key_fn fn, void *userdata);
/* Objects that are not signing keys (tpm-mac.c's keyedHash keys), kept
 * as signing keys are (a key file, or a persistent handle) and freed,
 * removed and read back with hsm_backend_tpm2's free, remove and
 * custody: made from tmpl at uri (refused if one is there, unless
 * force), or opened without the signing key's checks. */
int tpm_obj_create(const key_uri *uri, const TPM2B_PUBLIC *tmpl, bool force, const hsm_options *opts,
                   void **ret_obj);
int tpm_obj_open(const key_uri *uri, const hsm_options *opts, void **ret_obj);
/* The object's public area (as its key file or the TPM had it at open),
 * and its connection (for tpm_conn_left_report()). */
const TPMT_PUBLIC *tpm_obj_public(void *obj);
tpm_conn *tpm_obj_conn(void *obj);

/* ---- tpm-keyfile.c ---- */

/* A TSS2 key file is a few hundred bytes; anything bigger is not one. */
#define TPM_KEYFILE_MAX (16 * 1024)

/* The parent a hwid key file names when the TPM has no usable SRK: the
 * owner hierarchy's storage primary, re-created from the provider's
 * template on each load.  Else it names the SRK, TPM_SRK_HANDLE. */
#define TPM_KEYFILE_PARENT TPM2_RH_OWNER

/* The ECC storage primary the tpm2 OpenSSL provider creates for parent
 * 0x40000001, so that our key files load there and theirs here. */
void tpm_primary_template(TPM2B_PUBLIC *ret);

/* An unrestricted signing key of the given type with no fixed scheme. */
int tpm_key_template(hwid_key_type type, TPM2B_PUBLIC *ret);

/* The public part of a TPM key as a default-provider EVP_PKEY; `what`
 * names the key in errors.  Fails with -HWID_E_KEY_TYPE for anything but
 * the types hwid supports. */
int tpm_pub_to_pkey(const TPMT_PUBLIC *pub, const char *what, EVP_PKEY **ret);

/* The TPM signing scheme for a signature over digest (md_nid's output)
 * with a key of public type key_type (TPM2_ALG_ECC or TPM2_ALG_RSA). */
int tpm_sig_scheme(TPMI_ALG_PUBLIC key_type, hsm_sig_scheme scheme, int md_nid,
                   size_t digest_len, TPMT_SIG_SCHEME *ret);

/* A TPM signature in the encoding backend.h promises: DER for ECDSA, the
 * raw octet string for RSA. */
int tpm_sig_encode(const TPMT_SIGNATURE *s, uint8_t *sig, size_t *siglen);

/* Encodes a TSSPRIVKEY (parent TPM_KEYFILE_PARENT or TPM_SRK_HANDLE,
 * emptyAuth TRUE) as PEM. */
int tpm_keyfile_encode(const TPM2B_PUBLIC *pub, const TPM2B_PRIVATE *priv, uint32_t parent,
                       char **ret_pem, size_t *ret_len);

/* Decodes a PEM TSSPRIVKEY read from path (named in errors); fails with
 * -HWID_E_INVALID unless it is a loadable key under TPM_KEYFILE_PARENT
 * (ret_parent: that, also for the old spelling 0) or TPM_SRK_HANDLE,
 * with an empty auth value. */
int tpm_keyfile_decode(const char *path, const char *data, size_t len,
                       TPM2B_PUBLIC *ret_pub, TPM2B_PRIVATE *ret_priv, uint32_t *ret_parent);
