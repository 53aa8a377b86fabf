/* hwid ek add | list | remove: the EK allowlist (ek.h).  Import is in
 * ek-import.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/sha.h>

#include "admin.h"
#include "attest-verify.h"
#include "cli.h"
#include "ek.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"

#define EK_NAME_MAX 64

static void hex(const uint8_t *p, size_t n, char *out) {
        for (size_t i = 0; i < n; i++)
                snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* PEM or DER, one certificate, into DER. */
static int cert_der(const uint8_t *data, size_t len, const char *what, uint8_t **ret, size_t *ret_len) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(data, (int) len);
        _cleanup_(X509_freep) X509 *x = NULL;
        const unsigned char *p = data;
        unsigned char *der = NULL;
        int n;

        x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!x)
                x = d2i_X509(NULL, &p, (long) len);
        if (!x)
                return hwid_fail_ossl(HWID_E_INVALID, "%s holds no certificate (PEM or DER)", what);
        n = i2d_X509(x, &der);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode %s", what);
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}

int ek_entry_from_cert(const hwidd_config *cfg, const uint8_t *data, size_t len, const char *what, store_ek *e) {
        _cleanup_(X509_freep) X509 *x = NULL;
        uint8_t *der = NULL, cert_sha[32], pub_sha[32];
        size_t der_len;
        int r;

        if ((r = cert_der(data, len, what, &der, &der_len)) < 0)
                return r;
        if (cfg->ek_roots && (r = attest_ek_cert_verify(cfg->ek_roots, der, der_len, &x)) < 0)
                r = hwid_fail(HWID_E_INVALID, "%s cannot attest with this CA: %s", what, hwid_strerror(r));
        if (r >= 0)
                r = attest_ek_pub_sha256(der, der_len, pub_sha);
        SHA256(der, der_len, cert_sha);
        OPENSSL_free(der);
        if (r < 0)
                return r;
        hex(cert_sha, sizeof(cert_sha), e->ek_cert_sha256);
        hex(pub_sha, sizeof(pub_sha), e->ek_pub_sha256);
        return 0;
}

int ek_entry_pub_hash(const char *s, const char *what, store_ek *e) {
        if (strncmp(s, "sha256:", 7) == 0)
                s += 7;
        if (strlen(s) != 64 || strspn(s, "0123456789abcdefABCDEF") != 64)
                return hwid_fail(HWID_E_INVALID, "%s: an EK public key hash is 64 hex digits (sha256:<hex> of its "
                                 "SubjectPublicKeyInfo)", what);
        for (size_t i = 0; i < 64; i++)
                e->ek_pub_sha256[i] = (char) (s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
        e->ek_pub_sha256[64] = '\0';
        return 0;
}

static bool name_ok(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > EK_NAME_MAX)
                return false;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

int ek_entry_names(const hwidd_config *cfg, const char *name, const char *profile, const char *what, store_ek *e) {
        if (!name || !name_ok(name))
                return hwid_fail(HWID_E_INVALID, "%s: the name (CN) must be 1-%d printable bytes", what, EK_NAME_MAX);
        if (!profile || !policy_profile_find(cfg->policy, profile))
                return hwid_fail(HWID_E_INVALID, "%s: no profile '%s' in %s", what, profile ? profile : "", cfg->path);
        e->identity = strdup(name);
        e->profile = strdup(profile);
        return e->identity && e->profile ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* ---------- add ---------- */

static void add_usage(FILE *f) {
        fprintf(f, "Usage: hwid ek add [--config FILE] --cn NAME (--ek-cert FILE | --ek-sha256 HEX)\n"
                   "                   [--profile P]\n\n"
                   "Puts one TPM on the EK allowlist: a device whose TPM holds that EK enrolls with\n"
                   "hwid join --attest and no bootstrap token, under NAME only (its CN must be NAME)\n"
                   "and profile P.  The EK certificate must chain to attestation.ek_roots.\n\n"
                   "  -c, --config FILE   hwidd configuration (default $HWID_CONFIG or " DEFAULT_CONFIG ")\n"
                   "      --cn NAME       the one name this TPM may enroll\n"
                   "      --ek-cert FILE  its EK certificate, PEM or DER (tpm2_nvread 0x01c00002 ...)\n"
                   "      --ek-sha256 HEX its EK public key instead: sha256 of its SubjectPublicKeyInfo\n"
                   "                      (what hwid ca hash prints for the EK certificate)\n"
                   "  -p, --profile P     the profile it enrolls under (default: 'default')\n"
                   "  -h, --help          show this help\n");
}

typedef struct add_opts {
        const char *config, *cn, *ek_cert, *ek_sha256, *profile;
} add_opts;

static int add_parse(int argc, char **argv, add_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "cn", required_argument, NULL, 'n' },
                { "ek-cert", required_argument, NULL, 'e' }, { "ek-sha256", required_argument, NULL, 's' },
                { "profile", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        *o = (add_opts) { .profile = "default" };
        while ((c = getopt_long(argc, argv, "c:p:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': o->config = optarg; break;
                case 'n': o->cn = optarg; break;
                case 'e': o->ek_cert = optarg; break;
                case 's': o->ek_sha256 = optarg; break;
                case 'p': o->profile = optarg; break;
                case 'h': add_usage(stdout); exit(0);
                default: return cli_bad_option("ek add", argv);
                }
        }
        if (!o->cn || !o->ek_cert == !o->ek_sha256 || optind != argc)
                return cli_usage("ek add", "needs --cn and one of --ek-cert or --ek-sha256");
        return 0;
}

/* Without TPM attestation configured, no entry would ever be used. */
static int need_attestation(const hwidd_config *cfg) {
        if (cfg->ek_roots)
                return 0;
        return hwid_fail(HWID_E_CONFIG, "%s has no attestation.ek_roots: this CA does not verify TPM attestation, "
                         "so an EK allowlist entry would never be used", cfg->path);
}

static int add_entry(const add_opts *o, hwidd_config *cfg, store_ek *e) {
        _cleanup_free_ char *data = NULL;
        size_t len;
        int r;

        if ((r = need_attestation(cfg)) < 0)
                return r;
        if (o->ek_cert) {
                if ((r = read_file_capped(o->ek_cert, TPM_EK_CERT_MAX * 2, &data, &len)) < 0)
                        return r;
                r = ek_entry_from_cert(cfg, (const uint8_t *) data, len, o->ek_cert, e);
        } else
                r = ek_entry_pub_hash(o->ek_sha256, "--ek-sha256", e);
        return r < 0 ? r : ek_entry_names(cfg, o->cn, o->profile, o->cn, e);
}

int cmd_ek_add(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        _cleanup_(store_ek_clear) store_ek e = { 0 };
        store_audit a = { .actor = admin_actor(), .action = "ek.add", .outcome = "allow" };
        char reason[160];
        add_opts o;
        int r;

        if ((r = add_parse(argc, argv, &o)) != 0)
                return r;
        if ((r = admin_open(o.config, &cfg, &s)) < 0 || (r = add_entry(&o, cfg, &e)) < 0)
                return cli_fail(r);
        snprintf(reason, sizeof(reason), "profile %s, EK sha256:%s", e.profile, e.ek_pub_sha256);
        a.target = e.identity;
        a.reason = reason;
        a.at = (int64_t) time(NULL);
        if ((r = store_ek_add(s, &e, 1, &a, a.at)) < 0)
                return cli_fail(admin_audit(s, "ek.add", e.identity, r, NULL));
        printf("EK sha256:%s may enroll %s (profile %s) without a token: hwid join --attest --cn %s\n",
               e.ek_pub_sha256, e.identity, e.profile, e.identity);
        return 0;
}

/* ---------- list, remove ---------- */

static int config_only(const char *cmd, int argc, char **argv, const char **config, int nargs, const char *help) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *config = optarg; break;
                case 'h': fputs(help, stdout); exit(0);
                default: return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs a NAME or an EK hash" : "takes no arguments");
        return 0;
}

int cmd_ek_list(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *config = NULL;
        store_ek *v = NULL;
        size_t n = 0;
        int r;

        if ((r = config_only("ek list", argc, argv, &config, 0,
                             "Usage: hwid ek list [--config FILE]\n\nLists the EK allowlist: the TPMs that may "
                             "enroll without a token, their names and profiles.\n\n"
                             "  -c, --config FILE   hwidd configuration (default $HWID_CONFIG or " DEFAULT_CONFIG ")\n"
                             "  -h, --help          show this help\n")) != 0)
                return r;
        if ((r = admin_open(config, &cfg, &s)) < 0 || (r = store_ek_list(s, &v, &n)) < 0)
                return cli_fail(r);
        printf("%-20s  %-12s  %-17s  %-64s  %s\n", "NAME", "PROFILE", "ADDED", "EK-SHA256 (public key)",
               "EK-CERT-SHA256");
        for (size_t i = 0; i < n; i++) {
                char added[32];
                format_time(v[i].added_at, added, sizeof(added));
                printf("%-20s  %-12s  %-17s  %-64s  %s\n", v[i].identity, v[i].profile, added,
                       v[i].ek_pub_sha256[0] ? v[i].ek_pub_sha256 : "-",
                       v[i].ek_cert_sha256[0] ? v[i].ek_cert_sha256 : "-");
        }
        store_ek_list_free(v, n);
        return 0;
}

int cmd_ek_remove(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *config = NULL, *key;
        store_audit a = { .actor = admin_actor(), .action = "ek.remove", .outcome = "allow" };
        int r;

        if ((r = config_only("ek remove", argc, argv, &config, 1,
                             "Usage: hwid ek remove [--config FILE] NAME|HEX\n\nTakes a TPM off the EK allowlist, "
                             "by its name or the SHA-256 of its EK public key or certificate: it can no longer\n"
                             "enroll without a token.  Certificates it has are left alone (hwid cert revoke).\n\n"
                             "  -c, --config FILE   hwidd configuration (default $HWID_CONFIG or " DEFAULT_CONFIG ")\n"
                             "  -h, --help          show this help\n")) != 0)
                return r;
        key = argv[optind];
        if (strncmp(key, "sha256:", 7) == 0)
                key += 7;
        if ((r = admin_open(config, &cfg, &s)) < 0)
                return cli_fail(r);
        a.target = key;
        a.at = (int64_t) time(NULL);
        if ((r = store_ek_remove(s, key, &a, a.at)) < 0)
                return cli_fail(admin_audit(s, "ek.remove", key, r, NULL));
        printf("%s removed from the EK allowlist\n", key);
        return 0;
}
