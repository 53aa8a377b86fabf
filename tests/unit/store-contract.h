/* The store contract test (test-store-contract.c): the promises of store.h
 * that every backend keeps, written once and run against each --
 * store-contract-sqlite (a temporary file per case) and store-contract-pg
 * (a database per case on a cluster of the test's own,
 * tests/integration/store-contract-pg.sh).  A case opens its database with
 * case_open(); case_again() is a second store object on it, as a second
 * hwidd (replica) on one database.  Nothing in a case knows which backend
 * answers: only this fixture does. */
#pragma once

#include <stdbool.h>

#include "store-fixture.h"

/* A fresh, empty database for the case `name` ([a-z0-9-]), opened. */
store *case_open(const char *name);
/* Another store object on the database of case `name`. */
store *case_again(const char *name);
/* The database string of case `name` (store_open() takes it). */
const char *case_database(const char *name);
/* The store of case `name` holding what the SQLite file at old_path holds
 * (a database of an earlier schema, not opened since): that file itself,
 * opened, for SQLite; a fresh database filled by store_copy_sqlite_to_pg()
 * (`hwid store migrate`), for PostgreSQL.  NULL (and a failed check) if it
 * cannot. */
store *case_migrated(const char *name, const char *old_path);

/* Whether the live holder of DNS name at now is `expect` (NULL: nobody). */
bool held_by(store *s, const char *name, int64_t now, const char *expect);
/* Certificates of identity (NULL: all) in the store; -1 on error. */
int cert_count(store *s, const char *identity);
/* Certificates of identity in state st. */
int cert_count_status(store *s, const char *identity, store_cert_status st);

/* The cases, by file: test-store-contract.c, store-contract-certs.c,
 * store-contract-races.c, store-contract-audit.c, store-contract-attest.c,
 * store-contract-gens.c. */
void contract_tokens(void);
void contract_derived_tokens(void);
void contract_token_batches(void);
void contract_requests(void);
void contract_approvals(void);
void contract_reopen(void);

void contract_commit(void);
void contract_one_live(void);
void contract_identity_case(void);
void contract_renewal(void);
void contract_atomicity(void);
void contract_dns(void);
void contract_dns_renew_and_expiry(void);
void contract_revocation(void);
void contract_crl_numbers(void);
void contract_key_compromise(void);
void contract_revoke_identity(void);
void contract_reads(void);

void contract_race_one_identity(void);
void contract_race_dns(void);
void contract_race_tokens(void);
void contract_race_replace(void);
void contract_race_mixed_batch(void);
void contract_race_key(void);
void contract_race_first_open(void);

void contract_audit(void);
void contract_audit_checkpoints(void);
void contract_audit_notes(void);
void contract_audit_sink(void);
void contract_challenges(void);
void contract_requester_bound(void);
void contract_allowlist(void);
void contract_attestation_records(void);
void contract_bindings(void);
void contract_binding_race(void);
void contract_migration(void);

void contract_ca_generations(void);
void contract_ca_generation_import(void);
void contract_ca_generation_race(void);
void contract_cert_generations(void);
