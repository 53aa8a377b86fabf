/* hwid ca import: the offline-root case, second half.  Installs the
 * intermediate certificate the root signed for the key from hwid ca init
 * --csr, checks it against the key and the chain, and finishes the setup. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "ca-setup.h"
#include "cli.h"
#include "error.h"
#include "fsutil.h"
#include "host-cmd.h"
#include "ossl-util.h"
#include "x509-util.h"

#define PEM_MAX (256 * 1024)

typedef struct import_opts {
        ca_setup s;
        const char *cert, *chain;
} import_opts;

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid ca import --key URI --cert FILE --chain FILE --dir DIR\n"
                   "                      [--tls-key URI] [--tls-names LIST] [--listen ADDR:PORT] [--tcti TCTI]\n"
                   "                      [--http-listen ADDR:PORT|none]\n\n"
                   "Installs the intermediate CA certificate FILE (signed by an offline root for the\n"
                   "key at URI, see hwid ca init --csr) after checking that it belongs to the key, is\n"
                   "a CA, and chains to the root in --chain; then sets up hwidd as ca init does.\n\n"
                   "  -k, --key URI          the CA key the certificate was issued for\n"
                   "  -c, --cert FILE        the intermediate CA certificate (PEM)\n"
                   "      --chain FILE       the offline root (and any CA between), PEM\n"
                   "  -d, --dir DIR          the directory hwid ca init --csr wrote\n"
                   "      --tls-key URI      hwidd's TLS key (default: next to the CA key)\n"
                   "      --tls-names LIST   TLS server names (default localhost,127.0.0.1)\n"
                   "      --listen ADDR:PORT hwidd's address (default 127.0.0.1:8443)\n"
                   "      --tcti TCTI        TPM to use for TPM keys (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "  -f, --force            replace an existing CA in DIR\n"
                   CA_SETUP_HTTP_LISTEN_HELP);
}

static int parse(int argc, char **argv, import_opts *o) {
        static const struct option opts[] = {
                { "key", required_argument, NULL, 'k' }, { "cert", required_argument, NULL, 'c' },
                { "chain", required_argument, NULL, 'C' }, { "dir", required_argument, NULL, 'd' },
                { "tls-key", required_argument, NULL, 'K' }, { "tls-names", required_argument, NULL, 'N' },
                { "listen", required_argument, NULL, 'l' },
                { "http-listen", required_argument, NULL, 'H' }, { "tcti", required_argument, NULL, 'T' },
                { "force", no_argument, NULL, 'f' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        *o = (import_opts) { .s = { .tls_names = "localhost,127.0.0.1", .listen = "127.0.0.1:8443",
                                    .type = HWID_KEY_TYPE_DEFAULT, .chain_file = "ca-chain.pem" } };
        while ((c = getopt_long(argc, argv, "k:c:d:fh", opts, NULL)) >= 0) {
                switch (c) {
                case 'k': o->s.ca_key_uri = optarg; break;
                case 'c': o->cert = optarg; break;
                case 'C': o->chain = optarg; break;
                case 'd': o->s.dir = optarg; break;
                case 'K': o->s.tls_key_uri = optarg; break;
                case 'N': o->s.tls_names = optarg; break;
                case 'l': o->s.listen = optarg; break;
                case 'H': o->s.http_listen = optarg; break;
                case 'T': o->s.tcti = optarg; break;
                case 'f': o->s.force = true; break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("ca import", argv);
                }
        }
        if (!o->s.ca_key_uri || !o->cert || !o->chain || !o->s.dir || optind != argc)
                return cli_usage("ca import", "needs --key, --cert, --chain and --dir");
        return 0;
}

static int read_certs(const char *path, STACK_OF(X509) **ret) {
        _cleanup_free_ char *pem = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        STACK_OF(X509) *sk = sk_X509_new_null();
        X509 *x;
        size_t len;
        int r;

        if (!sk)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = read_file_capped(path, PEM_MAX, &pem, &len)) < 0 || !(b = BIO_new_mem_buf(pem, (int) len))) {
                sk_X509_free(sk);
                return r < 0 ? r : hwid_fail(HWID_E_NOMEM, NULL);
        }
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                sk_X509_push(sk, x);
        ERR_clear_error();
        if (sk_X509_num(sk) == 0) {
                sk_X509_free(sk);
                return hwid_fail(HWID_E_INVALID, "%s holds no PEM certificate", path);
        }
        *ret = sk;
        return 0;
}

/* Everything after the directory is staged. */
static int import_ca(import_opts *o) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *certs = NULL, *chain = NULL;
        _cleanup_free_ char *ca_path = ca_setup_path(&o->s, "ca.pem"), *chain_path = ca_setup_path(&o->s, "ca-chain.pem");
        _cleanup_free_ char *chain_pem = NULL;
        hsm_options ho = { .tcti = o->s.tcti };
        size_t len;
        int r;

        if (!ca_path || !chain_path)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = hwid_key_open(o->s.ca_key_uri, &ho, &k)) < 0 || (r = read_certs(o->cert, &certs)) < 0 ||
            (r = read_certs(o->chain, &chain)) < 0 || (r = x509_check_intermediate(sk_X509_value(certs, 0), hwid_key_public(k), hwid_key_uri(k),
                                         chain)) < 0 ||
            (r = read_file_capped(o->chain, PEM_MAX, &chain_pem, &len)) < 0 ||
            (r = write_file_atomic(chain_path, chain_pem, len, 0644)) < 0 ||
            (r = write_cert_pem(ca_path, sk_X509_value(certs, 0))) < 0)
                return r;
        return ca_finish(&o->s, k, sk_X509_value(certs, 0));
}

int cmd_ca_import(int argc, char **argv) {
        import_opts o;
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        if ((r = ca_setup_begin(&o.s)) >= 0)
                r = import_ca(&o);
        ca_setup_done(&o.s);
        return r < 0 ? cli_fail(r) : 0;
}
