/* hwid ca init: the CA key in an HSM slot or TPM, a self-signed root (or a
 * CSR for an offline root), hwidd's TLS identity and a ready config. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "ca-setup.h"
#include "cli.h"
#include "csr.h"
#include "error.h"
#include "fsutil.h"
#include "issuer.h"
#include "ossl-util.h"
#include "x509-util.h"

typedef struct init_opts {
        ca_setup s;
        const char *subject;
        long days;
        bool csr;
} init_opts;

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid ca init --key URI --subject DN --dir DIR [--days N] [--type TYPE]\n"
                   "                    [--tls-key URI] [--tls-names LIST] [--listen ADDR:PORT]\n"
                   "                    [--http-listen ADDR:PORT|none]\n"
                   "                    [--tcti TCTI] [--csr] [--force]\n\n"
                   "Creates the CA key inside the HSM/TPM at URI (or uses the key already there),\n"
                   "self-signs a root certificate, gives hwidd a TLS key in the same device and a\n"
                   "certificate from the CA, and writes DIR/ca.pem, DIR/tls.pem, DIR/hwid.db and a\n"
                   "ready-to-run DIR/hwidd.yaml.\n\n"
                   "  -k, --key URI          CA key (pkcs11:... or tpm2:...)\n"
                   "  -s, --subject DN       e.g. \"/CN=acme device CA/O=acme\"\n"
                   "  -d, --dir DIR          where to write the CA's files\n"
                   "      --days N           root validity (default 3650)\n"
                   "  -t, --type TYPE        key type if the key is created (default ec-p256)\n"
                   "      --tls-key URI      hwidd's TLS key (default: next to the CA key)\n"
                   "      --tls-names LIST   TLS server names (default localhost,127.0.0.1); the first\n"
                   "                         that is not 0.0.0.0 or :: names hwidd in the CRL URL\n"
                   "      --listen ADDR:PORT hwidd's address (default 127.0.0.1:8443)\n"
                   CA_SETUP_HTTP_LISTEN_HELP
                   "      --csr              offline root: write DIR/ca.csr instead of a root;\n"
                   "                         then install the signed certificate with hwid ca import\n"
                   "  -f, --force            replace an existing CA in DIR\n");
}

static int parse(int argc, char **argv, init_opts *o) {
        static const struct option opts[] = {
                { "key", required_argument, NULL, 'k' }, { "subject", required_argument, NULL, 's' },
                { "dir", required_argument, NULL, 'd' }, { "days", required_argument, NULL, 'D' },
                { "type", required_argument, NULL, 't' }, { "tls-key", required_argument, NULL, 'K' },
                { "tls-names", required_argument, NULL, 'N' }, { "listen", required_argument, NULL, 'l' },
                { "http-listen", required_argument, NULL, 'H' },
                { "tcti", required_argument, NULL, 'T' }, { "csr", no_argument, NULL, 'C' },
                { "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, {},
        };
        char *end;
        int c;

        *o = (init_opts) { .days = 3650, .s = { .tls_names = "localhost,127.0.0.1", .listen = "127.0.0.1:8443",
                                                .type = HWID_KEY_TYPE_DEFAULT } };
        while ((c = getopt_long(argc, argv, "k:s:d:t:fh", opts, NULL)) >= 0) {
                switch (c) {
                case 'k': o->s.ca_key_uri = optarg; break;
                case 's': o->subject = optarg; break;
                case 'd': o->s.dir = optarg; break;
                case 'D':
                        o->days = strtol(optarg, &end, 10);
                        if (*end || o->days < 1 || o->days > 36500)
                                return cli_usage("ca init", "--days must be 1..36500");
                        break;
                case 't':
                        if (hwid_key_type_from_string(optarg, &o->s.type) < 0)
                                return cli_fail(-HWID_E_KEY_TYPE);
                        break;
                case 'K': o->s.tls_key_uri = optarg; break;
                case 'N': o->s.tls_names = optarg; break;
                case 'l': o->s.listen = optarg; break;
                case 'H': o->s.http_listen = optarg; break;
                case 'T': o->s.tcti = optarg; break;
                case 'C': o->csr = true; break;
                case 'f': o->s.force = true; break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("ca init", argv);
                }
        }
        if (!o->s.ca_key_uri || !o->subject || !o->s.dir || optind != argc)
                return cli_usage("ca init", "needs --key URI, --subject DN and --dir DIR");
        return 0;
}

/* Offline root: a request asking for CA:TRUE, keyCertSign and cRLSign. */
static int write_ca_csr(const init_opts *o, hwid_key *k, const X509_NAME *name) {
        _cleanup_(sk_X509_EXTENSION_pop_freep) STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *pem = NULL, *path = path_join(o->s.dir, "ca.csr");
        X509_EXTENSION *bc, *ku;
        int r;

        bc = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints, "critical,CA:TRUE");
        ku = X509V3_EXT_conf_nid(NULL, NULL, NID_key_usage, "critical,keyCertSign,cRLSign");
        if (!exts || !path || !bc || !ku || !sk_X509_EXTENSION_push(exts, bc) || !sk_X509_EXTENSION_push(exts, ku))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = csr_build_ext(k, name, exts, &req)) < 0 || (r = csr_to_pem(req, &pem)) < 0 ||
            (r = write_file_atomic(path, pem, strlen(pem), 0644)) < 0)
                return r;
        printf("wrote %s\nHave the offline root sign it as an intermediate CA, then run:\n"
               "  hwid ca import --key '%s' --cert SIGNED.pem --chain ROOT.pem --dir %s\n",
               path, o->s.ca_key_uri, o->s.dir);
        return 0;
}

int cmd_ca_init(int argc, char **argv) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        _cleanup_(X509_freep) X509 *root = NULL;
        _cleanup_free_ char *ca_path = NULL;
        _cleanup_free_ char *abs_dir = NULL;
        hsm_options ho;
        init_opts o;
        bool created;
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        if ((r = dn_parse(o.subject, &name)) < 0)
                return cli_usage("ca init", "%s", hwid_strerror(r));
        ho = (hsm_options) { .tcti = o.s.tcti };
        if ((r = ca_prepare_dir(&o.s)) < 0 || (r = absolute_dir(&o.s, &abs_dir)) < 0 ||
            (r = ca_key_open_or_create(o.s.ca_key_uri, o.s.type, &ho, &k, &created)) < 0)
                return cli_fail(r);
        printf("%s CA key %s\n", created ? "created" : "using existing", hwid_key_uri(k));
        if (o.csr) {
                r = write_ca_csr(&o, k, name);
                return r < 0 ? cli_fail(r) : 0;
        }
        if (!(ca_path = path_join(o.s.dir, "ca.pem")))
                return cli_fail(hwid_fail(HWID_E_NOMEM, NULL));
        if ((r = ca_self_sign(k, name, (int) o.days, &root)) < 0 || (r = write_cert_pem(ca_path, root)) < 0 ||
            (r = ca_finish(&o.s, k, root)) < 0)
                return cli_fail(r);
        return 0;
}
