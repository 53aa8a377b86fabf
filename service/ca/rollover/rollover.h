/* A CA rollover's steps on the CA host (hwid ca rollover, docs/OPERATIONS.md
 * "Rolling the CA over"): prepare the next generation (its key made by
 * the caller in the HSM/TPM, its CA certificate, the two link
 * certificates), import its certificate when an offline root signs it,
 * activate it, retire the one before, and the status with what to do
 * next.  Each step is one audited store write (store.h, "CA
 * generations"); running hwidd replicas follow within a second
 * (ca-gens.h).  Everything a step decides is decided here; the command
 * line parses and prints. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "hsm.h"
#include "store.h"

/* The CA as the configuration names it, and who acts. */
typedef struct rollover_ctx {
        store *store;
        X509 *ca_cert;              /* ca.certificate: generation 1 */
        const char *ca_chain_pem;   /* ca.chain's PEM, NULL: none (a root) */
        const char *ca_key_uri;     /* ca.key: generation 1's key */
        const char *tcti;
        const char *actor;          /* for the audit records: "admin:<user>" */
        int64_t now;
} rollover_ctx;

/* What the next rollover will be, before any key is made. */
typedef struct rollover_plan {
        int generation;             /* the next generation's number */
        int active;                 /* the active generation's */
        X509 *active_cert;          /* its CA certificate (owned) */
        char *active_chain;         /* its chain, NULL: none */
        char *active_key_uri;       /* its key's URI: ca.key for generation 1 */
        /* Under an offline root (the active CA has a chain): the new key's
         * certificate comes from the root (a CSR, then an import). */
        bool offline;
} rollover_plan;

/* -HWID_E_CONFLICT (before any key is made) when a generation is
 * prepared already and not replace. */
int rollover_plan_get(const rollover_ctx *c, bool replace, rollover_plan *ret);
void rollover_plan_clear(rollover_plan *p);

/* The subject of the next generation: dn (the operator's), else the
 * active CA's with its CN suffixed " G<n>" (a suffix " G<k>" replaced).
 * -HWID_E_INVALID if it is the active CA's subject: a link between two
 * CAs of one name is a self-issued certificate, which many relying
 * parties' path building mishandles. */
int rollover_subject(const rollover_plan *p, const char *dn, X509_NAME **ret);

typedef struct rollover_prepared {
        int generation;
        X509 *cert;                 /* the new CA certificate (NewWithNew); NULL offline */
} rollover_prepared;

/* Records the next generation for key (made or opened by the caller, at
 * key_uri, which names no PIN) under subject: online, its self-signed CA
 * certificate (valid days days) and the two links, made with the active
 * generation's key (opened here) and key; offline, the key alone, its
 * certificate to come (rollover_import()).  The first rollover records
 * generation 1 (ca.certificate) with it. */
int rollover_prepare(const rollover_ctx *c, const rollover_plan *p, hwid_key *key, const char *key_uri,
                     const X509_NAME *subject, int days, bool replace, rollover_prepared *ret);
void rollover_prepared_clear(rollover_prepared *p);

/* The prepared generation's certificate, signed by the offline root:
 * checked (its key is the prepared key, it is a CA that signs
 * certificates, it chains to a root in chain_pem -- NULL: the active
 * generation's chain), then its links made by the two keys.
 * *ret_generation: the generation. */
int rollover_import(const rollover_ctx *c, const char *cert_pem, const char *chain_pem, int *ret_generation);

/* The prepared generation becomes the active one, once its key opens and
 * is its certificate's and its links hold. *ret_generation: it. */
int rollover_activate(const rollover_ctx *c, int *ret_generation);

/* What retire leaves behind. */
typedef struct rollover_retired {
        int generation;
        uint64_t unexpired;         /* its certificates not yet expired */
        int64_t last_expiry;        /* the latest notAfter among them (0: none) */
} rollover_retired;

/* Retires generation (0: the oldest the active one replaced): refused
 * (-HWID_E_CONFLICT, saying how many and until when) while it has
 * unexpired certificates, unless force. */
int rollover_retire(const rollover_ctx *c, int generation, bool force, rollover_retired *ret);

#define ROLLOVER_STATUS_MAX 16

typedef struct rollover_gen_status {
        int generation;
        store_ca_state state;
        char subject[256];
        bool has_cert;              /* false: waiting for the offline root's certificate */
        int64_t not_after;
        uint64_t unexpired;         /* its certificates not expired yet */
        int64_t last_expiry;
} rollover_gen_status;

typedef struct rollover_status {
        rollover_gen_status gens[ROLLOVER_STATUS_MAX];
        size_t n;
        char next[512];             /* what to do next, one sentence */
} rollover_status;

/* Every generation (generation 1 alone before a rollover), and what to
 * do next: longest: the longest validity of a profile (seconds), warn:
 * how long before its end the active CA is to be replaced. */
int rollover_status_get(const rollover_ctx *c, int64_t longest, int64_t warn, rollover_status *ret);

/* Why the active CA, valid until not_after, should be replaced by now
 * (one sentence into out, true), or false: it ends within longest (the
 * longest profile validity: certificates issued now would be cut short),
 * or within warn. */
bool rollover_expiry_warning(int generation, int64_t not_after, int64_t now, int64_t longest, int64_t warn,
                             char *out, size_t size);
