/* hwid factory: enroll many devices at once from a factory station. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "factory.h"
#include "tpm-attest.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid factory --server URL --ca-hash sha256:HEX --tokens FILE --devices FILE\n"
                   "                    [--parallel N] [--out-dir BASE] [--type TYPE] [--verbose]\n"
                   "                    [--attest [--ek ALG]]\n\n"
                   "Enrolls every device named in the devices file, N at a time, each with its own TPM:\n"
                   "the key is made inside that TPM, the CSR signed there, and one bootstrap token from\n"
                   "the tokens file (in order) is spent per device that needs one.  Devices already\n"
                   "enrolled are left alone; requests waiting for approval are not waited for (run the\n"
                   "station again after approval to collect them).  Tokens are never printed.\n\n"
                   "Devices file, one per line ('#' starts a comment):\n"
                   "  NAME TCTI KEY-URI [DIR]     e.g. edge-07 swtpm:host=10.0.0.7,port=2321 "
                   "tpm2:file=/srv/edge-07/device.tss2.pem\n"
                   "  TCTI '-' means $HWID_TCTI (or the tpm2-tss default); DIR defaults to BASE/NAME.\n\n"
                   "  -s, --server URL         hwidd, e.g. https://ca.example:8443; repeat it for\n"
                   "                           replicas of one CA (each device fails over in order,\n"
                   "                           as hwid join does)\n"
                   "      --ca-hash PIN        sha256:<hex> of the CA's public key (hwid ca hash)\n"
                   "      --tokens FILE        bootstrap tokens, one per line (hwid token create --count N --out FILE)\n"
                   "      --devices FILE       the devices\n"
                   "  -j, --parallel N         devices enrolled at once (default 4, at most %d)\n"
                   "      --out-dir BASE       base of the default DIRs (default .)\n"
                   "      --type TYPE          key type for keys created (default ec-p256)\n"
                   "  -v, --verbose            also print each step of each device\n"
                   "      --attest             each TPM proves to the CA that its device key lives in it\n"
                   "                           (hwid join --attest); --tokens is then optional: a device\n"
                   "                           without a token enrolls if its TPM is on the CA's EK\n"
                   "                           allowlist (hwid ek import)\n"
                   "      --ek ALG             the EK to attest with: auto (default), ecc-p256, rsa-2048,\n"
                   "                           ecc-p384\n"
                   "  -h, --help               show this help\n\n"
                   "Exit codes: 0 every device enrolled (or already), 1 otherwise, 2 usage.\n",
                FACTORY_MAX_PARALLEL);
}

typedef struct display {
        bool tty;
} display;

static void on_progress(void *ud, const char *message) {
        const factory_device *d = ud;

        fprintf(stderr, "%s%s: %s\n", isatty(STDERR_FILENO) ? "\r\033[K" : "", d->name, message);
}

/* One line per device as it finishes; on a terminal, a status line below
 * it that the next line overwrites. */
static void on_done(void *ud, const factory_report *rep, size_t i, size_t done) {
        const display *dp = ud;
        const factory_result *res = &rep->results[i];
        int width = snprintf(NULL, 0, "%zu", rep->n);

        fprintf(stderr, "%s[%*zu/%zu] %s %s (%.2fs)%s%s\n", dp->tty ? "\r\033[K" : "", width, done, rep->n,
                rep->devices[i].name, factory_outcome_name(res->outcome), res->seconds, res->reason ? ": " : "",
                res->reason ? res->reason : "");
        if (dp->tty && done < rep->n)
                fprintf(stderr, "  ... %zu enrolled, %zu already, %zu pending, %zu failed; %zu to go",
                        rep->counts[FACTORY_ENROLLED], rep->counts[FACTORY_ALREADY], rep->counts[FACTORY_PENDING],
                        rep->counts[FACTORY_FAILED], rep->n - done);
        fflush(stderr);
}

static void summary(const factory_report *rep) {
        printf("%zu device%s in %.1fs: %zu enrolled, %zu already enrolled, %zu pending, %zu failed\n", rep->n,
               rep->n == 1 ? "" : "s", rep->seconds, rep->counts[FACTORY_ENROLLED], rep->counts[FACTORY_ALREADY],
               rep->counts[FACTORY_PENDING], rep->counts[FACTORY_FAILED]);
        for (size_t i = 0; i < rep->n; i++) {
                const factory_result *res = &rep->results[i];
                const factory_device *d = &rep->devices[i];

                if (res->outcome == FACTORY_FAILED)
                        printf("failed: %s (line %u): %s\n", d->name, d->line, res->reason ? res->reason : "?");
                else if (res->outcome == FACTORY_PENDING)
                        printf("pending: %s (line %u): approve it, then run the station again\n", d->name, d->line);
        }
        fflush(stdout);
}

static const char *servers[CLI_MAX_SERVERS + 1];

static int parse(int argc, char **argv, factory_opts *o) {
        static const struct option opts[] = {
                { "server", required_argument, NULL, 's' }, { "ca-hash", required_argument, NULL, 'H' },
                { "tokens", required_argument, NULL, 't' }, { "devices", required_argument, NULL, 'D' },
                { "parallel", required_argument, NULL, 'j' }, { "out-dir", required_argument, NULL, 'o' },
                { "type", required_argument, NULL, 'T' }, { "verbose", no_argument, NULL, 'v' },
                { "attest", no_argument, NULL, 'A' }, { "ek", required_argument, NULL, 'E' },
                { "help", no_argument, NULL, 'h' }, {},
        };
        size_t n_servers = 0;
        char *end;
        long n;
        int c, r;

        while ((c = getopt_long(argc, argv, "s:j:vh", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        if ((r = cli_add_server("factory", optarg, servers, &n_servers)) != 0)
                                return r;
                        o->server = servers[0];
                        o->servers = servers;
                        break;
                case 'H': o->ca_hash = optarg; break;
                case 't': o->tokens_file = optarg; break;
                case 'D': o->devices_file = optarg; break;
                case 'o': o->out_dir = optarg; break;
                case 'j':
                        n = strtol(optarg, &end, 10);
                        if (*end || end == optarg || n < 1 || n > FACTORY_MAX_PARALLEL)
                                return cli_usage("factory", "--parallel must be 1..%d", FACTORY_MAX_PARALLEL);
                        o->parallel = (unsigned) n;
                        break;
                case 'T':
                        if ((r = hwid_key_type_from_string(optarg, &o->type)) < 0)
                                return cli_fail(r);
                        break;
                case 'v': o->progress = on_progress; break;
                case 'A': o->attest = true; break;
                case 'E':
                        if (tpm_ek_alg_from_string(optarg, (tpm_ek_alg *) &o->ek) < 0)
                                return cli_usage("factory", "--ek must be auto, ecc-p256, rsa-2048 or ecc-p384");
                        break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("factory", argv);
                }
        }
        if (!o->server || !o->ca_hash || (!o->tokens_file && !o->attest) || !o->devices_file || optind != argc)
                return cli_usage("factory", "needs --server, --ca-hash, --tokens and --devices (--tokens is optional with --attest)");
        if (!ca_hash_valid(o->ca_hash))
                return cli_usage("factory", "--ca-hash must be sha256:<64 lower-case hex digits>");
        return 0;
}

int cmd_factory(int argc, char **argv) {
        _cleanup_(factory_report_freep) factory_report *rep = NULL;
        display dp = { .tty = isatty(STDERR_FILENO) };
        factory_opts o = { .parallel = 4, .out_dir = ".", .type = HWID_KEY_TYPE_DEFAULT, .http_timeout = 30,
                           .done = on_done, .userdata = &dp };
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        r = factory_run(&o, &rep);
        if (r < 0)
                return cli_fail(r);
        summary(rep);
        return rep->counts[FACTORY_ENROLLED] + rep->counts[FACTORY_ALREADY] == rep->n ? 0 : 1;
}
