/* certmonger's external CA helper operations (certmonger.h). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "certmonger.h"
#include "client.h"
#include "csr.h"
#include "device.h"
#include "error.h"
#include "ossl-util.h"
#include "pinned.h"
#include "renew.h"
#include "secret.h"
#include "x509-util.h"

#define note(h, ...) progress_say((h)->o->note, (h)->o->note_data, __VA_ARGS__)

/* "Later" when the answer says no more: a pending request, rate limits. */
#define LATER_DEFAULT 60
/* certmonger comes back at least this often, even when the CA names a
 * later moment (a clock that moves, a window changed by a reload). */
#define LATER_MAX (7 * 24 * 3600)
#define REQUEST_ID_MAX 128
#define COOKIE_REQUEST "request:"

void certmonger_answer_clear(certmonger_answer *a) {
        free(a->output);
        *a = (certmonger_answer) { 0 };
}

certmonger_status certmonger_status_of(int r) {
        switch (-r) {
        case HWID_E_PENDING:
        case HWID_E_TOO_EARLY:
        case HWID_E_RATE_LIMITED:
                return CERTMONGER_WAIT_WITH_DELAY;
        /* Passing: the CA, the network, the TPM or HSM; certmonger retries. */
        case HWID_E_NETWORK:
        case HWID_E_STORE:
        case HWID_E_NOT_READY:
        case HWID_E_HSM:
        case HWID_E_TPM:
        case HWID_E_TPM_UNREACHABLE:
        case HWID_E_NOMEM:
        case HWID_E_INTERNAL:
                return CERTMONGER_UNREACHABLE;
        /* The helper's own configuration: its options, keys, PINs, token. */
        case HWID_E_USAGE:
        case HWID_E_CONFIG:
        case HWID_E_URI:
        case HWID_E_KEY_NOT_FOUND:
        case HWID_E_TOKEN_NOT_FOUND:
        case HWID_E_PIN_INCORRECT:
        case HWID_E_PIN_LOCKED:
        case HWID_E_PIN_MISSING:
                return CERTMONGER_UNDERCONFIGURED;
        default:
                return CERTMONGER_REJECTED;
        }
}

static int answer(certmonger_answer *ret, certmonger_status status, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int answer(certmonger_answer *ret, certmonger_status status, const char *fmt, ...) {
        va_list ap;
        int n;

        free(ret->output);
        va_start(ap, fmt);
        n = vasprintf(&ret->output, fmt, ap);
        va_end(ap);
        if (n < 0) {
                ret->output = NULL;
                ret->status = CERTMONGER_UNREACHABLE;
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        ret->status = status;
        return 0;
}

static int answer_failure(certmonger_answer *ret, int r) {
        certmonger_status s = certmonger_status_of(r);

        /* "Later" needs a delay and a cookie: without them, certmonger's own pace. */
        return answer(ret, s == CERTMONGER_WAIT_WITH_DELAY ? CERTMONGER_UNREACHABLE : s, "%s\n", hwid_strerror(r));
}

static int answer_later(certmonger_answer *ret, int64_t delay, const char *cookie) {
        delay = delay < 1 ? 1 : delay > LATER_MAX ? LATER_MAX : delay;
        return answer(ret, CERTMONGER_WAIT_WITH_DELAY, "%lld\n%s\n", (long long) delay, cookie);
}

/* One call's state: the options, and the CA once pinned. */
typedef struct helper {
        const certmonger_opts *o;
        client_opts co;
        char *bundle; /* the pinned CA and what chains above it */
        char *anchor; /* the pinned certificate: the TLS trust anchor */
} helper;

static int fetch_ca(helper *h) {
        unsigned dropped = 0;
        int r;

        if (h->anchor)
                return 0;
        r = pinned_fetch_ca(&h->co, h->o->ca_hash, &h->bundle, &h->anchor, &dropped, NULL);
        if (r < 0)
                return r;
        if (dropped > 0)
                note(h, "warning: /ca sent %u certificate(s) that do not chain to the pinned CA: left out", dropped);
        h->co.ca_pem = h->anchor;
        return 0;
}

/* certmonger's request: what it asks for, and its key in the TPM/HSM. */
typedef struct request {
        X509_REQ *req;
        char *csr;   /* as sent: re-encoded from what was parsed */
        char *cn;
        hwid_key *key;
} request;

static void request_clear(request *rq) {
        X509_REQ_free(rq->req);
        free(rq->csr);
        free(rq->cn);
        hwid_key_free(rq->key);
        *rq = (request) { 0 };
}

/* The first of the given keys whose public half is pub.  This is the
 * custody check: a key certmonger made itself (in software) is none of
 * them, and nothing is sent for it. */
static int find_key(helper *h, EVP_PKEY *pub, const char *what, hwid_key **ret) {
        hsm_options ho = { .tcti = h->o->tcti };
        char fp[65] = "?";

        for (const char *const *u = h->o->keys; u && *u; u++) {
                _cleanup_(hwid_key_freep) hwid_key *k = NULL;
                int r = hwid_key_open(*u, &ho, &k);

                if (r == -HWID_E_KEY_NOT_FOUND) {
                        note(h, "skipping --key %s: %s", *u, hwid_strerror(r));
                        continue;
                }
                if (r < 0)
                        return r;
                if (EVP_PKEY_eq(hwid_key_public(k), pub) == 1) {
                        *ret = TAKE_PTR(k);
                        return 0;
                }
        }
        (void) spki_sha256_hex(pub, fp);
        return hwid_fail(HWID_E_FORBIDDEN, "the key of %s (SPKI sha256:%s) is none of the helper's --key keys: hwid "
                         "enrolls only keys in a TPM or HSM, and a key certmonger made itself is in software", what,
                         fp);
}

static int common_name(const X509_NAME *name, char **ret) {
        int i = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
        const ASN1_STRING *s = i >= 0 ? X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)) : NULL;
        unsigned char *utf8 = NULL;
        int n = s ? ASN1_STRING_to_UTF8(&utf8, s) : -1;

        if (n <= 0)
                return hwid_fail(HWID_E_CSR_INVALID, "the request names no CN (getcert request -N CN=NAME)");
        *ret = strndup((const char *) utf8, (size_t) n);
        OPENSSL_free(utf8);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

static int request_open(helper *h, const char *pem, request *rq) {
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        int r;

        if (!pem || !*pem)
                return hwid_fail(HWID_E_CONFIG, "no request in $CERTMONGER_CSR: the helper is run by certmonger "
                                 "(getcert add-ca -e), which passes it");
        if (!(b = BIO_new_mem_buf(pem, -1)) || !(rq->req = PEM_read_bio_X509_REQ(b, NULL, NULL, NULL)))
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "$CERTMONGER_CSR holds no PEM certificate request");
        if ((r = csr_to_pem(rq->req, &rq->csr)) < 0 || (r = common_name(X509_REQ_get_subject_name(rq->req), &rq->cn)) < 0)
                return r;
        return find_key(h, X509_REQ_get0_pubkey(rq->req), "the request", &rq->key);
}

/* A certificate answer: only one signed by the pinned CA for the
 * request's key and name is handed to certmonger. */
static int issued(helper *h, const request *rq, const client_response *resp, certmonger_answer *ret) {
        _cleanup_free_ char *pem = NULL;
        unsigned dropped = 0;
        int r = pinned_issued((const char *) resp->body.data, h->anchor, rq->key, rq->cn, &pem, &dropped);

        if (r < 0)
                return answer_failure(ret, r);
        if (dropped > 0)
                note(h, "warning: the certificate came with %u certificate(s) that do not chain to it: left out",
                     dropped);
        note(h, "issued to %s", rq->cn);
        free(ret->output);
        ret->output = TAKE_PTR(pem);
        ret->status = CERTMONGER_ISSUED;
        return 0;
}

/* A refusal r (of resp), or "later" when the CA says when. */
static int refused(const client_response *resp, int r, const char *cookie, certmonger_answer *ret) {
        int64_t at;

        if (r == -HWID_E_TOO_EARLY) {
                at = renew_window_opens_at(resp);
                return answer_later(ret, at > 0 ? at - (int64_t) time(NULL) : LATER_DEFAULT, cookie);
        }
        if (r == -HWID_E_RATE_LIMITED || (r == -HWID_E_NETWORK && resp->retry_after > 0))
                return answer_later(ret, resp->retry_after > 0 ? resp->retry_after : LATER_DEFAULT, cookie);
        return answer_failure(ret, r);
}

/* 202: waiting for an admin's approval; certmonger asks again (POLL). */
static int pending(helper *h, const request *rq, const client_response *resp, certmonger_answer *ret) {
        _cleanup_free_ char *id = NULL, *cookie = NULL;
        char spki[80] = "";
        int r = join_parse_pending(resp, &id, spki, sizeof(spki));

        if (r < 0)
                return answer_failure(ret, r);
        note(h, "request %s for %s is waiting for approval; the CA admin must check that its key fingerprint is %s",
             id, rq->cn, spki);
        if (asprintf(&cookie, COOKIE_REQUEST "%s", id) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return answer_later(ret, resp->retry_after > 0 ? resp->retry_after : LATER_DEFAULT, cookie);
}

/* What an issuing request answered: a certificate, pending, or why not. */
static int outcome(helper *h, const request *rq, const client_response *resp, const char *cookie,
                   certmonger_answer *ret) {
        if (resp->status == 200 || resp->status == 201)
                return issued(h, rq, resp, ret);
        if (resp->status == 202)
                return pending(h, rq, resp, ret);
        return refused(resp, client_error_from_response(resp), cookie, ret);
}

static int enroll(helper *h, const request *rq, certmonger_answer *ret) {
        _cleanup_secret_ char *token = NULL, *auth = NULL;
        client_response resp;
        int r;

        if (!h->o->token_file)
                return answer(ret, CERTMONGER_UNDERCONFIGURED, "%s has no certificate yet: a first enrollment needs a "
                              "bootstrap token (the helper's --token-file)\n", rq->cn);
        if ((r = secret_read_file(h->o->token_file, 128, &token)) < 0 || !*token)
                return answer(ret, CERTMONGER_UNDERCONFIGURED, "the bootstrap token: %s\n",
                              r < 0 ? hwid_strerror(r) : "--token-file is empty");
        if ((r = fetch_ca(h)) < 0)
                return answer_failure(ret, r);
        if (asprintf(&auth, "Bearer %s", token) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        note(h, "enrolling %s with the bootstrap token", rq->cn);
        r = client_request(&h->co, "POST", "/csr", auth, (const uint8_t *) rq->csr, strlen(rq->csr),
                           "application/pkcs10", &resp);
        if (r < 0)
                return answer_failure(ret, r);
        r = outcome(h, rq, &resp, "enroll", ret);
        client_response_clear(&resp);
        return r;
}

/* The renewal was refused for good (revoked, expired): with a token, the
 * identity starts over; the answer says both. */
static int bootstrap_again(helper *h, const request *rq, int refusal, certmonger_answer *ret) {
        _cleanup_free_ char *why = strdup(hwid_strerror(refusal)), *then = NULL;
        int r;

        if (!why)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!h->o->token_file)
                return answer(ret, CERTMONGER_REJECTED, "%s; bootstrap again: put a new token in the helper's "
                              "--token-file, then getcert resubmit\n", why);
        note(h, "renewal refused (%s): enrolling anew with the bootstrap token", why);
        if ((r = enroll(h, rq, ret)) < 0 || ret->status == CERTMONGER_ISSUED ||
            ret->status == CERTMONGER_WAIT_WITH_DELAY)
                return r;
        then = TAKE_PTR(ret->output);
        return answer(ret, ret->status, "renewal: %s; enrollment with --token-file: %s", why, then ? then : "failed\n");
}

/* Over mutual TLS with the certificate being renewed and its key. */
static int renew(helper *h, const request *rq, const char *cert_pem, certmonger_answer *ret) {
        _cleanup_(X509_freep) X509 *cert = NULL;
        _cleanup_(hwid_key_freep) hwid_key *current = NULL;
        _cleanup_free_ char *client_pem = NULL;
        client_response resp;
        int r;

        if ((r = pem_first_cert(cert_pem, &cert)) < 0 || (r = cert_to_pem(cert, &client_pem)) < 0 ||
            (r = find_key(h, X509_get0_pubkey(cert), "the certificate to renew", &current)) < 0 ||
            (r = fetch_ca(h)) < 0)
                return answer_failure(ret, r);
        h->co.key = current;
        h->co.cert_pem = client_pem;
        note(h, "renewing %s over mutual TLS", rq->cn);
        r = client_request(&h->co, "POST", "/v1/renew", NULL, (const uint8_t *) rq->csr, strlen(rq->csr),
                           "application/pkcs10", &resp);
        h->co.key = NULL;
        h->co.cert_pem = NULL;
        if (r < 0)
                return answer_failure(ret, r);
        if (resp.status < 300)
                r = outcome(h, rq, &resp, "renew", ret);
        else if (renew_needs_bootstrap(r = client_error_from_response(&resp)))
                r = bootstrap_again(h, rq, r, ret);
        else
                r = refused(&resp, r, "renew", ret);
        client_response_clear(&resp);
        return r;
}

static bool request_id_valid(const char *id) {
        size_t n = strlen(id);

        return n > 0 && n <= REQUEST_ID_MAX &&
               strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == n;
}

/* A request pending approval, by its id (the cookie). */
static int poll_request(helper *h, const request *rq, const char *id, certmonger_answer *ret) {
        _cleanup_free_ char *path = NULL, *cookie = NULL;
        client_response resp;
        int r;

        if (!request_id_valid(id))
                return answer(ret, CERTMONGER_REJECTED, "the cookie names no request hwid made\n");
        if ((r = fetch_ca(h)) < 0)
                return answer_failure(ret, r);
        if (asprintf(&path, "/v1/requests/%s", id) < 0 || asprintf(&cookie, COOKIE_REQUEST "%s", id) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = client_request(&h->co, "GET", path, NULL, NULL, 0, NULL, &resp)) < 0)
                return answer_failure(ret, r);
        if (resp.status == 202)
                r = answer_later(ret, resp.retry_after > 0 ? resp.retry_after : LATER_DEFAULT, cookie);
        else
                r = outcome(h, rq, &resp, cookie, ret);
        client_response_clear(&resp);
        return r;
}

/* SUBMIT, and POLL with the cookie of an earlier answer: "request:ID"
 * (pending approval), else the same as SUBMIT ("enroll", "renew"). */
static int submit(helper *h, const certmonger_call *c, certmonger_answer *ret) {
        request rq = { 0 };
        int r = request_open(h, c->csr, &rq);

        if (r < 0)
                r = answer_failure(ret, r);
        else if (c->cookie && strncmp(c->cookie, COOKIE_REQUEST, strlen(COOKIE_REQUEST)) == 0)
                r = poll_request(h, &rq, c->cookie + strlen(COOKIE_REQUEST), ret);
        else if (c->certificate && *c->certificate)
                r = renew(h, &rq, c->certificate, ret);
        else
                r = enroll(h, &rq, ret);
        request_clear(&rq);
        return r;
}

/* FETCH-ROOTS: the root of the pinned chain (checked against the pin, so
 * this is an authenticated answer), as "NICKNAME\nPEM". */
static int fetch_roots(helper *h, certmonger_answer *ret) {
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *root = NULL;
        _cleanup_free_ char *pem = NULL;
        char nick[256] = "hwid CA";
        X509 *x;
        int r;

        if ((r = fetch_ca(h)) < 0)
                return answer_failure(ret, r);
        if (!(b = BIO_new_mem_buf(h->bundle, -1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        while ((x = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
                X509_free(root);
                root = x;
        }
        ERR_clear_error();
        if (!root || (r = cert_to_pem(root, &pem)) < 0)
                return answer_failure(ret, root ? r : hwid_fail(HWID_E_INTERNAL, "the pinned CA vanished"));
        (void) X509_NAME_get_text_by_NID(X509_get_subject_name(root), NID_commonName, nick, sizeof(nick));
        nick[strcspn(nick, "\r\n")] = '\0';
        return answer(ret, CERTMONGER_ISSUED, "%s\n%s", nick, pem);
}

static bool is(const char *op, const char *name) {
        return strcmp(op, name) == 0;
}

int certmonger_run(const certmonger_opts *o, const certmonger_call *c, certmonger_answer *ret) {
        const char *op = c->operation && *c->operation ? c->operation : "SUBMIT";
        helper h = { .o = o,
                     .co = { .server = o->servers ? o->servers[0] : NULL, .servers = o->servers,
                             .timeout = o->http_timeout, .note = o->note, .note_data = o->note_data } };
        int r = 0;

        *ret = (certmonger_answer) { .status = CERTMONGER_UNSUPPORTED };
        if (is(op, "SUBMIT") || is(op, "POLL"))
                r = submit(&h, c, ret);
        else if (is(op, "IDENTIFY"))
                r = answer(ret, CERTMONGER_ISSUED, "hwid %s\n", o->version ? o->version : "");
        else if (is(op, "FETCH-ROOTS"))
                r = fetch_roots(&h, ret);
        else if (is(op, "GET-NEW-REQUEST-REQUIREMENTS") || is(op, "GET-RENEW-REQUEST-REQUIREMENTS"))
                r = answer(ret, CERTMONGER_ISSUED, "CERTMONGER_REQ_SUBJECT\n");
        free(h.bundle);
        free(h.anchor);
        return r;
}
