/* What both stores (store-sqlite*.c, store-pg*.c) share and that does not
 * depend on the database: the columns they read, the names of states as
 * stored, and the bounded checks of caller input that give clear
 * -HWID_E_INVALID details before anything is written. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "store.h"

#define TOKEN_COLS \
        "id, secret_hash, profile, name_pattern, description, created_at, expires_at, uses_total, uses_left, revoked, " \
        "nonce"
#define REQUEST_COLS \
        "id, identity, profile, token_id, spki_sha256, csr_der, status, reason, serial, created_at, updated_at, " \
        "ek_cert_sha256, ek_pub_sha256, ak_name"
#define CERT_COLS                                                                             \
        "serial, identity, subject, profile, spki_sha256, der, not_before, not_after, status, " \
        "revoked_at, revocation_reason, request_id, created_at, role, token_id, scope, ek_cert_sha256, " \
        "ek_pub_sha256, ak_name, generation"
#define EK_COLS "ek_cert_sha256, ek_pub_sha256, identity, profile, added_at"

#define STORE_DNS_NAME_MAX 253
#define STORE_EK_NAME_MAX 64
/* An identity named to store_binding_get() or released. */
#define STORE_BINDING_NAME_MAX 128
#define BINDING_COLS "identity, ek_pub_sha256, ek_cert_sha256, serial, bound_at"

/* States as the databases hold them ('pending', 'valid', ...).  A name
 * that is none of them (impossible under the schemas' CHECKs) parses as
 * the safe answer: denied, revoked. */
const char *store_request_status_name(store_request_status s);
store_request_status store_request_status_parse(const char *s);
store_cert_status store_cert_status_parse(const char *s);

bool store_str_ok(const char *s, size_t max);
bool store_token_id_ok(const char *id);
/* A request id as the stores hold it: 1..32 characters. */
bool store_request_id_ok(const char *id);
/* Upper-case hex, as serials are stored: 1..64 characters. */
bool store_serial_ok(const char *serial);
/* Lower-case hex of min..max characters. */
bool store_hex_ok(const char *s, size_t min, size_t max);
/* Whether a is empty or well-formed (hex of the right lengths, EK key set). */
bool store_attestation_ok(const store_attestation *a);
/* An EK allowlist entry: a name, a profile, and an EK hash or two. */
bool store_ek_ok(const store_ek *e);
/* A binding to release: a name, an EK key hash and a serial. */
bool store_binding_ok(const store_binding *b);
/* A certificate to commit: every field it needs, well-formed. */
int store_cert_check(const store_cert *c);
/* Tokens to insert, n of them (1 or more): each id, profile and number of
 * uses well-formed. */
int store_tokens_check(const store_token *t, size_t n);

/* CA generations (store.h): the columns read, the highest number, a
 * state's stored name read back (an unknown one as retired), and a row's
 * check before it is recorded in state. */
#define CA_GEN_COLS \
        "generation, state, subject, cert, chain, key_uri, new_with_old, old_with_new, prepared_at, " \
        "activated_at, retired_at"
#define STORE_CA_GEN_MAX 1000
store_ca_state store_ca_state_parse(const char *s);
int store_ca_gen_check(const store_ca_gen *g, store_ca_state state);

/* The canonical form of a DNS name into out: ASCII lower case, without a
 * trailing dot; -HWID_E_INVALID if it is empty, longer than 253 or not
 * printable ASCII. */
int store_dns_canonical(const char *name, char *out, size_t size);

/* What to bind for an optional text: NULL for "". */
static inline const char *store_opt(const char *s) {
        return s && s[0] ? s : NULL;
}
