/* Shared by the PKCS#11 backend's files, each using only those before it:
 * p11-session.c (return values, login, the session pool), p11-module.c
 * (modules, slot lookup, the registry of tokens), p11-object.c (finding
 * objects), p11-recover.c (recovery of lost tokens) and p11.c (key
 * objects and operations).
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
/* After a failed recovery, callers fail at once for this long instead of
 * reinitialising the module again for every request. */
#define P11_RECOVERY_HOLDOFF_MS 1000

typedef struct p11_key p11_key;

/* The modules of one module-path= (or p11-kit's registered modules),
 * loaded once per process, and the recovery state of every token found
 * in them.  A token that vanished (removed and reinserted, an HSM that
 * restarted) comes back only through C_Finalize + C_Initialize of its
 * module, which invalidates every session and object handle of every
 * token of the module: so recovery is per module set, and waits until
 * none of its sessions is borrowed (p11-session.c). */
typedef struct p11_modset {
        char *path; /* module-path=, or NULL for p11-kit's registered modules */
        CK_FUNCTION_LIST **mods; /* NULL-terminated */
        int refs;   /* guarded by the registry lock */
        struct p11_modset *next;

        pthread_mutex_t lock; /* guards the session pools of its tokens and what follows */
        pthread_cond_t cond;
        size_t busy;          /* sessions borrowed from any of its tokens */
        bool recovering;      /* borrowers wait; the recovery waits for busy == 0 */
        unsigned gen;         /* bumped by every reinitialisation of the modules */
} p11_modset;

typedef struct p11_token {
        p11_modset *modset; /* the loaded modules this token was found in */
        CK_FUNCTION_LIST *mod;
        CK_SLOT_ID slot;
        CK_FLAGS token_flags; /* CKF_LOGIN_REQUIRED, ... */
        CK_TOKEN_INFO info;   /* as first found: a recovery finds the same token again by it */
        char *label;
        char *module_desc; /* "SoftHSM (libsofthsm2.so)", for messages */
        /* Where the PIN comes from, to log in again after a recovery: the
         * first key URI opened on the token that names one.  A pin-value=
         * (tests) is kept as a secret, wiped on free. */
        char *pin_source;
        char *pin_value;
        /* Set by a recovery that did not find it (or a key of it) again:
         * borrowing fails at once, and until retry_at_ms (monotonic) so
         * does a recovery, with this reason.  Guarded by modset->lock. */
        bool lost;
        uint64_t retry_at_ms;
        char why[320];

        /* The session pool, guarded by modset->lock. */
        CK_SESSION_HANDLE *idle; /* max_open places */
        size_t n_idle;
        size_t n_open; /* idle + borrowed */
        size_t max_open;

        /* Guarded by the registry lock in p11-module.c. */
        int refs;
        p11_key *keys; /* the keys open on it, found again after a recovery */
        struct p11_token *next;
} p11_token;

/* A key pair open on a token.  Its handles are those of the module
 * generation they were found in; a recovery finds them again. */
struct p11_key {
        p11_token *tok;
        CK_OBJECT_HANDLE priv, pub;
        CK_KEY_TYPE kt;
        size_t raw_len; /* C_Sign output: 2 x field bytes (EC), modulus bytes (RSA) */
        char *desc;     /* "labelled 'x'", "with id 0a1b", for messages */
        char *object;   /* the URI's object= and id=: how it is found again */
        uint8_t *id;
        size_t id_len;
        EVP_PKEY *pub_key; /* what it must still be after a recovery */
        struct p11_key *next; /* on tok->keys */
};

/* ---- p11-session.c ---- */

/* Maps a PKCS#11 return value to a hwid error with a one-line detail;
 * `what` names the operation ("C_Sign with key 'x'").  Never sees a PIN. */
int p11_fail(CK_RV rv, const char *token, const char *what);
/* Return values after which the token may work again once its module is
 * reinitialised and its sessions reopened and logged in: a lost session
 * or login, a token removed (and perhaps put back), an HSM restarted. */
bool p11_rv_recoverable(CK_RV rv);

/* Logs the token in on session s with its PIN source. */
int p11_login(p11_token *t, CK_SESSION_HANDLE s);
/* Logs the token in on session s with the PIN of uri (at open). */
int p11_login_uri(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri);
/* Remembers uri's PIN source for t, unless it has one already; called
 * with the registry lock held. */
int p11_token_keep_pin(p11_token *t, const key_uri *uri);

/* Opens a session on t outside the pool (the pool's, and a recovery's
 * first one). */
CK_RV p11_session_open(p11_token *t, CK_SESSION_HANDLE *ret);
/* Borrows a session from the pool, waiting while all are in use or the
 * module set is being recovered. */
int p11_session_get(p11_token *t, CK_SESSION_HANDLE *ret);
/* The same, with the token's own answer when there is no session (what
 * p11_rv_recoverable() judges). */
CK_RV p11_session_borrow(p11_token *t, CK_SESSION_HANDLE *ret);
/* Returns a session; discard (bad, or an operation left active) swaps it
 * for a new one first, or gives up its place if that fails. */
void p11_session_put(p11_token *t, CK_SESSION_HANDLE s, bool discard);

/* ---- p11-module.c ---- */

/* Finds the token named by uri (loading modules on first use), logs in
 * with the URI's PIN if the token needs it, and returns a reference. */
int p11_token_acquire(const key_uri *uri, p11_token **ret);
void p11_token_release(p11_token *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(p11_token *, p11_token_release)

/* How many sessions a token's pool keeps open at most, for its token
 * info and the number of online cores. */
size_t p11_pool_size(const CK_TOKEN_INFO *ti, long cores);

/* What recovery needs of the registry. */
void p11_registry_lock(void);
void p11_registry_unlock(void);
/* The first token of the registry (walk ->next); registry lock held. */
p11_token *p11_registry_tokens(void);
/* Finds t's slot again, by its token info, in its module. */
int p11_token_refind(p11_token *t);
/* C_Finalize + C_Initialize of every module of ms. */
int p11_modset_reinit(p11_modset *ms);
/* Keys open on a token, for the recovery (registry lock taken inside). */
void p11_token_add_key(p11_token *t, p11_key *k);
void p11_token_remove_key(p11_token *t, p11_key *k);

/* ---- p11-recover.c ---- */

/* The module set's generation, read before an operation: what
 * p11_recover() needs to tell whether another thread recovered since. */
unsigned p11_token_gen(p11_token *t);
/* After a recoverable failure, by a caller that holds no session of the
 * module set (the recovery waits until none is borrowed): reinitialises
 * its modules, finds each of its tokens and keys again and logs in.
 * Returns 0 at once when another thread has recovered since gen; after a
 * failed recovery, its reason at once for P11_RECOVERY_HOLDOFF_MS. */
int p11_recover(p11_token *t, unsigned gen);
/* Finds k's objects again on session s (after a recovery) and checks
 * that its public key is still the one it had. */
int p11_key_refind(p11_key *k, CK_SESSION_HANDLE s);

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
