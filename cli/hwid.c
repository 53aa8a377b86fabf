/* hwid: one command line for the CA admin and for devices. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ca-rollover.h"
#include "cli.h"
#include "error.h"

typedef struct command {
        const char *group; /* NULL for top-level commands */
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
} command;

static const command commands[] = {
        { "key", "create", cmd_key_create, "generate a key inside a TPM or PKCS#11 token" },
        { "key", "show", cmd_key_show, "show a key's public part, fingerprint and custody" },
        { NULL, "csr", cmd_csr, "build a certificate request signed inside the device" },
        { "ca", "init", cmd_ca_init, "create the CA (key in the HSM/TPM), hwidd's TLS identity and config" },
        { "ca", "import", cmd_ca_import, "install an intermediate CA certificate signed by an offline root" },
        { "ca", "hash", cmd_ca_hash, "print the CA pin (sha256 of the SubjectPublicKeyInfo)" },
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
        { NULL, "join", cmd_join, "enroll this device with a bootstrap token" },
        { NULL, "renew", cmd_renew, "renew this device's certificate once" },
        { NULL, "agent", cmd_agent, "keep this device's certificate renewed, unattended" },
        { NULL, "factory", cmd_factory, "enroll many devices at once (factory station)" },
        { "jws", "sign", cmd_jws_sign, "sign a JWS/JWT with this device's identity (key in the TPM/HSM)" },
        { "jws", "verify", cmd_jws_verify, "verify a JWS signed with a device identity, against the CA" },
};

static void help(FILE *f) {
        fprintf(f, "Usage: hwid COMMAND [ARGS...]\n\n"
                   "Hardware-backed identities: keys live in a TPM or HSM and never leave it.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                char full[64];
                snprintf(full, sizeof(full), "%s%s%s", commands[i].group ? commands[i].group : "",
                         commands[i].group ? " " : "", commands[i].name);
                fprintf(f, "  %-16s %s\n", full, commands[i].summary);
        }
        fprintf(f, "\nKey URIs:\n"
                   "  pkcs11:token=LABEL;object=LABEL?pin-source=file:/path   (RFC 7512, via p11-kit)\n"
                   "  tpm2:file=/path/key.tss2.pem | tpm2:handle=0x81000001  (TPM via $HWID_TCTI or --tcti)\n"
                   "\nRun 'hwid COMMAND --help' for a command's options.\n"
                   "Exit codes: 0 success, 1 failure (reason on stderr), 2 usage error.\n");
}

static const command *find(const char *group, const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
                const command *c = &commands[i];
                if (c->group ? (group && name && strcmp(c->group, group) == 0 && strcmp(c->name, name) == 0)
                             : (strcmp(c->name, group) == 0))
                        return c;
        }
        return NULL;
}

static int group_usage(const char *group) {
        fprintf(stderr, "hwid %s: needs a subcommand:", group);
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (commands[i].group && strcmp(commands[i].group, group) == 0)
                        fprintf(stderr, " %s", commands[i].name);
        fprintf(stderr, " (see hwid --help)\n");
        return EXIT_USAGE;
}

static bool is_group(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(commands); i++)
                if (commands[i].group && strcmp(commands[i].group, s) == 0)
                        return true;
        return false;
}

int main(int argc, char **argv) {
        const command *c;

        /* tpm2-tss prints its own warnings to stderr; hwid reports every
         * failure itself in one line, so silence it unless asked for. */
        setenv("TSS2_LOG", "all+NONE", 0);
        opterr = 0; /* every usage error is one line, printed by cli_usage() */
        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                help(argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : 0;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("hwid %s\n", HWID_VERSION);
                return 0;
        }
        if (is_group(argv[1])) {
                c = argc > 2 ? find(argv[1], argv[2]) : NULL;
                if (!c)
                        return group_usage(argv[1]);
                return c->run(argc - 2, argv + 2);
        }
        c = find(argv[1], NULL);
        if (!c) {
                fprintf(stderr, "hwid: unknown command '%s' (see hwid --help)\n", argv[1]);
                return EXIT_USAGE;
        }
        return c->run(argc - 1, argv + 1);
}
