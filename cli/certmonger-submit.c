/* certmonger-submit: hwid's CA helper for certmonger (getcert add-ca -e),
 * installed to libexec: certmonger runs it, people rarely do.  It speaks
 * certmonger's protocol, not hwid's: the operation and the request come in
 * the environment, the answer goes to standard output, and the exit code
 * is certmonger's (provisioning/certmonger.h). */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "certmonger.h"
#include "cli.h"
#include "error.h"
#include "join.h"

#define PROG "certmonger-submit"

static void usage(FILE *f) {
        fprintf(f, "Usage: " PROG " --server URL --ca-hash sha256:HEX --key URI [--key URI...]\n"
                   "       [--token-file FILE] [--tcti TCTI] [--timeout SECONDS]\n\n"
                   "hwid's CA helper for certmonger: getcert add-ca -c hwid -e '" PROG " ...'.\n"
                   "certmonger makes the key and the request; hwid carries a request only for a key\n"
                   "in a TPM or HSM: its public key must be one of the --key keys (certmonger's own\n"
                   "keys are in software and are refused). The first request enrolls with the\n"
                   "bootstrap token; later ones renew over mutual TLS with the certificate's key.\n\n"
                   "  -s, --server URL       hwidd, e.g. https://ca.example:8443; repeat it for\n"
                   "                         replicas of one CA (tried in order)\n"
                   "      --ca-hash PIN      sha256:<hex> of the CA's public key (hwid ca hash)\n"
                   "  -k, --key URI          a key certmonger's requests may use, e.g.\n"
                   "                         tpm2:file=/var/lib/hwid/certmonger/web.tss2.pem (the\n"
                   "                         file given to getcert request -k); repeat it, up to %d\n"
                   "      --token-file FILE  the bootstrap token for first enrollments\n"
                   "      --tcti TCTI        the TPM (default: the tpm2-tss default; certmonger\n"
                   "                         clears the environment, so $HWID_TCTI is not seen)\n"
                   "      --timeout SECONDS  for each HTTP request (default 30)\n"
                   "      --version          print the version\n"
                   "  -h, --help             show this help\n\n"
                   "Environment (set by certmonger): CERTMONGER_OPERATION (SUBMIT, POLL, IDENTIFY,\n"
                   "FETCH-ROOTS, GET-NEW-REQUEST-REQUIREMENTS, GET-RENEW-REQUEST-REQUIREMENTS; others\n"
                   "exit 6), CERTMONGER_CSR, CERTMONGER_CERTIFICATE, CERTMONGER_CA_COOKIE.\n\n"
                   "Exit codes (certmonger's): 0 issued (the certificate on standard output), 2\n"
                   "rejected, 3 unreachable (certmonger retries), 4 not configured (also for a bad\n"
                   "command line), 5 later (a delay in seconds and a cookie), 6 not supported.\n",
                CERTMONGER_MAX_KEYS);
}

/* A bad command line is certmonger's "underconfigured": the message on
 * standard output, where certmonger records it, and on standard error. */
static int misconfigured(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int misconfigured(const char *fmt, ...) {
        va_list ap, aq;

        va_start(ap, fmt);
        va_copy(aq, ap);
        printf(PROG ": ");
        vprintf(fmt, ap);
        printf(" (see " PROG " --help)\n");
        fprintf(stderr, PROG ": ");
        vfprintf(stderr, fmt, aq);
        fprintf(stderr, "\n");
        va_end(aq);
        va_end(ap);
        return CERTMONGER_UNDERCONFIGURED;
}

static void note(void *ud, const char *message) {
        fprintf(stderr, PROG ": %s\n", message);
}

static const char *servers[CLI_MAX_SERVERS + 1];
static const char *keys[CERTMONGER_MAX_KEYS + 1];

static int add(const char **list, size_t *n, size_t max, const char *what, const char *v) {
        for (size_t i = 0; i < *n; i++)
                if (strcmp(list[i], v) == 0)
                        return misconfigured("%s is given twice", what);
        if (*n >= max)
                return misconfigured("too many %s options", what);
        list[(*n)++] = v;
        list[*n] = NULL;
        return 0;
}

static int parse(int argc, char **argv, certmonger_opts *o) {
        static const struct option opts[] = {
                { "server", required_argument, NULL, 's' },     { "ca-hash", required_argument, NULL, 'H' },
                { "key", required_argument, NULL, 'k' },        { "token-file", required_argument, NULL, 'F' },
                { "tcti", required_argument, NULL, 'C' },       { "timeout", required_argument, NULL, 't' },
                { "version", no_argument, NULL, 'V' },          { "help", no_argument, NULL, 'h' },
                {},
        };
        size_t n_servers = 0, n_keys = 0;
        char *end;
        int c, r = 0;

        while (r == 0 && (c = getopt_long(argc, argv, "s:k:h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        r = strncmp(optarg, "https://", 8) != 0 ? misconfigured("--server %s is not https://", optarg)
                                                               : add(servers, &n_servers, CLI_MAX_SERVERS, "--server", optarg);
                        break;
                case 'H': o->ca_hash = optarg; break;
                case 'k': r = add(keys, &n_keys, CERTMONGER_MAX_KEYS, "--key", optarg); break;
                case 'F': o->token_file = optarg; break;
                case 'C': o->tcti = optarg; break;
                case 't':
                        o->http_timeout = strtol(optarg, &end, 10);
                        if (*end || o->http_timeout < 1 || o->http_timeout > 3600)
                                r = misconfigured("--timeout must be 1 to 3600 seconds, not '%s'", optarg);
                        break;
                case 'V': printf("hwid %s\n", HWID_VERSION); exit(0);
                case 'h': usage(stdout); exit(0);
                default: return misconfigured("option '%s' is unknown or needs a value", argv[optind - 1]);
                }
        }
        if (r == 0 && (!n_servers || !o->ca_hash || !n_keys || optind != argc))
                r = misconfigured("needs --server, --ca-hash and --key, and no other arguments");
        if (r == 0 && !ca_hash_valid(o->ca_hash))
                r = misconfigured("--ca-hash must be sha256:<64 lower-case hex digits>, not '%s'", o->ca_hash);
        o->servers = servers;
        o->keys = keys;
        return r;
}

int main(int argc, char **argv) {
        certmonger_opts o = { .http_timeout = 30, .version = HWID_VERSION, .note = note };
        certmonger_call call = {
                .operation = getenv("CERTMONGER_OPERATION"),
                .csr = getenv("CERTMONGER_CSR"),
                .certificate = getenv("CERTMONGER_CERTIFICATE"),
                .cookie = getenv("CERTMONGER_CA_COOKIE"),
        };
        certmonger_answer a;
        int r;

        setenv("TSS2_LOG", "all+NONE", 0); /* failures are reported in one line, by us */
        /* certmonger's children read the system's OpenSSL configuration (it
         * clears the environment), which for certmonger's own use of the
         * TPM key prefers the tpm2 provider (docs/USING.md); hwid reaches
         * its keys through its own provider and wants none of that. */
        if (OPENSSL_init_crypto(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) != 1)
                return misconfigured("OpenSSL did not start");
        opterr = 0;
        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        if (certmonger_run(&o, &call, &a) < 0) {
                printf("%s\n", hwid_strerror(-HWID_E_NOMEM));
                return CERTMONGER_UNREACHABLE;
        }
        if (a.output)
                fputs(a.output, stdout);
        if (a.status == CERTMONGER_WAIT_WITH_DELAY)
                fprintf(stderr, PROG ": come back in %.*s s\n", (int) strcspn(a.output, "\n"), a.output);
        else if (a.status != CERTMONGER_ISSUED && a.output)
                fprintf(stderr, PROG ": %s", a.output);
        r = fflush(stdout) == 0 ? (int) a.status : CERTMONGER_UNREACHABLE;
        certmonger_answer_clear(&a);
        return r;
}
