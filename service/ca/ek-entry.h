/* EK allowlist entries, checked in one place: the admin API's
 * (POST /v1/admin/ek, /v1/admin/ek/import), which `hwid ek add/import`
 * call, remotely or on the CA host.  An entry lets one TPM -- by its EK certificate or
 * its EK public key -- enroll without a bootstrap token, under one name
 * and profile. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

/* The longest name (CN) an entry may give its TPM. */
#define EK_NAME_MAX 64
/* The most entries one import adds. */
#define EK_IMPORT_MAX 100000

/* Fills e's hashes from an EK certificate (PEM or DER, what the TPM holds
 * in NV).  With TPM attestation configured, the certificate must chain to
 * the configured roots: an entry that could never attest is refused. */
int ek_entry_from_cert(const hwidd_config *cfg, const uint8_t *data, size_t len, const char *what, store_ek *e);
/* Sets an EK public key hash given as 64 hex digits (any case, an
 * optional "sha256:" prefix). */
int ek_entry_pub_hash(const char *hex, const char *what, store_ek *e);
/* Takes copies of name and profile into e, once both are checked: the
 * name a CN hwid can issue (1-64 printable bytes), the profile one of
 * cfg's. */
int ek_entry_names(const hwidd_config *cfg, const char *name, const char *profile, const char *what, store_ek *e);

/* Parses a factory manifest (JSON or CSV, docs/ATTESTATION.md; text is
 * modified) into entries, each checked as above; profile is the default
 * for entries that name none; what names the manifest in errors.  At
 * least one entry, at most EK_IMPORT_MAX. */
int ek_manifest_parse(const hwidd_config *cfg, const char *what, char *text, size_t len, const char *profile,
                      store_ek **ret, size_t *ret_n);
