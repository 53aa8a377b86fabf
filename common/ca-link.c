/* Link certificates (ca-link.h). */
#include <stdbool.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "ca-link.h"
#include "error.h"

/* A CA certificate that may sign certificates. */
static bool signs_certificates(X509 *x) {
        return X509_check_ca(x) > 0 && (X509_get_key_usage(x) & KU_KEY_CERT_SIGN);
}

/* notBefore <= now <= notAfter, as OpenSSL reads them. */
static bool valid_at(X509 *x, int64_t now) {
        time_t t = (time_t) now;

        return X509_cmp_time(X509_get0_notBefore(x), &t) <= 0 && X509_cmp_time(X509_get0_notAfter(x), &t) >= 0;
}

static int link_signature(X509 *link, X509 *signer) {
        bool ok = X509_NAME_cmp(X509_get_issuer_name(link), X509_get_subject_name(signer)) == 0 &&
                  X509_verify(link, X509_get0_pubkey(signer)) == 1;

        ERR_clear_error();
        return ok ? 0 : hwid_fail(HWID_E_UNTRUSTED, "the link certificate is not signed by the trusted CA's key");
}

int ca_link_verify(X509 *link, X509 *signer, X509 *certified, int64_t now) {
        int r;

        if (!link || !signer || !certified)
                return hwid_fail(HWID_E_UNTRUSTED, "no link certificate");
        if ((r = link_signature(link, signer)) < 0)
                return r;
        if (EVP_PKEY_eq(X509_get0_pubkey(link), X509_get0_pubkey(certified)) != 1 ||
            X509_NAME_cmp(X509_get_subject_name(link), X509_get_subject_name(certified)) != 0) {
                ERR_clear_error();
                return hwid_fail(HWID_E_UNTRUSTED, "the link certificate certifies another key than the new CA's");
        }
        if (!signs_certificates(link) || !signs_certificates(certified))
                return hwid_fail(HWID_E_UNTRUSTED, "the link certificate or the new CA is no CA that signs "
                                 "certificates (CA:TRUE, keyCertSign)");
        if (!valid_at(link, now))
                return hwid_fail(HWID_E_UNTRUSTED, "the link certificate is not valid now");
        return 0;
}
