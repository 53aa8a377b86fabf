/* What the plain admin commands share (admin-plain.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin-answer.h"
#include "admin-conn.h"
#include "admin-plain.h"
#include "cli.h"
#include "error.h"

int admin_parse_plain(const char *cmd, int argc, char **argv, const char **config, remote_opts *ro, int nargs,
                      const char *arg_name, const char *help) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c;

        *ro = (remote_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *config = optarg; break;
                case 'h': printf("%s\n" CONFIG_HELP "  -h, --help           show this help\n" REMOTE_HELP, help);
                        exit(0);
                default:
                        if (!remote_option(ro, c, optarg))
                                return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return nargs ? cli_usage(cmd, "needs %s", arg_name ? arg_name : "an argument")
                             : cli_usage(cmd, "takes no arguments");
        return remote_check_usage(cmd, ro, *config, false);
}

int admin_get_list(const char *cmd, const remote_opts *ro, const char *config, const char *path, const char *key,
                   json_object **ret_answer, json_object **ret_list) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        int r;

        if ((r = admin_conn_open(cmd, ro, config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "GET", path, NULL, &answer)) < 0 || (r = answer_list(answer, key, ret_list)) < 0)
                return r;
        *ret_answer = TAKE_PTR(answer);
        return 0;
}

int admin_print_each(json_object *list, int (*print)(json_object *e)) {
        int r = 0;

        for (size_t i = 0; r >= 0 && i < json_object_array_length(list); i++)
                r = print(json_object_array_get_idx(list, i));
        return r;
}

int admin_post_on(const char *cmd, const remote_opts *ro, const char *config, const char *collection,
                  const char *name, const char *action, json_object **ret_answer) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(name), *path = NULL;
        int r;

        if (!esc || asprintf(&path, "%s/%s/%s", collection, esc, action) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_conn_open(cmd, ro, config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "POST", path, NULL, &answer)) < 0)
                return r;
        if (ret_answer)
                *ret_answer = TAKE_PTR(answer);
        return 0;
}
