/* Who protected a CMP message (RFC 9483 §3.2).
 *
 * A password-based MAC (PasswordBasedMac, RFC 4210 §5.1.3.1, as OpenSSL's
 * client makes it): the senderKID is a bootstrap token's id, and the
 * shared secret is what hwidd keeps of that token: the lower-case hex
 * SHA-256 of its secret (hwidd never stores the secret itself, and a MAC
 * can only be checked by one who can make it; docs/CMP.md says what that
 * means for the store).  An unknown id and a wrong MAC are one answer.
 *
 * A signature: extraCerts[0] is the signer's certificate (RFC 9483
 * §3.3); it must be signed by this CA's certificate, and OpenSSL's
 * OSSL_CMP_validate_msg() checks the message's signature with it.
 * Whether it is a certificate this CA recorded, live, is the native
 * API's question (ca_auth_peer()), asked by the caller. */
#include <string.h>

#include <openssl/err.h>

#include "cmp.h"
#include "error.h"
#include "ossl-util.h"
#include "secret.h"
#include "token.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_CMP_CTX *, OSSL_CMP_CTX_free)

static bool token_id_ok(const cmp_view *v) {
        if (v->kid_len != TOKEN_ID_LEN)
                return false;
        for (size_t i = 0; i < v->kid_len; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789", v->kid[i]) || !v->kid[i])
                        return false;
        return true;
}

static int mac_secret(const uint8_t hash[32], char hex[65]) {
        for (int i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", hash[i]);
        return 0;
}

static int check_mac(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v, char ret_id[7]) {
        _cleanup_(OSSL_CMP_CTX_freep) OSSL_CMP_CTX *vctx = OSSL_CMP_CTX_new(NULL, NULL);
        store_token tok = { 0 };
        char id[TOKEN_ID_LEN + 1], hex[65];
        bool ok;
        int r;

        if (!vctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!token_id_ok(v))
                return hwid_fail(HWID_E_UNAUTHENTICATED, "the MAC's senderKID is not a bootstrap token id");
        memcpy(id, v->kid, TOKEN_ID_LEN);
        id[TOKEN_ID_LEN] = '\0';
        r = store_token_get(ca->store, id, &tok);
        if (r < 0 && r != -HWID_E_NOT_FOUND)
                return r;
        /* An unknown id is checked against a secret nobody has: one answer, one cost. */
        mac_secret(tok.secret_hash, hex);
        ok = OSSL_CMP_CTX_set1_secretValue(vctx, (const unsigned char *) hex, 64) &&
             OSSL_CMP_validate_msg(vctx, msg) == 1 && r == 0;
        secret_wipe(hex, sizeof(hex));
        store_token_clear(&tok);
        ERR_clear_error();
        if (!ok)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "the message's MAC does not verify with bootstrap token %s "
                                 "(or there is no such token)", id);
        memcpy(ret_id, id, sizeof(id));
        return 0;
}

static int check_signature(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v) {
        _cleanup_(OSSL_CMP_CTX_freep) OSSL_CMP_CTX *vctx = OSSL_CMP_CTX_new(NULL, NULL);

        if (!vctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!v->signer)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "a signed message must carry its signer's certificate "
                                 "first in extraCerts (RFC 9483 §3.3)");
        if (X509_verify(v->signer, X509_get0_pubkey(ca->ca_cert)) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_UNAUTHENTICATED, "the message is signed with a certificate this CA did "
                                 "not issue");
        }
        /* The signer is pinned: OpenSSL checks the signature with it, and
         * that the header's sender is its subject. */
        if (!OSSL_CMP_CTX_set1_srvCert(vctx, v->signer) || OSSL_CMP_validate_msg(vctx, msg) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_UNAUTHENTICATED, "the message's signature does not verify with the "
                                 "certificate in its extraCerts");
        }
        return 0;
}

int cmp_authenticate(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v, cmp_auth_kind *ret_kind,
                     char ret_token_id[7], uint8_t **ret_cert_der, size_t *ret_cert_len) {
        unsigned char *der = NULL;
        int len, r;

        *ret_kind = CMP_AUTH_NONE;
        if (v->protection_nid == NID_undef)
                return 0;
        if (v->protection_nid == NID_id_PasswordBasedMAC) {
                if ((r = check_mac(ca, msg, v, ret_token_id)) < 0)
                        return r;
                *ret_kind = CMP_AUTH_MAC;
                return 0;
        }
        if (v->protection_nid < 0 || !OBJ_find_sigid_algs(v->protection_nid, NULL, NULL))
                return hwid_fail(HWID_E_INVALID, "protection algorithm not supported: use PasswordBasedMac with a "
                                 "bootstrap token, or a signature with a certificate this CA issued");
        if ((r = check_signature(ca, msg, v)) < 0)
                return r;
        if ((len = i2d_X509(v->signer, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode the signer's certificate");
        *ret_cert_der = der;
        *ret_cert_len = (size_t) len;
        *ret_kind = CMP_AUTH_SIGNATURE;
        return 0;
}
