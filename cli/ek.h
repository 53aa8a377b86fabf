/* hwid ek: the EK allowlist, on the CA host (cli/ek.c, cli/ek-import.c)
 * or remotely through the admin API (cli/ek-remote.c).
 * An entry lets one TPM -- by its EK certificate or its EK public key --
 * enroll without a bootstrap token, under one name and profile. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "ek-entry.h"
#include "remote.h"
#include "store.h"

/* Reads a factory manifest (JSON or CSV, docs/ATTESTATION.md) into
 * entries; profile is the default for entries that name none. */
int ek_manifest_read(const hwidd_config *cfg, const char *path, const char *profile, store_ek **ret,
                     size_t *ret_n);

/* The admin API's EK allowlist (operators with --dir or --cert/--key):
 * one entry added (from an EK certificate file or a public key hash;
 * *ret is the entry as stored), the list, one entry removed by its name
 * or hash. */
int ek_remote_add(const remote_opts *ro, const char *cn, const char *profile, const char *cert_file,
                  const char *hash, store_ek *ret);
int ek_remote_list(const remote_opts *ro, store_ek **ret, size_t *ret_n);
/* A manifest file sent whole (all entries or none); *ret_n: entries added. */
int ek_remote_import(const remote_opts *ro, const char *path, const char *profile, size_t *ret_n);
int ek_remote_remove(const remote_opts *ro, const char *key);
