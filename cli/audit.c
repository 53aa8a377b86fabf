/* hwid audit list: the audit log of the CA, newest last.
 * hwid audit verify: the audit log's hash chain, record by record. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin.h"
#include "cli.h"
#include "error.h"

static int print_record(const store_audit *a, void *userdata) {
        char when[32];

        format_time(a->at, when, sizeof(when));
        printf("%s  %-18s  %-16s  %-24s  %-10s  %s\n", when, a->actor, a->action, a->target ? a->target : "-",
               a->outcome, a->reason ? a->reason : "");
        return 0;
}

int cmd_audit_list(int argc, char **argv) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "limit", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' }, {},
        };
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *config = NULL;
        long limit = 50;
        char *end;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:n:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': config = optarg; break;
                case 'n':
                        limit = strtol(optarg, &end, 10);
                        if (*end || limit < 0)
                                return cli_usage("audit list", "--limit must be a number (0: everything)");
                        break;
                case 'h':
                        printf("Usage: hwid audit list [--config FILE] [--limit N]\n\n"
                               "Shows the last N audit records (default 50, 0 for all): who did what to\n"
                               "which identity, the outcome (allow, deny, would-deny, error) and why.\n\n"
                               CONFIG_HELP
                               "  -n, --limit N        how many records (default 50, 0 for all)\n");
                        return 0;
                default: return cli_bad_option("audit list", argv);
                }
        }
        if (optind != argc)
                return cli_usage("audit list", "takes no arguments");
        if ((r = admin_open(config, &cfg, &s)) < 0)
                return cli_fail(r);
        printf("%-17s  %-18s  %-16s  %-24s  %-10s  %s\n", "WHEN", "ACTOR", "ACTION", "TARGET", "OUTCOME", "REASON");
        if ((r = store_audit_foreach(s, (size_t) limit, print_record, NULL)) < 0)
                return cli_fail(r);
        return 0;
}

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
}

int cmd_audit_verify(int argc, char **argv) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, {},
        };
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
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
                               "and the chain's head.  Reports the first record that was modified,\n"
                               "deleted or moved in the database (exit 1), else how many verified (exit 0).\n"
                               "The chain is specified in docs/OPERATIONS.md.\n\n"
                               "  -c, --config FILE  hwidd's configuration (default $HWID_CONFIG, else %s)\n",
                               DEFAULT_CONFIG);
                        return 0;
                default: return cli_bad_option("audit verify", argv);
                }
        }
        if (optind != argc)
                return cli_usage("audit verify", "takes no arguments");
        if ((r = admin_open(config, &cfg, &s)) < 0 || (r = store_audit_verify(s, &rep)) < 0)
                return cli_fail(r);
        if (rep.problem != AUDIT_OK)
                return cli_fail(hwid_fail(HWID_E_TAMPERED, "audit log of %s does not verify: %s", cfg->database,
                                          rep.detail));
        print_verified(&rep);
        return 0;
}
