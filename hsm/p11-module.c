/* PKCS#11 plumbing: modules loaded once per process through p11-kit, and
 * the token a URI names (login and the session pool: p11-session.c).
 *
 * Everything here that is shared between keys lives in one registry under
 * one lock: the loaded module sets (p11-kit's registered modules, or one
 * module-path=) and the tokens found in them.  Both are reference counted
 * so that the last key freed finalizes the modules.  Signing never takes
 * the registry lock, only its module set's pool lock. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "p11-internal.h"
#include "secret.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static p11_modset *modsets;
static p11_token *tokens;

/* ---- module sets ---- */

static const char *p11_kit_reason(void) {
        const char *m = p11_kit_message();

        return m ? m : "unknown error";
}

static int modset_load(const char *path, CK_FUNCTION_LIST ***ret) {
        CK_FUNCTION_LIST **mods = calloc(2, sizeof(*mods));
        CK_RV rv;

        if (!mods)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!path) {
                free(mods);
                /* Modules that fail to initialize are skipped by p11-kit
                 * unless marked critical in their configuration. */
                mods = p11_kit_modules_load_and_initialize(0);
                if (!mods)
                        return hwid_fail(HWID_E_HSM, "cannot load the PKCS#11 modules registered "
                                                     "with p11-kit: %s", p11_kit_reason());
                *ret = mods;
                return 0;
        }
        mods[0] = p11_kit_module_load(path, 0);
        if (!mods[0]) {
                free(mods);
                return hwid_fail(HWID_E_HSM, "cannot load PKCS#11 module %s: %s", path, p11_kit_reason());
        }
        rv = p11_kit_module_initialize(mods[0]);
        if (rv != CKR_OK) {
                p11_kit_module_release(mods[0]);
                free(mods);
                return hwid_fail(HWID_E_HSM, "cannot initialize PKCS#11 module %s: %s",
                                 path, p11_kit_strerror(rv));
        }
        *ret = mods;
        return 0;
}

/* Called with the registry lock held. */
static int modset_get(const char *path, p11_modset **ret) {
        p11_modset *ms = NULL;
        int r;

        for (ms = modsets; ms; ms = ms->next)
                if ((!path && !ms->path) || (path && ms->path && strcmp(path, ms->path) == 0)) {
                        ms->refs++;
                        *ret = ms;
                        return 0;
                }
        ms = calloc(1, sizeof(*ms));
        if (!ms || (path && !(ms->path = strdup(path)))) {
                free(ms);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        r = modset_load(path, &ms->mods);
        if (r < 0) {
                free(ms->path);
                free(ms);
                return r;
        }
        pthread_mutex_init(&ms->lock, NULL);
        pthread_cond_init(&ms->cond, NULL);
        ms->refs = 1;
        ms->next = modsets;
        *ret = modsets = ms;
        return 0;
}

/* Called with the registry lock held. */
static void modset_put(p11_modset *ms) {
        if (--ms->refs > 0)
                return;
        for (p11_modset **p = &modsets; *p; p = &(*p)->next)
                if (*p == ms) {
                        *p = ms->next;
                        break;
                }
        if (ms->path) {
                p11_kit_module_finalize(ms->mods[0]);
                p11_kit_module_release(ms->mods[0]);
                free(ms->mods);
        } else
                p11_kit_modules_finalize_and_release(ms->mods);
        pthread_cond_destroy(&ms->cond);
        pthread_mutex_destroy(&ms->lock);
        free(ms->path);
        free(ms);
}

int p11_modset_reinit(p11_modset *ms) {
        CK_RV rv = CKR_OK;

        /* Every session of the set is closed by now; a module that fails
         * to finalize (it lost its device) is initialized all the same. */
        for (size_t i = 0; ms->mods[i]; i++) {
                (void) p11_kit_module_finalize(ms->mods[i]);
                CK_RV rv_i = p11_kit_module_initialize(ms->mods[i]);
                if (rv_i != CKR_OK && rv == CKR_OK)
                        rv = rv_i;
        }
        if (rv != CKR_OK)
                return hwid_fail(HWID_E_HSM, "cannot initialize the PKCS#11 module%s again: %s",
                                 ms->path ? " " : "s", p11_kit_strerror(rv));
        return 0;
}

/* ---- finding the token ---- */

/* RFC 7512 module-name is the library name without prefix and suffix
 * ("softhsm2" for libsofthsm2.so); p11-kit's config name also counts. */
static bool module_name_matches(CK_FUNCTION_LIST *mod, const char *want) {
        _cleanup_free_ char *name = p11_kit_module_get_name(mod);
        _cleanup_free_ char *file = p11_kit_module_get_filename(mod);
        const char *base;
        size_t n;

        if (name && strcmp(name, want) == 0)
                return true;
        if (!file)
                return false;
        base = strrchr(file, '/') ? strrchr(file, '/') + 1 : file;
        if (strncmp(base, "lib", 3) == 0 && strncmp(want, "lib", 3) != 0)
                base += 3;
        n = strcspn(base, ".");
        return strlen(want) == n && strncmp(base, want, n) == 0;
}

static void module_display_name(CK_FUNCTION_LIST *mod, char *buf, size_t size) {
        _cleanup_free_ char *name = p11_kit_module_get_name(mod);
        _cleanup_free_ char *file = NULL;

        if (!name)
                file = p11_kit_module_get_filename(mod);
        snprintf(buf, size, "%s", name ? name : file ? file : "?");
}

typedef struct slot_match {
        CK_FUNCTION_LIST *mod;
        CK_SLOT_ID slot;
        CK_TOKEN_INFO info;
        unsigned count;
} slot_match;

static bool slot_matches(CK_FUNCTION_LIST *mod, CK_SLOT_ID slot, const key_uri *uri, CK_TOKEN_INFO *ti) {
        CK_SLOT_ID want = p11_kit_uri_get_slot_id(uri->p11);
        CK_SLOT_INFO si;

        if (want != (CK_SLOT_ID) -1 && want != slot)
                return false;
        if (mod->C_GetSlotInfo(slot, &si) != CKR_OK || !(si.flags & CKF_TOKEN_PRESENT) ||
            !p11_kit_uri_match_slot_info(uri->p11, &si))
                return false;
        return mod->C_GetTokenInfo(slot, ti) == CKR_OK && p11_kit_uri_match_token_info(uri->p11, ti);
}

/* Looks through one module's slots; a module that cannot list its slots
 * is skipped (and named so) rather than hiding the others' tokens. */
static void search_module(CK_FUNCTION_LIST *mod, const key_uri *uri, slot_match *m,
                          char *looked, size_t size) {
        CK_SLOT_ID slots[256]; /* more would be reported as a listing failure */
        CK_ULONG n = ELEMENTSOF(slots);
        CK_INFO info;
        char name[128];
        CK_RV rv;

        if (uri->module_name && !module_name_matches(mod, uri->module_name))
                return;
        if (mod->C_GetInfo(&info) != CKR_OK || !p11_kit_uri_match_module_info(uri->p11, &info))
                return;
        module_display_name(mod, name, sizeof(name));
        rv = mod->C_GetSlotList(CK_TRUE, slots, &n);
        snprintf(looked + strlen(looked), size - strlen(looked), "%s%s%s%s%s", looked[0] ? ", " : "", name,
                 rv == CKR_OK ? "" : " (cannot list slots: ", rv == CKR_OK ? "" : p11_kit_strerror(rv),
                 rv == CKR_OK ? "" : ")");
        if (rv != CKR_OK)
                return;
        for (CK_ULONG i = 0; i < n; i++) {
                CK_TOKEN_INFO ti;

                if (!slot_matches(mod, slots[i], uri, &ti))
                        continue;
                if (m->count++ == 0) {
                        m->mod = mod;
                        m->slot = slots[i];
                        m->info = ti;
                }
        }
}

static int find_slot(p11_modset *ms, const key_uri *uri, slot_match *ret) {
        slot_match m = { 0 };
        char looked[256] = "";

        for (size_t i = 0; ms->mods[i]; i++)
                search_module(ms->mods[i], uri, &m, looked, sizeof(looked));
        if (m.count == 0 && !looked[0])
                return hwid_fail(HWID_E_TOKEN_NOT_FOUND, "no PKCS#11 token labelled '%s': no module %s%s",
                                 uri->token,
                                 uri->module_name ? "matches module-name=" : "is registered with p11-kit",
                                 uri->module_name ? uri->module_name : "");
        if (m.count == 0)
                return hwid_fail(HWID_E_TOKEN_NOT_FOUND, "no PKCS#11 token labelled '%s' (looked in: %s)",
                                 uri->token, looked);
        if (m.count > 1)
                return hwid_fail(HWID_E_INVALID, "%u PKCS#11 tokens are labelled '%s'; add serial= "
                                                 "or module-name= to the URI", m.count, uri->token);
        *ret = m;
        return 0;
}

/* ---- tokens ---- */

static char *module_desc(CK_FUNCTION_LIST *mod) {
        _cleanup_free_ char *file = p11_kit_module_get_filename(mod);
        _cleanup_free_ char *manuf = NULL;
        const char *base = file ? (strrchr(file, '/') ? strrchr(file, '/') + 1 : file) : "?";
        CK_INFO info;
        char *s;

        if (mod->C_GetInfo(&info) == CKR_OK)
                manuf = p11_kit_space_strdup(info.manufacturerID, sizeof(info.manufacturerID));
        if (asprintf(&s, "%s (%s)", manuf ? manuf : "?", base) < 0)
                return NULL;
        return s;
}

static void token_free(p11_token *t) {
        for (size_t i = 0; i < t->n_idle; i++)
                t->mod->C_CloseSession(t->idle[i]);
        free(t->idle);
        free(t->label);
        free(t->module_desc);
        free(t->pin_source);
        secret_locked_free(t->pin_value);
        free(t);
}

size_t p11_pool_size(const CK_TOKEN_INFO *ti, long cores) {
        size_t n = cores > 0 ? 2 * (size_t) cores : P11_POOL_MIN;

        if (n < P11_POOL_MIN)
                n = P11_POOL_MIN;
        if (n > P11_POOL_CAP)
                n = P11_POOL_CAP;

        if (ti->ulMaxSessionCount != CK_EFFECTIVELY_INFINITE &&
            ti->ulMaxSessionCount != CK_UNAVAILABLE_INFORMATION && ti->ulMaxSessionCount < n)
                n = ti->ulMaxSessionCount;
        if (ti->ulMaxRwSessionCount != CK_EFFECTIVELY_INFINITE &&
            ti->ulMaxRwSessionCount != CK_UNAVAILABLE_INFORMATION && ti->ulMaxRwSessionCount < n)
                n = ti->ulMaxRwSessionCount;
        return n > 0 ? n : 1;
}

/* Called with the registry lock held; takes over the caller's modset ref. */
static int token_new(p11_modset *ms, const slot_match *m, p11_token **ret) {
        p11_token *t = calloc(1, sizeof(*t));

        if (!t)
                return hwid_fail(HWID_E_NOMEM, NULL);
        t->label = p11_kit_space_strdup(m->info.label, sizeof(m->info.label));
        t->module_desc = module_desc(m->mod);
        t->max_open = p11_pool_size(&m->info, sysconf(_SC_NPROCESSORS_ONLN));
        t->idle = calloc(t->max_open, sizeof(*t->idle));
        t->mod = m->mod;
        if (!t->label || !t->module_desc || !t->idle) {
                token_free(t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        t->modset = ms;
        t->slot = m->slot;
        t->token_flags = m->info.flags;
        t->info = m->info;
        t->refs = 1;
        t->next = tokens;
        *ret = tokens = t;
        return 0;
}

/* Called with the registry lock held. */
static int token_get_locked(const key_uri *uri, p11_token **ret) {
        p11_modset *ms = NULL;
        slot_match m;
        int r;

        r = modset_get(uri->module_path, &ms);
        if (r < 0)
                return r;
        r = find_slot(ms, uri, &m);
        if (r < 0) {
                modset_put(ms);
                return r;
        }
        for (p11_token *t = tokens; t; t = t->next)
                if (t->mod == m.mod && t->slot == m.slot) {
                        t->refs++;
                        modset_put(ms); /* the token already holds one */
                        *ret = t;
                        return p11_token_keep_pin(t, uri);
                }
        r = token_new(ms, &m, ret);
        if (r < 0) {
                modset_put(ms);
                return r;
        }
        return p11_token_keep_pin(*ret, uri);
}

void p11_token_release(p11_token *t) {
        p11_modset *ms = t->modset;

        pthread_mutex_lock(&registry_lock);
        if (--t->refs == 0) {
                for (p11_token **p = &tokens; *p; p = &(*p)->next)
                        if (*p == t) {
                                *p = t->next;
                                break;
                        }
                token_free(t);
                modset_put(ms);
        }
        pthread_mutex_unlock(&registry_lock);
}

static int token_login(p11_token *t, const key_uri *uri) {
        CK_SESSION_HANDLE s;
        int r;

        if (!(t->token_flags & CKF_LOGIN_REQUIRED))
                return 0;
        r = p11_session_get(t, &s);
        if (r < 0)
                return r;
        r = p11_login_uri(t, s, uri);
        p11_session_put(t, s, false);
        return r;
}

int p11_token_acquire(const key_uri *uri, p11_token **ret) {
        _cleanup_(p11_token_releasep) p11_token *t = NULL;
        int r;

        pthread_mutex_lock(&registry_lock);
        r = token_get_locked(uri, &t);
        pthread_mutex_unlock(&registry_lock);
        if (r < 0)
                return r;
        r = token_login(t, uri);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(t);
        return 0;
}

/* ---- what recovery needs ---- */

void p11_registry_lock(void) {
        pthread_mutex_lock(&registry_lock);
}

void p11_registry_unlock(void) {
        pthread_mutex_unlock(&registry_lock);
}

p11_token *p11_registry_tokens(void) {
        return tokens;
}

/* The same token: label, manufacturer, model and serial number alike
 * (a slot id may change when a token comes back). */
static bool same_token(const CK_TOKEN_INFO *a, const CK_TOKEN_INFO *b) {
        return memcmp(a->label, b->label, sizeof(a->label)) == 0 &&
               memcmp(a->manufacturerID, b->manufacturerID, sizeof(a->manufacturerID)) == 0 &&
               memcmp(a->model, b->model, sizeof(a->model)) == 0 &&
               memcmp(a->serialNumber, b->serialNumber, sizeof(a->serialNumber)) == 0;
}

int p11_token_refind(p11_token *t) {
        CK_SLOT_ID slots[256];
        CK_ULONG n = ELEMENTSOF(slots);
        CK_TOKEN_INFO ti;
        CK_RV rv = t->mod->C_GetSlotList(CK_TRUE, slots, &n);

        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "listing the slots again");
        for (CK_ULONG i = 0; i < n; i++)
                if (t->mod->C_GetTokenInfo(slots[i], &ti) == CKR_OK && same_token(&ti, &t->info)) {
                        t->slot = slots[i];
                        t->token_flags = ti.flags;
                        return 0;
                }
        return hwid_fail(HWID_E_HSM, "token '%s' is not present in %s", t->label, t->module_desc);
}

void p11_token_add_key(p11_token *t, p11_key *k) {
        pthread_mutex_lock(&registry_lock);
        k->next = t->keys;
        t->keys = k;
        pthread_mutex_unlock(&registry_lock);
}

void p11_token_remove_key(p11_token *t, p11_key *k) {
        pthread_mutex_lock(&registry_lock);
        for (p11_key **p = &t->keys; *p; p = &(*p)->next)
                if (*p == k) {
                        *p = k->next;
                        break;
                }
        pthread_mutex_unlock(&registry_lock);
}
