/* hwid token list / hwid token revoke ID: on the CA host (--config), or
 * against a remote hwidd's admin API as an operator (--dir, --cert/--key). */
#include <getopt.h>
#include <stdio.h>
#include <time.h>

#include "admin.h"
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

static void print_tokens(const store_token *t, size_t n, int64_t now) {
        printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", "ID", "STATE", "PROFILE", "USES", "EXPIRES", "NAME-PATTERN");
        for (size_t i = 0; i < n; i++) {
                char exp[32], uses[16];
                format_time(t[i].expires_at, exp, sizeof(exp));
                snprintf(uses, sizeof(uses), "%d/%d", t[i].uses_total - t[i].uses_left, t[i].uses_total);
                printf("%-6s  %-8s  %-12s  %-9s  %-17s  %s\n", t[i].id,
                       admin_token_state_name(store_token_state_at(&t[i], now)), t[i].profile, uses, exp,
                       t[i].name_pattern ? t[i].name_pattern : "*");
        }
}

/* The tokens of a remote hwidd, as the store would give them. */
static int remote_tokens(const remote_opts *ro, store_token **ret, size_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *list;
        store_token *t;
        size_t n = 0;
        int r;

        if ((r = remote_open(ro, &rm)) < 0 || (r = remote_call(rm, "GET", "/v1/admin/tokens", NULL, &answer)) < 0 ||
            (r = remote_list(answer, "tokens", &list)) < 0)
                return r;
        if (!(t = calloc(json_object_array_length(list) + 1, sizeof(*t))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < json_object_array_length(list); n += r >= 0)
                r = admin_json_to_token(json_object_array_get_idx(list, n), &t[n]);
        if (r < 0) {
                store_token_list_free(t, n);
                return r;
        }
        *ret = t;
        *ret_n = n;
        return 0;
}

static int local_tokens(const char *config, store_token **ret, size_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(config, &cfg, &s);

        return r < 0 ? r : store_token_list(s, ret, ret_n);
}

int cmd_token_list(int argc, char **argv) {
        const char *config = NULL;
        store_token *t = NULL;
        remote_opts ro;
        size_t n = 0;
        int r;

        if ((r = parse("token list", argc, argv, &config, &ro, 0,
                       "Usage: hwid token list [--config FILE]\n"
                       "       hwid token list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                       "Lists bootstrap tokens (never their secrets).  Remotely: the admin and auditor roles.\n")) != 0)
                return r;
        r = remote_wanted(&ro) ? remote_tokens(&ro, &t, &n) : local_tokens(config, &t, &n);
        if (r < 0)
                return cli_fail(r);
        print_tokens(t, n, (int64_t) time(NULL));
        store_token_list_free(t, n);
        return 0;
}

static int remote_revoke(const remote_opts *ro, const char *id) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(id), *path = NULL;
        int r;

        if (!esc || asprintf(&path, "/v1/admin/tokens/%s/revoke", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = remote_open(ro, &rm)) < 0)
                return r;
        return remote_call(rm, "POST", path, NULL, &answer);
}

static int local_revoke(const char *config, const char *id) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(config, &cfg, &s);

        return r < 0 ? r : admin_audit(s, "token.revoke", id, store_token_revoke(s, id), NULL);
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
        r = remote_wanted(&ro) ? remote_revoke(&ro, argv[optind]) : local_revoke(config, argv[optind]);
        if (r < 0)
                return cli_fail(r);
        printf("token %s revoked\n", argv[optind]);
        return 0;
}
