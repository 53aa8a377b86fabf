/* The error table: statuses, slugs, exit codes, and per-thread details. */
#include <pthread.h>

#include "check.h"
#include "error.h"

static void maps_statuses(void) {
        CHECK(hwid_err_http_status(-HWID_E_CSR_INVALID) == 400);
        CHECK(hwid_err_http_status(-HWID_E_TOKEN_INVALID) == 401);
        CHECK(hwid_err_http_status(-HWID_E_FORBIDDEN) == 403);
        CHECK(hwid_err_http_status(-HWID_E_CONFLICT) == 409);
        CHECK(hwid_err_http_status(-HWID_E_TOO_LARGE) == 413);
        CHECK(hwid_err_http_status(-HWID_E_RATE_LIMITED) == 429);
        CHECK(hwid_err_http_status(-HWID_E_HSM) == 503);
        CHECK(hwid_err_http_status(-HWID_E_STORE) == 503);
        CHECK(hwid_err_http_status(-HWID_E_TPM_UNREACHABLE) == 503);
        CHECK_STREQ(hwid_err_slug(-HWID_E_CONFLICT), "identity_has_certificate");
        /* Out-of-range codes are internal errors, not crashes. */
        CHECK(hwid_err_http_status(-9999) == 500);
        CHECK(hwid_err_http_status(12345) == 500);
}

static void maps_exit_codes(void) {
        CHECK(hwid_err_exit_code(-HWID_E_USAGE) == 2);
        CHECK(hwid_err_exit_code(-HWID_E_PIN_INCORRECT) == 1);
        CHECK(hwid_err_exit_code(-HWID_E_URI) == 1);
}

static void keeps_detail(void) {
        int r = hwid_fail(HWID_E_PIN_INCORRECT, "wrong PIN for token '%s'", "ca");

        CHECK(r == -HWID_E_PIN_INCORRECT);
        CHECK_STREQ(hwid_strerror(r), "wrong PIN for token 'ca'");
        /* The detail belongs to the last failure only. */
        CHECK_STREQ(hwid_strerror(-HWID_E_TOO_LARGE), "input too large");
        hwid_error_clear();
        CHECK_STREQ(hwid_strerror(r), "PIN incorrect");
        r = hwid_fail(HWID_E_IO, NULL);
        CHECK_STREQ(hwid_strerror(r), "input/output error");
}

/* A failure that wraps the one before it: its detail is an argument of
 * the new one's format, and the buffer it comes from is the one written. */
static void wraps_detail(void) {
        int r = hwid_fail(HWID_E_ATTESTATION, "the EK certificate does not chain: %s", "no issuer");

        r = hwid_fail(HWID_E_INVALID, "ek.der cannot attest with this CA: %s", hwid_strerror(r));
        CHECK_STREQ(hwid_strerror(r), "ek.der cannot attest with this CA: the EK certificate does not chain: no issuer");
        r = hwid_fail(HWID_E_INVALID, "%s (again)", hwid_strerror(r));
        CHECK_STREQ(hwid_strerror(r), "ek.der cannot attest with this CA: the EK certificate does not chain: no issuer "
                                      "(again)");
}

static void *other_thread(void *arg) {
        hwid_fail(HWID_E_HSM, "other thread");
        return NULL;
}

static void detail_is_per_thread(void) {
        pthread_t t;
        int r = hwid_fail(HWID_E_TPM, "main thread");

        pthread_create(&t, NULL, other_thread, NULL);
        pthread_join(t, NULL);
        CHECK_STREQ(hwid_strerror(r), "main thread");
}

int main(void) {
        maps_statuses();
        maps_exit_codes();
        keeps_detail();
        wraps_detail();
        detail_is_per_thread();
        return check_done("test-error");
}
