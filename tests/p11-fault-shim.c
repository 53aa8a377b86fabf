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
 *
 * Each variable is read at every call, so one process can switch faults.
 * Used through a key URI's module-path= attribute. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
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
