/* One error table for all of hwid, after s2n-tls's s2n_errno.c.
 *
 * Every internal function returns 0 on success or a negative hwid_err
 * (never a raw errno); ret_* outputs are written only on success.  The
 * code says what class of failure it is (and so which HTTP status and
 * exit code it maps to); hwid_fail() attaches a one-line detail naming
 * what went wrong, kept per thread until the next failure.  Library code
 * (hsm/, policy/, common/) never prints: the binaries decide. */
#pragma once

#include <stdarg.h>

/* X(code, http_status, slug, default message) */
#define HWID_ERROR_TABLE(X)                                                              \
        X(HWID_E_NOMEM, 500, "internal", "out of memory")                                \
        X(HWID_E_INTERNAL, 500, "internal", "internal error")                            \
        X(HWID_E_INVALID, 400, "invalid_argument", "invalid argument")                   \
        X(HWID_E_USAGE, 400, "usage", "usage error")                                     \
        X(HWID_E_IO, 500, "io", "input/output error")                                    \
        X(HWID_E_NOT_FOUND, 404, "not_found", "not found")                               \
        X(HWID_E_EXISTS, 409, "exists", "already exists")                                \
        X(HWID_E_URI, 400, "bad_uri", "malformed key URI")                               \
        X(HWID_E_KEY_TYPE, 400, "unsupported_key_type", "unsupported key type")          \
        X(HWID_E_KEY_NOT_FOUND, 404, "key_not_found", "key not found")                   \
        X(HWID_E_KEY_EXISTS, 409, "key_exists", "a key already exists there")            \
        X(HWID_E_TOKEN_NOT_FOUND, 404, "hsm_token_not_found", "PKCS#11 token not found") \
        X(HWID_E_PIN_INCORRECT, 401, "pin_incorrect", "PIN incorrect")                   \
        X(HWID_E_PIN_LOCKED, 401, "pin_locked", "PIN locked")                            \
        X(HWID_E_PIN_MISSING, 400, "pin_missing", "no PIN given")                        \
        X(HWID_E_HSM, 503, "hsm_unavailable", "HSM failure")                             \
        X(HWID_E_TPM_UNREACHABLE, 503, "tpm_unreachable", "TPM unreachable")             \
        X(HWID_E_TPM, 503, "tpm_failure", "TPM failure")                                 \
        X(HWID_E_CRYPTO, 500, "crypto", "cryptographic operation failed")                \
        X(HWID_E_CSR_INVALID, 400, "bad_csr", "malformed certificate request")           \
        X(HWID_E_CSR_SIGNATURE, 400, "bad_csr_signature", "CSR signature does not verify") \
        X(HWID_E_TOKEN_INVALID, 401, "bad_token", "bootstrap token invalid")             \
        X(HWID_E_UNAUTHENTICATED, 401, "unauthenticated", "authentication required")     \
        X(HWID_E_FORBIDDEN, 403, "forbidden", "denied by policy")                        \
        X(HWID_E_CONFLICT, 409, "identity_has_certificate",                              \
          "identity already has a live certificate")                                     \
        X(HWID_E_TOO_LARGE, 413, "too_large", "input too large")                         \
        X(HWID_E_RATE_LIMITED, 429, "rate_limited", "too many requests")                 \
        X(HWID_E_STORE, 503, "store_unavailable", "store unavailable")                   \
        X(HWID_E_CONFIG, 500, "config", "configuration error")                           \
        X(HWID_E_PENDING, 202, "pending", "request pending approval")                    \
        X(HWID_E_NETWORK, 503, "network", "network failure")                             \
        X(HWID_E_PIN_MISMATCH, 400, "ca_pin_mismatch", "CA certificate does not match the pin") \
        X(HWID_E_EXPIRED, 401, "expired", "certificate expired")                         \
        X(HWID_E_REVOKED, 401, "revoked", "certificate revoked")                         \
        X(HWID_E_SUPERSEDED, 409, "superseded", "certificate replaced by a newer one")   \
        X(HWID_E_NOT_YET_VALID, 401, "not_yet_valid",                                    \
          "certificate not yet valid (check the clocks)")                                \
        X(HWID_E_TOO_EARLY, 403, "renewal_not_open", "renewal window not open yet")      \
        X(HWID_E_KEY_BLOCKED, 403, "key_blocked",                                        \
          "key blocked after a key-compromise revocation")                               \
        X(HWID_E_ATTESTATION, 403, "attestation_failed", "hardware attestation failed")     \
        X(HWID_E_UNTRUSTED, 401, "untrusted", "signature or certificate not trusted")         \
        X(HWID_E_WRONG_STATE, 409, "wrong_state", "not in a state that allows this")         \
        X(HWID_E_NOT_READY, 503, "not_ready", "not ready to serve")                          \
        X(HWID_E_TAMPERED, 500, "tampered", "audit log does not verify")

typedef enum hwid_err {
        HWID_OK = 0,
#define HWID_ERR_ENUM(code, status, slug, msg) code,
        HWID_ERROR_TABLE(HWID_ERR_ENUM)
#undef HWID_ERR_ENUM
        _HWID_E_MAX,
} hwid_err;

/* Records detail for the calling thread; returns -code so that callers
 * can write `return hwid_fail(HWID_E_IO, "cannot read %s", path);`. */
int hwid_fail(hwid_err code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int hwid_failv(hwid_err code, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Like hwid_fail(), and appends the first reason in OpenSSL's error
 * queue (which it then clears). */
int hwid_fail_ossl(hwid_err code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The detail of this thread's last failure, or the table message of r. */
const char *hwid_strerror(int r);
/* What a client may be told of r: hwid_strerror(r), except for failures
 * whose detail is the server's own business (the store's). */
const char *hwid_public_message(int r);
/* Forget this thread's last failure detail. */
void hwid_error_clear(void);
/* -code of this thread's last hwid_fail() since hwid_error_clear(), or 0:
 * lets a caller of OpenSSL recover the real cause when our provider's
 * device signature failed underneath it. */
int hwid_last_error(void);

int hwid_err_http_status(int r);
const char *hwid_err_slug(int r);
/* Process exit code for a failure: 2 for usage errors, 1 otherwise. */
int hwid_err_exit_code(int r);
