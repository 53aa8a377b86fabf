/* certmonger's external CA helper interface (getcert add-ca -e), spoken by
 * hwid's helper (libexec's certmonger-submit, docs/USING.md "certmonger").
 *
 * certmonger makes the request; hwid only carries it, and only for a key
 * that lives in the TPM/HSM: the request's public key must be one of the
 * keys the helper was given (--key), opened through hsm/ and compared, or
 * the request is refused before anything is sent.  A first request
 * enrolls with a bootstrap token; a request with an earlier certificate
 * renews over mutual TLS with that certificate's key (also one of the
 * given keys).  "Come back later" (approval pending, renewal window not
 * open, rate limited) is certmonger's status 5: a delay and a cookie. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "join.h"

/* The exit codes certmonger gives a helper's answers (its doc/helpers.txt). */
typedef enum certmonger_status {
        CERTMONGER_ISSUED = 0,          /* the certificate on standard output */
        CERTMONGER_REJECTED = 2,        /* refused for good: a message */
        CERTMONGER_UNREACHABLE = 3,     /* try again later: a message */
        CERTMONGER_UNDERCONFIGURED = 4, /* the helper's configuration: a message */
        CERTMONGER_WAIT_WITH_DELAY = 5, /* "SECONDS\nCOOKIE\n" */
        CERTMONGER_UNSUPPORTED = 6,     /* an operation hwid does not implement */
} certmonger_status;

/* Most --key options the helper takes. */
#define CERTMONGER_MAX_KEYS 16

typedef struct certmonger_opts {
        const char *const *servers; /* replicas of one CA, NULL-terminated */
        const char *ca_hash;        /* sha256:<hex> */
        const char *token_file;     /* the bootstrap token, or NULL */
        const char *const *keys;    /* key URIs certmonger's requests may use, NULL-terminated */
        const char *tcti;           /* NULL: the tpm2-tss default */
        long http_timeout;          /* seconds per request */
        const char *version;        /* for IDENTIFY */
        progress_fn note;           /* what happens, for standard error; may be NULL */
        void *note_data;
} certmonger_opts;

/* What certmonger hands the helper in its environment. */
typedef struct certmonger_call {
        const char *operation;   /* $CERTMONGER_OPERATION; NULL or "": SUBMIT */
        const char *csr;         /* $CERTMONGER_CSR (PEM) */
        const char *certificate; /* $CERTMONGER_CERTIFICATE: the one to renew, or NULL */
        const char *cookie;      /* $CERTMONGER_CA_COOKIE (POLL) */
} certmonger_call;

typedef struct certmonger_answer {
        certmonger_status status;
        char *output;            /* for standard output, may be NULL */
} certmonger_answer;

void certmonger_answer_clear(certmonger_answer *a);

/* Carries out one call.  Every outcome, failures included, is an answer:
 * returns 0, or -HWID_E_NOMEM when not even that could be made. */
int certmonger_run(const certmonger_opts *o, const certmonger_call *c, certmonger_answer *ret);

/* The status certmonger should see for a failure r. */
certmonger_status certmonger_status_of(int r);
