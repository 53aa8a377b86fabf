/* hwid csr --key URI --subject DN [--san LIST] [--out FILE] [--tcti TCTI] */
#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "csr.h"
#include "device-cmd.h"
#include "error.h"
#include "ossl-util.h"
#include "x509-util.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid csr --key URI --subject DN [--san LIST] [--out FILE] [--tcti TCTI]\n\n"
                   "Builds a PKCS#10 certificate request signed inside the device holding URI.\n\n"
                   "  -k, --key URI        the device key (pkcs11:... or tpm2:...)\n"
                   "  -s, --subject DN     e.g. \"/CN=edge-0001/O=acme\"\n"
                   "      --san LIST       dns:NAME,ip:ADDR,uri:URI,email:ADDR (comma separated)\n"
                   "  -o, --out FILE       write the PEM request to FILE (default: standard output)\n"
                   "      --tcti TCTI      TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "  -h, --help           show this help\n");
}

int cmd_csr(int argc, char **argv) {
        static const struct option opts[] = {
                { "key", required_argument, NULL, 'k' },
                { "subject", required_argument, NULL, 's' },
                { "san", required_argument, NULL, 'S' },
                { "out", required_argument, NULL, 'o' },
                { "tcti", required_argument, NULL, 'T' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *uri = NULL, *subject = NULL, *san = NULL, *out = NULL, *tcti = NULL;
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *sans = NULL;
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *pem = NULL;
        hsm_options ho;
        int c, r;

        while ((c = getopt_long(argc, argv, "k:s:o:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'k': uri = optarg; break;
                case 's': subject = optarg; break;
                case 'S': san = optarg; break;
                case 'o': out = optarg; break;
                case 'T': tcti = optarg; break;
                case 'h': usage(stdout); return 0;
                default: return cli_bad_option("csr", argv);
                }
        }
        if (!uri || !subject || optind != argc)
                return cli_usage("csr", "needs --key URI and --subject DN");
        /* Check everything the user typed before touching the device. */
        if ((r = dn_parse(subject, &name)) < 0 || (san && (r = san_parse(san, &sans)) < 0))
                return cli_usage("csr", "%s", hwid_strerror(r));
        cli_hsm_options(&ho, tcti);
        if ((r = hwid_key_open(uri, &ho, &k)) < 0 ||
            (r = csr_build(k, name, sans, &req)) < 0 ||
            (r = csr_to_pem(req, &pem)) < 0 ||
            (r = cli_write_output(out, pem)) < 0)
                return cli_fail(r);
        return 0;
}
