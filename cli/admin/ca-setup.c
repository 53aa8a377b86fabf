#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <p11-kit/uri.h>

#include "buf.h"
#include "ca-setup.h"
#include "error.h"
#include "fsutil.h"
#include "issuer.h"
#include "ossl-util.h"
#include "policy.h"
#include "secret.h"
#include "store.h"
#include "uri.h"
#include "x509-util.h"

/* The configuration ca init writes: everything hwidd needs, with two
 * profiles to start from.  See docs/CONFIG.md for every field. */
#define CONFIG_TEMPLATE                                                                          \
        "# hwidd configuration written by hwid ca init on %s.\n"                                 \
        "# Reference: docs/CONFIG.md.  Relative paths are relative to this file.\n"             \
        "listen: \"%s\"\n"                                                                       \
        "%shttp_listen: \"%s\"\n"                                                                 \
        "database: hwid.db\n"                                                                    \
        "%stcti: \"%s\"\n"                                                                       \
        "\n"                                                                                     \
        "ca:\n"                                                                                  \
        "  key: \"%s\"\n"                                                                        \
        "  # What bootstrap tokens are derived with (an HMAC key that never leaves\n"            \
        "  # the HSM/TPM): the store keeps nothing a token can be spent with.\n"                  \
        "  token_key: \"%s\"\n"                                                                  \
        "  certificate: ca.pem\n"                                                                \
        "  %schain: ca-chain.pem\n"                                                              \
        "  %scrl_url: \"%s\"\n"                                                                  \
        "  %socsp_url: \"%s\"\n"                                                                 \
        "  crl_validity: 7d\n"                                                                   \
        "\n"                                                                                     \
        "tls:\n"                                                                                 \
        "  key: \"%s\"\n"                                                                        \
        "  certificate: tls.pem\n"                                                               \
        "\n"                                                                                     \
        "limits:\n"                                                                              \
        "  max_body: 64KiB\n"                                                                    \
        "  max_header: 8KiB\n"                                                                   \
        "  timeout: 30s\n"                                                                       \
        "  # Connections: docs/CONFIG.md says what each costs in memory.\n"                      \
        "  max_connections: 16384\n"                                                             \
        "  max_connections_per_ip: 1024\n"                                                       \
        "  handshake_cap: 1024\n"                                                                \
        "  handshake_timeout: 10s\n"                                                             \
        "  workers: 32\n"                                                                        \
        "  # Requests per second per client address, and new connections (burst x2).\n"        \
        "  # A factory station enrolling faster: raise it, or 0 to turn it off.\n"              \
        "  rate_per_ip: 200\n"                                                                   \
        "  rate_burst: 500\n"                                                                    \
        "  retry_after: 5s\n"                                                                    \
        "\n"                                                                                     \
        "policy:\n"                                                                              \
        "  audit_only: false\n"                                                                  \
        "\n"                                                                                     \
        "profiles:\n"                                                                            \
        "  # Devices enrolling with a token are signed at once.  The subject is the CN\n"        \
        "  # alone: a requester never chooses its own O/OU (groups, roles); give them\n"         \
        "  # with fixed_o/fixed_ou here.  Each certificate also names its CN as a DNS\n"         \
        "  # name, so that verifiers checking host names accept it.\n"                           \
        "  default:\n"                                                                           \
        "    validity: 30d\n"                                                                    \
        "    key_types: [ec-p256, ec-p384, rsa]\n"                                               \
        "    extended_key_usage: [clientAuth]\n"                                                 \
        "    subject:\n"                                                                         \
        "      allowed_rdns: [CN]\n"                                                             \
        "      # fixed_o: [devices]\n"                                                           \
        "    san:\n"                                                                             \
        "      dns: [\"{cn}\"]\n"                                                                \
        "      add_dns_templates: true\n"                                                        \
        "    approval: auto\n"                                                                   \
        "    renewal:\n"                                                                         \
        "      window: 0.3333\n"                                                                 \
        "  # Devices an administrator approves by hand (hwid request approve).\n"                \
        "  manual:\n"                                                                            \
        "    validity: 30d\n"                                                                    \
        "    key_types: [ec-p256, ec-p384, rsa]\n"                                               \
        "    extended_key_usage: [clientAuth]\n"                                                 \
        "    subject:\n"                                                                         \
        "      allowed_rdns: [CN]\n"                                                             \
        "    approval: manual\n"                                                                 \
        "    renewal:\n"                                                                         \
        "      window: 0.3333\n"

#define TLS_VALIDITY (365 * 86400)
#define TLS_IDENTITY "hwidd"
#define TLS_BACKDATE 300 /* hwidd's default clock_skew */

int write_cert_pem(const char *path, X509 *x) {
        _cleanup_free_ char *pem = NULL;
        int r = cert_to_pem(x, &pem);

        return r < 0 ? r : write_file_atomic(path, pem, strlen(pem), 0644);
}

char *ca_setup_path(const ca_setup *s, const char *name) {
        return ca_stage_path(s->stage, name);
}

/* Where a file that may already be in DIR is used: there when it is (a
 * rerun, --force: the store and the TLS key file are kept), else where the
 * new one is made. */
static char *kept_or_staged(const ca_setup *s, const char *name) {
        _cleanup_free_ char *kept = path_join(s->dir, name);

        if (kept && access(kept, F_OK) == 0)
                return TAKE_PTR(kept);
        return ca_setup_path(s, name);
}

static bool unspecified(const char *name, size_t n) {
        return (n == 7 && memcmp(name, "0.0.0.0", 7) == 0) || (n == 2 && memcmp(name, "::", 2) == 0) ||
               (n == 4 && memcmp(name, "[::]", 4) == 0);
}

/* The subject of hwidd's TLS certificate: CN = the first --tls-names
 * entry that is not an unspecified address (else the first), so that the
 * CN is one of the certificate's SANs, as the CA/Browser Forum's
 * Baseline Requirements (7.1.4.3) and verifiers that still read the CN
 * expect. */
static int tls_subject(const ca_setup *s, X509_NAME **ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_new();
        const char *cn = s->tls_names;
        size_t n = strcspn(cn, ",");

        for (const char *p = s->tls_names; *p;) {
                size_t len = strcspn(p, ",");
                if (len > 0 && !unspecified(p, len)) {
                        cn = p;
                        n = len;
                        break;
                }
                p += len + (p[len] == ',');
        }
        if (!name || n == 0 ||
            !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) cn, (int) n, -1, 0))
                return hwid_fail(HWID_E_INVALID, "--tls-names '%s' has no name for the TLS certificate", s->tls_names);
        *ret = TAKE_PTR(name);
        return 0;
}

/* hwidd's own TLS certificate, issued by the CA like any other and
 * recorded in the store (as identity TLS_IDENTITY, whatever its CN). */
static int issue_tls_cert(const ca_setup *s, issuer *is, hwid_key *tls_key, const char *const urls[2],
                          issued_cert *ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *sans = NULL;
        _cleanup_free_ char *list = NULL;
        bool rsa = EVP_PKEY_is_a(hwid_key_public(tls_key), "RSA");
        issue_request in;
        int r;

        if ((r = tls_subject(s, &name)) < 0)
                return r;
        if (!(list = malloc(strlen(s->tls_names) * 2 + 16)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        list[0] = '\0';
        /* "localhost,127.0.0.1" -> "dns:localhost,ip:127.0.0.1" */
        for (const char *p = s->tls_names; *p;) {
                size_t n = strcspn(p, ",");
                bool ip = memchr(p, ':', n) || strspn(p, "0123456789.") == n;
                sprintf(list + strlen(list), "%s%s%.*s", list[0] ? "," : "", ip ? "ip:" : "dns:", (int) n, p);
                p += n + (p[n] == ',');
        }
        if ((r = san_parse(list, &sans)) < 0)
                return r;
        in = (issue_request) {
                .subject_key = hwid_key_public(tls_key), .subject = name, .sans = sans,
                .key_usage = KU_DIGITAL_SIGNATURE | (rsa ? KU_KEY_ENCIPHERMENT : 0),
                .eku = EKU_SERVER_AUTH, .validity = TLS_VALIDITY, .now = (int64_t) time(NULL),
                .backdate = TLS_BACKDATE, .crl_url = urls[0], .ocsp_url = urls[1],
        };
        return issuer_sign(is, &in, ret);
}

/* Recorded like every certificate; read back from its DER for what the
 * issuer does not hand out (this runs once per CA). */
static int record_tls_cert(store *st, const issued_cert *tls) {
        const unsigned char *p = tls->der;
        _cleanup_(X509_freep) X509 *x = d2i_X509(NULL, &p, (long) tls->der_len);
        _cleanup_free_ char *subject = NULL;
        int64_t now = (int64_t) time(NULL);
        store_cert c = { .serial = (char *) tls->serial, .identity = (char *) TLS_IDENTITY,
                         .profile = (char *) "hwidd-tls", .der = tls->der, .der_len = tls->der_len,
                         .not_before = tls->not_before, .not_after = tls->not_after, .status = CERT_VALID,
                         .created_at = now };
        store_audit a = { .at = now, .actor = "admin:ca-init", .action = "issue-tls", .target = TLS_IDENTITY,
                          .outcome = "allow", .reason = "hwidd's TLS server certificate" };
        store_issue how = { .cert = &c, .replace_live = true, .audit = &a };
        char **dns = NULL;
        size_t n_dns = 0;
        int r;

        if (!x)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot read the TLS certificate back");
        if ((r = name_to_string(X509_get_subject_name(x), &subject)) < 0 ||
            (r = spki_sha256_hex(X509_get0_pubkey(x), c.spki_sha256)) < 0)
                return r;
        c.subject = subject;
        /* Its DNS names are hwidd's: no device may get them. */
        if ((r = x509_dns_names(x, &dns, &n_dns)) < 0)
                return r;
        how.dns_names = (const char *const *) dns;
        how.n_dns_names = n_dns;
        r = store_cert_commit(st, &how, now);
        strv_free_n(dns, n_dns);
        return r;
}

/* "ADDR:PORT" / "[v6]:PORT" -> where the port starts; NULL if malformed. */
static const char *listen_port(const char *listen) {
        const char *colon = strrchr(listen, ':');

        return colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1) ? colon + 1 : NULL;
}

/* The host relying parties reach hwidd by: the first --tls-names entry
 * that is not an unspecified address, else this machine's host name. */
static int cdp_host(const ca_setup *s, char *out, size_t size) {
        for (const char *p = s->tls_names; p && *p;) {
                size_t n = strcspn(p, ",");
                if (n > 0 && !unspecified(p, n) && n < size - 2) {
                        bool v6 = memchr(p, ':', n) != NULL;
                        snprintf(out, size, "%s%.*s%s", v6 ? "[" : "", (int) n, p, v6 ? "]" : "");
                        return 0;
                }
                p += n + (p[n] == ',');
        }
        if (gethostname(out, size) < 0 || !out[0])
                return hwid_fail(HWID_E_INVALID, "no host name for the CRL distribution point: give --tls-names");
        out[size - 1] = '\0';
        return 0;
}

/* The plain-HTTP listener hwidd.yaml configures, and the CRL distribution
 * point and the OCSP responder naming it (http://HOST:PORT/crl and
 * /ocsp); all NULL with "none". */
static int crl_endpoint(const ca_setup *s, char **ret_listen, char *ret_urls[2]) {
        _cleanup_free_ char *listen = NULL, *crl = NULL, *ocsp = NULL;
        const char *port;
        char host[256];
        int r;

        if (s->http_listen && strcmp(s->http_listen, "none") == 0)
                return 0;
        if (s->http_listen)
                listen = strdup(s->http_listen);
        else if ((port = listen_port(s->listen)))
                (void) asprintf(&listen, "%.*s:8080", (int) (port - 1 - s->listen), s->listen);
        else
                return hwid_fail(HWID_E_INVALID, "--listen '%s' is not ADDR:PORT", s->listen);
        if (!listen)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!(port = listen_port(listen)) || strcmp(port, "0") == 0)
                return hwid_fail(HWID_E_INVALID, "--http-listen '%s' is not ADDR:PORT with a fixed port (or none)", listen);
        if ((r = cdp_host(s, host, sizeof(host))) < 0)
                return r;
        if (asprintf(&crl, "http://%s:%s/crl", host, port) < 0)
                crl = NULL;
        if (asprintf(&ocsp, "http://%s:%s/ocsp", host, port) < 0)
                ocsp = NULL;
        if (!crl || !ocsp)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret_listen = TAKE_PTR(listen);
        ret_urls[0] = TAKE_PTR(crl);
        ret_urls[1] = TAKE_PTR(ocsp);
        return 0;
}

static void urls_free(char *(*urls)[2]) {
        free((*urls)[0]);
        free((*urls)[1]);
}

/* A value that cannot go into a double-quoted YAML scalar as it is. */
static bool yaml_unsafe(const char *v) {
        return v && strpbrk(v, "\"\\\n");
}

static int write_config(const ca_setup *s, const char *ca_uri, const char *token_uri, const char *tls_uri,
                        const char *http, const char *const urls[2]) {
        _cleanup_free_ char *path = ca_setup_path(s, "hwidd.yaml");
        _cleanup_buf_ buf b;
        char when[32];
        time_t now = time(NULL);
        struct tm tm;
        int r;

        if (!path)
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* ca_setup_begin() refused these already; the URIs were re-formatted since. */
        if (yaml_unsafe(ca_uri) || yaml_unsafe(token_uri) || yaml_unsafe(tls_uri) || yaml_unsafe(http) ||
            yaml_unsafe(urls[0]) || yaml_unsafe(urls[1]))
                return hwid_fail(HWID_E_INVALID, "key URIs and the listen address may not contain quotes or backslashes");
        buf_init(&b, 64 * 1024);
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", gmtime_r(&now, &tm));
        r = buf_printf(&b, CONFIG_TEMPLATE, when, s->listen, http ? "" : "# ", http ? http : "0.0.0.0:8080",
                       s->tcti ? "" : "# ", s->tcti ? s->tcti : "swtpm:...", ca_uri, token_uri,
                       s->chain_file ? "" : "# ",
                       urls[0] ? "" : "# ", urls[0] ? urls[0] : "http://HOST:8080/crl", urls[1] ? "" : "# ",
                       urls[1] ? urls[1] : "http://HOST:8080/ocsp", tls_uri);
        if (r < 0)
                return r;
        return write_file_atomic(path, b.data, b.len, 0640);
}

/* hwidd's TLS key: --tls-key, or next to the CA key (ca_tls_uri(): the
 * same token, or a key file in DIR), made if it is not there; its
 * certificate from the CA.  *ret_tls_uri: what hwidd.yaml names. */
static int setup_tls(const ca_setup *s, hwid_key *ca_key, X509 *ca_cert, const char *ca_cfg_uri,
                     const char *const urls[2], char **ret_tls_uri, issued_cert *ret_cert) {
        _cleanup_(hwid_key_freep) hwid_key *tls_key = NULL;
        _cleanup_(issuer_freep) issuer *is = NULL;
        _cleanup_secret_ char *uri = NULL; /* may hold the CA URI's pin-value */
        _cleanup_free_ char *key_file = kept_or_staged(s, "tls.tss2.pem"), *key_dir = NULL;
        hsm_options o = { .tcti = s->tcti };
        bool created;
        int r;

        if (!key_file || !(key_dir = strdup(key_file)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *strrchr(key_dir, '/') = '\0';
        if (!s->tls_key_uri)
                r = ca_tls_uri(s->ca_key_uri, key_dir, &uri);
        else
                r = (uri = strdup(s->tls_key_uri)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        if (r < 0)
                return r;
        if ((r = ca_key_open_or_create(uri, s->type, &o, &tls_key, &created)) < 0 ||
            (r = issuer_new(ca_key, ca_cert, &is)) < 0 ||
            (r = issue_tls_cert(s, is, tls_key, urls, ret_cert)) < 0)
                return r;
        printf("%s hwidd's TLS key %s\n", created ? "created" : "using", hwid_key_uri(tls_key));
        if (s->tls_key_uri)
                return ca_config_uri(s, s->tls_key_uri, tls_key, "tls-key.pin", ret_tls_uri);
        return ca_tls_uri(ca_cfg_uri, s->dir, ret_tls_uri);
}

/* The token key next to the CA key (ca_token_key_uri(): the same token,
 * or a key file in DIR), made if it is not there.  *ret_uri: what
 * hwidd.yaml names. */
static int setup_token_key(const ca_setup *s, const char *ca_cfg_uri, char **ret_uri) {
        _cleanup_(hwid_mac_key_freep) hwid_mac_key *k = NULL;
        _cleanup_secret_ char *uri = NULL; /* may hold the CA URI's pin-value */
        _cleanup_free_ char *key_file = kept_or_staged(s, "tokens.tss2.pem"), *key_dir = NULL;
        hsm_options o = { .tcti = s->tcti };
        bool created;
        int r;

        if (!key_file || !(key_dir = strdup(key_file)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *strrchr(key_dir, '/') = '\0';
        if ((r = ca_token_key_uri(s->ca_key_uri, key_dir, &uri)) < 0 ||
            (r = ca_mac_key_open_or_create(uri, &o, &k, &created)) < 0)
                return r;
        printf("%s the token key %s\n", created ? "created" : "using", hwid_mac_key_uri(k));
        return ca_token_key_uri(ca_cfg_uri, s->dir, ret_uri);
}

static int write_tls_pem(const ca_setup *s, const issued_cert *tls, X509 *ca_cert) {
        _cleanup_free_ char *path = ca_setup_path(s, "tls.pem"), *leaf = NULL, *ca = NULL, *both = NULL;
        int r;

        /* Leaf first, then the CA, so that clients can build the chain. */
        if ((r = der_to_pem(tls->der, tls->der_len, "CERTIFICATE", &leaf)) < 0 || (r = cert_to_pem(ca_cert, &ca)) < 0)
                return r;
        if (!path || asprintf(&both, "%s%s", leaf, ca) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return write_file_atomic(path, both, strlen(both), 0644);
}

/* The store (DIR's, kept, or a new one), with hwidd's TLS certificate on
 * record; closed before the staged files move. */
static int store_tls_cert(const ca_setup *s, const issued_cert *tls) {
        _cleanup_(store_freep) store *st = NULL;
        _cleanup_free_ char *db = kept_or_staged(s, "hwid.db");
        int r;

        if (!db)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = store_open(db, &st)) < 0)
                return r;
        return record_tls_cert(st, tls);
}

int ca_finish(const ca_setup *s, hwid_key *ca_key, X509 *ca_cert) {
        _cleanup_(issued_cert_clear) issued_cert tls = { 0 };
        _cleanup_free_ char *tls_uri = NULL, *ca_uri = NULL, *token_uri = NULL, *http = NULL;
        _cleanup_(urls_free) char *urls[2] = { NULL, NULL };
        _cleanup_free_ char *ca_path = ca_setup_path(s, "ca.pem");
        char pin[72];
        int r;

        if (!ca_path)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = crl_endpoint(s, &http, urls)) < 0 ||
            (r = ca_config_uri(s, s->ca_key_uri, ca_key, "ca-key.pin", &ca_uri)) < 0 ||
            (r = setup_tls(s, ca_key, ca_cert, ca_uri, (const char *const *) urls, &tls_uri, &tls)) < 0 ||
            (r = setup_token_key(s, ca_uri, &token_uri)) < 0 ||
            (r = write_tls_pem(s, &tls, ca_cert)) < 0 ||
            (r = store_tls_cert(s, &tls)) < 0 ||
            (r = write_cert_pem(ca_path, ca_cert)) < 0 ||
            (r = write_config(s, ca_uri, token_uri, tls_uri, http, (const char *const *) urls)) < 0 ||
            (r = ca_stage_commit(s->stage)) < 0 ||
            (r = spki_sha256_pin(X509_get0_pubkey(ca_cert), pin)) < 0)
                return r;
        printf("\nCA ready in %s\n  ca.pem       the CA certificate\n  tls.pem      hwidd's TLS certificate\n"
               "  hwid.db      the store\n  hwidd.yaml   configuration\n\nCA pin: %s\n\n"
               "Start the service:   hwidd --config %s/hwidd.yaml\n"
               "Create a join token: hwid token create --config %s/hwidd.yaml --profile default\n",
               s->dir, pin, s->dir, s->dir);
        return 0;
}

/* What would only fail once keys are made, refused before: a key URI that
 * does not parse (or from which no TLS key URI follows), a value the
 * configuration cannot quote, a bad --listen or --http-listen. */
static int check_options(const ca_setup *s) {
        _cleanup_(key_uri_freep) key_uri *u = NULL, *t = NULL;
        _cleanup_secret_ char *tls = NULL;
        _cleanup_free_ char *http = NULL;
        _cleanup_(urls_free) char *urls[2] = { NULL, NULL };
        int r;

        if (yaml_unsafe(s->dir) || yaml_unsafe(s->ca_key_uri) || yaml_unsafe(s->tls_key_uri) ||
            yaml_unsafe(s->listen) || yaml_unsafe(s->http_listen) || yaml_unsafe(s->tcti))
                return hwid_fail(HWID_E_INVALID, "the directory, key URIs, addresses and TCTI may not contain "
                                                 "quotes, backslashes or newlines (hwidd.yaml names them)");
        if ((r = key_uri_parse(s->ca_key_uri, &u)) < 0)
                return r;
        r = s->tls_key_uri ? key_uri_parse(s->tls_key_uri, &t) : ca_tls_uri(s->ca_key_uri, s->dir, &tls);
        if (r < 0)
                return r;
        return crl_endpoint(s, &http, urls);
}

int ca_setup_begin(ca_setup *s) {
        _cleanup_free_ char *ca = path_join(s->dir, "ca.pem");
        bool made;
        int r;

        if (!ca)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (access(ca, F_OK) == 0 && !s->force)
                return hwid_fail(HWID_E_EXISTS, "%s already exists: this directory holds a CA "
                                                "(use --force to replace it)", ca);
        if ((r = check_options(s)) < 0)
                return r;
        made = access(s->dir, F_OK) != 0;
        if ((r = mkdir_parents(s->dir, 0750)) < 0)
                return r;
        if (!(s->abs_dir = realpath(s->dir, NULL)))
                return hwid_fail(HWID_E_IO, "cannot resolve %s: %s", s->dir, strerror(errno));
        s->dir = s->abs_dir;
        return ca_stage_open(s->dir, made, &s->stage);
}

int ca_setup_commit(ca_setup *s) {
        return ca_stage_commit(s->stage);
}

void ca_setup_done(ca_setup *s) {
        ca_stage_free(TAKE_PTR(s->stage));
        free(TAKE_PTR(s->abs_dir));
}
