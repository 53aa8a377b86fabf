#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <json-c/json.h>

#include "client.h"
#include "csr.h"
#include "device.h"
#include "error.h"
#include "x509-util.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "renew.h"
#include "uri.h"

#define say(o, ...) progress_say((o)->progress, (o)->progress_data, __VA_ARGS__)

bool renew_needs_bootstrap(int r) {
        return r == -HWID_E_EXPIRED || r == -HWID_E_REVOKED;
}

/* The URI of generation gen's key when rotating: TPM key files live in the
 * generation's directory; persistent handles alternate between H and H^1;
 * PKCS#11 objects get a "-gN" label. */
static int next_key_uri(const device_state *s, int gen, char **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        int r;

        if ((r = key_uri_parse(s->key_uri, &u)) < 0)
                return r;
        if (u->scheme == KEY_URI_TPM2 && u->path)
                return asprintf(ret, "tpm2:file=%s/gen-%d/key.tss2.pem", s->dir, gen) < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
        if (u->scheme == KEY_URI_TPM2)
                return asprintf(ret, "tpm2:handle=0x%08x", u->handle ^ 1u) < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
        {
                char label[300];
                const char *base = u->object ? u->object : "hwid";
                const char *dash = strstr(base, "-g");
                int n = dash && strspn(dash + 2, "0123456789") == strlen(dash + 2) && dash[2] ? (int) (dash - base)
                                                                                              : (int) strlen(base);
                CK_ATTRIBUTE attr = { CKA_LABEL, label, 0 };

                snprintf(label, sizeof(label), "%.*s-g%d", n, base, gen);
                attr.ulValueLen = strlen(label);
                p11_kit_uri_clear_attribute(u->p11, CKA_ID);
                if (p11_kit_uri_set_attribute(u->p11, &attr) != P11_KIT_URI_OK ||
                    p11_kit_uri_format(u->p11, P11_KIT_URI_FOR_ANY, ret) != P11_KIT_URI_OK)
                        return hwid_fail(HWID_E_URI, "cannot derive the next key's URI");
        }
        return 0;
}

/* The server refused for good: remember it in DIR (best effort) for
 * hwid join, keeping the server's reason as the error detail. */
static int dead_end(const char *dir, int r) {
        char why[512];

        if (!renew_needs_bootstrap(r))
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        (void) device_mark_bootstrap(dir, why);
        return hwid_fail((hwid_err) -r, "%s", why);
}

/* What the server says about our identity: when may it renew, rotate the key? */
static int identity_status(const renew_opts *o, client_session *cs, const char *identity, renew_status *ret) {
        _cleanup_free_ char *path = NULL;
        client_response resp;
        json_object *j, *v;
        int r;

        if (asprintf(&path, "/v1/identities/%s", identity) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = client_session_request(cs, "GET", path, NULL, NULL, 0, NULL, &resp)) < 0)
                return r;
        if (resp.status != 200) {
                r = client_error_from_response(&resp);
                client_response_clear(&resp);
                return r;
        }
        j = json_tokener_parse(resp.body.data ? (const char *) resp.body.data : "");
        ret->rotate_key = j && json_object_object_get_ex(j, "rotate_key", &v) && json_object_get_boolean(v);
        ret->renew_after = j && json_object_object_get_ex(j, "renew_after", &v) ? json_object_get_int64(v) : -1;
        json_object_put(j);
        client_response_clear(&resp);
        return 0;
}

static int delete_key(const char *uri, const char *tcti) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        hsm_options ho = { .tcti = tcti };
        int r = hwid_key_open(uri, &ho, &k);

        if (r == -HWID_E_KEY_NOT_FOUND)
                return 0;
        return r < 0 ? r : hwid_key_delete(k);
}

static int cleanup_state(const renew_opts *o, const device_state *s) {
        char **uris = NULL;
        int r = device_stale_generations(s, &uris);

        for (char **u = uris; r >= 0 && u && *u; u++) {
                say(o, "removing the previous key %s", *u);
                r = delete_key(*u, o->tcti);
        }
        strv_free(uris);
        return r < 0 ? r : device_remove_stale(s);
}

/* A renewal interrupted after it wrote gen-(N+1) but before it switched
 * `current`: the server has already replaced the current certificate by
 * that one, so it is taken (once checked) rather than thrown away. */
static int adopt_finished(const renew_opts *o, const device_state *s, bool *ret_adopted) {
        _cleanup_free_ char *cert = NULL, *uri = NULL, *anchor = NULL;
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_(X509_freep) X509 *ca = NULL;
        hsm_options ho = { .tcti = o->tcti };
        int r;

        *ret_adopted = false;
        if (device_read_generation(s, s->generation + 1, &cert, &uri) < 0)
                return 0; /* nothing finished there: debris at most */
        if ((r = pem_first_cert(s->ca_pem, &ca)) < 0 || (r = cert_to_pem(ca, &anchor)) < 0)
                return r;
        r = hwid_key_open(uri, &ho, &k);
        if (r == -HWID_E_KEY_NOT_FOUND)
                return 0;
        if (r < 0)
                return r; /* the TPM is away: decide another time */
        if (check_issued(cert, anchor, k, s->identity) < 0)
                return 0;
        say(o, "taking generation %d, which an interrupted renewal stored but did not switch to",
            s->generation + 1);
        if ((r = device_switch(s, s->generation + 1)) < 0)
                return r;
        *ret_adopted = true;
        return 0;
}

/* DIR, with an interrupted renewal's finished generation taken. */
static int load_recovered(const renew_opts *o, device_state *ret) {
        device_state s;
        bool adopted;
        int r;

        if ((r = device_load(o->dir, &s)) < 0)
                return r;
        r = adopt_finished(o, &s, &adopted);
        if (r >= 0 && !adopted) {
                *ret = s;
                return 0;
        }
        device_state_clear(&s);
        return r < 0 ? r : device_load(o->dir, ret);
}

int renew_cleanup(const renew_opts *o) {
        device_state s;
        int r = device_load(o->dir, &s);

        if (r < 0)
                return r;
        r = cleanup_state(o, &s);
        device_state_clear(&s);
        return r;
}

/* The URI the next certificate's key lives at: the one an interrupted
 * renewal recorded, else a new one when rotating, else the current one. */
static int next_uri(const device_state *s, bool rotate, char **ret) {
        int r = device_read_next_key(s, ret);

        if (r != -HWID_E_NOT_FOUND)
                return r;
        if (rotate)
                return next_key_uri(s, s->generation + 1, ret);
        *ret = strdup(s->key_uri);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* The key the new certificate will carry, recorded in DIR before the
 * server is asked: the current one (*ret stays NULL: use current), or a
 * new one made in the device. */
static int pick_key(const renew_opts *o, const device_state *s, hwid_key *current, bool rotate,
                    hwid_key **ret, char **ret_uri) {
        _cleanup_free_ char *uri = NULL;
        hsm_options ho = { .tcti = o->tcti };
        int r;

        if ((r = next_uri(s, rotate, &uri)) < 0 || (r = device_write_next_key(s, uri)) < 0)
                return r;
        if (strcmp(uri, s->key_uri) == 0) {
                *ret = NULL;
                *ret_uri = TAKE_PTR(uri);
                return 0;
        }
        r = hwid_key_open(uri, &ho, ret);
        if (r == -HWID_E_KEY_NOT_FOUND) {
                say(o, "creating a new key in the device (%s)", uri);
                r = hwid_key_create(uri, hwid_key_get_type(current), true, &ho, ret);
        } else if (r >= 0) {
                say(o, "reusing the new key of an interrupted renewal (%s)", uri);
        }
        if (r < 0)
                return r;
        *ret_uri = TAKE_PTR(uri);
        return 0;
}

/* When a "too early" answer says the window opens: its renewal_opens_at,
 * else now + Retry-After, else 0 (unknown). */
static int64_t window_opens_at(const client_response *resp) {
        json_object *j = json_tokener_parse(resp->body.data ? (const char *) resp->body.data : "");
        json_object *v;
        int64_t at = 0;

        if (j && json_object_object_get_ex(j, "renewal_opens_at", &v) && json_object_is_type(v, json_type_int))
                at = json_object_get_int64(v);
        json_object_put(j);
        if (at <= 0 && resp->retry_after > 0)
                at = (int64_t) time(NULL) + resp->retry_after;
        return at;
}

static int post_renew(const renew_opts *o, client_session *cs, const char *csr, char **ret_cert) {
        client_response resp;
        int r = client_session_request(cs, "POST", "/v1/renew", NULL, (const uint8_t *) csr, strlen(csr),
                                       "application/pkcs10", &resp);

        if (r < 0)
                return r;
        /* 200: the server hands back a renewal whose answer we lost. */
        if (resp.status == 201 || resp.status == 200)
                *ret_cert = (char *) buf_steal(&resp.body, NULL);
        else
                r = client_error_from_response(&resp);
        if (r == -HWID_E_TOO_EARLY && o->window_opens_at)
                *o->window_opens_at = window_opens_at(&resp);
        client_response_clear(&resp);
        return r;
}

static int new_certificate(const renew_opts *o, const device_state *s, client_session *cs, hwid_key *k,
                           char **ret_cert) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_new();
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *csr = NULL;
        int r;

        if (!name || !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) s->identity,
                                                 -1, -1, 0))
                return hwid_fail(HWID_E_INVALID, "'%s' cannot be a common name", s->identity);
        if ((r = csr_build(k, name, NULL, &req)) < 0 || (r = csr_to_pem(req, &csr)) < 0)
                return r;
        say(o, "asking %s to renew %s", s->server, s->identity);
        return post_renew(o, cs, csr, ret_cert);
}

static int check_not_expired(const device_state *s) {
        if ((int64_t) time(NULL) < s->not_after)
                return 0;
        return hwid_fail(HWID_E_EXPIRED, "the certificate of %s has expired: bootstrap again "
                                         "(hwid join with a new token)", s->identity);
}

/* Asks the server whether to rotate.  A superseded certificate means an
 * earlier renewal went through but its answer was lost: if that renewal's
 * key is recorded, go on and ask again (the server replays it). */
static int status_or_replay(const renew_opts *o, client_session *cs, const device_state *s, bool *ret_rotate) {
        _cleanup_free_ char *uri = NULL;
        renew_status st;
        int r = identity_status(o, cs, s->identity, &st);

        if (r == -HWID_E_SUPERSEDED) {
                if (device_read_next_key(s, &uri) < 0)
                        return hwid_fail(HWID_E_REVOKED, "the certificate of %s was replaced by one this device "
                                         "never received: bootstrap again with a new token", s->identity);
                say(o, "an earlier renewal's answer was lost; asking for it again");
                *ret_rotate = false;
                return 0;
        }
        if (r < 0)
                return r;
        *ret_rotate = st.rotate_key;
        return 0;
}

/* Everything after the state is loaded and the current key opened. */
static int renew_with(const renew_opts *o, const device_state *s, hwid_key *current, renew_result *ret) {
        _cleanup_free_ char *anchor = NULL, *cert = NULL, *uri = NULL;
        _cleanup_(hwid_key_freep) hwid_key *fresh = NULL;
        _cleanup_(client_session_freep) client_session *cs = NULL;
        _cleanup_(X509_freep) X509 *ca = NULL;
        client_opts co = { .server = s->server, .key = current, .cert_pem = s->cert_pem, .timeout = o->http_timeout };
        bool rotate = o->rotate;
        hwid_key *k;
        int r, gen;

        if ((r = pem_first_cert(s->ca_pem, &ca)) < 0 || (r = cert_to_pem(ca, &anchor)) < 0)
                return r;
        co.ca_pem = anchor;
        /* One connection for the status and the renewal: one TLS handshake,
         * one signature by the current key. */
        if ((r = client_session_new(&co, &cs)) < 0)
                return r;
        if (!rotate && (r = status_or_replay(o, cs, s, &rotate)) < 0)
                return r;
        if ((r = pick_key(o, s, current, rotate, &fresh, &uri)) < 0)
                return r;
        k = fresh ? fresh : current;
        /* On failure the new key stays recorded in gen-(N+1): a retry
         * reuses it, which is what lets a lost answer be replayed. */
        if ((r = new_certificate(o, s, cs, k, &cert)) < 0 || (r = check_issued(cert, anchor, k, s->identity)) < 0 ||
            (r = device_write_next(s, cert, uri, &gen)) < 0)
                return r;
        *ret = (renew_result) { .generation = gen, .rotated = strcmp(uri, s->key_uri) != 0 };
        return 0;
}

int renew_run(const renew_opts *o, renew_result *ret) {
        _cleanup_(hwid_key_freep) hwid_key *current = NULL;
        hsm_options ho = { .tcti = o->tcti };
        device_state s, fresh;
        renew_result res;
        int r;

        if ((r = load_recovered(o, &s)) < 0)
                return r;
        /* Debris of an interrupted run goes first, so it cannot pile up. */
        r = cleanup_state(o, &s);
        if (r >= 0)
                r = check_not_expired(&s);
        if (r >= 0)
                r = hwid_key_open(s.key_uri, &ho, &current);
        if (r >= 0)
                r = renew_with(o, &s, current, &res);
        device_state_clear(&s);
        if (r < 0)
                return dead_end(o->dir, r);
        hwid_key_free(TAKE_PTR(current)); /* release the old key before deleting it */
        if ((r = device_load(o->dir, &fresh)) < 0)
                return r;
        res.not_before = fresh.not_before;
        res.not_after = fresh.not_after;
        r = cleanup_state(o, &fresh);
        device_state_clear(&fresh);
        if (r < 0)
                return r;
        *ret = res;
        return 0;
}

int renew_fetch_status(const renew_opts *o, renew_status *ret) {
        _cleanup_(hwid_key_freep) hwid_key *key = NULL;
        _cleanup_(client_session_freep) client_session *cs = NULL;
        _cleanup_(X509_freep) X509 *ca = NULL;
        _cleanup_free_ char *anchor = NULL;
        hsm_options ho = { .tcti = o->tcti };
        client_opts co = { .timeout = o->http_timeout };
        device_state s;
        renew_status st;
        int r;

        if ((r = load_recovered(o, &s)) < 0)
                return r;
        co.server = s.server;
        co.cert_pem = s.cert_pem;
        r = check_not_expired(&s);
        if (r >= 0 && (r = pem_first_cert(s.ca_pem, &ca)) >= 0 && (r = cert_to_pem(ca, &anchor)) >= 0 &&
            (r = hwid_key_open(s.key_uri, &ho, &key)) >= 0) {
                co.ca_pem = anchor;
                co.key = key;
                if ((r = client_session_new(&co, &cs)) >= 0)
                        r = identity_status(o, cs, s.identity, &st);
        }
        client_session_free(TAKE_PTR(cs)); /* it points into s */
        device_state_clear(&s);
        if (r < 0)
                return dead_end(o->dir, r);
        *ret = st;
        return 0;
}
