/* What the two halves of the hwid command line share (cli/, the device's
 * hwid; cli/admin/, the CA host's hwid-admin): one file per subcommand,
 * each exporting cmd_<name>(argc, argv) and returning the process exit
 * code (0 success, 1 operational failure, 2 usage error). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hsm.h"

#define EXIT_USAGE 2
/* The identity is revoked or expired: the device must join again. */
#define EXIT_BOOTSTRAP 4

/* Prints "hwid: <detail of r>" (one line) and returns the exit code for r. */
int cli_fail(int r);
/* Prints a usage error naming the subcommand and returns EXIT_USAGE. */
int cli_usage(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Usage error for the option getopt just refused (opterr is off, so
 * this is the only line printed). */
int cli_bad_option(const char *cmd, char **argv);
/* Parses a duration option ("30s", "5m", "2h"; a bare number is seconds)
 * of at least min seconds; a usage error naming cmd and opt otherwise. */
int cli_duration(const char *cmd, const char *opt, const char *s, int64_t min, int64_t *ret);
/* Most --server options a command takes (failover between replicas). */
#define CLI_MAX_SERVERS 8
/* Adds url (a --server) to list, which holds *n and room for
 * CLI_MAX_SERVERS and a NULL; a usage error for a URL that is not
 * https://, a duplicate or one too many. */
int cli_add_server(const char *cmd, const char *url, const char *list[CLI_MAX_SERVERS + 1], size_t *n);
/* Fills hsm options from --tcti (may be NULL). */
void cli_hsm_options(hsm_options *o, const char *tcti);
/* A TPM without a resource manager serves one program at a time:
 * /dev/tpm0 while another holds it open (a running hwidd does, for good),
 * swtpm while another is in the middle of a command; until then, a
 * command sent to it never returns.  cli_tpm_reachable() asks it a
 * harmless question (hwid_tpm_ping()) with a watchdog armed: after
 * CLI_TPM_WAIT seconds without an answer, the process says so on stderr
 * and exits 1, having sent nothing that could leave an object in the
 * TPM.  The watchdog stays armed for the command's first real operation,
 * until cli_tpm_done(). */
#define CLI_TPM_WAIT 10
#define CLI_TPM_HELD_HINT                                                                                        \
        "another program holds the TPM (without a resource manager, /dev/tpm0 and swtpm serve one at a time, "   \
        "and a running hwidd holds /dev/tpm0 for good): stop it first, or create tokens through hwidd (hwid "    \
        "token create --dir DIR, or --cert FILE --key URI)"
int cli_tpm_reachable(const char *cmd, const hsm_options *o);
void cli_tpm_done(void);
/* The custody attributes a device reports for a key ("backend:",
 * "location:", "custody:" lines; hwid key show, hwid ca token-key). */
void cli_print_custody(const hwid_custody *c);
/* Writes text to path atomically (mode 0644), or to stdout when path is NULL. */
int cli_write_output(const char *path, const char *text);
/* "2026-11-21 21:45Z" */
void format_time(int64_t t, char *out, size_t n);

/* hwidd's configuration, which the CA host's commands work with. */
#define DEFAULT_CONFIG "/etc/hwid/hwidd.yaml"
/* The --config line of the admin commands' help. */
#define CONFIG_HELP "  -c, --config FILE    hwidd configuration (default $HWID_CONFIG or " DEFAULT_CONFIG ")\n"
/* --config, else $HWID_CONFIG, else DEFAULT_CONFIG. */
const char *admin_config_path(const char *opt);
