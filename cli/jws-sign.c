/* hwid jws sign: a compact JWS signed with the device's identity. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "device-cmd.h"
#include "duration.h"
#include "error.h"
#include "fsutil.h"
#include "jws.h"

#define TTL_DEFAULT 300

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid jws sign --dir DIR [--claims JSON | --payload FILE|-] [--ttl 5m] [--tcti TCTI]\n\n"
                   "Signs with this device's identity: the key inside the TPM/HSM makes the signature and\n"
                   "the protected header carries the certificate chain (x5c) and the certificate's\n"
                   "SHA-256 thumbprint (x5t#S256), so that a verifier needs only the CA.  Prints a compact\n"
                   "JWS (RFC 7515) on standard output; the algorithm follows from the key: ES256 (EC\n"
                   "P-256), ES384 (EC P-384) or RS256 (RSA).\n\n"
                   "Without --payload the payload is a JWT claims set (typ JWT): the claims of --claims\n"
                   "plus iss (this device's identity), iat (now) and exp (now + --ttl, never past the\n"
                   "certificate's end).\n\n"
                   "  -d, --dir DIR          the identity (written by hwid join)\n"
                   "      --claims JSON      more claims, a JSON object, e.g. '{\"aud\":\"billing\"}'\n"
                   "                         (iss, iat and exp are hwid's to set)\n"
                   "      --payload FILE     sign FILE's bytes as they are instead ('-': standard input),\n"
                   "                         at most %d KiB\n"
                   "      --ttl DURATION     lifetime of the JWT (default 5m)\n"
                   "      --tcti TCTI        TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n\n"
                   "Exit codes: 0 signed, 1 failure, 2 usage.\n", JWS_PAYLOAD_MAX / 1024);
}

typedef struct sign_args {
        jws_device_opts o;
        const char *payload_path;
        bool ttl_set;
} sign_args;

static int parse(int argc, char **argv, sign_args *a) {
        static const struct option opts[] = {
                { "dir", required_argument, NULL, 'd' }, { "claims", required_argument, NULL, 'c' },
                { "payload", required_argument, NULL, 'p' }, { "ttl", required_argument, NULL, 't' },
                { "tcti", required_argument, NULL, 'T' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "d:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'd': a->o.dir = optarg; break;
                case 'c': a->o.claims = optarg; break;
                case 'p': a->payload_path = optarg; break;
                case 't':
                        if (duration_parse(optarg, &a->o.ttl) < 0 || a->o.ttl < 1)
                                return cli_usage("jws sign", "--ttl must be a duration like 30s or 5m, not '%s'",
                                                 optarg);
                        a->ttl_set = true;
                        break;
                case 'T': a->o.tcti = optarg; break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("jws sign", argv);
                }
        }
        if (!a->o.dir || optind != argc)
                return cli_usage("jws sign", "needs --dir DIR");
        if (a->payload_path && (a->o.claims || a->ttl_set))
                return cli_usage("jws sign", "--payload signs bytes as they are: it takes no --claims or --ttl");
        return 0;
}

int cmd_jws_sign(int argc, char **argv) {
        _cleanup_free_ char *payload = NULL, *token = NULL;
        sign_args a = { .o = { .ttl = TTL_DEFAULT } };
        size_t len = 0;
        int r;

        if ((r = parse(argc, argv, &a)) != 0)
                return r;
        if (a.payload_path) {
                const char *path = strcmp(a.payload_path, "-") == 0 ? "/dev/stdin" : a.payload_path;
                if ((r = read_file_capped(path, JWS_PAYLOAD_MAX, &payload, &len)) < 0)
                        return cli_fail(r);
                a.o.payload = (const uint8_t *) payload;
                a.o.payload_len = len;
        }
        a.o.now = (int64_t) time(NULL);
        if ((r = jws_device_sign(&a.o, &token, NULL)) < 0)
                return cli_fail(r);
        printf("%s\n", token);
        return fflush(stdout) == 0 ? 0 : cli_fail(hwid_fail(HWID_E_IO, "cannot write to standard output"));
}
