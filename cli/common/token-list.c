/* hwid token list / hwid token revoke ID, through the admin API
 * (admin-conn.h): of a remote hwidd as an operator (--dir, --cert/--key),
 * or on the CA host of its own store (--config). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "admin-plain.h"
#include "cli.h"
#include "error.h"
#include "remote.h"

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
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *items;
        int r;

        if ((r = admin_get_list("token list", ro, config, "/v1/admin/tokens", "tokens", &answer, &items)) < 0)
                return r;
        printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", "ID", "STATE", "PROFILE", "USES", "EXPIRES", "NAME-PATTERN");
        return admin_print_each(items, print_token);
}

int cmd_token_list(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = admin_parse_plain("token list", argc, argv, &config, &ro, 0, NULL,
                       "Usage: hwid token list [--config FILE]\n"
                       "       hwid token list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                       "Lists bootstrap tokens (never their secrets).  Remotely: the admin and auditor roles.\n")) != 0)
                return r;
        r = list_tokens(config, &ro);
        return r < 0 ? cli_fail(r) : 0;
}

static int revoke_token(const char *config, const remote_opts *ro, const char *id) {
        return admin_post_on("token revoke", ro, config, "/v1/admin/tokens", id, "revoke", NULL);
}

int cmd_token_revoke(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = admin_parse_plain("token revoke", argc, argv, &config, &ro, 1, "a token id",
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
