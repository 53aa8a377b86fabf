/* hwid store migrate: copies a SQLite store into PostgreSQL, with a count
 * check (service/store/store-pg-import.c), for moving a CA to several hwidd
 * replicas (docs/HA.md). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "error.h"
#include "host-cmd.h"
#include "store.h"

#define CMD "store migrate"

static int usage(void) {
        printf("Usage: hwid store migrate --from sqlite:PATH --to postgresql://...\n\n"
               "Copies every table of the SQLite store at PATH into the PostgreSQL database,\n"
               "which must hold no hwid data yet, in one transaction that commits only when\n"
               "each table holds as many rows on both sides; then verifies the audit chain\n"
               "there.  Stop hwidd first.  The URI holds no password: use ?passfile=PATH,\n"
               "PGPASSFILE or PGPASSWORD.  Then set database: to the URI (docs/HA.md).\n\n"
               "      --from sqlite:PATH   the SQLite store\n"
               "      --to URI             the PostgreSQL database (postgresql://...)\n");
        return 0;
}

int cmd_store_migrate(int argc, char **argv) {
        const struct option opts[] = {
                { "from", required_argument, NULL, 'f' },
                { "to", required_argument, NULL, 't' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *from = NULL, *to = NULL;
        char summary[512];
        int c, r;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 'f': from = optarg; break;
                case 't': to = optarg; break;
                case 'h': return usage();
                default: return cli_bad_option(CMD, argv);
                }
        }
        if (optind != argc)
                return cli_usage(CMD, "takes no arguments");
        if (!from || strncmp(from, "sqlite:", 7) != 0 || !from[7])
                return cli_usage(CMD, "needs --from sqlite:PATH");
        if (!to || (strncmp(to, "postgresql://", 13) != 0 && strncmp(to, "postgres://", 11) != 0))
                return cli_usage(CMD, "needs --to postgresql://...");
        if ((r = store_copy_sqlite_to_pg(from + 7, to, summary, sizeof(summary))) < 0)
                return cli_fail(r);
        printf("copied %s into PostgreSQL: %s; the audit chain verifies\n", from + 7, summary);
        return 0;
}
