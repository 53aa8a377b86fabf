/* hwid ca hash FILE: the CA pin, sha256:<hex of SubjectPublicKeyInfo>. */
#include <stdio.h>
#include <string.h>

#include <openssl/pem.h>

#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "x509-util.h"

int cmd_ca_hash(int argc, char **argv) {
        _cleanup_free_ char *pem = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        char pin[72];
        size_t len;
        int r;

        if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
                printf("Usage: hwid ca hash FILE\n\nPrints the CA pin of the PEM certificate in FILE: "
                       "sha256:<hex> of its\nSubjectPublicKeyInfo (the form of kubeadm's "
                       "--discovery-token-ca-cert-hash).\n");
                return 0;
        }
        if (argc != 2)
                return cli_usage("ca hash", "needs exactly one certificate file");
        if ((r = read_file_capped(argv[1], 256 * 1024, &pem, &len)) < 0)
                return cli_fail(r);
        b = BIO_new_mem_buf(pem, (int) len);
        x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!x)
                return cli_fail(hwid_fail(HWID_E_INVALID, "%s holds no PEM certificate", argv[1]));
        if ((r = spki_sha256_pin(X509_get0_pubkey(x), pin)) < 0)
                return cli_fail(r);
        printf("%s\n", pin);
        return 0;
}
