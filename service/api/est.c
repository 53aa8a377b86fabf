/* EST (RFC 7030): a second front door to the same enrollment and renewal.
 *
 * Nothing here issues, authenticates or decides: each request's wire
 * format is decoded (base64 PKCS#10, HTTP Basic credentials as a
 * bootstrap token "<id>.<secret>") into the request POST /csr or
 * /v1/renew would have received, that handler answers it, and its answer
 * is encoded back (a PEM certificate as a base64 certs-only PKCS#7, a
 * JSON error as text).  Tokens, the approval queue, the store, the audit
 * log, rate and body limits are therefore the native API's. */
#include <string.h>
#include <strings.h>
#include <time.h>

#include <json-c/json.h>

#include <openssl/crypto.h>
#include <openssl/x509.h>

#include "base64.h"
#include "api.h"
#include "error.h"
#include "ossl-util.h"
#include "est-wire.h"
#include "est.h"
#include "secret.h"
#include "token.h"

#define EST_PREFIX "/.well-known/est/"
#define EST_LABEL_MAX 64
#define EST_REALM "Basic realm=\"hwid EST\", charset=\"UTF-8\""
#define EST_CERTS_ONLY "application/pkcs7-mime; smime-type=certs-only"

/* The message of a JSON error body (or the body itself), as text. */
static void error_to_text(http_response *resp) {
        json_object *o = http_response_json(resp);
        json_object *m = NULL;
        char text[1024];

        snprintf(text, sizeof(text), "%s", resp->body.data ? (const char *) resp->body.data : "");
        if (o && json_object_object_get_ex(o, "message", &m) && json_object_is_type(m, json_type_string))
                snprintf(text, sizeof(text), "%s", json_object_get_string(m));
        json_object_put(o);
        buf_reset(&resp->body);
        resp->content_type = "text/plain; charset=utf-8";
        if (buf_printf(&resp->body, "%s\n", text) < 0)
                http_error_from(resp, -HWID_E_NOMEM);
}

/* 202: the request waits for an administrator; the client asks again
 * with the same request after Retry-After (RFC 7030 §4.2.3). */
static void pending_to_text(http_response *resp) {
        json_object *o = http_response_json(resp);
        json_object *id = NULL, *name = NULL, *spki = NULL;

        json_object_object_get_ex(o, "request_id", &id);
        json_object_object_get_ex(o, "identity", &name);
        json_object_object_get_ex(o, "spki_sha256", &spki);
        buf_reset(&resp->body);
        resp->location[0] = '\0';
        resp->content_type = "text/plain; charset=utf-8";
        if (buf_printf(&resp->body,
                       "request %.8s... for %s is pending approval (key SHA-256 %s); "
                       "send the same request again after Retry-After seconds\n",
                       json_object_get_string(id), json_object_get_string(name), json_object_get_string(spki)) < 0)
                http_error_from(resp, -HWID_E_NOMEM);
        json_object_put(o);
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

/* The native handler's answer, in EST's terms. */
static void est_answer(ca_service *ca, http_response *resp) {
        _cleanup_free_ char *pem = NULL;
        int r;

        if (resp->status == 200 || resp->status == 201) {
                pem = strndup(resp->body.data ? (const char *) resp->body.data : "", resp->body.len);
                r = pem ? respond_certs_only(resp, pem, EST_CERTS_ONLY) : -HWID_E_NOMEM;
                if (r < 0)
                        ca_respond_error(ca, resp, r);
        }
        if (resp->status == 202)
                pending_to_text(resp);
        if (resp->status == 401)
                resp->www_authenticate = EST_REALM;
        if (resp->status >= 400)
                error_to_text(resp);
}

static void est_fail(ca_service *ca, http_response *resp, int r) {
        ca_respond_error(ca, resp, r);
        est_answer(ca, resp);
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

/* Basic credentials, user = token id and password = token secret, as the
 * native "Bearer <id>.<secret>" (*ret: secret_free()).  Anything else is
 * passed on as it came, for the token check to refuse. */
static int basic_to_bearer(const char *authorization, char **ret) {
        _cleanup_secret_ char *password = NULL, *out = NULL;
        char user[EST_USER_MAX + 1];
        size_t n;

        *ret = NULL;
        if (!authorization || strncasecmp(authorization, "Basic ", 6) != 0)
                return 0;
        if (est_basic_parse(authorization, user, &password) < 0)
                return hwid_fail(HWID_E_TOKEN_INVALID, "the Basic credentials are malformed: the user is the "
                                 "bootstrap token's id, the password its secret");
        n = strlen("Bearer ") + strlen(user) + 1 + strlen(password) + 1;
        if (!(out = malloc(n)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        snprintf(out, n, "Bearer %s.%s", user, password);
        *ret = TAKE_PTR(out);
        return 0;
}

/* ---------- proof-of-possession linking (§3.5) ---------- */

/* The challengePassword of a DER CSR, as text; NULL if it has none. */
static const ASN1_STRING *challenge_password(const X509_REQ *x) {
        int i = X509_REQ_get_attr_by_NID(x, NID_pkcs9_challengePassword, -1);
        ASN1_TYPE *t = i >= 0 ? X509_ATTRIBUTE_get0_type(X509_REQ_get_attr(x, i), 0) : NULL;

        if (!t || (t->type != V_ASN1_PRINTABLESTRING && t->type != V_ASN1_UTF8STRING &&
                   t->type != V_ASN1_IA5STRING && t->type != V_ASN1_T61STRING && t->type != V_ASN1_BMPSTRING &&
                   t->type != V_ASN1_UNIVERSALSTRING))
                return NULL;
        return t->value.asn1_string;
}

/* With the profile's est.pop_linking, the CSR's challengePassword must be
 * the base64 of this connection's channel binding: the CSR was made for
 * this TLS session, not relayed from another one. */
static int check_pop(const http_request *req, const policy_profile *p) {
        const unsigned char *d = req->body;
        _cleanup_(X509_REQ_freep) X509_REQ *x = NULL;
        _cleanup_free_ char *want = NULL;
        uint8_t binding[HTTP_TLS_BINDING_MAX];
        const char *binding_type;
        const ASN1_STRING *got;
        size_t binding_len;
        int r;

        if (!p || !p->est_pop_linking)
                return 0;
        http_request_tls_binding(req, binding, &binding_len, &binding_type);
        if (binding_len == 0)
                return hwid_fail(HWID_E_FORBIDDEN, "profile %s requires proof-of-possession linking (RFC 7030 §3.5) "
                                 "and this connection has no TLS channel binding", p->name);
        if (!(x = d2i_X509_REQ(NULL, &d, (long) req->body_len)))
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "the body is not a PKCS#10 request");
        if ((r = base64_encode(binding, binding_len, false, &want)) < 0)
                return r;
        if (!(got = challenge_password(x)))
                return hwid_fail(HWID_E_FORBIDDEN, "profile %s requires proof-of-possession linking: the CSR's "
                                 "challengePassword must be the base64 of this connection's %s channel binding",
                                 p->name, binding_type);
        if ((size_t) ASN1_STRING_length(got) != strlen(want) ||
            CRYPTO_memcmp(ASN1_STRING_get0_data(got), want, strlen(want)) != 0)
                return hwid_fail(HWID_E_FORBIDDEN, "the CSR's challengePassword is not this TLS connection's %s "
                                 "channel binding (RFC 7030 §3.5): make the CSR on the connection that sends it",
                                 binding_type);
        return 0;
}

/* ---------- simpleenroll ---------- */

/* RFC 7030 §4.2.3: a client told 202 sends the same request again.  With
 * a genuine token and the key of a request it made, that request's
 * state is the answer, exactly as a native poll of it would be. */
static int answer_earlier_request(ca_service *ca, const http_request *inner, const ca_auth *a,
                                  http_response *resp, bool *ret_done) {
        _cleanup_(csr_info_freep) csr_info *csr = NULL;

        *ret_done = false;
        if (csr_info_parse(inner->body, inner->body_len, &csr) < 0)
                return 0; /* the native handler says why */
        return ca_answer_request_of(ca, a->token.id, csr, resp, ret_done);
}

/* What only EST adds before the native enrollment: a label must be the
 * token's profile, and an earlier request may be the answer. */
static int enroll_front(ca_service *ca, const http_request *inner, const char *label, ca_auth *a,
                        http_response *resp, bool *ret_done) {
        int r;

        *ret_done = false;
        if (!inner->authorization)
                return 0;
        (void) ca_auth_token(ca, inner, (int64_t) time(NULL), a);
        if (!a->token_genuine)
                return 0; /* refused by the native handler, counted there */
        if (label && strcmp(a->token.profile, label) != 0)
                return hwid_fail(HWID_E_FORBIDDEN, "bootstrap token %s is for profile %s, not for EST label %s",
                                 a->token.id, a->token.profile, label);
        /* An earlier request was linked when it was made; asking again
         * may come over another connection. */
        if ((r = answer_earlier_request(ca, inner, a, resp, ret_done)) < 0 || *ret_done)
                return r;
        /* A spent or expired token is refused for that first (401). */
        if (a->who.role != ROLE_TOKEN)
                return 0;
        return check_pop(inner, policy_profile_find(ca->cfg->policy, a->token.profile));
}

/* Without credentials in the header, a client certificate the profile
 * accepts (est.enroll_by_certificate): that profile's proof-of-possession
 * linking holds.  Who the client is, and whether it may, is the native
 * enrollment's to say (ca_enroll_by_certificate()). */
static int cert_enroll_front(ca_service *ca, const http_request *inner, const char *label, ca_auth *a) {
        const policy_profile *p;

        if (ca_auth_peer(ca, inner, (int64_t) time(NULL), a) < 0 || !a->cert.profile)
                return 0;
        p = label ? policy_profile_find(ca->cfg->policy, label)
                  : policy_cert_enroll_target(ca->cfg->policy, a->cert.profile, NULL);
        if (!policy_cert_enroll_accepts(p, a->cert.profile))
                return 0; /* policy refuses it, with the reason */
        return check_pop(inner, p);
}

/* Credentials in the Authorization header (Basic) win: a client
 * certificate sent with them is not looked at for enrollment. */
static void simpleenroll(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        _cleanup_free_ uint8_t *der = NULL;
        _cleanup_secret_ char *bearer = NULL;
        http_request inner = *req;
        bool by_cert = !req->authorization && req->peer_cert, done = false;
        ca_auth a = { 0 };
        size_t len;
        int r;

        snprintf(a.actor, sizeof(a.actor), "anonymous");
        if ((r = basic_to_bearer(req->authorization, &bearer)) >= 0 && (r = decode_csr(req, &der, &len)) >= 0) {
                inner.body = der;
                inner.body_len = len;
                inner.content_type = "application/pkcs10";
                if (bearer)
                        inner.authorization = bearer;
                if (!inner.authorization && !by_cert)
                        r = hwid_fail(HWID_E_UNAUTHENTICATED, "EST simpleenroll needs HTTP Basic credentials (user = "
                                      "the bootstrap token's id, password = its secret) or a client certificate "
                                      "this CA issued that a profile accepts");
                else
                        r = by_cert ? cert_enroll_front(ca, &inner, label, &a)
                                    : enroll_front(ca, &inner, label, &a, resp, &done);
        }
        if (r < 0)
                ca_fail_request(ca, &a, "enroll", NULL, resp, r);
        else if (by_cert)
                ca_enroll_by_certificate(ca, &inner, label, resp);
        else if (!done && a.token_genuine) /* its secret checked once, above: one HMAC a request */
                ca_enroll_token(ca, &inner, a.token.id, resp);
        else if (!done)
                ca_enroll(ca, &inner, resp);
        ca_auth_clear(&a);
        est_answer(ca, resp);
}

/* ---------- simplereenroll ---------- */

/* A label must be the profile of the certificate presented, and that
 * profile's proof-of-possession linking holds.  *a: who presented it. */
static int reenroll_front(ca_service *ca, const http_request *inner, const char *label, ca_auth *a) {
        if (ca_auth_peer(ca, inner, (int64_t) time(NULL), a) < 0 || !a->cert.profile)
                return 0; /* the native handler says why */
        if (label && strcmp(a->cert.profile, label) != 0)
                return hwid_fail(HWID_E_FORBIDDEN, "certificate %s is of profile %s, not of EST label %s",
                                 a->cert.serial, a->cert.profile, label);
        return check_pop(inner, policy_profile_find(ca->cfg->policy, a->cert.profile));
}

static void simplereenroll(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        _cleanup_free_ uint8_t *der = NULL;
        http_request inner = *req;
        ca_auth a = { 0 };
        size_t len;
        int r;

        snprintf(a.actor, sizeof(a.actor), "anonymous");
        if ((r = decode_csr(req, &der, &len)) >= 0) {
                inner.body = der;
                inner.body_len = len;
                inner.content_type = "application/pkcs10";
                inner.authorization = NULL; /* renewal is by the certificate alone */
                r = reenroll_front(ca, &inner, label, &a);
        }
        if (r < 0)
                ca_fail_request(ca, &a, "renew", NULL, resp, r);
        else
                ca_renew(ca, &inner, resp);
        ca_auth_clear(&a);
        est_answer(ca, resp);
}

/* ---------- the read-only operations ---------- */

static void cacerts(ca_service *ca, const http_request *req, http_response *resp) {
        int r = ca_allow_read(ca, req, ACTION_GET_CA);

        if (r >= 0)
                r = respond_certs_only(resp, ca->ca_pem, "application/pkcs7-mime");
        if (r < 0)
                est_fail(ca, resp, r);
}

/* The profile csrattrs describes: the label's, else the one of the
 * client certificate presented; NULL: none (204, §4.5.2). */
static const policy_profile *csrattrs_profile(ca_service *ca, const http_request *req, const char *label) {
        const policy_profile *p = NULL;
        ca_auth a = { 0 };

        if (label)
                return policy_profile_find(ca->cfg->policy, label);
        if (ca_auth_peer(ca, req, (int64_t) time(NULL), &a) >= 0 && a.cert.profile)
                p = policy_profile_find(ca->cfg->policy, a.cert.profile);
        ca_auth_clear(&a);
        return p;
}

static void csrattrs(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        _cleanup_free_ uint8_t *der = NULL;
        const policy_profile *p;
        size_t len;
        int r = ca_allow_read(ca, req, ACTION_GET_CA);

        if (r < 0) {
                est_fail(ca, resp, r);
                return;
        }
        if (!(p = csrattrs_profile(ca, req, label))) {
                resp->status = 204;
                return;
        }
        if ((r = est_csrattrs_der(p, &der, &len)) < 0 || (r = est_b64_encode(der, len, &resp->body)) < 0) {
                est_fail(ca, resp, r);
                return;
        }
        resp->status = 200;
        resp->content_type = "application/csrattrs";
        resp->transfer_encoding = "base64";
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

bool ca_est_route(ca_service *ca, const http_request *req, http_response *resp) {
        char label[EST_LABEL_MAX + 1], msg[160];
        const char *op;

        if (strncmp(req->path, EST_PREFIX, strlen(EST_PREFIX)) != 0)
                return false;
        if (!split_path(req->path, label, &op)) {
                http_respond_text(resp, 404, "not_found", "no such EST path");
                return true;
        }
        if (label[0] && !policy_profile_find(ca->cfg->policy, label)) {
                snprintf(msg, sizeof(msg), "no EST label %s: a label is the name of a profile", label);
                http_respond_text(resp, 404, "not_found", msg);
                return true;
        }
        dispatch(ca, req, op, label[0] ? label : NULL, resp);
        return true;
}
