/* Who protected a CMP message (RFC 9483 §3.2).
 *
 * A password-based MAC (PasswordBasedMac, RFC 4210 §5.1.3.1, as OpenSSL's
 * client makes it): the senderKID is a bootstrap token's id, the shared
 * secret is the CA core's (ca_token_secret()).  What computing the MAC costs is the
 * client's choice (its one-way function, iteration count and MAC
 * algorithm: 100,000 iterations of SHA3-512 take a tenth of a second), so
 * nothing is computed before the parameters pass an allow-list (SHA-256,
 * -384 or -512 as the one-way function; HMAC with one of them as the MAC;
 * 100 to 10,000 iterations; 8 to 64 bytes of salt) and the senderKID names
 * a token: anything else is refused first, and costs a look-up at most.
 * An unknown id and a wrong MAC are one answer, in the same words.
 *
 * A signature: extraCerts[0] is the signer's certificate (RFC 9483
 * §3.3); it must be signed by this CA's certificate, and OpenSSL's
 * OSSL_CMP_validate_msg() checks the message's signature with it.
 * Whether it is a certificate this CA recorded, live, is the CA core's
 * question, asked with the request. */
#include <string.h>

#include <openssl/err.h>

#include "cmp-internal.h"
#include "error.h"
#include "ossl-util.h"
#include "secret.h"
#include "token.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(OSSL_CMP_CTX *, OSSL_CMP_CTX_free)

#define PBM_ITERATIONS_MIN 100    /* RFC 4211's and OpenSSL's floor; OpenSSL's client uses 500 */
#define PBM_ITERATIONS_MAX 10000
#define PBM_SALT_MIN 8
#define PBM_SALT_MAX 64           /* OpenSSL's client uses 16 */

static bool token_id_ok(const cmp_view *v) {
        if (v->kid_len != TOKEN_ID_LEN)
                return false;
        for (size_t i = 0; i < v->kid_len; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789", v->kid[i]) || !v->kid[i])
                        return false;
        return true;
}

static bool nid_in(int nid, const int *list, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (nid == list[i])
                        return true;
        return false;
}

static const char *alg_name(int nid) {
        return nid == NID_undef ? "(an OID OpenSSL does not know)" : OBJ_nid2sn(nid);
}

/* Whether the MAC may be computed as the client asks: refused before anything is. */
static int pbm_allowed(const cmp_pbm *p) {
        static const int owf[] = { NID_sha256, NID_sha384, NID_sha512 };
        static const int mac[] = { NID_hmacWithSHA256, NID_hmacWithSHA384, NID_hmacWithSHA512 };

        if (p->malformed)
                return hwid_fail(HWID_E_INVALID, "the PasswordBasedMac parameters are not a PBMParameter "
                                 "(RFC 4210 §5.1.3.1)");
        if (!nid_in(p->owf_nid, owf, ELEMENTSOF(owf)))
                return hwid_fail(HWID_E_INVALID, "PasswordBasedMac one-way function %s not accepted: use SHA-256, "
                                 "SHA-384 or SHA-512", alg_name(p->owf_nid));
        if (!nid_in(p->mac_nid, mac, ELEMENTSOF(mac)))
                return hwid_fail(HWID_E_INVALID, "PasswordBasedMac MAC algorithm %s not accepted: use "
                                 "hmacWithSHA256, hmacWithSHA384 or hmacWithSHA512 (openssl cmp -mac "
                                 "hmacWithSHA256)", alg_name(p->mac_nid));
        if (p->iterations < PBM_ITERATIONS_MIN || p->iterations > PBM_ITERATIONS_MAX)
                return hwid_fail(HWID_E_INVALID, "PasswordBasedMac iteration count %lld not accepted: %d to %d",
                                 (long long) p->iterations, PBM_ITERATIONS_MIN, PBM_ITERATIONS_MAX);
        if (p->salt_len < PBM_SALT_MIN || p->salt_len > PBM_SALT_MAX)
                return hwid_fail(HWID_E_INVALID, "PasswordBasedMac salt of %zu bytes not accepted: %d to %d",
                                 p->salt_len, PBM_SALT_MIN, PBM_SALT_MAX);
        return 0;
}

static int mac_refused(ca_service *ca, int r) {
        ca_service_count_pbm(ca, false);
        return r;
}

/* A wrong MAC and an unknown token id: one answer. */
static int mac_mismatch(const char *id) {
        return hwid_fail(HWID_E_UNAUTHENTICATED, "the message's MAC does not verify with bootstrap token %s (or "
                         "there is no such token)", id);
}

static int check_mac(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v, char ret_id[7]) {
        _cleanup_(OSSL_CMP_CTX_freep) OSSL_CMP_CTX *vctx = NULL;
        _cleanup_secret_ char *secret = NULL;
        char id[TOKEN_ID_LEN + 1];
        bool ok;
        int r;

        if (!token_id_ok(v))
                return mac_refused(ca, hwid_fail(HWID_E_UNAUTHENTICATED, "the MAC's senderKID is not a bootstrap "
                                                 "token id"));
        if ((r = pbm_allowed(&v->pbm)) < 0)
                return mac_refused(ca, r);
        memcpy(id, v->kid, TOKEN_ID_LEN);
        id[TOKEN_ID_LEN] = '\0';
        /* An unknown id costs a look-up, no HSM operation. */
        r = ca_token_secret(ca, id, &secret);
        if (r == -HWID_E_NOT_FOUND)
                return mac_refused(ca, mac_mismatch(id));
        if (r < 0)
                return r;
        if (!(vctx = OSSL_CMP_CTX_new(NULL, NULL)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        ca_service_count_pbm(ca, true);
        ok = OSSL_CMP_CTX_set1_secretValue(vctx, (const unsigned char *) secret, (int) strlen(secret)) &&
             OSSL_CMP_validate_msg(vctx, msg) == 1;
        ERR_clear_error();
        if (!ok)
                return mac_mismatch(id);
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
        if (!ca_service_signed(ca, v->signer))
                return hwid_fail(HWID_E_UNAUTHENTICATED, "the message is signed with a certificate this CA did "
                                 "not issue");
        /* The signer is pinned: OpenSSL checks the signature with it, and
         * that the header's sender is its subject. */
        if (!OSSL_CMP_CTX_set1_srvCert(vctx, v->signer) || OSSL_CMP_validate_msg(vctx, msg) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_UNAUTHENTICATED, "the message's signature does not verify with the "
                                 "certificate in its extraCerts");
        }
        return 0;
}

/* The signer's certificate, and its SHA-256 as the sender's key. */
static int signer_of(const cmp_view *v, cmp_sender *s) {
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int n = 0;
        int len = i2d_X509(v->signer, &s->cert_der);

        if (len <= 0 || !X509_digest(v->signer, EVP_sha256(), md, &n))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode the signer's certificate");
        s->cert_len = (size_t) len;
        snprintf(s->key, sizeof(s->key), "cert:");
        for (unsigned i = 0; i < n && 5 + 2 * i + 2 < sizeof(s->key); i++)
                snprintf(s->key + 5 + 2 * i, 3, "%02x", md[i]);
        return 0;
}

int cmp_authenticate(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v, cmp_sender *ret) {
        cmp_sender s = { .kind = CMP_AUTH_NONE };
        int r;

        if (v->protection_nid == NID_id_PasswordBasedMAC) {
                if ((r = check_mac(ca, msg, v, s.token_id)) < 0)
                        return r;
                s.kind = CMP_AUTH_MAC;
                snprintf(s.key, sizeof(s.key), "token:%s", s.token_id);
        } else if (v->protection_nid != NID_undef) {
                if (v->protection_nid < 0 || !OBJ_find_sigid_algs(v->protection_nid, NULL, NULL))
                        return hwid_fail(HWID_E_INVALID, "protection algorithm not supported: use PasswordBasedMac "
                                         "with a bootstrap token, or a signature with a certificate this CA "
                                         "issued");
                if ((r = check_signature(ca, msg, v)) < 0 || (r = signer_of(v, &s)) < 0) {
                        cmp_sender_clear(&s);
                        return r;
                }
                s.kind = CMP_AUTH_SIGNATURE;
        }
        *ret = s;
        return 0;
}

void cmp_sender_clear(cmp_sender *s) {
        OPENSSL_free(s->cert_der);
        *s = (cmp_sender) { 0 };
}

int cmp_sender_copy(const cmp_sender *from, cmp_sender *to) {
        cmp_sender s = *from;

        if (from->cert_der && !(s.cert_der = OPENSSL_memdup(from->cert_der, from->cert_len)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *to = s;
        return 0;
}
