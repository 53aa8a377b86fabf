/* The admin commands, written once (cli/common/): each parses its
 * options, builds its request to the admin API, makes it on the
 * connection its options ask for (admin-conn.h) and prints the answer.
 * Both hwid (the device's) and hwid-admin (the CA host's) run them. */
#pragma once

int cmd_token_create(int argc, char **argv);
int cmd_token_list(int argc, char **argv);
int cmd_token_revoke(int argc, char **argv);
int cmd_request_list(int argc, char **argv);
int cmd_request_approve(int argc, char **argv);
int cmd_request_deny(int argc, char **argv);
int cmd_cert_list(int argc, char **argv);
int cmd_cert_show(int argc, char **argv);
int cmd_cert_revoke(int argc, char **argv);
int cmd_audit_list(int argc, char **argv);
int cmd_ek_add(int argc, char **argv);
int cmd_ek_import(int argc, char **argv);
int cmd_ek_list(int argc, char **argv);
int cmd_ek_remove(int argc, char **argv);
int cmd_identity_list(int argc, char **argv);
int cmd_identity_release(int argc, char **argv);

/* The command table's entries (cli-main.h's cli_command) of the admin
 * commands, for both programs' tables: one list, so that hwid and
 * hwid-admin cannot come to differ in a name or a summary. */
#define ADMIN_COMMANDS \
        { "token", "create", cmd_token_create, "create a bootstrap token and print the join command" }, \
        { "token", "list", cmd_token_list, "list bootstrap tokens" }, \
        { "token", "revoke", cmd_token_revoke, "revoke a bootstrap token" }, \
        { "request", "list", cmd_request_list, "list requests waiting for approval" }, \
        { "request", "approve", cmd_request_approve, "approve a pending request" }, \
        { "request", "deny", cmd_request_deny, "deny a pending request" }, \
        { "cert", "list", cmd_cert_list, "list issued certificates" }, \
        { "cert", "show", cmd_cert_show, "show an issued certificate" }, \
        { "cert", "revoke", cmd_cert_revoke, "revoke a certificate (by serial or identity)" }, \
        { "audit", "list", cmd_audit_list, "show the CA's audit log" }, \
        { "ek", "add", cmd_ek_add, "let a TPM (by its EK) enroll one name without a token" }, \
        { "ek", "import", cmd_ek_import, "add a factory manifest of TPMs to the EK allowlist" }, \
        { "ek", "list", cmd_ek_list, "list the EK allowlist" }, \
        { "ek", "remove", cmd_ek_remove, "take a TPM off the EK allowlist" }, \
        { "identity", "list", cmd_identity_list, "list the identities bound to the TPM that attested them" }, \
        { "identity", "release", cmd_identity_release, "set an identity free of its TPM (a replaced TPM or board)" }

/* The CA host's own operations (hwid-admin's, cli/admin/), each entry's
 * function RUN(cmd_...): hwid-admin's runs it, hwid's hands the command
 * line over (RUN ignoring its argument, so hwid names none of them). */
#define HOST_COMMANDS(RUN) \
        { "ca", "init", RUN(cmd_ca_init), "create the CA (key in the HSM/TPM), hwidd's TLS identity and config" }, \
        { "ca", "import", RUN(cmd_ca_import), "install an intermediate CA certificate signed by an offline root" }, \
        { "ca", "token-key", RUN(cmd_ca_token_key), "make the key in the HSM/TPM that bootstrap tokens are derived with" }, \
        { "ca", "rollover", RUN(cmd_ca_rollover), "replace the CA key: prepare, import, activate, status, retire" }, \
        { "ca", "backup", RUN(cmd_ca_backup), "copy the CA's store consistently while hwidd runs" }, \
        { "ca", "restore", RUN(cmd_ca_restore), "put a backup of the store in place (hwidd stopped)" }, \
        { "store", "migrate", RUN(cmd_store_migrate), "copy a SQLite store into PostgreSQL (several hwidd replicas)" }, \
        { "audit", "verify", RUN(cmd_audit_verify), "check the audit log's hash chain (tampering)" }
