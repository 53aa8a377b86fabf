#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "error.h"
#include "est-client.h"
#include "est-wire.h"
#include "ossl-util.h"
#include "secret.h"

/* The PEM certificates of a 200 EST answer (base64 certs-only PKCS#7). */
static int certs_of(const client_response *resp, char **ret) {
        _cleanup_free_ uint8_t *der = NULL;
        size_t len;
        int r;

        if ((r = est_b64_decode(resp->body.data ? resp->body.data : (const uint8_t *) "", resp->body.len, &der,
                                &len)) < 0 ||
            (r = est_certs_only_to_pem(der, len, ret)) < 0)
                return hwid_fail(HWID_E_NETWORK, "the EST answer is not a base64 certs-only PKCS#7: %s",
                                 hwid_strerror(r));
        return 0;
}

int est_fetch_ca_unverified(const client_opts *o, char **ret_pem, const char **ret_server) {
        client_response resp;
        const char *server = NULL;
        int r = client_get_unverified(o, EST_PATH "/cacerts", &resp, &server);

        if (r < 0)
                return r;
        r = resp.status == 200 ? certs_of(&resp, ret_pem) : client_error_from_response(&resp);
        client_response_clear(&resp);
        if (r >= 0 && ret_server)
                *ret_server = server;
        return r;
}

int est_get_cacerts(client_session *cs, char **ret_pem) {
        client_response resp;
        int r = client_session_request(cs, "GET", EST_PATH "/cacerts", NULL, NULL, 0, NULL, &resp);

        if (r < 0)
                return r;
        r = resp.status == 200 ? certs_of(&resp, ret_pem) : client_error_from_response(&resp);
        client_response_clear(&resp);
        return r;
}

static int csr_b64(const char *csr_pem, buf *out) {
        _cleanup_(BIO_free_allp) BIO *in = BIO_new_mem_buf(csr_pem, -1);
        _cleanup_(X509_REQ_freep) X509_REQ *req = in ? PEM_read_bio_X509_REQ(in, NULL, NULL, NULL) : NULL;
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        int n;

        if (!req || (n = i2d_X509_REQ(req, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot encode the CSR as DER");
        return est_b64_encode(der, (size_t) n, out);
}

int est_post_csr(client_session *cs, const char *op, const char *auth, const char *csr_pem, client_response *ret,
                 char **ret_cert) {
        _cleanup_buf_ buf body;
        _cleanup_free_ char *path = NULL;
        int r;

        buf_init(&body, 64 * 1024);
        if ((r = csr_b64(csr_pem, &body)) < 0)
                return r;
        if (asprintf(&path, EST_PATH "/%s", op) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = client_session_request(cs, "POST", path, auth, body.data, body.len, "application/pkcs10", ret)) < 0)
                return r;
        if (ret->status == 200 && (r = certs_of(ret, ret_cert)) < 0) {
                client_response_clear(ret);
                return r;
        }
        return 0;
}

int est_token_auth(const char *token, char **ret) {
        const char *dot = token ? strchr(token, '.') : NULL;
        char user[EST_USER_MAX + 1];

        if (!dot || dot == token || (size_t) (dot - token) > EST_USER_MAX)
                return hwid_fail(HWID_E_TOKEN_INVALID, "the bootstrap token is not <id>.<secret>");
        memcpy(user, token, (size_t) (dot - token));
        user[dot - token] = '\0';
        return est_basic_make(user, dot + 1, ret);
}
