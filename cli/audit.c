/* hwid audit list: the audit log of the CA, newest last. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin.h"
#include "cli.h"
#include "error.h"
#include "escape.h"

/* Fields are escaped again for the terminal (common/escape.h): records
 * written before hwidd escaped them, or by anything else, cannot fake a
 * row or a column either. */
static int print_record(const store_audit *a, void *userdata) {
        const char *in[5] = { a->actor, a->action, a->target ? a->target : "-", a->outcome, a->reason ? a->reason : "" };
        char *f[5] = { 0 };
        char when[32];
        int r = 0;

        for (size_t i = 0; i < ELEMENTSOF(in) && r >= 0; i++)
                r = text_escape(in[i], in[i] ? strlen(in[i]) : 0, &f[i]);
        format_time(a->at, when, sizeof(when));
        if (r >= 0)
                printf("%s  %-18s  %-16s  %-24s  %-10s  %s\n", when, f[0], f[1], f[2], f[3], f[4]);
        for (size_t i = 0; i < ELEMENTSOF(f); i++)
                free(f[i]);
        return r < 0 ? r : 0;
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
                               "which identity, the outcome (allow, deny, would-deny, error) and why.\n");
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
