/* hwid token list / hwid token revoke ID */
#include <getopt.h>
#include <stdio.h>
#include <time.h>

#include "admin.h"
#include "cli.h"
#include "error.h"

static const char *state_name(store_token_state s) {
        static const char *names[] = { "active", "expired", "used-up", "revoked" };
        return names[s];
}

static int parse_config_only(const char *cmd, int argc, char **argv, const char **config, int nargs,
                             const char *help) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *config = optarg; break;
                case 'h': fputs(help, stdout); exit(0);
                default: return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs a token id" : "takes no arguments");
        return 0;
}

int cmd_token_list(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *config = NULL;
        int64_t now = (int64_t) time(NULL);
        store_token *t = NULL;
        size_t n = 0;
        int r;

        if ((r = parse_config_only("token list", argc, argv, &config, 0,
                                   "Usage: hwid token list [--config FILE]\n\nLists bootstrap tokens "
                                   "(never their secrets).\n\n" CONFIG_HELP)) != 0)
                return r;
        if ((r = admin_open(config, &cfg, &s)) < 0 || (r = store_token_list(s, &t, &n)) < 0)
                return cli_fail(r);
        printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", "ID", "STATE", "PROFILE", "USES", "EXPIRES", "NAME-PATTERN");
        for (size_t i = 0; i < n; i++) {
                char exp[32], uses[16];
                format_time(t[i].expires_at, exp, sizeof(exp));
                snprintf(uses, sizeof(uses), "%d/%d", t[i].uses_total - t[i].uses_left, t[i].uses_total);
                printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", t[i].id, state_name(store_token_state_at(&t[i], now)),
                       t[i].profile, uses, exp, t[i].name_pattern ? t[i].name_pattern : "*");
        }
        store_token_list_free(t, n);
        return 0;
}

int cmd_token_revoke(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *config = NULL;
        int r;

        if ((r = parse_config_only("token revoke", argc, argv, &config, 1,
                                   "Usage: hwid token revoke [--config FILE] ID\n\nRevokes a bootstrap "
                                   "token: it can no longer enroll anything.\n\n" CONFIG_HELP)) != 0)
                return r;
        if ((r = admin_open(config, &cfg, &s)) < 0)
                return cli_fail(r);
        r = admin_audit(s, "token.revoke", argv[optind], store_token_revoke(s, argv[optind]), NULL);
        if (r < 0)
                return cli_fail(r);
        printf("token %s revoked\n", argv[optind]);
        return 0;
}
