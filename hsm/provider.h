/* hwid's built-in OpenSSL provider: exposes any backend key (hsm_obj) as an
 * EVP_PKEY whose private operations run in the device.  Internal to hsm/. */
#pragma once

#include <openssl/core.h>
#include <openssl/core_dispatch.h>

#include "backend.h"

/* Name of the private parameter that carries an hsm_obj pointer into
 * keymgmt import (same address space: the provider is built in). */
#define HWID_PARAM_OBJ "hwid-obj"

/* Key data of both keymgmts: a device key (obj set) or, when OpenSSL
 * imports a plain public key to compare with ours, only a public key. */
typedef struct prov_key {
        hsm_obj *obj;  /* NULL for public-only key data */
        EVP_PKEY *pub; /* default-provider public key */
} prov_key;

extern const OSSL_DISPATCH hwid_ec_keymgmt_functions[];
extern const OSSL_DISPATCH hwid_rsa_keymgmt_functions[];
extern const OSSL_DISPATCH hwid_ecdsa_signature_functions[];
extern const OSSL_DISPATCH hwid_rsa_signature_functions[];

int hwid_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                       const OSSL_DISPATCH **out, void **provctx);
