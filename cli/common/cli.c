#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "duration.h"
#include "error.h"
#include "fsutil.h"

int cli_fail(int r) {
        fprintf(stderr, "hwid: %s\n", hwid_strerror(r));
        return hwid_err_exit_code(r);
}

int cli_usage(const char *cmd, const char *fmt, ...) {
        va_list ap;

        fprintf(stderr, "hwid %s: ", cmd);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, " (see hwid %s --help)\n", cmd);
        return EXIT_USAGE;
}

int cli_bad_option(const char *cmd, char **argv) {
        const char *arg = optind > 0 ? argv[optind - 1] : "?";

        if (optopt && optopt != '?')
                return cli_usage(cmd, "option '-%c' is unknown or needs a value", optopt);
        return cli_usage(cmd, "option '%s' is unknown or needs a value", arg);
}

int cli_add_server(const char *cmd, const char *url, const char *list[CLI_MAX_SERVERS + 1], size_t *n) {
        if (strncmp(url, "https://", 8) != 0)
                return cli_usage(cmd, "--server must be an https:// URL");
        for (size_t i = 0; i < *n; i++)
                if (strcmp(list[i], url) == 0)
                        return cli_usage(cmd, "--server %s is given twice", url);
        if (*n >= CLI_MAX_SERVERS)
                return cli_usage(cmd, "at most %d --server options", CLI_MAX_SERVERS);
        list[(*n)++] = url;
        list[*n] = NULL;
        return 0;
}

int cli_duration(const char *cmd, const char *opt, const char *s, int64_t min, int64_t *ret) {
        _cleanup_free_ char *with_unit = NULL;
        int64_t v;

        /* A bare number is seconds. */
        if (s[0] && strspn(s, "0123456789") == strlen(s) && asprintf(&with_unit, "%ss", s) < 0)
                return cli_fail(hwid_fail(HWID_E_NOMEM, NULL));
        if (duration_parse(with_unit ? with_unit : s, &v) < 0 || v < min)
                return cli_usage(cmd, "%s must be a duration like 30s, 5m or 2h%s, not '%s'", opt,
                                 min > 0 ? "" : " (or 0)", s);
        *ret = v;
        return 0;
}

void cli_hsm_options(hsm_options *o, const char *tcti) {
        *o = (hsm_options) { .tcti = tcti };
}

static const char *yn(bool b) {
        return b ? "yes" : "no";
}

void cli_print_custody(const hwid_custody *c) {
        printf("backend: %s\nlocation: %s\n", c->backend, c->location);
        if (c->backend[0] == 'p') {
                printf("custody: sensitive=%s always-sensitive=%s extractable=%s never-extractable=%s "
                       "local=%s value-readable=%s\n",
                       yn(c->sensitive), yn(c->always_sensitive), yn(c->extractable),
                       yn(c->never_extractable), yn(c->local), yn(c->value_readable));
                return;
        }
        printf("custody: fixedTPM=%s fixedParent=%s sensitiveDataOrigin=%s userWithAuth=%s sign=%s "
               "decrypt=%s restricted=%s noDA=%s\ntpm-attributes: 0x%08x\n",
               yn(c->fixed_tpm), yn(c->fixed_parent), yn(c->sensitive_data_origin),
               yn(c->user_with_auth), yn(c->sign), yn(c->decrypt), yn(c->restricted), yn(c->no_da),
               c->tpm_attributes);
}

int cli_write_output(const char *path, const char *text) {
        if (!path) {
                fputs(text, stdout);
                return fflush(stdout) == 0 ? 0 : hwid_fail(HWID_E_IO, "cannot write to standard output");
        }
        return write_file_atomic(path, text, strlen(text), 0644);
}

void format_time(int64_t t, char *out, size_t n) {
        time_t tt = (time_t) t;
        struct tm tm;

        strftime(out, n, "%Y-%m-%d %H:%MZ", gmtime_r(&tt, &tm));
}

const char *admin_config_path(const char *opt) {
        const char *env = getenv("HWID_CONFIG");

        return opt ? opt : env && *env ? env : DEFAULT_CONFIG;
}

/* ---- a TPM that serves someone else ---- */

static char tpm_silent_msg[512];

static void tpm_silent(int sig) {
        (void) sig;
        (void) !write(STDERR_FILENO, tpm_silent_msg, strlen(tpm_silent_msg));
        _exit(1);
}

int cli_tpm_reachable(const char *cmd, const hsm_options *o) {
        char prev[512];
        int r;

        snprintf(tpm_silent_msg, sizeof(tpm_silent_msg), "hwid %s: the TPM did not answer in %d s: " CLI_TPM_HELD_HINT
                 "\n", cmd, CLI_TPM_WAIT);
        signal(SIGALRM, tpm_silent);
        alarm(CLI_TPM_WAIT);
        r = hwid_tpm_ping(o);
        if (r != -HWID_E_TPM_UNREACHABLE)
                return r;
        alarm(0);
        snprintf(prev, sizeof(prev), "%s", hwid_strerror(r));
        return hwid_fail(HWID_E_TPM_UNREACHABLE, "%s; " CLI_TPM_HELD_HINT, prev);
}

void cli_tpm_done(void) {
        alarm(0);
}
