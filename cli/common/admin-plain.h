/* What the plain admin commands share (token list|revoke, ek list|remove,
 * identity list|release): a command line of --config, the remote options
 * and a fixed number of arguments; a listing fetched as one array. */
#pragma once

#include <json-c/json.h>

#include "remote.h"

/* Parses cmd's options into config and ro; exactly nargs arguments must
 * follow (else the usage error "cmd needs ARG_NAME" or "takes no
 * arguments", exit code 2); --help prints help and the options, exits 0.
 * Returns 0, or what cli_usage()/cli_bad_option() return. */
int admin_parse_plain(const char *cmd, int argc, char **argv, const char **config, remote_opts *ro, int nargs,
                      const char *arg_name, const char *help);

/* GET path on cmd's connection (admin_conn_open()); *ret_answer (owned:
 * json_object_put() it) holds the array under key, *ret_list. */
int admin_get_list(const char *cmd, const remote_opts *ro, const char *config, const char *path, const char *key,
                   json_object **ret_answer, json_object **ret_list);

/* Each element of list through print, in order; the first error ends it. */
int admin_print_each(json_object *list, int (*print)(json_object *e));

/* POST <collection>/<name, escaped>/<action> on cmd's connection, with no
 * body; *ret_answer (owned; NULL: not wanted) the answer. */
int admin_post_on(const char *cmd, const remote_opts *ro, const char *config, const char *collection,
                  const char *name, const char *action, json_object **ret_answer);
