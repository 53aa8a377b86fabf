/* hwid: the command line of devices, and of the CA's administrators.
 *
 * This program holds no store, issuer or CA code.  The device's commands
 * run here; the admin commands too, against a remote hwidd's admin API
 * (--dir DIR, --cert FILE --key URI).  What works on the CA host itself
 * -- the offline operations (ca init, ca backup, ...) and the admin
 * commands on the store of hwidd's configuration (--config, or no
 * operator identity) -- is hwid-admin's, which the package hwidd
 * installs: hwid hands it the whole command line, as typed, and it runs
 * the same command there (git's way with its subcommands). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "admin-cmd.h"
#include "admin-conn.h"
#include "cli-main.h"
#include "cli.h"
#include "device-cmd.h"
#include "error.h"

/* Where the package hwidd installs hwid-admin. */
#ifndef HWID_ADMIN_PATH
#define HWID_ADMIN_PATH "/usr/libexec/hwid/hwid-admin"
#endif

/* $HWID_ADMIN; else hwid-admin beside this program (a build tree);
 * else where the package installs it. */
static const char *host_program(char *buf, size_t size) {
        const char *env = getenv("HWID_ADMIN");
        ssize_t n = readlink("/proc/self/exe", buf, size - 1);
        char *slash;

        if (env && *env)
                return env;
        if (n > 0) {
                buf[n] = '\0';
                slash = strrchr(buf, '/');
                if (slash && (size_t) (slash - buf) + sizeof("/hwid-admin") <= size) {
                        strcpy(slash + 1, "hwid-admin");
                        if (access(buf, X_OK) == 0)
                                return buf;
                }
        }
        return HWID_ADMIN_PATH;
}

/* Runs the whole command line on hwid-admin; returns only if it cannot.
 * admin: an admin command, which also works remotely. */
static int exec_host(const char *cmd, bool admin) {
        char buf[4096];
        const char *prog = host_program(buf, sizeof(buf));
        int e;

        fflush(stdout);
        execv(prog, cli_argv());
        e = errno;
        if (e != ENOENT)
                return hwid_fail(HWID_E_IO, "cannot run %s: %s", prog, strerror(e));
        return hwid_fail(HWID_E_NOT_FOUND, "%s%s runs on the CA host: install the package hwidd there (it holds "
                         "hwid-admin, which is not at %s)%s", cmd,
                         admin ? " with --config (or without --dir or --cert)" : "", prog,
                         admin ? "; from anywhere, give an operator's identity for a remote hwidd (--dir DIR, or "
                                 "--cert FILE --key URI)" : "");
}

/* The admin commands' connection to the CA host's store: hwid-admin's. */
static int local_conn(const char *cmd, const char *config, const remote_opts *o, unsigned flags, admin_conn **ret) {
        return exec_host(cmd, true);
}

/* The offline operations: hwid-admin's alone (argv[0] "init" of "ca init"). */
static int host_only(int argc, char **argv) {
        char **all = cli_argv();
        char cmd[64];

        snprintf(cmd, sizeof(cmd), "%s%s%s", argv == all + 2 ? all[1] : "", argv == all + 2 ? " " : "", argv[0]);
        return cli_fail(exec_host(cmd, false));
}

static const cli_command commands[] = {
        { "key", "create", cmd_key_create, "generate a key inside a TPM or PKCS#11 token" },
        { "key", "show", cmd_key_show, "show a key's public part, fingerprint and custody" },
        { NULL, "csr", cmd_csr, "build a certificate request signed inside the device" },
        { "ca", "init", host_only, "create the CA (key in the HSM/TPM), hwidd's TLS identity and config" },
        { "ca", "import", host_only, "install an intermediate CA certificate signed by an offline root" },
        { "ca", "hash", cmd_ca_hash, "print the CA pin (sha256 of the SubjectPublicKeyInfo)" },
        { "ca", "token-key", host_only, "make the key in the HSM/TPM that bootstrap tokens are derived with" },
        { "ca", "rollover", host_only, "replace the CA key: prepare, import, activate, status, retire" },
        { "ca", "backup", host_only, "copy the CA's store consistently while hwidd runs" },
        { "ca", "restore", host_only, "put a backup of the store in place (hwidd stopped)" },
        { "store", "migrate", host_only, "copy a SQLite store into PostgreSQL (several hwidd replicas)" },
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
        { "audit", "verify", host_only, "check the audit log's hash chain (tampering)" },
        { "ek", "add", cmd_ek_add, "let a TPM (by its EK) enroll one name without a token" },
        { "ek", "import", cmd_ek_import, "add a factory manifest of TPMs to the EK allowlist" },
        { "ek", "list", cmd_ek_list, "list the EK allowlist" },
        { "ek", "remove", cmd_ek_remove, "take a TPM off the EK allowlist" },
        { "identity", "list", cmd_identity_list, "list the identities bound to the TPM that attested them" },
        { "identity", "release", cmd_identity_release, "set an identity free of its TPM (a replaced TPM or board)" },
        { NULL, "join", cmd_join, "enroll this device with a bootstrap token" },
        { NULL, "renew", cmd_renew, "renew this device's certificate once" },
        { NULL, "agent", cmd_agent, "keep this device's certificate renewed, unattended" },
        { NULL, "factory", cmd_factory, "enroll many devices at once (factory station)" },
        { "jws", "sign", cmd_jws_sign, "sign a JWS/JWT with this device's identity (key in the TPM/HSM)" },
        { "jws", "verify", cmd_jws_verify, "verify a JWS signed with a device identity, against the CA" },
};

static const cli_program hwid = {
        .name = "hwid",
        .about = "Hardware-backed identities: keys live in a TPM or HSM and never leave it.",
        .more = "On the CA host, hwid-admin (package hwidd) runs ca init, ca import, ca token-key,\n"
                "ca rollover, ca backup, ca restore, store migrate and audit verify, and the admin\n"
                "commands "
                "(token, request, cert, audit list, ek, identity) on the store of hwidd's\n"
                "configuration (--config, or no --dir or --cert): hwid hands them over.  With an\n"
                "operator's identity (--dir DIR, or --cert FILE --key URI), the admin commands go\n"
                "to a remote hwidd's admin API from here.\n"
                "\nKey URIs:\n"
                "  pkcs11:token=LABEL;object=LABEL?pin-source=file:/path   (RFC 7512, via p11-kit)\n"
                "  tpm2:file=/path/key.tss2.pem | tpm2:handle=0x81000001  (TPM via $HWID_TCTI or --tcti)\n"
                "\nRun 'hwid COMMAND --help' for a command's options.\n"
                "Exit codes: 0 success, 1 failure (reason on stderr), 2 usage error.\n",
        .commands = commands,
        .n_commands = ELEMENTSOF(commands),
};

int main(int argc, char **argv) {
        admin_conn_set_local(local_conn);
        return cli_main(&hwid, argc, argv);
}
