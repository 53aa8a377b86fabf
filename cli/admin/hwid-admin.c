/* hwid-admin: the CA host's half of hwid, installed with hwidd (in
 * libexec, for hwid to run: `hwid token create --config F` runs
 * `hwid-admin token create --config F`).  It holds the offline operations
 * on the CA's files, keys and store, and connects the admin commands --
 * the very ones hwid has (cli/common/) -- to the store of hwidd's
 * configuration through the admin API in process (host-conn.c). */
#include "admin-cmd.h"
#include "cli-main.h"
#include "cli.h"
#include "host-cmd.h"
#include "log.h"

/* A host command's entry in hwid-admin's table: run here. */
#define RUN_HERE(cmd) cmd

static const cli_command commands[] = {
        HOST_COMMANDS(RUN_HERE),
        ADMIN_COMMANDS,
};

static const cli_program hwid_admin = {
        .name = "hwid-admin",
        .about = "The CA host's commands of hwid (hwid runs them: see hwid --help and hwid(1)).",
        .more = "Run 'hwid COMMAND --help' for a command's options.\n"
                "Exit codes: 0 success, 1 failure (reason on stderr), 2 usage error.\n",
        .commands = commands,
        .n_commands = ELEMENTSOF(commands),
};

int main(int argc, char **argv) {
        /* Every refusal reaches the administrator whole, in the command's
         * one line on stderr (host-conn.c): the CA's log lines would only
         * repeat it. */
        log_set_max_level(LOG_LVL_ERR - 1);
        admin_conn_set_local(host_conn_open);
        return cli_main(&hwid_admin, argc, argv);
}
