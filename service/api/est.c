/* EST (RFC 7030): a second front door to the same enrollment and renewal.
 *
 * Nothing here issues, authenticates or decides: each request's wire
 * format is decoded (base64 PKCS#10, HTTP Basic credentials as a
 * bootstrap token "<id>.<secret>") into one call of the CA core, with
 * the label and the connection's channel binding (for the profiles that
 * link proof of possession to it), and its answer encoded back (a
 * certificate as a base64 certs-only PKCS#7, a refusal as text).  Tokens,
 * the approval queue, the store, the audit log, rate and body limits are
 * therefore the native API's. */
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api.h"
#include "error.h"
#include "est-wire.h"
#include "est.h"
#include "secret.h"

#define EST_PREFIX "/.well-known/est/"
#define EST_LABEL_MAX 64
#define EST_REALM "Basic realm=\"hwid EST\", charset=\"UTF-8\""
#define EST_CERTS_ONLY "application/pkcs7-mime; smime-type=certs-only"

/* ---------- answers in EST's format ---------- */

/* An error as text (EST clients read no JSON); 401 says how to log in. */
static void text_error(http_response *resp, const char *message) {
        if (resp->status == 401)
                resp->www_authenticate = EST_REALM;
        buf_reset(&resp->body);
        resp->content_type = "text/plain; charset=utf-8";
        if (buf_printf(&resp->body, "%s\n", message) < 0)
                http_error_from(resp, -HWID_E_NOMEM);
}

static void est_refuse(http_response *resp, const ca_result *res, int64_t now) {
        door_respond_refusal(resp, res, "renewal_opens_at", now);
        text_error(resp, res->message);
}

/* A failure of this door's own (an answer it could not encode). */
static void est_fail(ca_service *ca, http_response *resp, int r) {
        char message[CA_MESSAGE_MAX];

        ca_service_count_error(ca, "request", r);
        snprintf(message, sizeof(message), "%s", hwid_public_message(r));
        http_respond_error(resp, r);
        text_error(resp, message);
}

static int respond_certs_only(http_response *resp, const char *pem, const char *content_type) {
        _cleanup_free_ uint8_t *der = NULL;
        size_t len;
        int r;

        if ((r = est_certs_only_from_pem(pem, &der, &len)) < 0)
                return r;
        buf_reset(&resp->body);
        if ((r = est_b64_encode(der, len, &resp->body)) < 0)
                return r;
        resp->status = 200;
        resp->content_type = content_type;
        resp->transfer_encoding = "base64";
        return 0;
}

/* 202: the request waits for an administrator; the client asks again
 * with the same request after Retry-After (RFC 7030 §4.2.3). */
static void respond_pending(http_response *resp, const ca_result *res) {
        resp->status = 202;
        resp->retry_after = res->retry_after;
        resp->content_type = "text/plain; charset=utf-8";
        if (buf_printf(&resp->body,
                       "request %.8s... for %s is pending approval (key SHA-256 %s); "
                       "send the same request again after Retry-After seconds\n",
                       res->request_id, res->identity, res->spki_sha256) < 0)
                http_error_from(resp, -HWID_E_NOMEM);
}

/* The core's answer to an enrollment or a renewal, in EST's terms. */
static void est_answer(ca_service *ca, const ca_result *res, int64_t now, http_response *resp) {
        int r;

        if (res->outcome == CA_PENDING)
                respond_pending(resp, res);
        else if (res->outcome != CA_ISSUED && res->outcome != CA_AGAIN)
                est_refuse(resp, res, now);
        else if ((r = respond_certs_only(resp, res->pem, EST_CERTS_ONLY)) < 0)
                est_fail(ca, resp, r);
}

/* ---------- requests in EST's format ---------- */

/* An EST POST body: application/pkcs10, base64 of the DER. */
static int decode_csr(const http_request *req, uint8_t **ret, size_t *ret_len) {
        static const char want[] = "application/pkcs10";
        const char *ct = req->content_type;
        size_t n = strlen(want);
        int r;

        if (!ct || strncasecmp(ct, want, n) != 0 || (ct[n] && ct[n] != ';' && ct[n] != ' '))
                return hwid_fail(HWID_E_CSR_INVALID, "EST wants Content-Type: application/pkcs10, not %s",
                                 ct ? ct : "none");
        if ((r = est_b64_decode(req->body, req->body_len, ret, ret_len)) < 0)
                return hwid_fail(r == -HWID_E_TOO_LARGE ? HWID_E_TOO_LARGE : HWID_E_CSR_INVALID, "%s",
                                 hwid_strerror(r));
        /* DER only: the native API's PEM, base64-encoded once more, is not EST. */
        if (*ret_len == 0 || (*ret)[0] != 0x30) {
                free(*ret);
                *ret = NULL;
                return hwid_fail(HWID_E_CSR_INVALID, "the base64 body does not hold a DER PKCS#10 request");
        }
        return 0;
}

/* Basic credentials, user = token id and password = token secret: the
 * token "<id>.<secret>" (*ret: secret_free()), NULL when the header holds
 * no Basic credentials (anything else goes on as it came, for the token
 * check to refuse). */
static int basic_token(const char *authorization, char **ret) {
        _cleanup_secret_ char *password = NULL, *out = NULL;
        char user[EST_USER_MAX + 1];
        size_t n;

        *ret = NULL;
        if (!authorization || strncasecmp(authorization, "Basic ", 6) != 0)
                return 0;
        if (est_basic_parse(authorization, user, &password) < 0)
                return hwid_fail(HWID_E_TOKEN_INVALID, "the Basic credentials are malformed: the user is the "
                                 "bootstrap token's id, the password its secret");
        n = strlen(user) + 1 + strlen(password) + 1;
        if (!(out = malloc(n)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        snprintf(out, n, "%s.%s", user, password);
        *ret = TAKE_PTR(out);
        return 0;
}

/* The connection's channel binding, when a profile asks for it. */
static void tls_binding(void *userdata, uint8_t ret[CA_BINDING_MAX], size_t *ret_len, const char **ret_type) {
        http_request_tls_binding(userdata, ret, ret_len, ret_type);
}

_Static_assert(CA_BINDING_MAX == HTTP_TLS_BINDING_MAX, "a channel binding fits");

/* ---------- simpleenroll, simplereenroll ---------- */

/* What an EST POST says: the CSR, the label, the client certificate and
 * the connection's channel binding. */
static ca_request est_request(ca_op op, const http_request *req, const char *label, int64_t now) {
        return (ca_request) {
                .op = op,
                .door = CA_DOOR_EST,
                .now = now,
                .label = label,
                .peer = door_peer(req),
                .binding = tls_binding,
                .binding_userdata = (void *) req,
        };
}

/* Credentials in the Authorization header (Basic) win: a client
 * certificate sent with them is not looked at for enrollment. */
static void simpleenroll(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        _cleanup_free_ uint8_t *der = NULL;
        _cleanup_secret_ char *token = NULL;
        int64_t now = (int64_t) time(NULL);
        ca_request in = est_request(CA_OP_ENROLL, req, label, now);
        ca_result res;
        size_t len = 0;
        int r;

        in.by_certificate = !req->authorization && req->peer_cert;
        if ((r = basic_token(req->authorization, &token)) >= 0 && (r = decode_csr(req, &der, &len)) >= 0 &&
            !req->authorization && !in.by_certificate)
                r = hwid_fail(HWID_E_UNAUTHENTICATED, "EST simpleenroll needs HTTP Basic credentials (user = the "
                              "bootstrap token's id, password = its secret) or a client certificate this CA "
                              "issued that a profile accepts");
        if (r < 0)
                ca_request_refuse(&in, r);
        in.authorization = token ? token : req->authorization;
        in.bearer = !token;
        in.csr = der;
        in.csr_len = len;
        ca_call(ca, &in, &res);
        est_answer(ca, &res, now, resp);
        ca_result_clear(&res);
}

/* Renewal is by the client certificate alone. */
static void simplereenroll(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        _cleanup_free_ uint8_t *der = NULL;
        int64_t now = (int64_t) time(NULL);
        ca_request in = est_request(CA_OP_RENEW, req, label, now);
        ca_result res;
        size_t len = 0;
        int r;

        if ((r = decode_csr(req, &der, &len)) < 0)
                ca_request_refuse(&in, r);
        in.csr = der;
        in.csr_len = len;
        ca_call(ca, &in, &res);
        est_answer(ca, &res, now, resp);
        ca_result_clear(&res);
}

/* ---------- the read-only operations ---------- */

static void cacerts(ca_service *ca, const http_request *req, http_response *resp) {
        int64_t now = (int64_t) time(NULL);
        ca_request in = { .op = CA_OP_READ, .what = CA_READ_CA, .door = CA_DOOR_EST, .now = now,
                          .peer = door_peer(req) };
        ca_result res;
        int r;

        if (ca_call(ca, &in, &res) != CA_DONE)
                est_refuse(resp, &res, now);
        else if ((r = respond_certs_only(resp, res.text, "application/pkcs7-mime")) < 0)
                est_fail(ca, resp, r);
        ca_result_clear(&res);
}

/* What the label's profile (else the client certificate's) wants of a
 * CSR; 204 when there is no such profile (§4.5.2). */
static void csrattrs(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        _cleanup_free_ uint8_t *der = NULL;
        int64_t now = (int64_t) time(NULL);
        ca_request in = { .op = CA_OP_READ, .what = CA_READ_TEMPLATE, .door = CA_DOOR_EST, .now = now,
                          .label = label, .peer = door_peer(req) };
        ca_result res;
        size_t len;
        int r;

        ca_call(ca, &in, &res);
        if (res.outcome == CA_REFUSED) {
                est_refuse(resp, &res, now);
        } else if (res.outcome == CA_NONE) {
                resp->status = 204;
        } else if ((r = est_csrattrs_der(&res.tmpl, &der, &len)) < 0 ||
                   (r = est_b64_encode(der, len, &resp->body)) < 0) {
                est_fail(ca, resp, r);
        } else {
                resp->status = 200;
                resp->content_type = "application/csrattrs";
                resp->transfer_encoding = "base64";
        }
        ca_result_clear(&res);
}

/* ---------- routing ---------- */

static bool label_ok(const char *s, size_t n) {
        if (n == 0 || n > EST_LABEL_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", s[i]))
                        return false;
        return true;
}

/* "/.well-known/est/[label/]op": the operation, and the label if any. */
static bool split_path(const char *path, char label[EST_LABEL_MAX + 1], const char **ret_op) {
        const char *rest = path + strlen(EST_PREFIX), *slash = strchr(rest, '/');

        label[0] = '\0';
        if (!slash) {
                *ret_op = rest;
                return true;
        }
        if (!label_ok(rest, (size_t) (slash - rest)) || strchr(slash + 1, '/'))
                return false;
        memcpy(label, rest, (size_t) (slash - rest));
        label[slash - rest] = '\0';
        *ret_op = slash + 1;
        return true;
}

static void dispatch(ca_service *ca, const http_request *req, const char *op, const char *label,
                     http_response *resp) {
        bool get = strcmp(req->method, "GET") == 0, post = strcmp(req->method, "POST") == 0;

        if (strcmp(op, "cacerts") == 0 && get)
                cacerts(ca, req, resp);
        else if (strcmp(op, "csrattrs") == 0 && get)
                csrattrs(ca, req, label, resp);
        else if (strcmp(op, "simpleenroll") == 0 && post)
                simpleenroll(ca, req, label, resp);
        else if (strcmp(op, "simplereenroll") == 0 && post)
                simplereenroll(ca, req, label, resp);
        else if (strcmp(op, "serverkeygen") == 0 && post)
                http_respond_text(resp, 501, "not_implemented", "serverkeygen is not offered: keys are made in the device's "
                         "TPM or HSM and never leave it; send simpleenroll with a CSR signed by that key");
        else if (strcmp(op, "fullcmc") == 0 && post)
                http_respond_text(resp, 501, "not_implemented", "fullcmc is not offered: use simpleenroll and simplereenroll");
        else if (!strcmp(op, "cacerts") || !strcmp(op, "csrattrs") || !strcmp(op, "simpleenroll") ||
                 !strcmp(op, "simplereenroll") || !strcmp(op, "serverkeygen") || !strcmp(op, "fullcmc"))
                http_respond_text(resp, 405, "method_not_allowed", "method not allowed for this EST operation");
        else
                http_respond_text(resp, 404, "not_found", "no such EST operation");
}

bool api_est_route(ca_service *ca, const http_request *req, http_response *resp) {
        char label[EST_LABEL_MAX + 1], msg[160];
        const char *op;

        if (strncmp(req->path, EST_PREFIX, strlen(EST_PREFIX)) != 0)
                return false;
        if (!split_path(req->path, label, &op)) {
                http_respond_text(resp, 404, "not_found", "no such EST path");
                return true;
        }
        if (label[0] && !ca_profile_exists(ca, label)) {
                snprintf(msg, sizeof(msg), "no EST label %s: a label is the name of a profile", label);
                http_respond_text(resp, 404, "not_found", msg);
                return true;
        }
        dispatch(ca, req, op, label[0] ? label : NULL, resp);
        return true;
}
