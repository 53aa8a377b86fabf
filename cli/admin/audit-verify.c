/* hwid audit verify: the audit log's hash chain, record by record, on the
 * CA host: it reads the database itself (or a copy), which is what it
 * checks. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>
#include <openssl/x509.h>

#include "cli.h"
#include "error.h"
#include "host-cmd.h"
#include "ossl-util.h"

static void print_verified(const store_audit_report *rep) {
        if (rep->n_records == 0)
                printf("audit log verified: no records%s\n", rep->anchored ? " (all pruned by retention)" : "");
        else
                printf("audit log verified: %zu record%s (%lld to %lld)", rep->n_records,
                       rep->n_records == 1 ? "" : "s", (long long) rep->first_id, (long long) rep->last_id);
        if (rep->n_records > 0 && rep->anchored)
                printf(", chained from the anchor left by retention pruning at record %lld",
                       (long long) rep->anchor_id);
        if (rep->n_records > 0)
                printf("\n");
        if (rep->last.kind) {
                char t[32];
                time_t at = (time_t) rep->last.at;
                struct tm tm;

                if (!gmtime_r(&at, &tm) || !strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm))
                        snprintf(t, sizeof(t), "%lld", (long long) rep->last.at);
                printf("%zu signed checkpoint%s verified; the newest, made at %s, signs record %lld: records after "
                       "it are covered by the chain only\n", rep->n_checkpoints, rep->n_checkpoints == 1 ? "" : "s",
                       t, (long long) rep->last.id);
        } else
                printf("no signed checkpoint of the head yet: the newest records are covered by the chain only\n");
        if (rep->n_unchained > 0)
                printf("%zu newer record%s committed and not chained yet: hwidd chains them within a second "
                       "(docs/HA.md)\n", rep->n_unchained, rep->n_unchained == 1 ? " is" : "s are");
}

/* The key checkpoints are signed with: the CA certificate's. */
static int ca_public_key(const hwidd_config *cfg, EVP_PKEY **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_file(cfg->ca_cert, "r");
        _cleanup_(X509_freep) X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

        if (!x || !(*ret = X509_get_pubkey(x)))
                return hwid_fail_ossl(HWID_E_CONFIG, "%s holds no PEM certificate", cfg->ca_cert);
        return 0;
}

/* Records that no checkpoint signs, the oldest older than the interval
 * and a few seconds: hwidd signs the head when it starts, when it stops
 * and every checkpoint_interval while it runs, and notes each in the
 * chain; a log with none was stripped of them, or hwidd never ran on it.
 * Younger ones may still be waiting for a running hwidd's first one. */
static bool unsigned_records(const hwidd_config *cfg, const store_audit_report *rep) {
        bool none = !rep->last.kind || (rep->anchored && rep->last.id <= rep->anchor_id);

        return rep->n_records > 0 && none && (int64_t) time(NULL) - rep->first_at > cfg->audit_checkpoint_interval + 5;
}

int cmd_audit_verify(int argc, char **argv) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, {},
        };
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ca_key = NULL;
        const char *config = NULL;
        store_audit_report rep;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': config = optarg; break;
                case 'h':
                        printf("Usage: hwid audit verify [--config FILE]\n\n"
                               "Checks the audit log's hash chain: every record against its hash, each\n"
                               "record's link to the one before it, the anchor left by retention pruning\n"
                               "and the chain's head; and the checkpoints hwidd signs with the CA key:\n"
                               "each signature, the newest one's record still in the chain, the anchor\n"
                               "one a signed pruning left, every checkpoint the chain notes still there,\n"
                               "and some checkpoint signing the records.  Reports the first record that\n"
                               "was modified, deleted or moved in the database, or the checkpoint that\n"
                               "is missing (exit 1), else how many verified (exit 0).\n"
                               "The chain is specified in docs/OPERATIONS.md.\n\n"
                               "  -c, --config FILE  hwidd's configuration (default $HWID_CONFIG, else %s)\n",
                               DEFAULT_CONFIG);
                        return 0;
                default: return cli_bad_option("audit verify", argv);
                }
        }
        if (optind != argc)
                return cli_usage("audit verify", "takes no arguments");
        if ((r = admin_open(config, &cfg, &s)) < 0 || (r = ca_public_key(cfg, &ca_key)) < 0 ||
            (r = store_audit_verify(s, ca_key, cfg->audit_retention, &rep)) < 0)
                return cli_fail(r);
        if (rep.problem != AUDIT_OK)
                return cli_fail(hwid_fail(HWID_E_TAMPERED, "audit log of %s does not verify: %s", cfg->database,
                                          rep.detail));
        if (unsigned_records(cfg, &rep))
                return cli_fail(hwid_fail(HWID_E_TAMPERED, "audit log of %s does not verify: no signed checkpoint "
                                          "covers its %zu record%s (%lld to %lld): hwidd signs the chain's head when "
                                          "it starts, when it stops and every audit.checkpoint_interval, so they were "
                                          "deleted (or hwidd has not run since these records were written: start it, "
                                          "then verify again)", cfg->database, rep.n_records,
                                          rep.n_records == 1 ? "" : "s", (long long) rep.first_id,
                                          (long long) rep.last_id));
        print_verified(&rep);
        return 0;
}
