/* A CA whose key is in SoftHSM2, for the unit tests of the issuer: a
 * SoftHSM2 store of the test's own (a private directory, one token "ca"),
 * keys made there and signing through hwid's provider as hwidd does. */
#pragma once

#include "hsm.h"
#include "issuer.h"

typedef struct ca {
        hwid_key *key;
        X509 *cert;
        issuer *is;
} ca;

/* Makes the SoftHSM2 store; 0, or the exit code the test returns at once
 * (77, skipped, only where SoftHSM2 is missing and HWID_ALLOW_SKIP=1, as
 * tests/lib.sh's missing_hardware: CI never skips), the reason printed. */
int ca_fixture_setup(const char *test);
void ca_fixture_teardown(void);

/* The URI of the key at object in the token (free() it). */
char *ca_key_uri(const char *object);
/* A self-signed CA with its key at object in the token. */
int ca_make(const char *object, hwid_key_type type, const char *subject, int days, ca *ret);
void ca_done(ca *c);
