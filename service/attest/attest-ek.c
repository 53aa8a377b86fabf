/* TPM manufacturers' CA certificates (a cert-bundle.h bundle) and the EK
 * certificate chain.
 *
 * A deployment lists its TPM vendors' EK CAs (PEM as configuration files
 * usually are, or DER as vendors often publish them), roots and
 * intermediates alike; a chain must end at a self-signed root among them. */
#include <string.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include "attest-verify.h"
#include "error.h"
#include "ossl-util.h"

/* tcg-kp-EKCertificate (TCG EK Credential Profile). */
#define OID_TCG_KP_EK_CERTIFICATE "2.23.133.8.1"

DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_OBJECT *, ASN1_OBJECT_free)

int attest_roots_load(const char *const *paths, size_t n, attest_roots **ret) {
        return cert_bundle_load("EK roots", paths, n, ret);
}

size_t attest_roots_count(const attest_roots *r) {
        return cert_bundle_count(r);
}

void attest_roots_free(attest_roots *r) {
        cert_bundle_free(r);
}

/* The EK's critical extensions OpenSSL does not process are all ones the
 * TCG EK profile uses and that carry no constraint we would miss:
 * subjectDirectoryAttributes (TPM specification, security assertions). */
static bool only_tcg_critical(X509 *x) {
        for (int i = 0; i < X509_get_ext_count(x); i++) {
                X509_EXTENSION *ext = X509_get_ext(x, i);

                if (!X509_EXTENSION_get_critical(ext) || X509_supported_extension(ext))
                        continue;
                if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) != NID_subject_directory_attributes)
                        return false;
        }
        return true;
}

static int ek_verify_cb(int ok, X509_STORE_CTX *ctx) {
        if (!ok && X509_STORE_CTX_get_error(ctx) == X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION &&
            X509_STORE_CTX_get_error_depth(ctx) == 0 && only_tcg_critical(X509_STORE_CTX_get_current_cert(ctx)))
                return 1;
        return ok;
}

/* An EK certificate is an end entity; with an EKU, one for EKs. */
static int check_ek_usage(X509 *x) {
        _cleanup_(ASN1_OBJECT_freep) ASN1_OBJECT *ek_kp = OBJ_txt2obj(OID_TCG_KP_EK_CERTIFICATE, 1);
        EXTENDED_KEY_USAGE *eku;
        bool found = false;
        int crit = 0;

        if ((X509_get_extension_flags(x) & EXFLAG_CA) || X509_check_ca(x) != 0)
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate is a CA certificate");
        eku = X509_get_ext_d2i(x, NID_ext_key_usage, &crit, NULL);
        if (!eku)
                return crit == -1 ? 0 : hwid_fail(HWID_E_ATTESTATION, "the EK certificate's extendedKeyUsage is malformed");
        for (int i = 0; ek_kp && i < sk_ASN1_OBJECT_num(eku); i++)
                found |= OBJ_cmp(sk_ASN1_OBJECT_value(eku, i), ek_kp) == 0;
        EXTENDED_KEY_USAGE_free(eku);
        if (!found)
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate's extendedKeyUsage lacks "
                                 "tcg-kp-EKCertificate (" OID_TCG_KP_EK_CERTIFICATE ")");
        return 0;
}

int attest_ek_cert_verify(const attest_roots *roots, const uint8_t *der, size_t len, X509 **ret) {
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        const unsigned char *p = der;
        _cleanup_(X509_freep) X509 *x = NULL;
        int r;

        if (len == 0 || len > TPM_EK_CERT_MAX)
                return hwid_fail(HWID_E_INVALID, "an EK certificate of %zu bytes (at most %d)", len, TPM_EK_CERT_MAX);
        x = d2i_X509(NULL, &p, (long) len);
        if (!x || p != der + len) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "the EK certificate is not one DER certificate");
        }
        if (!ctx || !X509_STORE_CTX_init(ctx, cert_bundle_store(roots), x, NULL))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot check the EK certificate");
        X509_STORE_CTX_set_verify_cb(ctx, ek_verify_cb);
        if (X509_verify_cert(ctx) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate does not chain to a configured TPM "
                                 "manufacturer root: %s",
                                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        }
        r = check_ek_usage(x);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}
