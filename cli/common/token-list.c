/* hwid token list / hwid token revoke ID, through the admin API
 * (admin-conn.h): of a remote hwidd as an operator (--dir, --cert/--key),
 * or on the CA host of its own store (--config). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "cli.h"
#include "error.h"
#include "remote.h"

static int parse(const char *cmd, int argc, char **argv, const char **config, remote_opts *ro, int nargs,
                 const char *help) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c;

        *ro = (remote_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *config = optarg; break;
                case 'h': printf("%s\n" CONFIG_HELP REMOTE_HELP, help); exit(0);
                default:
                        if (!remote_option(ro, c, optarg))
                                return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs a token id" : "takes no arguments");
        return remote_check_usage(cmd, ro, *config, false);
}

/* One row of the listing; every member read before anything is printed. */
static int print_token(json_object *t) {
        const char *id, *state, *profile, *pattern;
        int64_t expires, total, left;
        char exp[32], uses[48];
        int r;

        if ((r = answer_str(t, "id", false, &id)) < 0 || (r = answer_str(t, "state", false, &state)) < 0 ||
            (r = answer_str(t, "profile", false, &profile)) < 0 ||
            (r = answer_str(t, "name_pattern", true, &pattern)) < 0 ||
            (r = answer_int(t, "expires_at", &expires)) < 0 || (r = answer_int(t, "uses_total", &total)) < 0 ||
            (r = answer_int(t, "uses_left", &left)) < 0)
                return r;
        format_time(expires, exp, sizeof(exp));
        snprintf(uses, sizeof(uses), "%lld/%lld", (long long) (total - left), (long long) total);
        printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", id, state, profile, uses, exp, pattern ? pattern : "*");
        return 0;
}

static int list_tokens(const char *config, const remote_opts *ro) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *list;
        int r;

        if ((r = admin_conn_open("token list", ro, config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "GET", "/v1/admin/tokens", NULL, &answer)) < 0 ||
            (r = answer_list(answer, "tokens", &list)) < 0)
                return r;
        printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", "ID", "STATE", "PROFILE", "USES", "EXPIRES", "NAME-PATTERN");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(list); i++)
                r = print_token(json_object_array_get_idx(list, i));
        return r;
}

int cmd_token_list(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = parse("token list", argc, argv, &config, &ro, 0,
                       "Usage: hwid token list [--config FILE]\n"
                       "       hwid token list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                       "Lists bootstrap tokens (never their secrets).  Remotely: the admin and auditor roles.\n")) != 0)
                return r;
        r = list_tokens(config, &ro);
        return r < 0 ? cli_fail(r) : 0;
}

static int revoke_token(const char *config, const remote_opts *ro, const char *id) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(id), *path = NULL;
        int r;

        if (!esc || asprintf(&path, "/v1/admin/tokens/%s/revoke", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_conn_open("token revoke", ro, config, 0, &conn)) < 0)
                return r;
        return admin_conn_call(conn, "POST", path, NULL, &answer);
}

int cmd_token_revoke(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = parse("token revoke", argc, argv, &config, &ro, 1,
                       "Usage: hwid token revoke [--config FILE] ID\n"
                       "       hwid token revoke --dir DIR | --cert FILE --key URI [...] ID   (remote)\n\n"
                       "Revokes a bootstrap token: it can no longer enroll anything.  Remotely: the admin\n"
                       "role.\n")) != 0)
                return r;
        if ((r = revoke_token(config, &ro, argv[optind])) < 0)
                return cli_fail(r);
        printf("token %s revoked\n", argv[optind]);
        return 0;
}
