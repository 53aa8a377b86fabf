/* hwid key create URI [--type T] [--force] [--tcti TCTI] */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "x509-util.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid key create URI [--type TYPE] [--force] [--tcti TCTI]\n\n"
                   "Generates a key inside the TPM or PKCS#11 token named by URI.  The private key\n"
                   "never leaves the device.  Prints the SHA-256 of its SubjectPublicKeyInfo.\n\n"
                   "  -t, --type TYPE   ec-p256 (default), ec-p384, rsa-2048, rsa-3072\n"
                   "  -f, --force       replace a key that already exists at URI\n"
                   "      --tcti TCTI   TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "  -h, --help        show this help\n");
}

int cmd_key_create(int argc, char **argv) {
        static const struct option opts[] = {
                { "type", required_argument, NULL, 't' },
                { "force", no_argument, NULL, 'f' },
                { "tcti", required_argument, NULL, 'T' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        hwid_key_type type = HWID_KEY_TYPE_DEFAULT;
        const char *tcti = NULL;
        bool force = false;
        hsm_options ho;
        char hex[65];
        int c, r;

        while ((c = getopt_long(argc, argv, "t:fh", opts, NULL)) >= 0) {
                switch (c) {
                case 't':
                        if ((r = hwid_key_type_from_string(optarg, &type)) < 0)
                                return cli_fail(r);
                        break;
                case 'f': force = true; break;
                case 'T': tcti = optarg; break;
                case 'h': usage(stdout); return 0;
                default: return cli_bad_option("key create", argv);
                }
        }
        if (optind + 1 != argc)
                return cli_usage("key create", "needs exactly one key URI");
        cli_hsm_options(&ho, tcti);
        r = hwid_key_create(argv[optind], type, force, &ho, &k);
        if (r < 0)
                return cli_fail(r);
        r = spki_sha256_hex(hwid_key_public(k), hex);
        if (r < 0)
                return cli_fail(r);
        printf("created %s key %s\nspki-sha256: %s\n", hwid_key_type_to_string(type), hwid_key_uri(k), hex);
        return 0;
}
