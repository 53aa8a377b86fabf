/* PKCS#11 sessions: what the token's return values mean, login, and the
 * pool of sessions per token.
 *
 * Every session of a module set is borrowed and returned under the set's
 * one lock, which also counts the borrowed ones, so that a recovery
 * (p11-recover.c) can wait until nothing is borrowed. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "p11-internal.h"
#include "secret.h"

#define PIN_MAX 256

/* ---- return values ---- */

int p11_fail(CK_RV rv, const char *token, const char *what) {
        switch (rv) {
        case CKR_PIN_INCORRECT:
        case CKR_PIN_LEN_RANGE:
                return hwid_fail(HWID_E_PIN_INCORRECT, "wrong PIN for token '%s'", token);
        case CKR_PIN_LOCKED:
                return hwid_fail(HWID_E_PIN_LOCKED, "the user PIN of token '%s' is locked "
                                                    "(unlock it with the SO PIN)", token);
        case CKR_HOST_MEMORY:
                return hwid_fail(HWID_E_NOMEM, NULL);
        case CKR_KEY_HANDLE_INVALID:
        case CKR_OBJECT_HANDLE_INVALID:
                return hwid_fail(HWID_E_KEY_NOT_FOUND, "%s: the key is no longer on token '%s'",
                                 what, token);
        case CKR_USER_NOT_LOGGED_IN:
                return hwid_fail(HWID_E_HSM, "%s: token '%s' is no longer logged in (was it reset?)", what, token);
        case CKR_TOKEN_NOT_PRESENT:
        case CKR_DEVICE_REMOVED:
                return hwid_fail(HWID_E_HSM, "%s: token '%s' was removed", what, token);
        default:
                /* Device errors, lost sessions, lost login and everything
                 * else: the HSM is (for now) unusable for this request. */
                return hwid_fail(HWID_E_HSM, "%s on token '%s' failed: %s (0x%lx)",
                                 what, token, p11_kit_strerror(rv), (unsigned long) rv);
        }
}

bool p11_rv_recoverable(CK_RV rv) {
        switch (rv) {
        case CKR_SESSION_HANDLE_INVALID:
        case CKR_SESSION_CLOSED:
        case CKR_DEVICE_REMOVED:
        case CKR_TOKEN_NOT_PRESENT:
        case CKR_TOKEN_NOT_RECOGNIZED:
        case CKR_USER_NOT_LOGGED_IN:
        case CKR_SLOT_ID_INVALID:
        case CKR_CRYPTOKI_NOT_INITIALIZED:
        /* A token that vanished leaves its objects' handles dangling
         * (SoftHSM2 answers this when its token directory is gone). */
        case CKR_KEY_HANDLE_INVALID:
        case CKR_OBJECT_HANDLE_INVALID:
                return true;
        default:
                return false;
        }
}

/* ---- login ---- */

/* pin-source is a file: URI or a bare path (RFC 7512 leaves the form to
 * the application); nothing else is accepted.  The file must be its
 * owner's alone (0600: no group or other permission bit), and a NUL byte
 * in the PIN is refused, not taken for its end (a pin-value= with one is
 * refused by the URI's parser).  The PIN is returned in locked memory
 * (secret_locked_free() it). */
static int pin_get(const char *source, const char *value, const char *label, char **ret) {
        const char *path = source;

        if (value)
                return secret_locked_dup(value, ret);
        if (!path)
                return hwid_fail(HWID_E_PIN_MISSING, "token '%s' needs a PIN: add pin-source=file:PATH "
                                                     "to the key URI", label);
        if (strncmp(path, "file://", 7) == 0)
                path += 7;
        else if (strncmp(path, "file:", 5) == 0)
                path += 5;
        else if (strchr(path, ':') && (!strchr(path, '/') || strchr(path, ':') < strchr(path, '/')))
                return hwid_fail(HWID_E_URI, "pin-source must be file:PATH or a path");
        return secret_read_private_file_locked(path, PIN_MAX, ret);
}

static int login_with(p11_token *t, CK_SESSION_HANDLE s, const char *source, const char *value) {
        _cleanup_locked_secret_ char *pin = NULL;
        CK_SESSION_INFO si;
        CK_RV rv;
        int r;

        /* Asking for the PIN even when another key already logged the
         * token in keeps the outcome independent of what else is open. */
        r = pin_get(source, value, t->label, &pin);
        if (r < 0)
                return r;
        rv = t->mod->C_GetSessionInfo(s, &si);
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "C_GetSessionInfo");
        if (si.state == CKS_RW_USER_FUNCTIONS || si.state == CKS_RO_USER_FUNCTIONS)
                return 0;
        rv = t->mod->C_Login(s, CKU_USER, (CK_UTF8CHAR *) pin, strlen(pin));
        if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN)
                return p11_fail(rv, t->label, "C_Login");
        return 0;
}

int p11_login_uri(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri) {
        return login_with(t, s, uri->pin_source, uri->pin_value);
}

int p11_login(p11_token *t, CK_SESSION_HANDLE s) {
        if (!(t->token_flags & CKF_LOGIN_REQUIRED))
                return 0;
        return login_with(t, s, t->pin_source, t->pin_value);
}

int p11_token_keep_pin(p11_token *t, const key_uri *uri) {
        if (t->pin_source || t->pin_value || (!uri->pin_source && !uri->pin_value))
                return 0;
        /* A pin-value is kept (for logging in again after a recovery) in
         * locked, wiped memory like every PIN. */
        if (uri->pin_value)
                return secret_locked_dup(uri->pin_value, &t->pin_value);
        t->pin_source = strdup(uri->pin_source);
        return t->pin_source ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* ---- the pool ---- */

CK_RV p11_session_open(p11_token *t, CK_SESSION_HANDLE *ret) {
        return t->mod->C_OpenSession(t->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, ret);
}

/* Gives up a borrowed session's place in the pool. */
static void pool_forget(p11_token *t) {
        p11_modset *ms = t->modset;

        pthread_mutex_lock(&ms->lock);
        t->n_open--;
        ms->busy--;
        /* Waiters want an idle session, room for a new one, or no borrower. */
        pthread_cond_broadcast(&ms->cond);
        pthread_mutex_unlock(&ms->lock);
}

/* A session, or the token's answer when none can be had: a token the last
 * recovery did not find again answers CKR_TOKEN_NOT_PRESENT at once. */
static CK_RV session_borrow(p11_token *t, CK_SESSION_HANDLE *ret) {
        p11_modset *ms = t->modset;
        CK_RV rv;

        pthread_mutex_lock(&ms->lock);
        while (ms->recovering || (!t->lost && t->n_idle == 0 && t->n_open >= t->max_open))
                pthread_cond_wait(&ms->cond, &ms->lock);
        if (t->lost) {
                pthread_mutex_unlock(&ms->lock);
                return CKR_TOKEN_NOT_PRESENT;
        }
        ms->busy++;
        if (t->n_idle > 0) {
                *ret = t->idle[--t->n_idle];
                pthread_mutex_unlock(&ms->lock);
                return CKR_OK;
        }
        t->n_open++; /* reserve the place, then open outside the lock */
        pthread_mutex_unlock(&ms->lock);
        rv = p11_session_open(t, ret);
        if (rv != CKR_OK)
                pool_forget(t);
        return rv;
}

int p11_session_get(p11_token *t, CK_SESSION_HANDLE *ret) {
        CK_RV rv = session_borrow(t, ret);

        return rv == CKR_OK ? 0 : p11_fail(rv, t->label, "C_OpenSession");
}

CK_RV p11_session_borrow(p11_token *t, CK_SESSION_HANDLE *ret) {
        return session_borrow(t, ret);
}

/* Swaps *s for a new session.  The new one is opened before the old one
 * is closed, because closing a token's last session logs the token out. */
static CK_RV session_swap(p11_token *t, CK_SESSION_HANDLE *s) {
        CK_SESSION_HANDLE old = *s;
        CK_SESSION_INFO si;
        CK_RV rv;

        *s = CK_INVALID_HANDLE;
        rv = p11_session_open(t, s);
        t->mod->C_CloseSession(old);
        if (rv == CKR_SESSION_COUNT) /* at the token's limit: now there is room */
                rv = p11_session_open(t, s);
        if (rv == CKR_OK && (t->token_flags & CKF_LOGIN_REQUIRED)) {
                rv = t->mod->C_GetSessionInfo(*s, &si);
                if (rv == CKR_OK && si.state != CKS_RW_USER_FUNCTIONS)
                        rv = CKR_USER_NOT_LOGGED_IN;
                if (rv != CKR_OK)
                        t->mod->C_CloseSession(*s);
        }
        if (rv != CKR_OK) {
                *s = CK_INVALID_HANDLE;
                pool_forget(t);
        }
        return rv;
}

void p11_session_put(p11_token *t, CK_SESSION_HANDLE s, bool discard) {
        p11_modset *ms = t->modset;

        /* Swapped, not just closed: it may be the token's last session. */
        if (discard && session_swap(t, &s) != CKR_OK)
                return;
        pthread_mutex_lock(&ms->lock);
        t->idle[t->n_idle++] = s;
        ms->busy--;
        pthread_cond_broadcast(&ms->cond);
        pthread_mutex_unlock(&ms->lock);
}
