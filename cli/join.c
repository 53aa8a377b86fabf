/* hwid join: a device's first identity from a bootstrap token. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "join.h"
#include "secret.h"
#include "tpm-attest.h"

#define EXIT_PENDING 3

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid join --server URL --ca-hash sha256:HEX --key URI --cn NAME --dir DIR\n"
                   "                 [--token-file FILE] [--san LIST] [--type TYPE] [--tcti TCTI]\n"
                   "                 [--no-wait] [--wait-timeout DURATION] [--attest [--ek ALG]] [--est]\n\n"
                   "Enrolls this device: checks the CA against the pin before sending anything, makes\n"
                   "(or reuses) the key inside the TPM/HSM, sends a CSR signed there with the bootstrap\n"
                   "token, and writes DIR/cert.pem, DIR/ca.pem and DIR/key.uri atomically.\n\n"
                   "The token comes from $HWID_TOKEN, --token-file FILE ('-' for standard input) or\n"
                   "--token TOKEN (visible to other users in ps: avoid); with --attest and a TPM on\n"
                   "the CA's EK allowlist, none is needed.\n\n"
                   "  -s, --server URL       hwidd, e.g. https://ca.example:8443; repeat it for\n"
                   "                         replicas of one CA: they are tried in order, moving on\n"
                   "                         when one is unreachable or answers 502/503/504 (never\n"
                   "                         after a refusal); DIR/device.json keeps the list\n"
                   "      --ca-hash PIN      sha256:<hex> of the CA's public key (hwid ca hash)\n"
                   "  -k, --key URI          device key, e.g. tpm2:file=/var/lib/hwid/device.tss2.pem\n"
                   "      --cn NAME          the identity to request\n"
                   "  -d, --dir DIR          where the identity is kept\n"
                   "      --token-file FILE  read the bootstrap token from FILE ('-': standard input)\n"
                   "      --token TOKEN      the bootstrap token itself (visible in ps: avoid)\n"
                   "      --san LIST         extra names: dns:NAME,ip:ADDR,uri:URI,email:ADDR\n"
                   "      --type TYPE        key type if the key is created: ec-p256 (default),\n"
                   "                         ec-p384, rsa-2048, rsa-3072\n"
                   "      --tcti TCTI        TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "      --no-wait          if approval is pending, exit 3 instead of waiting;\n"
                   "                         run the same command again later to finish\n"
                   "      --attest           prove to the CA that the key lives in this TPM (TPM\n"
                   "                         attestation: EK certificate, AK, Certify); the key must be\n"
                   "                         a tpm2: key.  Without a token, the TPM must be on the CA's\n"
                   "                         EK allowlist (hwid ek add)\n"
                   "      --ek ALG           the EK to attest with: auto (default), ecc-p256,\n"
                   "                         rsa-2048, ecc-p384\n"
                   "      --est              speak EST (RFC 7030, /.well-known/est/) instead of hwid's\n"
                   "                         API: the token goes as HTTP Basic credentials; a pending\n"
                   "                         request is asked again until approved (not with --attest)\n"
                   "      --wait-timeout D   how long to wait for approval (default 30m)\n"
                   "      --clock-skew D     how far this device's clock may be off before DIR's\n"
                   "                         certificate counts as expired (default 5m)\n"
                   "  -h, --help             show this help\n\n"
                   "Exit codes: 0 enrolled (or already), 1 failure, 2 usage, 3 pending.\n");
}

static void progress(void *ud, const char *message) {
        fprintf(stderr, "hwid join: %s\n", message);
}

static int read_token(const char *file, char **ret) {
        const char *env = getenv("HWID_TOKEN");

        if (file && strcmp(file, "-") == 0)
                return secret_read_file("/dev/stdin", 128, ret);
        if (file)
                return secret_read_file(file, 128, ret);
        *ret = env && *env ? strdup(env) : NULL;
        return 0;
}

static const char *servers[CLI_MAX_SERVERS + 1];

static int parse(int argc, char **argv, join_opts *o, const char **token_file, char **token_arg) {
        static const struct option opts[] = {
                { "server", required_argument, NULL, 's' }, { "token", required_argument, NULL, 't' },
                { "token-file", required_argument, NULL, 'F' }, { "ca-hash", required_argument, NULL, 'H' },
                { "key", required_argument, NULL, 'k' }, { "cn", required_argument, NULL, 'n' },
                { "dir", required_argument, NULL, 'd' }, { "san", required_argument, NULL, 'S' },
                { "type", required_argument, NULL, 'T' }, { "tcti", required_argument, NULL, 'C' },
                { "no-wait", no_argument, NULL, 'W' }, { "wait-timeout", required_argument, NULL, 'w' },
                { "attest", no_argument, NULL, 'A' }, { "ek", required_argument, NULL, 'E' },
                { "clock-skew", required_argument, NULL, 'K' }, { "est", no_argument, NULL, 'e' },
                { "help", no_argument, NULL, 'h' }, {},
        };
        size_t n_servers = 0;
        int c, r;

        while ((c = getopt_long(argc, argv, "s:k:d:h", opts, NULL)) >= 0) {
                switch (c) {
                case 's':
                        if ((r = cli_add_server("join", optarg, servers, &n_servers)) != 0)
                                return r;
                        o->server = servers[0];
                        o->servers = servers;
                        break;
                case 't':
                        /* Take it, then blank it out of our argv (and so out of ps). */
                        *token_arg = strdup(optarg);
                        secret_wipe(optarg, strlen(optarg));
                        break;
                case 'F': *token_file = optarg; break;
                case 'H': o->ca_hash = optarg; break;
                case 'k': o->key_uri = optarg; break;
                case 'n': o->cn = optarg; break;
                case 'd': o->dir = optarg; break;
                case 'S': o->san = optarg; break;
                case 'T':
                        if ((r = hwid_key_type_from_string(optarg, &o->type)) < 0)
                                return cli_fail(r);
                        break;
                case 'C': o->tcti = optarg; break;
                case 'W': o->no_wait = true; break;
                case 'w':
                        if ((r = cli_duration("join", "--wait-timeout", optarg, 1, &o->wait_timeout)) != 0)
                                return r;
                        break;
                case 'K':
                        if ((r = cli_duration("join", "--clock-skew", optarg, 0, &o->clock_skew)) != 0)
                                return r;
                        break;
                case 'A': o->attest = true; break;
                case 'e': o->est = true; break;
                case 'E':
                        if (tpm_ek_alg_from_string(optarg, (tpm_ek_alg *) &o->ek) < 0)
                                return cli_usage("join", "--ek must be auto, ecc-p256, rsa-2048 or ecc-p384");
                        break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("join", argv);
                }
        }
        if (!o->server || !o->ca_hash || !o->key_uri || !o->cn || !o->dir || optind != argc)
                return cli_usage("join", "needs --server, --ca-hash, --key, --cn and --dir");
        if (!ca_hash_valid(o->ca_hash))
                return cli_usage("join", "--ca-hash must be sha256:<64 lower-case hex digits>");
        if (o->attest && o->est)
                return cli_usage("join", "--est does not carry TPM attestation: use --attest or --est");
        if (o->attest && strncmp(o->key_uri, "tpm2:", 5) != 0)
                return cli_usage("join", "--attest needs a TPM key (tpm2:file=... or tpm2:handle=...)");
        return 0;
}

int cmd_join(int argc, char **argv) {
        _cleanup_secret_ char *token = NULL, *token_arg = NULL;
        const char *token_file = NULL;
        join_opts o = { .type = HWID_KEY_TYPE_DEFAULT, .progress = progress, .http_timeout = 30,
                        .clock_skew = DEVICE_CLOCK_SKEW_DEFAULT };
        join_result res;
        int r;

        if ((r = parse(argc, argv, &o, &token_file, &token_arg)) != 0)
                return r;
        if (token_arg)
                token = TAKE_PTR(token_arg);
        else if ((r = read_token(token_file, &token)) < 0)
                return cli_fail(r);
        o.token = token;
        r = join_run(&o, &res);
        if (r == -HWID_E_PENDING) {
                fprintf(stderr, "hwid: %s\n", hwid_strerror(r));
                return EXIT_PENDING;
        }
        if (r < 0)
                return cli_fail(r);
        return res == JOIN_PENDING ? EXIT_PENDING : 0;
}
