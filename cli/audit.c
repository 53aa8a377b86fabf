/* hwid audit list: the audit log of the CA, newest last. */
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
