/* hwid renew --dir DIR: renew once, over mutual TLS with the TPM key. */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "renew.h"
#include "tpm-attest.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid renew --dir DIR [--rotate] [--attest] [--ek ALG] [--tcti TCTI]\n"
                   "                  [--clock-skew D] [--est]\n\n"
                   "Renews the certificate in DIR over mutual TLS, authenticated by the current key\n"
                   "inside the TPM/HSM.  When the profile asks for it (or with --rotate) a new key is\n"
                   "made in the device; the old one is removed only once the new certificate is on disk.\n"
                   "When the profile requires TPM attestation of the key (a new key, or a certificate\n"
                   "issued without), the TPM proves it first; --attest always does.\n"
                   "The servers are those hwid join was given (DIR/device.json): the one that answered\n"
                   "last first, then the others, moving on when one is unreachable or answers\n"
                   "502/503/504, never after a refusal.\n\n"
                   "  -d, --dir DIR          the identity (written by hwid join)\n"
                   "      --rotate           make a new key even if the profile does not ask for one\n"
                   "      --attest           prove that the key lives in this TPM (TPM attestation)\n"
                   "      --ek ALG           the EK to attest with: auto (default), ecc-p256, rsa-2048,\n"
                   "                         ecc-p384\n"
                   "      --est              speak EST (RFC 7030: simplereenroll over mutual TLS) instead\n"
                   "                         of hwid's API; EST cannot say whether the profile wants a new\n"
                   "                         key: give --rotate for a profile with rotate_key (not with\n"
                   "                         --attest)\n"
                   "      --tcti TCTI        TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "      --clock-skew D     how far the clocks of this device and the CA may differ\n"
                   "                         before a certificate's dates are called wrong (default 5m)\n"
                   "  -h, --help             show this help\n\n"
                   "Exit codes: 0 renewed, 1 failure (try again later), 2 usage,\n"
                   "            4 revoked or expired: bootstrap again with hwid join and a new token.\n");
}

static void progress(void *ud, const char *message) {
        fprintf(stderr, "hwid renew: %s\n", message);
}

int cmd_renew(int argc, char **argv) {
        static const struct option opts[] = {
                { "dir", required_argument, NULL, 'd' }, { "rotate", no_argument, NULL, 'R' },
                { "tcti", required_argument, NULL, 'T' }, { "clock-skew", required_argument, NULL, 'K' },
                { "attest", no_argument, NULL, 'A' }, { "ek", required_argument, NULL, 'E' },
                { "est", no_argument, NULL, 'e' }, { "help", no_argument, NULL, 'h' }, {},
        };
        renew_opts o = { .progress = progress, .http_timeout = 30, .clock_skew = DEVICE_CLOCK_SKEW_DEFAULT };
        renew_result res;
        char until[32];
        int c, r;

        while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'd': o.dir = optarg; break;
                case 'R': o.rotate = true; break;
                case 'T': o.tcti = optarg; break;
                case 'K':
                        if ((r = cli_duration("renew", "--clock-skew", optarg, 0, &o.clock_skew)) != 0)
                                return r;
                        break;
                case 'A': o.attest = true; break;
                case 'e': o.est = true; break;
                case 'E':
                        if (tpm_ek_alg_from_string(optarg, (tpm_ek_alg *) &o.ek) < 0)
                                return cli_usage("renew", "--ek must be auto, ecc-p256, rsa-2048 or ecc-p384");
                        break;
                case 'h': usage(stdout); return 0;
                default: return cli_bad_option("renew", argv);
                }
        }
        if (!o.dir || optind != argc)
                return cli_usage("renew", "needs --dir DIR");
        if (o.est && o.attest)
                return cli_usage("renew", "--est does not carry TPM attestation: use --attest or --est");
        r = renew_run(&o, &res);
        if (r < 0 && renew_needs_bootstrap(r)) {
                char line[640];

                renew_bootstrap_message(r, line, sizeof(line));
                fprintf(stderr, "hwid: %s\n", line);
                return EXIT_BOOTSTRAP;
        }
        if (r < 0)
                return cli_fail(r);
        strftime(until, sizeof(until), "%Y-%m-%d %H:%M:%SZ", gmtime(&(time_t) { (time_t) res.not_after }));
        printf("renewed: generation %d, valid until %s%s\n", res.generation, until,
               res.rotated ? ", new key" : "");
        return 0;
}
