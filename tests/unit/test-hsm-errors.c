/* The PKCS#11 error mapping p11_fail() (hsm/p11-module.c): every return
 * value lands in the right hwid error class (so the right exit code and
 * HTTP status), and its one-line detail names the token and the operation,
 * and never carries a PIN.  No device is needed: p11_fail() only maps.
 * Also the session pool's size (p11_pool_size()), which only computes. */
#include "check.h"
#include "error.h"
#include "p11-internal.h"
#include "uri.h"

#define TOKEN "factory-7"
#define PIN "Pin-5150-secret"

static const struct {
        CK_RV rv;
        hwid_err code;
        const char *detail; /* a piece of the one-line message */
} map[] = {
        { CKR_PIN_INCORRECT, HWID_E_PIN_INCORRECT, "wrong PIN for token '" TOKEN "'" },
        { CKR_PIN_LEN_RANGE, HWID_E_PIN_INCORRECT, "wrong PIN for token '" TOKEN "'" },
        { CKR_PIN_LOCKED, HWID_E_PIN_LOCKED, "user PIN of token '" TOKEN "' is locked" },
        { CKR_KEY_HANDLE_INVALID, HWID_E_KEY_NOT_FOUND, "no longer on token '" TOKEN "'" },
        { CKR_OBJECT_HANDLE_INVALID, HWID_E_KEY_NOT_FOUND, "no longer on token '" TOKEN "'" },
        { CKR_USER_NOT_LOGGED_IN, HWID_E_HSM, "token '" TOKEN "' is no longer logged in" },
        { CKR_TOKEN_NOT_PRESENT, HWID_E_HSM, "token '" TOKEN "' was removed" },
        { CKR_DEVICE_REMOVED, HWID_E_HSM, "token '" TOKEN "' was removed" },
        { CKR_DEVICE_ERROR, HWID_E_HSM, "on token '" TOKEN "' failed" },
        { CKR_DEVICE_MEMORY, HWID_E_HSM, "on token '" TOKEN "' failed" },
        { CKR_SESSION_HANDLE_INVALID, HWID_E_HSM, "on token '" TOKEN "' failed" },
        { CKR_GENERAL_ERROR, HWID_E_HSM, "on token '" TOKEN "' failed" },
        { CKR_FUNCTION_FAILED, HWID_E_HSM, "on token '" TOKEN "' failed" },
        { CKR_HOST_MEMORY, HWID_E_NOMEM, "out of memory" },
};

/* What the operation was must be in the message, except where the class
 * alone says it all (PIN problems, no memory). */
static bool names_operation(CK_RV rv) {
        return rv != CKR_PIN_INCORRECT && rv != CKR_PIN_LEN_RANGE && rv != CKR_PIN_LOCKED &&
               rv != CKR_HOST_MEMORY;
}

static void maps_every_code(void) {
        for (size_t i = 0; i < ELEMENTSOF(map); i++) {
                int r;

                hwid_error_clear();
                r = p11_fail(map[i].rv, TOKEN, "C_Sign with key 'dev'");
                CHECK(r == -(int) map[i].code);
                if (r != -(int) map[i].code)
                        fprintf(stderr, "  CKR 0x%lx mapped to %d, expected %d\n",
                                (unsigned long) map[i].rv, -r, (int) map[i].code);
                CHECK_CONTAINS(hwid_strerror(r), map[i].detail);
                if (names_operation(map[i].rv))
                        CHECK_CONTAINS(hwid_strerror(r), "C_Sign with key 'dev'");
                CHECK(strchr(hwid_strerror(r), '\n') == NULL);
                CHECK(hwid_err_exit_code(r) == 1);
        }
}

/* The generic message carries the PKCS#11 code, so a log says what failed. */
static void generic_names_code(void) {
        int r = p11_fail(CKR_DEVICE_ERROR, TOKEN, "C_GenerateKeyPair");

        CHECK_CONTAINS(hwid_strerror(r), "C_GenerateKeyPair on token '" TOKEN "' failed");
        CHECK_CONTAINS(hwid_strerror(r), "(0x30)");
}

/* Clients of hwidd see the class: PIN problems are 401, a failing HSM 503. */
static void http_status(void) {
        CHECK(hwid_err_http_status(p11_fail(CKR_PIN_INCORRECT, TOKEN, "C_Login")) == 401);
        CHECK(hwid_err_http_status(p11_fail(CKR_PIN_LOCKED, TOKEN, "C_Login")) == 401);
        CHECK(hwid_err_http_status(p11_fail(CKR_DEVICE_ERROR, TOKEN, "C_Sign")) == 503);
        CHECK(hwid_err_http_status(p11_fail(CKR_TOKEN_NOT_PRESENT, TOKEN, "C_Sign")) == 503);
        CHECK(hwid_err_http_status(p11_fail(CKR_KEY_HANDLE_INVALID, TOKEN, "C_Sign")) == 404);
}

/* No PIN in any message: not in the mapped ones (p11_fail never sees a
 * PIN), and not when a URI that carries one fails to parse or to reach its
 * module. */
static void never_shows_pin(void) {
        static const char *bad_uris[] = {
                "pkcs11:token=" TOKEN ";objekt=k?pin-value=" PIN,
                "pkcs11:token=" TOKEN "?pin-value=" PIN,
                "pkcs11:token=" TOKEN ";object=k%zz?pin-value=" PIN,
                "pkcs11:token=" TOKEN ";object=k?pin-value=" PIN "&pin-source=file:/p",
        };
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        p11_token *t = NULL;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(map); i++) {
                r = p11_fail(map[i].rv, TOKEN, "C_Login");
                CHECK(strstr(hwid_strerror(r), PIN) == NULL);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad_uris); i++) {
                key_uri *v = NULL;

                r = key_uri_parse(bad_uris[i], &v);
                CHECK(r == -HWID_E_URI);
                CHECK(strstr(hwid_strerror(r), PIN) == NULL);
        }
        CHECK(key_uri_parse("pkcs11:token=" TOKEN ";object=k?module-path=/nonexistent/libp11.so&"
                            "pin-value=" PIN, &u) == 0);
        r = p11_token_acquire(u, &t);
        CHECK(r == -HWID_E_HSM);
        CHECK(t == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "/nonexistent/libp11.so");
        CHECK(strstr(hwid_strerror(r), PIN) == NULL);
}

/* Twice the cores within [P11_POOL_MIN, P11_POOL_CAP], never more than the
 * token allows (either limit), never zero. */
static void pool_size(void) {
        static const struct {
                CK_ULONG max, max_rw;
                long cores;
                size_t want;
        } cases[] = {
                { CK_EFFECTIVELY_INFINITE, CK_EFFECTIVELY_INFINITE, 2, 4 },
                { CK_EFFECTIVELY_INFINITE, CK_EFFECTIVELY_INFINITE, 1, P11_POOL_MIN },
                { CK_EFFECTIVELY_INFINITE, CK_EFFECTIVELY_INFINITE, -1, P11_POOL_MIN }, /* cores unknown */
                { CK_EFFECTIVELY_INFINITE, CK_EFFECTIVELY_INFINITE, 8, 16 },
                { CK_EFFECTIVELY_INFINITE, CK_EFFECTIVELY_INFINITE, 1000, P11_POOL_CAP },
                { CK_UNAVAILABLE_INFORMATION, CK_UNAVAILABLE_INFORMATION, 8, 16 },
                { 2, CK_EFFECTIVELY_INFINITE, 8, 2 },
                { CK_EFFECTIVELY_INFINITE, 3, 8, 3 },
                { 10, 5, 32, 5 },
                { 0, 0, 8, 16 }, /* 0 is CK_EFFECTIVELY_INFINITE */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                CK_TOKEN_INFO ti = { .ulMaxSessionCount = cases[i].max, .ulMaxRwSessionCount = cases[i].max_rw };
                size_t n = p11_pool_size(&ti, cases[i].cores);

                CHECK(n == cases[i].want);
                if (n != cases[i].want)
                        fprintf(stderr, "  case %zu: %zu sessions, want %zu\n", i, n, cases[i].want);
        }
}

int main(void) {
        pool_size();
        maps_every_code();
        generic_names_code();
        http_status();
        never_shows_pin();
        return check_done("test-hsm-errors");
}
