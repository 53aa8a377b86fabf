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

static const cli_command commands[] = {
        { "ca", "init", cmd_ca_init, "create the CA (key in the HSM/TPM), hwidd's TLS identity and config" },
        { "ca", "import", cmd_ca_import, "install an intermediate CA certificate signed by an offline root" },
        { "ca", "token-key", cmd_ca_token_key, "make the key in the HSM/TPM that bootstrap tokens are derived with" },
        { "ca", "rollover", cmd_ca_rollover, "replace the CA key: prepare, import, activate, status, retire" },
        { "ca", "backup", cmd_ca_backup, "copy the CA's store consistently while hwidd runs" },
        { "ca", "restore", cmd_ca_restore, "put a backup of the store in place (hwidd stopped)" },
        { "store", "migrate", cmd_store_migrate, "copy a SQLite store into PostgreSQL (several hwidd replicas)" },
        { "token", "create", cmd_token_create, "create a bootstrap token and print the join command" },
        { "token", "list", cmd_token_list, "list bootstrap tokens" },
        { "token", "revoke", cmd_token_revoke, "revoke a bootstrap token" },
        { "request", "list", cmd_request_list, "list requests waiting for approval" },
        { "request", "approve", cmd_request_approve, "approve a pending request" },
        { "request", "deny", cmd_request_deny, "deny a pending request" },
        { "cert", "list", cmd_cert_list, "list issued certificates" },
        { "cert", "show", cmd_cert_show, "show an issued certificate" },
        { "cert", "revoke", cmd_cert_revoke, "revoke a certificate (by serial or identity)" },
        { "audit", "list", cmd_audit_list, "show the CA's audit log" },
        { "audit", "verify", cmd_audit_verify, "check the audit log's hash chain (tampering)" },
        { "ek", "add", cmd_ek_add, "let a TPM (by its EK) enroll one name without a token" },
        { "ek", "import", cmd_ek_import, "add a factory manifest of TPMs to the EK allowlist" },
        { "ek", "list", cmd_ek_list, "list the EK allowlist" },
        { "ek", "remove", cmd_ek_remove, "take a TPM off the EK allowlist" },
        { "identity", "list", cmd_identity_list, "list the identities bound to the TPM that attested them" },
        { "identity", "release", cmd_identity_release, "set an identity free of its TPM (a replaced TPM or board)" },
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
