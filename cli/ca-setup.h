/* What hwid ca init and hwid ca import share: the CA key, the TLS identity
 * of hwidd (its key in the same HSM/TPM, its certificate from the CA), the
 * ready-to-run configuration and the store. */
#pragma once

#include <stdbool.h>

#include <openssl/x509.h>

#include "hsm.h"

typedef struct ca_setup {
        const char *dir;
        const char *ca_key_uri;
        const char *tls_key_uri;   /* NULL: derived from the CA key's URI */
        const char *tls_names;     /* "localhost,127.0.0.1" */
        const char *listen;        /* "127.0.0.1:8443" */
        /* hwidd's plain-HTTP listener for GET /crl and /ca, named by the
         * CRL distribution point; NULL: the address of listen, port 8080;
         * "none": neither the listener nor a CRL distribution point. */
        const char *http_listen;
        const char *tcti;
        const char *chain_file;    /* intermediate case: the chain above ca.pem */
        hwid_key_type type;
        bool force;
} ca_setup;

/* Opens the key at uri, or creates it (of type) if there is none. */
int ca_key_open_or_create(const char *uri, hwid_key_type type, const hsm_options *o, hwid_key **ret,
                          bool *ret_created);

/* Refuses to overwrite DIR/ca.pem unless force; creates DIR (0750). */
int ca_prepare_dir(const ca_setup *s);

/* Makes s->dir absolute (paths in the config and key URIs must not depend
 * on where hwidd is started); *storage holds the new string. */
int absolute_dir(ca_setup *s, char **storage);

/* With the CA key and certificate in place: TLS key + certificate,
 * DIR/hwidd.yaml, the database; prints what to do next. */
int ca_finish(const ca_setup *s, hwid_key *ca_key, X509 *ca_cert);

/* uri, with module-path= added when it is a PKCS#11 URI without one (the
 * module the token was found in). */
int uri_with_module(const char *uri, hwid_key *k, char **ret);

/* The --http-listen option's help lines, shared by ca init and ca import. */
#define CA_SETUP_HTTP_LISTEN_HELP                                                                  \
        "      --http-listen ADDR:PORT  plain-HTTP listener for GET /crl and /ca, named by the\n"  \
        "                         CRL distribution point (default: --listen's address, port\n"   \
        "                         8080; none: no listener and no distribution point)\n"

/* Writes a PEM certificate to path (0644). */
int write_cert_pem(const char *path, X509 *x);
