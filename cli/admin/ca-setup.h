/* What hwid ca init and hwid ca import share: the CA key, the TLS identity
 * of hwidd (its key in the same HSM/TPM, its certificate from the CA), the
 * ready-to-run configuration and the store. */
#pragma once

#include <stdbool.h>

#include <openssl/x509.h>

#include "ca-stage.h"
#include "hsm.h"

typedef struct ca_setup {
        const char *dir;           /* absolute once ca_setup_begin() succeeded */
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
        /* ca_setup_begin()'s: the absolute DIR and where its files are made. */
        char *abs_dir;
        ca_stage *stage;
} ca_setup;

/* Refuses a DIR holding a CA unless force, and, before any key is made,
 * what would fail only afterwards (a key URI that does not parse, a value
 * hwidd.yaml cannot quote, a bad --listen or --http-listen).  Then makes
 * DIR (0750) and a staging directory in it (ca-stage.h): every file of
 * DIR is written there (ca_setup_path()) and moved into place by
 * ca_finish() (or ca_setup_commit()), so that a run that fails leaves DIR
 * as it was.  s->dir becomes absolute: paths in the config and key URIs
 * must not depend on where hwidd is started. */
int ca_setup_begin(ca_setup *s);
/* Where to write the file that is to become DIR/name (malloc'ed). */
char *ca_setup_path(const ca_setup *s, const char *name);
/* Moves the files written so far into DIR. */
int ca_setup_commit(ca_setup *s);
/* After ca_setup_begin(), whatever happened: a run that did not commit
 * leaves nothing (DIR too, if it made it and nothing else is there). */
void ca_setup_done(ca_setup *s);

/* ---- ca-keys.c ---- */

/* Opens the key at uri, or creates it (of type) if there is none. */
int ca_key_open_or_create(const char *uri, hwid_key_type type, const hsm_options *o, hwid_key **ret,
                          bool *ret_created);

/* The same for the token key (hwid_mac_key): opened, else created. */
int ca_mac_key_open_or_create(const char *uri, const hsm_options *o, hwid_mac_key **ret, bool *ret_created);

/* hwidd's TLS key next to the CA key at ca_uri: pkcs11:...;object=ca-key
 * -> the same token (module, PIN and all) with object=ca-key-tls; a TPM
 * CA key -> tpm2:file=DIR/tls.tss2.pem.  It holds ca_uri's pin-value if
 * there is one: free it with secret_free(). */
int ca_tls_uri(const char *ca_uri, const char *dir, char **ret);
/* The token key (ca.token_key, what bootstrap tokens are derived with)
 * next to the CA key, the same way: object=ca-key-tokens in the CA key's
 * token, or tpm2:file=DIR/tokens.tss2.pem. */
int ca_token_key_uri(const char *ca_uri, const char *dir, char **ret);

/* The URI hwidd.yaml names for the key k opened at uri: a PKCS#11 URI
 * gets the module-path= of the module the token was found in when it
 * names none, and a pin-value= becomes pin-source=file:DIR/pin_name, the
 * PIN written there (mode 0600): hwidd.yaml (0640) is no place for a
 * PIN. */
int ca_config_uri(const ca_setup *s, const char *uri, hwid_key *k, const char *pin_name, char **ret);

/* ---- ca-setup.c ---- */

/* With the CA key and certificate in place: TLS key + certificate,
 * DIR/ca.pem, DIR/hwidd.yaml, the database; then every staged file moves
 * into DIR; prints what to do next. */
int ca_finish(const ca_setup *s, hwid_key *ca_key, X509 *ca_cert);

/* The --http-listen option's help lines, shared by ca init and ca import. */
#define CA_SETUP_HTTP_LISTEN_HELP                                                                  \
        "      --http-listen ADDR:PORT  plain-HTTP listener for GET /crl and /ca, named by the\n"  \
        "                         CRL distribution point (default: --listen's address, port\n"   \
        "                         8080; none: no listener and no distribution point)\n"

/* Writes a PEM certificate to path (0644). */
int write_cert_pem(const char *path, X509 *x);
