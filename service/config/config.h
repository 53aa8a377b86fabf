/* hwidd's configuration: one YAML file read with libyaml, validated at
 * start (and on SIGHUP).  Errors name the file, line and field.  Relative
 * paths are resolved against the directory holding the file. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"
#include "policy.h"

typedef struct hwidd_config {
        char *path;            /* the file it was read from */
        /* where */
        char *listen;          /* "127.0.0.1:8443" */
        char *http_listen;     /* plain HTTP for GET /crl and GET /ca only; NULL: none */
        char *database;        /* SQLite file, or a postgresql:// URI */
        unsigned database_connections; /* PostgreSQL: connections kept, 0: the store's default */
        char *tcti;            /* NULL: $HWID_TCTI or the tpm2-tss default */
        /* CA */
        char *ca_key;          /* key URI */
        char *token_key;       /* key URI: the HMAC key bootstrap tokens are derived with, NULL: none */
        char *ca_cert;         /* PEM: the CA certificate */
        char *ca_chain;        /* PEM: intermediates + root above ca_cert, NULL if root */
        char *crl_url;         /* CRL distribution point put in certificates */
        int64_t crl_validity;  /* seconds until nextUpdate */
        char *ocsp_url;        /* OCSP responder put in certificates (authorityInfoAccess) */
        int64_t ocsp_validity; /* an OCSP answer's thisUpdate to nextUpdate, seconds, default 1 h */
        /* How long before the active CA's end hwidd warns (log, /readyz)
         * that it is to be rolled over (seconds; 0: only when it ends
         * within the longest profile validity). */
        int64_t ca_expiry_warning;
        /* TLS */
        char *tls_key;         /* key URI: the server's TLS key, in the HSM/TPM */
        char *tls_cert;        /* PEM: server certificate (+ chain) */
        /* limits */
        size_t max_body;       /* bytes, default 64 KiB */
        size_t max_header;     /* bytes, default 8 KiB */
        unsigned timeout;      /* connection timeout, seconds, default 30 */
        unsigned max_connections; /* default 16384 */
        unsigned max_connections_per_ip; /* default 1024 */
        unsigned handshake_cap;   /* connections in their TLS handshake, default 1024 */
        unsigned handshake_timeout; /* seconds, default 10 */
        unsigned workers;         /* threads running request handlers, default 32 */
        double rate_per_ip;    /* requests per second per client address, 0: off; default 200 */
        unsigned rate_burst;
        int64_t retry_after;   /* seconds a pending device is told to wait, default 5 */
        /* The OCSP responder: signed answers kept (default 10000), and
         * the signatures a client address (default 10 a second, bursts of
         * 100) and all of them together (100, bursts of 500) may cost. */
        size_t ocsp_cache_entries;
        double ocsp_sign_rate_per_ip;
        unsigned ocsp_sign_burst_per_ip;
        double ocsp_sign_rate;
        unsigned ocsp_sign_burst;
        /* How far clocks may disagree, seconds (default 300): issuance
         * backdates notBefore by it, and a client certificate up to this
         * far from its notBefore is accepted. */
        int64_t clock_skew;
        /* audit */
        int64_t audit_retention; /* seconds an audit record is kept, default 365 days */
        /* A signed checkpoint of the chain's head (store.h) once this many
         * records were appended (default 1000) or this many seconds passed
         * (default 60) since the last, and at shutdown. */
        unsigned audit_checkpoint_records;
        int64_t audit_checkpoint_interval;
        bool audit_syslog;       /* a copy of every audit record to syslog, default off */
        char *audit_syslog_socket; /* the syslog datagram socket, default /dev/log */
        /* TPM attestation (attestation:, docs/ATTESTATION.md); none
         * configured when ek_roots is NULL */
        char **ek_root_paths;          /* PEM/DER files or directories, NULL-terminated */
        struct cert_bundle *ek_roots;  /* the TPM manufacturers' CA certificates, loaded (cert-bundle.h) */
        int64_t attest_ttl;            /* seconds a challenge may be answered in, default 60 */
        size_t attest_max_pending;     /* challenges waiting at once, default 1000 */
        size_t attest_max_per_requester; /* of one token, certificate or EK, default 4 */
        /* policy (profiles, audit-only mode, admin group) */
        policy *policy;
} hwidd_config;

/* Loads and validates; on failure -HWID_E_CONFIG with a detail like
 * "/etc/hwid/hwidd.yaml:12: profiles.edge.validity: '30x' is not a duration". */
int config_load(const char *path, hwidd_config **ret);
/* The same from text in memory (what config_load() uses after reading the
 * file, and what the fuzz target feeds): name is used in messages, and
 * relative paths are resolved against its directory as given. */
int config_load_string(const char *text, size_t len, const char *name, hwidd_config **ret);
void config_free(hwidd_config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(hwidd_config *, config_free)

/* "30d", "12h", "90m", "45s", "1w" -> seconds. */
int config_parse_duration(const char *s, int64_t *ret);
/* "64KiB", "1MiB", "512" -> bytes. */
int config_parse_size(const char *s, size_t *ret);
