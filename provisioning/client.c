#include <string.h>
#include <time.h>
#include <strings.h>

#include <curl/curl.h>
#include <json-c/json.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include "client.h"
#include "error.h"
#include "json-read.h"
#include "ossl-util.h"
#include "secret.h"


/* Header lists may hold the bootstrap token: wipe before freeing. */
static void headers_freep(struct curl_slist **l) {
        for (struct curl_slist *p = *l; p; p = p->next)
                secret_wipe(p->data, strlen(p->data));
        curl_slist_free_all(*l);
}

void client_response_clear(client_response *r) {
        buf_reset(&r->body);
        *r = (client_response) { 0 };
}

static size_t on_body(char *data, size_t size, size_t n, void *userdata) {
        client_response *r = userdata;

        /* Returning less than given makes curl abort: the cap holds. */
        return buf_append(&r->body, data, size * n) < 0 ? 0 : size * n;
}

static size_t on_header(char *line, size_t size, size_t n, void *userdata) {
        client_response *r = userdata;
        size_t len = size * n;

        if (len > 12 && strncasecmp(line, "Retry-After:", 12) == 0)
                r->retry_after = strtoll(line + 12, NULL, 10);
        else if (len > 5 && strncasecmp(line, "Date:", 5) == 0) {
                char date[64];
                time_t t;

                snprintf(date, sizeof(date), "%.*s", (int) strcspn(line + 5, "\r\n"), line + 5);
                t = curl_getdate(date, NULL);
                r->date = t > 0 ? (int64_t) t : 0;
        }
        else if (len > 13 && strncasecmp(line, "Content-Type:", 13) == 0)
                snprintf(r->content_type, sizeof(r->content_type), "%.*s", (int) strcspn(line + 13, "\r\n"),
                         line + 13 + strspn(line + 13, " "));
        return len;
}

/* The pinned CA may be an intermediate: trust it as an anchor without
 * needing its root.  With a device key, install the client certificate
 * and the key into libcurl's SSL_CTX: the private key stays an hwid
 * provider key, so libssl's handshake signature goes to the TPM/HSM. */
static CURLcode on_ssl_ctx(CURL *curl, void *ssl_ctx, void *userdata) {
        const client_opts *o = userdata;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *leaf = NULL;

        X509_STORE_set_flags(SSL_CTX_get_cert_store(ssl_ctx), X509_V_FLAG_PARTIAL_CHAIN);
        if (!o->key)
                return CURLE_OK;
        b = BIO_new_mem_buf(o->cert_pem, -1);
        leaf = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!leaf || SSL_CTX_use_certificate(ssl_ctx, leaf) != 1 ||
            SSL_CTX_use_PrivateKey(ssl_ctx, hwid_key_pkey(o->key)) != 1)
                return CURLE_SSL_CERTPROBLEM;
        return CURLE_OK;
}

static int setup_tls(CURL *c, const client_opts *o) {
        if (!o->ca_pem) {
                curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
                curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        } else {
                struct curl_blob ca = { .data = (void *) o->ca_pem, .len = strlen(o->ca_pem),
                                        .flags = CURL_BLOB_COPY };
                if (curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca) != CURLE_OK)
                        return hwid_fail(HWID_E_INTERNAL, "libcurl lacks CAINFO_BLOB support");
                curl_easy_setopt(c, CURLOPT_CAPATH, NULL);
        }
        curl_easy_setopt(c, CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
        curl_easy_setopt(c, CURLOPT_SSL_CTX_DATA, (void *) o);
        return 0;
}

/* The TLS handshake signs with the device key through hwid's provider;
 * when the TPM/HSM fails there, libssl only says "EVP lib".  The device's
 * own error (recorded by the provider in this thread) is the real one. */
static int device_failure(const char *url) {
        char why[512];
        int r = hwid_last_error();

        if (r >= 0)
                return 0;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        return hwid_fail((hwid_err) -r, "TLS handshake with %s: %s", url, why);
}

static int perform(CURL *c, const char *url, client_response *ret) {
        char err[CURL_ERROR_SIZE] = "";
        CURLcode rc;
        int r;

        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
        hwid_error_clear();
        rc = curl_easy_perform(c);
        if (rc == CURLE_WRITE_ERROR && ret->body.len >= ret->body.max)
                return hwid_fail(HWID_E_TOO_LARGE, "response from %s is larger than %zu bytes", url, ret->body.max);
        if (rc != CURLE_OK && (r = device_failure(url)) < 0)
                return r;
        if (rc != CURLE_OK)
                return hwid_fail(HWID_E_NETWORK, "%s: %s", url, err[0] ? err : curl_easy_strerror(rc));
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
        return 0;
}

struct client_session {
        client_opts opts;
        CURL *curl;
        const char *one[2];         /* the list when opts.servers is NULL */
        const char *const *servers; /* opts.servers, or one */
        size_t n, cur;              /* how many; the one requests go to */
        bool sent;                  /* the last request left, at least in part */
};

int client_session_new(const client_opts *o, client_session **ret) {
        client_session *s = calloc(1, sizeof(*s));
        int r;

        if (!s || !(s->curl = curl_easy_init())) {
                free(s);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        s->opts = *o;
        s->one[0] = o->server;
        s->servers = o->servers ? o->servers : s->one;
        while (s->servers[s->n])
                s->n++;
        if (s->n == 0) {
                client_session_free(s);
                return hwid_fail(HWID_E_INVALID, "no server to ask");
        }
        if ((r = setup_tls(s->curl, &s->opts)) < 0) {
                client_session_free(s);
                return r;
        }
        curl_easy_setopt(s->curl, CURLOPT_PROTOCOLS_STR, "https");
        curl_easy_setopt(s->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(s->curl, CURLOPT_TIMEOUT, o->timeout > 0 ? o->timeout : 30L);
        curl_easy_setopt(s->curl, CURLOPT_CONNECTTIMEOUT, 10L);
        curl_easy_setopt(s->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(s->curl, CURLOPT_HEADERFUNCTION, on_header);
        *ret = s;
        return 0;
}

void client_session_free(client_session *s) {
        if (!s)
                return;
        curl_easy_cleanup(s->curl);
        free(s);
}

/* The per-request options; the connection (and its TLS session) stays. */
static void set_method(CURL *c, const char *method, const uint8_t *body, size_t body_len) {
        if (body) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) body_len);
        } else {
                curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        }
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, strcmp(method, body ? "POST" : "GET") == 0 ? NULL : method);
}

const char *client_session_server(const client_session *s) {
        return s->servers[s->cur];
}

void client_session_prefer(client_session *s, const char *server) {
        for (size_t i = 0; server && i < s->n; i++)
                if (strcmp(s->servers[i], server) == 0)
                        s->cur = i;
}

/* Whether any byte of the transfer's request was written to the server:
 * libcurl counts in CURLINFO_REQUEST_SIZE what it has sent of the request
 * (from zero for each transfer), so 0 means the connection or its TLS
 * handshake failed first and the server cannot have acted on it. */
static bool request_sent(CURL *c) {
        long n = 0;

        return curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &n) != CURLE_OK || n > 0;
}

/* One request to the current server. */
static int request_one(client_session *s, const char *method, const char *path, const char *auth,
                       const uint8_t *body, size_t body_len, const char *content_type, client_response *ret) {
        _cleanup_(headers_freep) struct curl_slist *hdrs = NULL;
        _cleanup_secret_ char *authz = NULL;
        _cleanup_free_ char *url = NULL, *ctype = NULL;
        int r;

        if (asprintf(&url, "%s%s", s->servers[s->cur], path) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = (client_response) { 0 };
        buf_init(&ret->body, s->opts.max_response ? s->opts.max_response : CLIENT_MAX_RESPONSE);
        if (auth && asprintf(&authz, "Authorization: %s", auth) >= 0)
                hdrs = curl_slist_append(hdrs, authz);
        if (content_type && asprintf(&ctype, "Content-Type: %s", content_type) >= 0)
                hdrs = curl_slist_append(hdrs, ctype);
        curl_easy_setopt(s->curl, CURLOPT_URL, url);
        curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, hdrs);
        set_method(s->curl, method, body, body_len);
        curl_easy_setopt(s->curl, CURLOPT_WRITEDATA, ret);
        curl_easy_setopt(s->curl, CURLOPT_HEADERDATA, ret);
        r = perform(s->curl, url, ret);
        /* The header list dies here and the body with the caller: the
         * handle keeps no pointer to either (curl copies neither). */
        curl_easy_setopt(s->curl, CURLOPT_HTTPHEADER, NULL);
        if (body)
                curl_easy_setopt(s->curl, CURLOPT_POSTFIELDS, NULL);
        s->sent = request_sent(s->curl);
        return r;
}

/* Whether an outcome of a request (its result r and, when r >= 0, its
 * answer) means the server is unavailable, so that another may be tried:
 * no answer at all, or a gateway's or the server's "not now".  For an
 * at_most_once request only a 503 says nothing was done: a gateway's 502
 * or 504 may come after it handed the request on. */
static bool unavailable(const client_session *s, int r, const client_response *resp) {
        if (r < 0)
                return r == -HWID_E_NETWORK && !(s->opts.at_most_once && s->sent);
        if (s->opts.at_most_once)
                return resp->status == 503;
        return resp->status == 502 || resp->status == 503 || resp->status == 504;
}

/* Why the current server is unavailable, in words. */
static void describe(int r, const client_response *resp, char *why, size_t size) {
        if (r < 0)
                snprintf(why, size, "%s", hwid_strerror(r));
        else
                snprintf(why, size, "it answered %ld", resp->status);
}

/* Why the current server was left, for the note. */
static void note_failover(client_session *s, const char *why) {
        char line[1024];

        if (!s->opts.note)
                return;
        snprintf(line, sizeof(line), "%s is unavailable (%s); trying %s", s->servers[s->cur], why,
                 s->servers[(s->cur + 1) % s->n]);
        s->opts.note(s->opts.note_data, line);
}

/* at_most_once: what ends a request that cannot move on.  A network
 * failure after the request left may hide a request carried out. */
static int at_most_once_end(const client_session *s, int r, client_response *resp) {
        char why[384];

        if (r != -HWID_E_NETWORK)
                return r;
        client_response_clear(resp); /* what came of an answer cut short */
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        return hwid_fail(HWID_E_NETWORK, "%s; the request was sent and may have been carried out by %s%s", why,
                         s->servers[s->cur], s->n > 1 ? ", so no other server was asked" : "");
}

/* at_most_once, every server unavailable: tried lists each with why. */
static int all_unavailable(const char *tried, client_response *resp) {
        client_response_clear(resp);
        return hwid_fail(HWID_E_NETWORK, "no server could take the request: %s", tried);
}

/* Every server at most once, from the current one on; the first that is
 * not unavailable stays current for the session's next requests.  A
 * request sent again to another replica is safe: enrollment, renewal and
 * a poll are idempotent (the same request gets the same answer).  An
 * administrative request may not be (at_most_once): it moves on only when
 * it certainly was not carried out. */
int client_session_request(client_session *s, const char *method, const char *path, const char *auth,
                           const uint8_t *body, size_t body_len, const char *content_type, client_response *ret) {
        char why[384], tried_list[768] = "";
        int r;

        for (size_t tried = 1;; tried++) {
                r = request_one(s, method, path, auth, body, body_len, content_type, ret);
                if (!unavailable(s, r, ret))
                        return s->opts.at_most_once ? at_most_once_end(s, r, ret) : r;
                describe(r, ret, why, sizeof(why));
                snprintf(tried_list + strlen(tried_list), sizeof(tried_list) - strlen(tried_list), "%s%s (%s)",
                         tried > 1 ? "; " : "", s->servers[s->cur], why);
                if (tried >= s->n)
                        return s->opts.at_most_once && s->n > 1 ? all_unavailable(tried_list, ret) : r;
                note_failover(s, why);
                client_response_clear(ret);
                s->cur = (s->cur + 1) % s->n;
        }
}

int client_request(const client_opts *o, const char *method, const char *path, const char *auth,
                   const uint8_t *body, size_t body_len, const char *content_type, client_response *ret) {
        client_session *s = NULL;
        int r = client_session_new(o, &s);

        if (r < 0)
                return r;
        r = client_session_request(s, method, path, auth, body, body_len, content_type, ret);
        client_session_free(s);
        return r;
}

int client_get_unverified(const client_opts *o, const char *path, client_response *ret,
                          const char **ret_server) {
        _cleanup_(client_session_freep) client_session *s = NULL;
        client_opts u = *o;
        int r;

        u.ca_pem = NULL;
        u.key = NULL;
        if ((r = client_session_new(&u, &s)) < 0 ||
            (r = client_session_request(s, "GET", path, NULL, NULL, 0, NULL, ret)) < 0)
                return r;
        if (ret_server)
                *ret_server = client_session_server(s);
        return 0;
}

int client_fetch_ca_unverified(const client_opts *o, char **ret_pem, const char **ret_server) {
        client_response resp;
        const char *server = NULL;
        int r = client_get_unverified(o, "/ca", &resp, &server);

        if (r < 0)
                return r;
        if (resp.status != 200)
                r = client_error_from_response(&resp);
        else
                *ret_pem = (char *) buf_steal(&resp.body, NULL);
        client_response_clear(&resp);
        if (r >= 0 && ret_server)
                *ret_server = server;
        return r;
}

static int error_for_status(long status) {
        switch (status) {
        case 400: return HWID_E_CSR_INVALID;
        case 401: return HWID_E_TOKEN_INVALID;
        case 403: return HWID_E_FORBIDDEN;
        case 404: return HWID_E_NOT_FOUND;
        case 409: return HWID_E_CONFLICT;
        case 413: return HWID_E_TOO_LARGE;
        case 429: return HWID_E_RATE_LIMITED;
        default: return status >= 500 ? HWID_E_NETWORK : HWID_E_INTERNAL;
        }
}

/* Maps the server's {"error": slug, "message": ...} back to an error code
 * (by slug when known, else by status) and keeps its message. */
int client_response_json(const client_response *r, json_object **ret) {
        return json_read(r->body.data, r->body.len, 16, 0, "the server's answer", ret);
}

int client_error_from_response(const client_response *r) {
        json_object *o = NULL;
        json_object *msg = NULL, *slug = NULL;
        const char *m = NULL, *sl = NULL;
        int code = error_for_status(r->status), ret;

        (void) client_response_json(r, &o); /* an error may come as text */
        if (o && json_object_object_get_ex(o, "message", &msg))
                m = json_object_get_string(msg);
        if (o && json_object_object_get_ex(o, "error", &slug))
                sl = json_object_get_string(slug);
        /* EST answers errors as text (docs/EST.md). */
        if (!o && strncmp(r->content_type, "text/plain", 10) == 0 && r->body.len > 0)
                m = (const char *) r->body.data;
        for (int c = 1; sl && c < _HWID_E_MAX; c++)
                if (strcmp(hwid_err_slug(-c), sl) == 0 && hwid_err_http_status(-c) == r->status) {
                        code = c;
                        break;
                }
        ret = hwid_fail((hwid_err) code, "server answered %ld: %.*s", r->status, m ? (int) strcspn(m, "\n") : 14,
                        m ? m : "(no message)");
        json_object_put(o);
        return ret;
}

int64_t client_response_server_time(const client_response *r) {
        json_object *o = NULL, *t = NULL;
        int64_t v = r->date;

        (void) client_response_json(r, &o);
        if (o && json_object_object_get_ex(o, "server_time", &t) && json_object_is_type(t, json_type_int) &&
            json_object_get_int64(t) > 0)
                v = json_object_get_int64(t);
        json_object_put(o);
        return v;
}
