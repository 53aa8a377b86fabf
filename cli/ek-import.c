/* hwid ek import: the EK allowlist from a factory line's manifest
 * (service/ca/ek-manifest.c), all entries or none. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "cli.h"
#include "ek.h"
#include "error.h"
#include "fsutil.h"
#include "remote.h"

#define MANIFEST_MAX (64 * 1024 * 1024)

int ek_manifest_read(const hwidd_config *cfg, const char *path, const char *profile, store_ek **ret,
                     size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r;

        if ((r = read_file_capped(path, MANIFEST_MAX, &text, &len)) < 0)
                return r;
        return ek_manifest_parse(cfg, path, text, len, profile, ret, ret_n);
}

/* ---------- the command ---------- */

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid ek import [--config FILE] [--profile P] MANIFEST\n"
                   "       hwid ek import --dir DIR | --cert FILE --key URI [...] [--profile P] MANIFEST\n"
                   "                                                                     (remote)\n\n"
                   "Puts the TPMs a factory line listed on the EK allowlist, all or none.  MANIFEST is\n"
                   "JSON, {\"devices\": [{\"cn\", \"profile\", \"ek_cert\" | \"ek_pub_sha256\" |\n"
                   "\"ek_cert_sha256\"}]}, or CSV with a header naming those columns, e.g.\n"
                   "  cn,profile,ek_pub_sha256\n"
                   "  edge-0001,edge,3f1c0b...\n"
                   "ek_cert is the EK certificate (PEM, or base64 of its DER); it must chain to\n"
                   "attestation.ek_roots.  See docs/ATTESTATION.md.  Remotely: the admin role; the\n"
                   "manifest goes in one request, within hwidd's limits.max_body.\n\n"
                   CONFIG_HELP
                   "  -p, --profile P      profile of the entries that name none (default: 'default')\n"
                   "  -h, --help           show this help\n" REMOTE_HELP);
}

static int local_import(const char *config, const char *path, const char *profile, size_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        store_audit a = { .actor = admin_actor(), .action = "ek.import", .outcome = "allow", .target = path };
        store_ek *v = NULL;
        char reason[64];
        size_t n = 0;
        int r;

        if ((r = admin_open(config, &cfg, &s)) < 0)
                return r;
        if (!cfg->ek_roots)
                return hwid_fail(HWID_E_CONFIG, "%s has no attestation.ek_roots: this CA does not verify TPM "
                                 "attestation, so EK allowlist entries would never be used", cfg->path);
        if ((r = ek_manifest_read(cfg, path, profile, &v, &n)) < 0)
                return r;
        snprintf(reason, sizeof(reason), "%zu entr%s", n, n == 1 ? "y" : "ies");
        a.reason = reason;
        a.at = (int64_t) time(NULL);
        r = store_ek_add(s, v, n, &a, a.at);
        store_ek_list_free(v, n);
        if (r < 0)
                return admin_audit(s, "ek.import", path, r, NULL);
        *ret_n = n;
        return 0;
}

int cmd_ek_import(int argc, char **argv) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "profile", required_argument, NULL, 'p' },
                { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        const char *config = NULL, *profile = "default";
        remote_opts ro = { 0 };
        size_t n = 0;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:p:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': config = optarg; break;
                case 'p': profile = optarg; break;
                case 'h': usage(stdout); return 0;
                default:
                        if (!remote_option(&ro, c, optarg))
                                return cli_bad_option("ek import", argv);
                }
        }
        if (argc - optind != 1)
                return cli_usage("ek import", "needs one MANIFEST file");
        if ((r = remote_check_usage("ek import", &ro, config, false)) != 0)
                return r;
        r = remote_wanted(&ro) ? ek_remote_import(&ro, argv[optind], profile, &n)
                               : local_import(config, argv[optind], profile, &n);
        if (r < 0)
                return cli_fail(r);
        printf("%zu TPM%s added to the EK allowlist from %s\n", n, n == 1 ? "" : "s", argv[optind]);
        return 0;
}
