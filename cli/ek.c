/* hwid ek add | list | remove: the EK allowlist (ek.h), on the CA host
 * (--config) or remotely as an operator (--dir, --cert/--key: ek-remote.c).
 * Import is in ek-import.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "attest-verify.h"
#include "cli.h"
#include "ek.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"

/* ---------- add ---------- */

static void add_usage(FILE *f) {
        fprintf(f, "Usage: hwid ek add [--config FILE] --cn NAME (--ek-cert FILE | --ek-sha256 HEX)\n"
                   "                   [--profile P]\n"
                   "       hwid ek add --dir DIR | --cert FILE --key URI [...] --cn NAME ...   (remote)\n\n"
                   "Puts one TPM on the EK allowlist: a device whose TPM holds that EK enrolls with\n"
                   "hwid join --attest and no bootstrap token, under NAME only (its CN must be NAME)\n"
                   "and profile P.  The EK certificate must chain to attestation.ek_roots.\n"
                   "Remotely: the admin role.\n\n"
                   CONFIG_HELP
                   "      --cn NAME            the one name this TPM may enroll\n"
                   "      --ek-cert FILE       its EK certificate, PEM or DER (tpm2_nvread 0x01c00002 ...)\n"
                   "      --ek-sha256 HEX      its EK public key instead: sha256 of its SubjectPublicKeyInfo\n"
                   "                           (what hwid ca hash prints for the EK certificate)\n"
                   "  -p, --profile P          the profile it enrolls under (default: 'default')\n"
                   "  -h, --help               show this help\n" REMOTE_HELP);
}

typedef struct add_opts {
        const char *config, *cn, *ek_cert, *ek_sha256, *profile;
        remote_opts ro;
} add_opts;

static int add_parse(int argc, char **argv, add_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "cn", required_argument, NULL, 'n' },
                { "ek-cert", required_argument, NULL, 'e' }, { "ek-sha256", required_argument, NULL, 's' },
                { "profile", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
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
                default:
                        if (!remote_option(&o->ro, c, optarg))
                                return cli_bad_option("ek add", argv);
                }
        }
        if (!o->cn || !o->ek_cert == !o->ek_sha256 || optind != argc)
                return cli_usage("ek add", "needs --cn and one of --ek-cert or --ek-sha256");
        return remote_check_usage("ek add", &o->ro, o->config, false);
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

static int local_add(const add_opts *o, store_ek *e) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        store_audit a = { .actor = admin_actor(), .action = "ek.add", .outcome = "allow" };
        char reason[160];
        int r;

        if ((r = admin_open(o->config, &cfg, &s)) < 0 || (r = add_entry(o, cfg, e)) < 0)
                return r;
        snprintf(reason, sizeof(reason), "profile %s, EK sha256:%s", e->profile, e->ek_pub_sha256);
        a.target = e->identity;
        a.reason = reason;
        a.at = (int64_t) time(NULL);
        if ((r = store_ek_add(s, e, 1, &a, a.at)) < 0)
                return admin_audit(s, "ek.add", e->identity, r, NULL);
        return 0;
}

int cmd_ek_add(int argc, char **argv) {
        _cleanup_(store_ek_clear) store_ek e = { 0 };
        add_opts o;
        int r;

        if ((r = add_parse(argc, argv, &o)) != 0)
                return r;
        r = remote_wanted(&o.ro) ? ek_remote_add(&o.ro, o.cn, o.profile, o.ek_cert, o.ek_sha256, &e)
                                 : local_add(&o, &e);
        if (r < 0)
                return cli_fail(r);
        printf("EK sha256:%s may enroll %s (profile %s) without a token: hwid join --attest --cn %s\n",
               e.ek_pub_sha256[0] ? e.ek_pub_sha256 : e.ek_cert_sha256, e.identity, e.profile, e.identity);
        return 0;
}

/* ---------- list, remove ---------- */

static int list_parse(const char *cmd, int argc, char **argv, const char **config, remote_opts *ro, int nargs,
                      const char *help) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c;

        *ro = (remote_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *config = optarg; break;
                case 'h': printf("%s\n" CONFIG_HELP "  -h, --help           show this help\n" REMOTE_HELP, help);
                        exit(0);
                default:
                        if (!remote_option(ro, c, optarg))
                                return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs a NAME or an EK hash" : "takes no arguments");
        return remote_check_usage(cmd, ro, *config, false);
}

static int local_list(const char *config, store_ek **ret, size_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(config, &cfg, &s);

        return r < 0 ? r : store_ek_list(s, ret, ret_n);
}

int cmd_ek_list(int argc, char **argv) {
        const char *config = NULL;
        store_ek *v = NULL;
        remote_opts ro;
        size_t n = 0;
        int r;

        if ((r = list_parse("ek list", argc, argv, &config, &ro, 0,
                            "Usage: hwid ek list [--config FILE]\n"
                            "       hwid ek list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                            "Lists the EK allowlist: the TPMs that may enroll without a token, their names and\n"
                            "profiles.  Remotely: the admin and auditor roles.\n")) != 0)
                return r;
        r = remote_wanted(&ro) ? ek_remote_list(&ro, &v, &n) : local_list(config, &v, &n);
        if (r < 0)
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

static int local_remove(const char *config, const char *key) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        store_audit a = { .actor = admin_actor(), .action = "ek.remove", .outcome = "allow", .target = key };
        int r;

        if ((r = admin_open(config, &cfg, &s)) < 0)
                return r;
        a.at = (int64_t) time(NULL);
        if ((r = store_ek_remove(s, key, &a, a.at)) < 0)
                return admin_audit(s, "ek.remove", key, r, NULL);
        return 0;
}

int cmd_ek_remove(int argc, char **argv) {
        const char *config = NULL, *key;
        remote_opts ro;
        int r;

        if ((r = list_parse("ek remove", argc, argv, &config, &ro, 1,
                            "Usage: hwid ek remove [--config FILE] NAME|HEX\n"
                            "       hwid ek remove --dir DIR | --cert FILE --key URI [...] NAME|HEX   (remote)\n\n"
                            "Takes a TPM off the EK allowlist, by its name or the SHA-256 of its EK public key or\n"
                            "certificate: it can no longer enroll without a token.  Certificates it has are left\n"
                            "alone (hwid cert revoke).  Remotely: the admin role.\n")) != 0)
                return r;
        key = argv[optind];
        if (strncmp(key, "sha256:", 7) == 0)
                key += 7;
        r = remote_wanted(&ro) ? ek_remote_remove(&ro, key) : local_remove(config, key);
        if (r < 0)
                return cli_fail(r);
        printf("%s removed from the EK allowlist\n", key);
        return 0;
}
