/* hwid key show URI [--tcti TCTI] */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "x509-util.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid key show URI [--tcti TCTI]\n\n"
                   "Shows the key's type, public key, SHA-256 of its SubjectPublicKeyInfo and the\n"
                   "custody attributes the device itself reports for it.\n\n"
                   "      --tcti TCTI   TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "  -h, --help        show this help\n");
}

int cmd_key_show(int argc, char **argv) {
        static const struct option opts[] = {
                { "tcti", required_argument, NULL, 'T' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_free_ char *pem = NULL;
        const char *tcti = NULL;
        hwid_custody cust;
        hsm_options ho;
        char hex[65];
        int c, r;

        while ((c = getopt_long(argc, argv, "h", opts, NULL)) >= 0) {
                switch (c) {
                case 'T': tcti = optarg; break;
                case 'h': usage(stdout); return 0;
                default: return cli_bad_option("key show", argv);
                }
        }
        if (optind + 1 != argc)
                return cli_usage("key show", "needs exactly one key URI");
        cli_hsm_options(&ho, tcti);
        if ((r = hwid_key_open(argv[optind], &ho, &k)) < 0 ||
            (r = hwid_key_custody(k, &cust)) < 0 ||
            (r = spki_sha256_hex(hwid_key_public(k), hex)) < 0 ||
            (r = pubkey_to_pem(hwid_key_public(k), &pem)) < 0)
                return cli_fail(r);
        printf("uri: %s\ntype: %s (%d bits)\nspki-sha256: %s\n", hwid_key_uri(k),
               hwid_key_type_to_string(hwid_key_get_type(k)), EVP_PKEY_get_bits(hwid_key_public(k)), hex);
        cli_print_custody(&cust);
        fputs(pem, stdout);
        return 0;
}
