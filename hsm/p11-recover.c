/* PKCS#11 recovery, when a token is lost (removed and put back, an HSM
 * restarted, a session or the login gone).
 *
 * A recovery raises its module set's `recovering` (new borrowers of a
 * session wait), waits until nothing is borrowed, reinitialises the
 * modules, finds each token and key again and logs in; then everyone goes
 * on with fresh sessions.  Nothing is signed while that happens, and no
 * handle from before it is used after it.  Above the registry
 * (p11-module.c), the sessions (p11-session.c) and the objects
 * (p11-object.c); p11.c calls it after a failed operation. */
#include <stdio.h>
#include <time.h>

#include "error.h"
#include "ossl-util.h"
#include "p11-internal.h"

static uint64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static _Atomic unsigned long n_recovered, n_recovery_failed;

void hsm_recovery_stats_get(hsm_recovery_stats *ret) {
        *ret = (hsm_recovery_stats) { .recovered = n_recovered, .failed = n_recovery_failed };
}

unsigned p11_token_gen(p11_token *t) {
        return __atomic_load_n(&t->modset->gen, __ATOMIC_ACQUIRE);
}

/* Finds k's objects again on session s and checks that its public key
 * is still the one it had. */
int p11_key_refind(p11_key *k, CK_SESSION_HANDLE s) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        key_uri u = { .scheme = KEY_URI_PKCS11, .object = k->object, .id = k->id, .id_len = k->id_len };
        CK_OBJECT_HANDLE priv, pub;
        CK_KEY_TYPE kt;
        hwid_key_type type;
        int r;

        if ((r = p11_find_private(k->tok, s, &u, k->desc, &priv)) < 0 ||
            (r = p11_find_public(k->tok, s, priv, &u, k->desc, &pub)) < 0 ||
            (r = p11_load_public(k->tok, s, priv, pub, &kt, &pkey, &type)) < 0)
                return r;
        /* Never sign with another key that took its name meanwhile. */
        if (kt != k->kt || EVP_PKEY_eq(pkey, k->pub_key) != 1)
                return hwid_fail(HWID_E_HSM, "the key %s on token '%s' is not the key it was before the token "
                                 "was lost", k->desc, k->tok->label);
        k->priv = priv;
        k->pub = pub;
        return 0;
}

/* Closes every session of the set's tokens (nothing is borrowed). */
static void close_all(p11_modset *ms) {
        for (p11_token *t = p11_registry_tokens(); t; t = t->next) {
                if (t->modset != ms)
                        continue;
                for (size_t i = 0; i < t->n_idle; i++)
                        (void) t->mod->C_CloseSession(t->idle[i]);
                t->n_idle = t->n_open = 0;
        }
}

/* One token after the modules came back: its slot, a logged-in session
 * (left in the pool) and its keys. */
static int reopen_token(p11_token *t) {
        CK_SESSION_HANDLE s;
        CK_RV rv;
        int r = p11_token_refind(t);

        if (r < 0)
                return r;
        rv = p11_session_open(t, &s);
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "C_OpenSession");
        r = p11_login(t, s);
        for (p11_key *k = t->keys; r >= 0 && k; k = k->next)
                r = p11_key_refind(k, s);
        if (r < 0) {
                (void) t->mod->C_CloseSession(s);
                return r;
        }
        t->idle[t->n_idle++] = s;
        t->n_open++;
        return 0;
}

/* The recovery proper, with nothing borrowed; the registry lock keeps
 * the set's tokens and keys in place.  Returns t's own outcome (another
 * token of the set that is still gone fails only its own users). */
static int recover_set(p11_modset *ms, p11_token *t) {
        int r, rt = 0;

        p11_registry_lock();
        close_all(ms);
        r = p11_modset_reinit(ms);
        for (p11_token *o = p11_registry_tokens(); o; o = o->next) {
                int ro = r;

                if (o->modset != ms)
                        continue;
                if (ro >= 0)
                        ro = reopen_token(o);
                o->lost = ro < 0;
                if (ro < 0) {
                        snprintf(o->why, sizeof(o->why), "%s", hwid_strerror(ro));
                        o->retry_at_ms = now_ms() + P11_RECOVERY_HOLDOFF_MS;
                }
                if (o == t)
                        rt = ro;
        }
        p11_registry_unlock();
        return rt;
}

/* Called with ms->lock held: whether t needs no recovery (0), cannot have
 * one yet (its last failure), or needs one (1). */
static int recovery_needed(p11_token *t, unsigned gen) {
        if (t->modset->gen != gen && !t->lost)
                return 0; /* another thread recovered since */
        if (t->lost && now_ms() < t->retry_at_ms)
                return hwid_fail(HWID_E_HSM, "%s", t->why);
        return 1;
}

int p11_recover(p11_token *t, unsigned gen) {
        p11_modset *ms = t->modset;
        int r;

        pthread_mutex_lock(&ms->lock);
        while (ms->recovering)
                pthread_cond_wait(&ms->cond, &ms->lock);
        r = recovery_needed(t, gen);
        if (r <= 0) {
                pthread_mutex_unlock(&ms->lock);
                return r;
        }
        ms->recovering = true;
        while (ms->busy > 0)
                pthread_cond_wait(&ms->cond, &ms->lock);
        pthread_mutex_unlock(&ms->lock);

        r = recover_set(ms, t);

        pthread_mutex_lock(&ms->lock);
        __atomic_add_fetch(&ms->gen, 1, __ATOMIC_RELEASE);
        ms->recovering = false;
        pthread_cond_broadcast(&ms->cond);
        pthread_mutex_unlock(&ms->lock);
        if (r < 0)
                n_recovery_failed++;
        else
                n_recovered++;
        return r;
}
