/* Shared by the PKCS#11 backend's two files: p11-module.c (modules, slot
 * lookup, login, session pool) and p11.c (key objects and operations).
 *
 * A p11_token is one token in one loaded module, shared by every key open
 * on it: PKCS#11 login state belongs to the application and the token, not
 * to a session, so the token is logged in once and its pool of R/W
 * sessions serves all of its keys. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include <stdint.h>

#include <openssl/evp.h>
#include <p11-kit/p11-kit.h>

#include "hsm.h"
#include "uri.h"

/* Sessions kept per token: twice the cores (a signature is CPU work in a
 * software token, a round trip to a network HSM: either way, more
 * concurrent signers than cores pays), within these bounds, and never more
 * than the token says it allows (p11_pool_size()). */
#define P11_POOL_MIN 4
#define P11_POOL_CAP 64
/* Objects looked at per search: enough to tell "one" from "several". */
#define P11_MATCH_MAX 16

typedef struct p11_modset p11_modset;

typedef struct p11_token {
        p11_modset *modset; /* the loaded modules this token was found in */
        CK_FUNCTION_LIST *mod;
        CK_SLOT_ID slot;
        CK_FLAGS token_flags; /* CKF_LOGIN_REQUIRED, ... */
        char *label;
        char *module_desc; /* "SoftHSM (libsofthsm2.so)", for messages */

        pthread_mutex_t lock; /* guards the pool below */
        pthread_cond_t cond;
        CK_SESSION_HANDLE *idle; /* max_open places */
        size_t n_idle;
        size_t n_open; /* idle + borrowed */
        size_t max_open;

        int refs; /* guarded by the registry lock in p11-module.c */
        struct p11_token *next;
} p11_token;

/* Maps a PKCS#11 return value to a hwid error with a one-line detail;
 * `what` names the operation ("C_Sign with key 'x'").  Never sees a PIN. */
int p11_fail(CK_RV rv, const char *token, const char *what);

/* Finds the token named by uri (loading modules on first use), logs in
 * with the URI's PIN if the token needs it, and returns a reference. */
int p11_token_acquire(const key_uri *uri, p11_token **ret);
void p11_token_release(p11_token *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(p11_token *, p11_token_release)

/* How many sessions a token's pool keeps open at most, for its token
 * info and the number of online cores. */
size_t p11_pool_size(const CK_TOKEN_INFO *ti, long cores);

/* Borrows a session from the pool, waiting while all are in use. */
int p11_session_get(p11_token *t, CK_SESSION_HANDLE *ret);
/* Returns a session; discard (bad, or an operation left active) swaps it
 * for a new one first, or gives up its place if that fails. */
void p11_session_put(p11_token *t, CK_SESSION_HANDLE s, bool discard);
/* Swaps a borrowed session that went bad for a new one.  On failure the
 * session is gone from the pool (*s is invalid, nothing to put back). */
int p11_session_replace(p11_token *t, CK_SESSION_HANDLE *s);

/* True for return values that mean the session itself is gone. */
static inline bool p11_rv_session_gone(CK_RV rv) {
        return rv == CKR_SESSION_HANDLE_INVALID || rv == CKR_SESSION_CLOSED;
}

/* A session borrowed from the token's pool for the length of a scope:
 * _cleanup_(p11_sess_putp) p11_sess s = { 0 }; p11_sess_get(t, &s). */
typedef struct p11_sess {
        p11_token *t;
        CK_SESSION_HANDLE h;
} p11_sess;

static inline void p11_sess_putp(p11_sess *s) {
        if (s->t)
                p11_session_put(s->t, s->h, false);
}

static inline int p11_sess_get(p11_token *t, p11_sess *ret) {
        int r = p11_session_get(t, &ret->h);

        if (r < 0)
                return r;
        ret->t = t;
        return 0;
}

/* ---- objects (p11-object.c) ---- */

/* How messages name the key a URI means: "labelled 'x'", "with id 0a1b". */
char *p11_key_desc(const key_uri *uri);
/* CKA_CLASS plus the URI's CKA_LABEL and CKA_ID; returns the count. */
CK_ULONG p11_uri_template(const key_uri *uri, CK_OBJECT_CLASS *cls, CK_ATTRIBUTE tmpl[3]);
/* Up to P11_MATCH_MAX objects matching tmpl. */
int p11_find_objects(p11_token *t, CK_SESSION_HANDLE s, CK_ATTRIBUTE *tmpl, CK_ULONG n,
                     CK_OBJECT_HANDLE found[P11_MATCH_MAX], CK_ULONG *ret_count);
/* Exactly one private key matching the URI, else KEY_NOT_FOUND/INVALID. */
int p11_find_private(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri, const char *desc,
                     CK_OBJECT_HANDLE *ret);
/* The public-key object paired with priv (same CKA_ID, else label). */
int p11_find_public(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, const key_uri *uri,
                    const char *desc, CK_OBJECT_HANDLE *ret);
/* A variable-length attribute (malloc'ed; NULL when empty). */
int p11_attr_get(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, CK_ATTRIBUTE_TYPE type,
                 const char *what, uint8_t **ret, size_t *ret_len);
/* Key type of the pair and its public key as a default-provider key. */
int p11_load_public(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, CK_OBJECT_HANDLE pub,
                    CK_KEY_TYPE *ret_kt, EVP_PKEY **ret_pub, hwid_key_type *ret_type);
