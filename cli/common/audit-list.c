/* hwid audit list: the audit log of the CA, newest last, through the
 * admin API (admin-conn.h): of a remote hwidd as an operator (--dir,
 * --cert/--key), or on the CA host of its own store (--config). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "cli.h"
#include "error.h"
#include "escape.h"
#include "remote.h"

/* The most records one answer holds (the admin API's bound). */
#define AUDIT_LIST_MAX 100000

/* Fields are escaped again for the terminal (common/escape.h): records
 * written before hwidd escaped them, or by anything else, cannot fake a
 * row or a column either. */
static int print_record(json_object *rec) {
        const char *in[5] = { NULL };
        char *f[5] = { 0 };
        char when[32];
        int64_t at;
        int r;

        if ((r = answer_int(rec, "at", &at)) < 0 || (r = answer_str(rec, "actor", false, &in[0])) < 0 ||
            (r = answer_str(rec, "action", false, &in[1])) < 0 || (r = answer_str(rec, "target", true, &in[2])) < 0 ||
            (r = answer_str(rec, "outcome", false, &in[3])) < 0 || (r = answer_str(rec, "reason", true, &in[4])) < 0)
                return r;
        in[2] = in[2] ? in[2] : "-";
        in[4] = in[4] ? in[4] : "";
        for (size_t i = 0; i < ELEMENTSOF(in) && r >= 0; i++)
                r = text_escape(in[i], strlen(in[i]), &f[i]);
        format_time(at, when, sizeof(when));
        if (r >= 0)
                printf("%s  %-18s  %-16s  %-24s  %-10s  %s\n", when, f[0], f[1], f[2], f[3], f[4]);
        for (size_t i = 0; i < ELEMENTSOF(f); i++)
                free(f[i]);
        return r < 0 ? r : 0;
}

static int list_audit(const char *config, const remote_opts *ro, long limit) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *path = NULL;
        json_object *list;
        int r;

        if (asprintf(&path, "/v1/admin/audit?limit=%ld", limit) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_conn_open("audit list", ro, config, 0, &conn)) < 0)
                return r;
        printf("%-17s  %-18s  %-16s  %-24s  %-10s  %s\n", "WHEN", "ACTOR", "ACTION", "TARGET", "OUTCOME", "REASON");
        if ((r = admin_conn_call(conn, "GET", path, NULL, &answer)) < 0 ||
            (r = answer_list(answer, "records", &list)) < 0)
                return r;
        for (size_t i = 0; r >= 0 && i < json_object_array_length(list); i++)
                r = print_record(json_object_array_get_idx(list, i));
        return r;
}

static void usage(void) {
        printf("Usage: hwid audit list [--config FILE] [--limit N]\n"
               "       hwid audit list --dir DIR | --cert FILE --key URI [...] [--limit N]   (remote)\n\n"
               "Shows the last N audit records (default 50; 0 for all, up to %d):\n"
               "who did what to which identity, the outcome (allow, deny, would-deny, error) and\n"
               "why.  Remotely: the admin and auditor roles.\n\n"
               CONFIG_HELP
               "  -n, --limit N        how many records (default 50, 0 for all)\n" REMOTE_HELP, AUDIT_LIST_MAX);
}

int cmd_audit_list(int argc, char **argv) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "limit", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        const char *config = NULL;
        remote_opts ro = { 0 };
        long limit = 50;
        char *end;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:n:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': config = optarg; break;
                case 'n':
                        limit = strtol(optarg, &end, 10);
                        if (*end || end == optarg || limit < 0)
                                return cli_usage("audit list", "--limit must be a number (0: everything)");
                        break;
                case 'h': usage(); return 0;
                default:
                        if (!remote_option(&ro, c, optarg))
                                return cli_bad_option("audit list", argv);
                }
        }
        if (optind != argc)
                return cli_usage("audit list", "takes no arguments");
        if ((r = remote_check_usage("audit list", &ro, config, false)) != 0)
                return r;
        if (limit > AUDIT_LIST_MAX)
                return cli_usage("audit list", "--limit is at most %d", AUDIT_LIST_MAX);
        r = list_audit(config, &ro, limit);
        return r < 0 ? cli_fail(r) : 0;
}
