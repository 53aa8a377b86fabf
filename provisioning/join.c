#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "attest.h"
#include "client.h"
#include "csr.h"
#include "device.h"
#include "error.h"
#include "est-client.h"
#include "fsutil.h"
#include "join.h"
#include "pinned.h"
#include "renew-key.h"
#include "ossl-util.h"
#include "secret.h"
#include "x509-util.h"

#define BACKOFF_MIN 2
#define BACKOFF_MAX 60

#define say(o, ...) progress_say((o)->progress, (o)->progress_data, __VA_ARGS__)

int device_key_release(hwid_key *k, int r, progress_fn fn, void *userdata) {
        char detail[1024];
        int q;

        snprintf(detail, sizeof(detail), "%s", r < 0 ? hwid_strerror(r) : "");
        q = hwid_key_release(k);
        if (q >= 0)
                return r;
        progress_say(fn, userdata, "warning: %s", hwid_strerror(q));
        return r < 0 ? hwid_fail((hwid_err) -r, "%s", detail) : r;
}

bool ca_hash_valid(const char *s) {
        if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != 7 + 64)
                return false;
        return strspn(s + 7, "0123456789abcdef") == 64;
}

/* The key is held loaded from its creation (or first use) until the CSR
 * is signed and, with attestation, certified; then released
 * (request_body()): no ContextSave and ContextLoad in between. */
static int open_or_create_key(const join_opts *o, hwid_key **ret) {
        hsm_options ho = { .tcti = o->tcti, .hold = true };
        char hex[65];
        int r = hwid_key_open(o->key_uri, &ho, ret);

        if (r == -HWID_E_KEY_NOT_FOUND) {
                say(o, "creating a %s key in the device (%s)", hwid_key_type_to_string(o->type), o->key_uri);
                r = hwid_key_create(o->key_uri, o->type, false, &ho, ret);
        } else if (r >= 0) {
                say(o, "using the key already at %s", o->key_uri);
        }
        if (r < 0)
                return r;
        if ((r = spki_sha256_hex(hwid_key_public(*ret), hex)) < 0)
                return r;
        say(o, "device key fingerprint (SPKI SHA-256): %s", hex);
        return 0;
}

static int make_csr(const join_opts *o, hwid_key *k, char **ret_pem) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_new();
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *sans = NULL;
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        int r;

        if (!name || !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) o->cn, -1, -1, 0))
                return hwid_fail(HWID_E_INVALID, "'%s' cannot be a common name", o->cn);
        if (o->san && (r = san_parse(o->san, &sans)) < 0)
                return r;
        if ((r = csr_build(k, name, sans, &req)) < 0)
                return r;
        return csr_to_pem(req, ret_pem);
}

/* The request id and fingerprint of a 202 answer. */
static int parse_pending(const client_response *resp, char **ret_id, char *spki, size_t n) {
        json_object *o = NULL, *id = NULL, *fp = NULL;
        int r = client_response_json(resp, &o);

        if (r < 0)
                return r;
        if (!json_object_object_get_ex(o, "request_id", &id) || !json_object_is_type(id, json_type_string))
                r = hwid_fail(HWID_E_NETWORK, "the server answered 202 without a request id");
        else if (!(*ret_id = strdup(json_object_get_string(id))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0 && json_object_object_get_ex(o, "spki_sha256", &fp))
                snprintf(spki, n, "%s", json_object_get_string(fp));
        json_object_put(o);
        return r;
}

/* Polls until issued, denied or out of time, honouring Retry-After; once:
 * asks one time only (a resumed --no-wait run). */
static int poll_request(const join_opts *o, const client_opts *co, const char *id, bool once, char **ret_cert) {
        _cleanup_free_ char *path = NULL;
        int64_t deadline = once ? 0 : (int64_t) time(NULL) + (o->wait_timeout > 0 ? o->wait_timeout : 1800);
        int64_t backoff = BACKOFF_MIN;

        if (asprintf(&path, "/v1/requests/%s", id) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (;;) {
                client_response resp;
                int r = client_request(co, "GET", path, NULL, NULL, 0, NULL, &resp);
                int64_t wait = backoff;

                if (r >= 0 && (resp.status == 200 || resp.status == 201)) {
                        *ret_cert = (char *) buf_steal(&resp.body, NULL);
                        client_response_clear(&resp);
                        return 0;
                }
                if (r >= 0 && resp.status != 202)
                        r = client_error_from_response(&resp);
                if (r >= 0 && resp.retry_after > wait)
                        wait = resp.retry_after;
                client_response_clear(&resp);
                /* Network trouble is retried like "not yet"; a refusal is final. */
                if (r < 0 && (r != -HWID_E_NETWORK || once))
                        return r;
                if ((int64_t) time(NULL) + wait > deadline)
                        return hwid_fail(HWID_E_PENDING, "request %.8s… still pending%s; run hwid join again "
                                         "to resume", id, once ? "" : " after the wait");
                say(o, "waiting for approval (next poll in %llds)", (long long) wait);
                sleep((unsigned) wait);
                backoff = backoff * 3 / 2 > BACKOFF_MAX ? BACKOFF_MAX : backoff * 3 / 2;
        }
}

/* POST /csr: the CSR as PEM, or JSON with its attestation. */
static int enroll(const join_opts *o, client_session *cs, const char *auth, const char *body, bool json,
                  char **ret_cert, char **ret_pending) {
        char spki[80] = "";
        client_response resp;
        int r;

        r = client_session_request(cs, "POST", "/csr", auth, (const uint8_t *) body, strlen(body),
                                   json ? "application/json" : "application/pkcs10", &resp);
        if (r < 0)
                return r;
        /* 200: the same enrollment again (its answer was lost): the same certificate. */
        if (resp.status == 201 || resp.status == 200)
                *ret_cert = (char *) buf_steal(&resp.body, NULL);
        else if (resp.status == 202 && (r = parse_pending(&resp, ret_pending, spki, sizeof(spki))) >= 0)
                say(o, "request %s is waiting for approval; the CA admin must check that its key "
                       "fingerprint is %s", *ret_pending, spki);
        else if (r >= 0)
                r = client_error_from_response(&resp);
        client_response_clear(&resp);
        return r;
}

/* EST simpleenroll: 202 is asked again with the same request after
 * Retry-After (RFC 7030 §4.2.3) until issued, refused or out of time. */
static int enroll_est(const join_opts *o, client_session *cs, const char *auth, const char *csr, char **ret_cert) {
        int64_t deadline = (int64_t) time(NULL) + (o->wait_timeout > 0 ? o->wait_timeout : 1800);

        for (;;) {
                client_response resp;
                int64_t wait;
                int r = est_post_csr(cs, "simpleenroll", auth, csr, &resp, ret_cert);

                if (r < 0)
                        return r;
                if (resp.status == 200) {
                        client_response_clear(&resp);
                        return 0;
                }
                if (resp.status != 202) {
                        r = client_error_from_response(&resp);
                        client_response_clear(&resp);
                        return r;
                }
                wait = resp.retry_after > BACKOFF_MIN ? resp.retry_after : BACKOFF_MIN;
                client_response_clear(&resp);
                if (o->no_wait || (int64_t) time(NULL) + wait > deadline)
                        return hwid_fail(HWID_E_PENDING, "the request for %s is pending approval; run the same hwid "
                                         "join --est again later to collect the certificate", o->cn);
                say(o, "waiting for approval (asking again in %llds)", (long long) wait);
                sleep((unsigned) wait);
        }
}

typedef struct join_ctx {
        const char *server; /* the server that answered last (one of the options') */
        char *bundle;   /* the CA as served (with its chain): DIR/ca.pem */
        char *anchor;   /* the pinned certificate alone: the TLS trust anchor */
        char *request;  /* pending request id */
        char *cert;
        hwid_key *key;
} join_ctx;

static void join_ctx_clear(join_ctx *c) {
        free(c->bundle);
        free(c->anchor);
        free(c->request);
        free(c->cert);
        hwid_key_free(c->key);
}

/* The servers of o (NULL-terminated), with one as room for a lone one. */
static const char *const *servers_of(const join_opts *o, const char *one[2]) {
        if (o->servers)
                return o->servers;
        one[0] = o->server;
        one[1] = NULL;
        return one;
}

/* server, if one of o's servers: that string of o's (the strings, not
 * the list, outlive this call); else NULL. */
static const char *known_server(const join_opts *o, const char *server) {
        const char *one[2] = { NULL, NULL };
        const char *const *list = servers_of(o, one);

        for (size_t i = 0; list[i]; i++)
                if (strcmp(list[i], server) == 0)
                        return list[i];
        return NULL;
}

/* A request left pending by an earlier run: a server of this run (any
 * replica can be polled), the same name, and the key it was made with. */
static int resume(const join_opts *o, join_ctx *c) {
        _cleanup_free_ char *server = NULL, *cn = NULL, *uri = NULL;
        hsm_options ho = { .tcti = o->tcti };
        int r;

        if ((r = device_read_pending(o->dir, &server, &cn, &c->request, &c->bundle, &uri)) < 0)
                return r;
        c->server = known_server(o, server);
        if (!c->server || strcmp(cn, o->cn) != 0 || strcmp(uri, o->key_uri) != 0)
                return hwid_fail(HWID_E_CONFLICT, "%s holds a pending request for %s at %s with key %s; "
                                 "remove %s/pending.json to start over", o->dir, cn, server, uri, o->dir);
        say(o, "resuming pending request %.8s…", c->request);
        if ((r = pinned_anchor(c->bundle, &c->anchor)) < 0)
                return r;
        return hwid_key_open(o->key_uri, &ho, &c->key);
}

/* The TPM asks the CA for a challenge (before the key is made: a refused
 * TPM costs no key). */
static int attest_begin(const join_opts *o, client_session *cs, const char *auth, device_attest **ret) {
        int r;

        say(o, "reading the TPM's EK certificate and asking the CA for an attestation challenge%s",
            auth ? "" : " (no token: the TPM must be on the CA's EK allowlist)");
        r = device_attest_begin(cs, auth, o->tcti, (tpm_ek_alg) o->ek, ret);
        if (r >= 0)
                say(o, "challenge received for the %s EK", device_attest_ek(*ret));
        return r;
}

/* The body of POST /csr: the CSR, with the answer to the challenge. */
static int request_body(const join_opts *o, join_ctx *c, device_attest *att, char **ret_body) {
        _cleanup_free_ char *csr = NULL;
        int r = make_csr(o, c->key, &csr);

        if (r < 0 || !att) {
                /* signed: nothing left for it to do in the TPM */
                r = device_key_release(c->key, r, o->progress, o->progress_data);
                if (r >= 0)
                        *ret_body = TAKE_PTR(csr);
                return r;
        }
        r = device_attest_body(att, c->key, csr, ret_body);
        /* signed and certified: nothing left for it to do in the TPM */
        r = device_key_release(c->key, r, o->progress, o->progress_data);
        if (r >= 0)
                say(o, "the TPM activated the CA's credential and certified the key");
        return r;
}

/* The pinned CA, and TLS verified against it from here on. */
static int fetch_ca(const join_opts *o, join_ctx *c, client_opts *co) {
        unsigned dropped;
        int r;

        say(o, "fetching the CA from %s and checking it against %s", o->server, o->ca_hash);
        r = o->est ? pinned_fetch_ca_est(co, o->ca_hash, &c->bundle, &c->anchor, &dropped, &c->server)
                   : pinned_fetch_ca(co, o->ca_hash, &c->bundle, &c->anchor, &dropped, &c->server);
        if (r < 0)
                return r;
        if (dropped > 0)
                say(o, "warning: %s/ca sent %u certificate%s that do%s not chain to the pinned CA: not stored",
                    c->server, dropped, dropped == 1 ? "" : "s", dropped == 1 ? "es" : "");
        co->ca_pem = c->anchor;
        return 0;
}

/* Fresh enrollment; leaves c->cert, or c->request when pending. */
static int start(const join_opts *o, join_ctx *c, client_opts *co) {
        _cleanup_(client_session_freep) client_session *cs = NULL;
        _cleanup_(device_attest_freep) device_attest *att = NULL;
        _cleanup_free_ char *body = NULL;
        _cleanup_secret_ char *auth = NULL;
        int r;

        if (!o->token && !o->attest)
                return hwid_fail(HWID_E_TOKEN_INVALID, "no bootstrap token (set HWID_TOKEN or use --token-file)");
        if ((r = fetch_ca(o, c, co)) < 0)
                return r;
        if (o->est && o->attest)
                return hwid_fail(HWID_E_USAGE, "--est does not carry TPM attestation: use one or the other");
        if (o->est && (r = est_token_auth(o->token, &auth)) < 0)
                return r;
        if (!o->est && o->token && asprintf(&auth, "Bearer %s", o->token) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* The directory must take the identity before the token is spent
         * on it; one connection for the challenge and the enrollment. */
        if ((r = device_check_writable(o->dir)) < 0 || (r = client_session_new(co, &cs)) < 0)
                return r;
        client_session_prefer(cs, c->server);
        if (o->attest && (r = attest_begin(o, cs, auth, &att)) < 0)
                return r;
        /* The device key usually lives in the directory. */
        if ((r = open_or_create_key(o, &c->key)) < 0 || (r = request_body(o, c, att, &body)) < 0)
                return r;
        say(o, "enrolling %s%s%s", o->cn, att ? " with TPM attestation" : "", o->est ? " over EST" : "");
        if (o->est)
                r = enroll_est(o, cs, auth, body, &c->cert);
        else
                r = enroll(o, cs, auth, body, att != NULL, &c->cert, &c->request);
        c->server = client_session_server(cs);
        return r;
}

static int finish(const join_opts *o, join_ctx *c) {
        _cleanup_free_ char *cert = NULL;
        unsigned dropped;
        int r = pinned_issued(c->cert, c->anchor, c->key, o->cn, &cert, &dropped);

        if (r >= 0 && dropped > 0)
                say(o, "warning: the certificate came with %u certificate%s that do%s not chain to it: not stored",
                    dropped, dropped == 1 ? "" : "s", dropped == 1 ? "es" : "");
        if (r >= 0) {
                const char *one[2];

                r = device_write_initial(o->dir, servers_of(o, one), c->server, o->cn, c->bundle, cert, o->key_uri);
        }
        if (r >= 0)
                say(o, "enrolled %s: certificate in %s/cert.pem", o->cn, o->dir);
        return r;
}

/* The identity in DIR can no longer renew: renewal was refused for good
 * (DIR/needs-bootstrap) or its certificate has expired — by this device's
 * clock, allowing for skew, since that clock may be somewhat off. */
static bool identity_dead(const device_state *st, int64_t skew) {
        return device_needs_bootstrap(st->dir) || (int64_t) time(NULL) >= st->not_after + skew;
}

/* A revoked or expired identity: its keys are deleted (a new identity
 * never reuses them) and DIR forgets it, so that the token enrolls anew. */
static int start_over(const join_opts *o, const device_state *st) {
        _cleanup_(device_key_refs_freep) device_key_ref *keys = NULL;
        int r = device_all_keys(st, &keys);

        say(o, "%s held %s, which is revoked or expired: starting over", o->dir, st->identity);
        for (device_key_ref *k = keys; r >= 0 && k && k->uri; k++)
                r = renew_delete_known_key(k, o->tcti, o->progress, o->progress_data);
        return r < 0 ? r : device_forget(st);
}

static int already_enrolled(const join_opts *o, bool *ret) {
        device_state st;
        int r = device_load(o->dir, &st);

        if (r == -HWID_E_NOT_FOUND) {
                *ret = false;
                return 0;
        }
        if (r < 0)
                return r;
        *ret = !identity_dead(&st, o->clock_skew);
        if (*ret)
                say(o, "%s is already enrolled as %s (generation %d); nothing to do", o->dir, st.identity,
                    st.generation);
        else if (!o->token && !o->attest) /* before anything is deleted */
                r = hwid_fail(HWID_E_TOKEN_INVALID, "%s holds %s, which is revoked or expired: a new bootstrap token "
                              "is needed (HWID_TOKEN or --token-file); nothing was changed", o->dir, st.identity);
        else
                r = start_over(o, &st);
        device_state_clear(&st);
        return r;
}

bool join_needs_token(const char *dir, int64_t clock_skew) {
        _cleanup_free_ char *p = path_join(dir, "pending.json");
        device_state st;
        bool alive;

        if (p && access(p, F_OK) == 0)
                return false;
        if (device_load(dir, &st) < 0)
                return true;
        alive = !identity_dead(&st, clock_skew);
        device_state_clear(&st);
        return !alive;
}

static bool has_pending(const char *dir) {
        _cleanup_free_ char *p = path_join(dir, "pending.json");

        return p && access(p, F_OK) == 0;
}

int join_run(const join_opts *o, join_result *ret) {
        client_opts co = { .server = o->server, .servers = o->servers, .timeout = o->http_timeout,
                           .note = o->progress, .note_data = o->progress_data };
        join_ctx c = { 0 };
        bool done, resumed = has_pending(o->dir);
        int r;

        if ((r = already_enrolled(o, &done)) < 0 || done) {
                if (r >= 0)
                        *ret = JOIN_ALREADY_ENROLLED;
                return r;
        }
        r = resumed ? resume(o, &c) : start(o, &c, &co);
        if (r >= 0 && c.request && !resumed)
                r = device_write_pending(o->dir, c.server, o->cn, c.request, c.bundle, o->key_uri);
        if (r >= 0 && c.request && o->no_wait && !resumed) {
                say(o, "not waiting: run the same hwid join again later to collect the certificate");
                *ret = JOIN_PENDING;
                goto out;
        }
        co.ca_pem = c.anchor;
        if (r >= 0 && c.request)
                r = poll_request(o, &co, c.request, o->no_wait, &c.cert);
        if (r >= 0 && (r = finish(o, &c)) >= 0)
                *ret = JOIN_ENROLLED;
out:
        join_ctx_clear(&c);
        return r;
}
