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
#include "host-cmd.h"
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
                   "ready-to-run DIR/hwidd.yaml: all of them or, if it fails, none (a key it made in\n"
                   "the device stays, and the next run uses it). A pin-value= in the key URI goes to\n"
                   "DIR/ca-key.pin (mode 0600), which hwidd.yaml names with pin-source=.\n\n"
                   "  -k, --key URI          CA key (pkcs11:... or tpm2:...)\n"
                   "  -s, --subject DN       e.g. \"/CN=acme device CA/O=acme\"\n"
                   "  -d, --dir DIR          where to write the CA's files\n"
                   "      --days N           root validity (default 3650)\n"
                   "  -t, --type TYPE        key type if the key is created (default ec-p256)\n"
                   "      --tls-key URI      hwidd's TLS key (default: next to the CA key)\n"
                   "      --tls-names LIST   TLS server names (default localhost,127.0.0.1); the first\n"
                   "                         that is not 0.0.0.0 or :: is the TLS certificate's CN\n"
                   "                         and names hwidd in the CRL URL\n"
                   "      --listen ADDR:PORT hwidd's address (default 127.0.0.1:8443)\n"
                   "      --tcti TCTI        TPM to use for TPM keys (default $HWID_TCTI, else the tpm2-tss default)\n"
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
static int write_ca_csr(init_opts *o, hwid_key *k, const X509_NAME *name) {
        _cleanup_(sk_X509_EXTENSION_pop_freep) STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *pem = NULL, *staged = ca_setup_path(&o->s, "ca.csr"), *path = path_join(o->s.dir, "ca.csr");
        X509_EXTENSION *bc, *ku;
        int r;

        bc = X509V3_EXT_conf_nid(NULL, NULL, NID_basic_constraints, "critical,CA:TRUE");
        ku = X509V3_EXT_conf_nid(NULL, NULL, NID_key_usage, "critical,keyCertSign,cRLSign");
        if (!exts || !staged || !path || !bc || !ku || !sk_X509_EXTENSION_push(exts, bc) ||
            !sk_X509_EXTENSION_push(exts, ku))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = csr_build_ext(k, name, exts, &req)) < 0 || (r = csr_to_pem(req, &pem)) < 0 ||
            (r = write_file_atomic(staged, pem, strlen(pem), 0644)) < 0 || (r = ca_setup_commit(&o->s)) < 0)
                return r;
        /* The URI as shown: a pin-value= is not printed (give it again). */
        printf("wrote %s\nHave the offline root sign it as an intermediate CA, then run:\n"
               "  hwid ca import --key '%s' --cert SIGNED.pem --chain ROOT.pem --dir %s\n",
               path, hwid_key_uri(k), o->s.dir);
        return 0;
}

/* Everything after the directory is staged; *ret_created: the CA key was
 * made by this run. */
static int init_ca(init_opts *o, const X509_NAME *name, bool *ret_created, char **ret_key_uri) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_(X509_freep) X509 *root = NULL;
        _cleanup_free_ char *ca_path = ca_setup_path(&o->s, "ca.pem");
        hsm_options ho = { .tcti = o->s.tcti };
        int r;

        if (!ca_path)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = ca_key_open_or_create(o->s.ca_key_uri, o->s.type, &ho, &k, ret_created)) < 0)
                return r;
        printf("%s CA key %s\n", *ret_created ? "created" : "using existing", hwid_key_uri(k));
        if (*ret_created && !(*ret_key_uri = strdup(hwid_key_uri(k))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (o->csr)
                return write_ca_csr(o, k, name);
        if ((r = ca_self_sign(k, name, (int) o->days, &root)) < 0 ||
            (r = write_cert_pem(ca_path, root)) < 0)
                return r;
        return ca_finish(&o->s, k, root);
}

int cmd_ca_init(int argc, char **argv) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        _cleanup_free_ char *made_key = NULL;
        init_opts o;
        const char *dir;
        bool created = false;
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        dir = o.s.dir; /* as given: ca_setup_done() frees the absolute one */
        if ((r = dn_parse(o.subject, &name)) < 0)
                return cli_usage("ca init", "%s", hwid_strerror(r));
        if ((r = ca_setup_begin(&o.s)) >= 0)
                r = init_ca(&o, name, &created, &made_key);
        ca_setup_done(&o.s);
        if (r >= 0)
                return 0;
        r = cli_fail(r);
        /* DIR is as it was; a key the device made stays there. */
        if (made_key)
                fprintf(stderr, "hwid ca init: nothing was written to %s; the CA key this run created stays at %s "
                                "and the next hwid ca init with it uses it\n", dir, made_key);
        return r;
}
