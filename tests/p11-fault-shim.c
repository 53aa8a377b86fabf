/* p11-fault-shim: a PKCS#11 module that passes every call through to a real
 * module (SoftHSM2 in the tests) and injects the faults the real module
 * cannot be made to produce.  It is a mock for exactly those faults and
 * nothing else: every fault SoftHSM2 can produce itself (wrong PIN, unknown
 * token or object, an existing key, ...) is tested against SoftHSM2 alone.
 *
 *   HWID_SHIM_TARGET=/path/libsofthsm2.so   the module to wrap (required)
 *   HWID_SHIM_PIN_LOCKED=1    C_Login answers CKR_PIN_LOCKED (SoftHSM2 has
 *                             no lockout after wrong PINs)
 *   HWID_SHIM_FAIL_PUBREAD=1  C_GetAttributeValue asking for CKA_EC_POINT or
 *                             CKA_MODULUS answers CKR_DEVICE_ERROR: a token
 *                             failing right after C_GenerateKeyPair, which
 *                             must leave no half-created key pair behind
 *   HWID_SHIM_SIGN_ERROR=1    C_Sign answers CKR_DEVICE_ERROR (and ends the
 *                             operation, as PKCS#11 says a failed C_Sign does)
 *   HWID_SHIM_CONTROL=FILE    faults for a process that is already running
 *                             (hwidd), read from FILE at every C_SignInit:
 *       fail RV N [LABEL]
 *                     the next N calls of C_SignInit answer RV (hex, e.g.
 *                     0xB3 CKR_SESSION_HANDLE_INVALID), as a token does
 *                     whose session or login was lost, that was removed,
 *                     or whose HSM restarted -- codes SoftHSM2 never gives
 *                     for a session it still has -- and, as such a token
 *                     has lost them, every session of the slot is closed
 *                     in SoftHSM2 (and the login with them)
 *       reset N [LABEL]
 *                     the next N calls first close every session of the
 *                     slot in SoftHSM2 itself (which also logs the token
 *                     out: an HSM that restarted), then go through: the
 *                     answer is SoftHSM2's own
 *       count N [LABEL]
 *                     no fault: N counts the calls of C_SignInit up (a
 *                     test reads how many signatures or HMACs a key made)
 *     With LABEL, only calls for the key whose CKA_LABEL it is count (so
 *     that hwidd's TLS key on the same token signs on).  N counts down in
 *     FILE (up for count); "fail RV 0" and a missing FILE mean no fault.
 *
 * Each variable is read at every call, so one process can switch faults.
 * Used through a key URI's module-path= attribute. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <p11-kit/pkcs11.h>

static CK_FUNCTION_LIST *real;   /* the wrapped module's own list */
static CK_FUNCTION_LIST shim;    /* a copy with the faulty entries swapped */
static CK_RV init_rv = CKR_GENERAL_ERROR;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static bool fault(const char *name) {
        const char *v = getenv(name);

        return v && strcmp(v, "1") == 0;
}

static CK_RV shim_login(CK_SESSION_HANDLE s, CK_USER_TYPE user, CK_UTF8CHAR_PTR pin, CK_ULONG len) {
        if (fault("HWID_SHIM_PIN_LOCKED"))
                return CKR_PIN_LOCKED;
        return real->C_Login(s, user, pin, len);
}

static CK_RV shim_get_attribute_value(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE o, CK_ATTRIBUTE_PTR tmpl,
                                      CK_ULONG n) {
        for (CK_ULONG i = 0; i < n && fault("HWID_SHIM_FAIL_PUBREAD"); i++)
                if (tmpl[i].type == CKA_EC_POINT || tmpl[i].type == CKA_MODULUS)
                        return CKR_DEVICE_ERROR;
        return real->C_GetAttributeValue(s, o, tmpl, n);
}

static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether key (on session s) has the CKA_LABEL want; no want: any key. */
static bool label_is(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, const char *want) {
        char label[128] = "";
        CK_ATTRIBUTE a = { CKA_LABEL, label, sizeof(label) - 1 };

        if (!*want)
                return true;
        if (real->C_GetAttributeValue(s, key, &a, 1) != CKR_OK || a.ulValueLen >= sizeof(label))
                return false;
        label[a.ulValueLen] = '\0';
        return strcmp(label, want) == 0;
}

typedef struct control {
        char verb[16];
        unsigned long rv;
        long n;
        char label[64];
} control;

static bool control_read(const char *path, control *c) {
        FILE *f = fopen(path, "r");
        bool ok = false;

        *c = (control) { 0 };
        if (!f)
                return false;
        if (fscanf(f, "%15s", c->verb) == 1) {
                if (strcmp(c->verb, "fail") == 0)
                        ok = fscanf(f, "%lx %ld", &c->rv, &c->n) == 2;
                else if (strcmp(c->verb, "reset") == 0 || strcmp(c->verb, "count") == 0)
                        ok = fscanf(f, "%ld", &c->n) == 1;
                if (ok && fscanf(f, "%63s", c->label) != 1)
                        c->label[0] = '\0';
        }
        fclose(f);
        return ok;
}

static void control_write(const char *path, const control *c) {
        FILE *f = fopen(path, "w");

        if (!f)
                return;
        if (strcmp(c->verb, "fail") == 0)
                fprintf(f, "fail 0x%lx %ld %s\n", c->rv, c->n, c->label);
        else
                fprintf(f, "%s %ld %s\n", c->verb, c->n, c->label);
        fclose(f);
}

/* The fault HWID_SHIM_CONTROL asks for at this call, counted down in the
 * file: *ret_rv for "fail", *ret_reset for "reset"; "count" only counts. */
static void control_take(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_RV *ret_rv, bool *ret_reset) {
        const char *path = getenv("HWID_SHIM_CONTROL");
        control c;

        if (!path || !*path)
                return;
        pthread_mutex_lock(&control_lock);
        if (control_read(path, &c) && (c.n > 0 || strcmp(c.verb, "count") == 0) && label_is(s, key, c.label)) {
                c.n += strcmp(c.verb, "count") == 0 ? 1 : -1;
                control_write(path, &c);
                if (strcmp(c.verb, "fail") == 0)
                        *ret_rv = (CK_RV) c.rv;
                else if (strcmp(c.verb, "reset") == 0)
                        *ret_reset = true;
        }
        pthread_mutex_unlock(&control_lock);
}

static CK_RV shim_sign_init(CK_SESSION_HANDLE s, CK_MECHANISM_PTR mech, CK_OBJECT_HANDLE key) {
        CK_RV rv = CKR_OK;
        bool reset = false;
        CK_SESSION_INFO si;

        control_take(s, key, &rv, &reset);
        if ((reset || rv != CKR_OK) && real->C_GetSessionInfo(s, &si) == CKR_OK)
                real->C_CloseAllSessions(si.slotID);
        if (rv != CKR_OK)
                return rv;
        return real->C_SignInit(s, mech, key);
}

static CK_RV shim_sign(CK_SESSION_HANDLE s, CK_BYTE_PTR data, CK_ULONG len, CK_BYTE_PTR sig,
                       CK_ULONG_PTR sig_len) {
        CK_BYTE buf[1024];
        CK_ULONG buf_len = sizeof(buf);

        if (!fault("HWID_SHIM_SIGN_ERROR"))
                return real->C_Sign(s, data, len, sig, sig_len);
        /* Finish the real operation so the session is free again, as a
         * token does after a failed C_Sign. */
        (void) real->C_Sign(s, data, len, buf, &buf_len);
        return CKR_DEVICE_ERROR;
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR ret);

static void load_target(void) {
        CK_RV (*get_list)(CK_FUNCTION_LIST_PTR_PTR);
        const char *path = getenv("HWID_SHIM_TARGET");
        void *h;

        if (!path || !*path)
                return;
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h)
                return;
        *(void **) &get_list = dlsym(h, "C_GetFunctionList");
        if (!get_list || get_list(&real) != CKR_OK || !real)
                return;
        shim = *real;
        shim.C_GetFunctionList = C_GetFunctionList;
        shim.C_Login = shim_login;
        shim.C_GetAttributeValue = shim_get_attribute_value;
        shim.C_Sign = shim_sign;
        shim.C_SignInit = shim_sign_init;
        init_rv = CKR_OK;
}

CK_RV C_GetFunctionList(CK_FUNCTION_LIST_PTR_PTR ret) {
        if (!ret)
                return CKR_ARGUMENTS_BAD;
        pthread_once(&once, load_target);
        if (init_rv != CKR_OK)
                return init_rv;
        *ret = &shim;
        return CKR_OK;
}
