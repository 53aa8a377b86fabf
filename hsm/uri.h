/* Key URIs: RFC 7512 PKCS#11 URIs (parsed by p11-kit) and hwid's tpm2: URIs.
 * Pure parsing and validation, no device access. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <p11-kit/uri.h>

#include "cleanup.h"

typedef enum key_uri_scheme {
        KEY_URI_PKCS11,
        KEY_URI_TPM2,
} key_uri_scheme;

/* Persistent TPM handles hwid accepts: the owner's persistent range. */
#define TPM_PERSISTENT_FIRST 0x81000000u
/* TCG's reserved range for endorsement keys: never hwid's to touch. */
#define TPM_EK_FIRST 0x81010000u
#define TPM_EK_LAST 0x8101FFFFu
#define TPM_PERSISTENT_LAST 0x817FFFFFu /* the owner's half; 0x818xxxxx is the platform's */

typedef struct key_uri {
        key_uri_scheme scheme;

        /* pkcs11: the parsed URI (token and module matching) and the
         * attributes hwid uses directly. */
        P11KitUri *p11;
        char *token;       /* token label, required */
        char *object;      /* object label (CKA_LABEL) */
        uint8_t *id;       /* CKA_ID */
        size_t id_len;
        char *module_path; /* module-path=, else p11-kit's registered modules */
        char *module_name;
        char *pin_source;  /* pin-source=file:PATH or PATH */
        char *pin_value;   /* pin-value= (tests); a secret: wiped on free */

        /* tpm2: exactly one of handle or path. */
        uint32_t handle;
        char *path;
} key_uri;

/* Parses and validates; on failure returns -HWID_E_URI with a detail that
 * names the problem. */
int key_uri_parse(const char *s, key_uri **ret);
void key_uri_free(key_uri *u);
DEFINE_TRIVIAL_CLEANUP_FUNC(key_uri *, key_uri_free)
