#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <json-c/json.h>

#include "attest.h"
#include "client.h"
#include "csr.h"
#include "est-client.h"
#include "device.h"
#include "error.h"
#include "x509-util.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "pinned.h"
#include "renew.h"
#include "renew-key.h"
#include "renew-parts.h"

#define say(o, ...) progress_say((o)->progress, (o)->progress_data, __VA_ARGS__)

bool renew_needs_bootstrap(int r) {
        return r == -HWID_E_EXPIRED || r == -HWID_E_REVOKED;
}

void renew_bootstrap_message(int r, char *out, size_t n) {
        char reason[512];
        char *advice;

        snprintf(reason, sizeof(reason), "%s", hwid_strerror(r));
        /* "...: bootstrap again with a new token" from the server, or ours. */
        if ((advice = strstr(reason, "bootstrap again"))) {
                while (advice > reason && strchr(":;, ", advice[-1]))
                        advice--;
                *advice = '\0';
        }
        snprintf(out, n, "%s; bootstrap again: run hwid join with a new token", reason);
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

/* A refusal of the current certificate for its dates.  A wrong clock —
 * the device's or the CA's — is not a revocation: "not yet valid", said by
 * the server or shown by its own clock being before the certificate's
 * notBefore although it says "expired" (as hwidd before 401 not_yet_valid
 * did), is a failure to try again later, never a reason to bootstrap. */
static int refusal(const device_state *s, const client_response *resp) {
        int64_t server = client_response_server_time(resp);
        char why[512], nb[32], srv[32] = "unknown", dev[32];
        int r = client_error_from_response(resp);

        if (r != -HWID_E_NOT_YET_VALID && !(r == -HWID_E_EXPIRED && server > 0 && server < s->not_before))
                return r;
        /* "Expired" is the server's mistake here: its advice is not repeated. */
        if (r == -HWID_E_EXPIRED)
                snprintf(why, sizeof(why), "the server refused the certificate as expired, yet by its own clock it "
                         "is not valid yet");
        else
                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        device_fmt_utc(s->not_before, nb);
        device_fmt_utc((int64_t) time(NULL), dev);
        if (server > 0)
                device_fmt_utc(server, srv);
        return hwid_fail(HWID_E_NOT_YET_VALID, "%s; the certificate of %s is valid from %s, the server's clock reads "
                         "%s, this device's %s: a clock is wrong, which is not a revocation (try again later)",
                         why, s->identity, nb, srv, dev);
}

/* What the server says about our identity: when may it renew, rotate the key? */
static int identity_status(const renew_opts *o, client_session *cs, const device_state *s, renew_status *ret) {
        _cleanup_free_ char *path = NULL;
        client_response resp;
        json_object *j, *v;
        int r;

        if (asprintf(&path, "/v1/identities/%s", s->identity) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = client_session_request(cs, "GET", path, NULL, NULL, 0, NULL, &resp)) < 0)
                return r;
        if (resp.status != 200) {
                r = refusal(s, &resp);
                client_response_clear(&resp);
                return r;
        }
        r = client_response_json(&resp, &j);
        client_response_clear(&resp);
        if (r < 0)
                return r;
        ret->rotate_key = j && json_object_object_get_ex(j, "rotate_key", &v) && json_object_get_boolean(v);
        ret->renew_after = j && json_object_object_get_ex(j, "renew_after", &v) ? json_object_get_int64(v) : -1;
        ret->attested = j && json_object_object_get_ex(j, "attested", &v) && json_object_get_boolean(v);
        ret->attestation = 0;
        if (j && json_object_object_get_ex(j, "attestation", &v) && json_object_is_type(v, json_type_string))
                ret->attestation = strcmp(json_object_get_string(v), "required") == 0   ? 2
                                   : strcmp(json_object_get_string(v), "optional") == 0 ? 1
                                                                                         : 0;
        json_object_put(j);
        return 0;
}

static int cleanup_state(const renew_opts *o, const device_state *s) {
        _cleanup_(device_key_refs_freep) device_key_ref *keys = NULL;
        int r = device_stale_keys(s, &keys);

        for (device_key_ref *k = keys; r >= 0 && k && k->uri; k++)
                r = renew_delete_known_key(k, o->tcti, o->progress, o->progress_data);
        return r < 0 ? r : device_remove_stale(s);
}

/* A renewal interrupted after it wrote gen-(N+1) but before it switched
 * `current`: the server has already replaced the current certificate by
 * that one, so it is taken (once checked) rather than thrown away. */
static int adopt_finished(const renew_opts *o, const device_state *s, bool *ret_adopted) {
        _cleanup_free_ char *cert = NULL, *uri = NULL, *anchor = NULL, *checked = NULL;
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        hsm_options ho = { .tcti = o->tcti };
        unsigned dropped;
        int r;

        *ret_adopted = false;
        if (device_read_generation(s, s->generation + 1, &cert, &uri) < 0)
                return 0; /* nothing finished there: debris at most */
        if ((r = pinned_anchor(s->ca_pem, &anchor)) < 0)
                return r;
        r = hwid_key_open(uri, &ho, &k);
        if (r == -HWID_E_KEY_NOT_FOUND)
                return 0;
        if (r < 0)
                return r; /* the TPM is away: decide another time */
        if (pinned_issued(cert, anchor, k, s->identity, &checked, &dropped) < 0)
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

int64_t renew_window_opens_at(const client_response *resp) {
        json_object *j = NULL, *v;
        int64_t at = 0;

        (void) client_response_json(resp, &j);
        if (j && json_object_object_get_ex(j, "renewal_opens_at", &v) && json_object_is_type(v, json_type_int))
                at = json_object_get_int64(v);
        json_object_put(j);
        if (at <= 0 && resp->retry_after > 0)
                at = (int64_t) time(NULL) + resp->retry_after;
        return at;
}

/* POST /v1/renew: the CSR as PEM, or JSON with its attestation. */
static int post_renew(const renew_opts *o, client_session *cs, const device_state *s, const char *body, bool json,
                      char **ret_cert) {
        client_response resp;
        int r = o->est ? est_post_csr(cs, "simplereenroll", NULL, body, &resp, ret_cert)
                       : client_session_request(cs, "POST", "/v1/renew", NULL, (const uint8_t *) body, strlen(body),
                                                json ? "application/json" : "application/pkcs10", &resp);

        if (r < 0)
                return r;
        /* 200: the server hands back a renewal whose answer we lost (EST:
         * *ret_cert is already the certs-only answer's). */
        if (!o->est && (resp.status == 201 || resp.status == 200))
                *ret_cert = (char *) buf_steal(&resp.body, NULL);
        else if (!o->est || resp.status != 200)
                r = refusal(s, &resp);
        if (r == -HWID_E_TOO_EARLY && o->window_opens_at)
                *o->window_opens_at = renew_window_opens_at(&resp);
        client_response_clear(&resp);
        return r;
}

int renew_request_body(const renew_opts *o, const device_state *s, hwid_key *k, device_attest *att,
                       char **ret_body) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_new();
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *csr = NULL, *body = NULL;
        int r;

        if (!name || !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) s->identity,
                                                 -1, -1, 0))
                return hwid_fail(HWID_E_INVALID, "'%s' cannot be a common name", s->identity);
        r = csr_build(k, name, NULL, &req);
        if (r >= 0)
                r = csr_to_pem(req, &csr);
        if (r >= 0 && att)
                r = device_attest_body(att, k, csr, &body);
        /* signed (and certified): nothing left for it to do in the TPM */
        r = device_key_release(k, r, o->progress, o->progress_data);
        if (r < 0)
                return r;
        if (att)
                say(o, "the TPM activated the CA's credential and certified the key");
        *ret_body = att ? TAKE_PTR(body) : TAKE_PTR(csr);
        return 0;
}

/* The CSR for k, and with att the answer to its challenge beside it. */
static int new_certificate(const renew_opts *o, const device_state *s, client_session *cs, hwid_key *k,
                           device_attest *att, char **ret_cert) {
        _cleanup_free_ char *body = NULL;
        int r = renew_request_body(o, s, k, att, &body);

        if (r < 0)
                return r;
        say(o, "asking %s to renew %s%s", client_session_server(cs), s->identity, att ? " with TPM attestation" : "");
        return post_renew(o, cs, s, body, att != NULL, ret_cert);
}

/* What this renewal does: a new key?  TPM attestation? */
typedef struct renew_plan {
        bool rotate;
        bool attest;
} renew_plan;

/* Attest when the profile requires it of this renewal (a new key, or a
 * certificate issued without), when asked, or to keep an attested
 * certificate attested across a new key where it is optional. */
static bool wants_attestation(const renew_opts *o, const device_state *s, const renew_status *st, bool rotate) {
        if (o->attest)
                return true;
        if (st->attestation == 2)
                return rotate || !st->attested;
        return st->attestation == 1 && st->attested && rotate && strncmp(s->key_uri, "tpm2:", 5) == 0;
}

/* Asks the server whether to rotate and attest.  A superseded certificate
 * means an earlier renewal went through but its answer was lost: if that
 * renewal's key is recorded, go on and ask again (the server replays it). */
static int status_or_replay(const renew_opts *o, client_session *cs, const device_state *s, renew_plan *ret) {
        _cleanup_free_ char *uri = NULL;
        renew_status st;
        int r;

        if (o->est) {
                if (o->attest)
                        return hwid_fail(HWID_E_USAGE, "--est does not carry TPM attestation");
                *ret = (renew_plan) { .rotate = o->rotate };
                return 0;
        }
        r = identity_status(o, cs, s, &st);
        if (r == -HWID_E_SUPERSEDED) {
                if (device_read_next_key(s, &uri) < 0)
                        return hwid_fail(HWID_E_REVOKED, "the certificate of %s was replaced by one this device "
                                         "never received: bootstrap again with a new token", s->identity);
                say(o, "an earlier renewal's answer was lost; asking for it again");
                *ret = (renew_plan) { .rotate = o->rotate };
                return 0;
        }
        if (r < 0)
                return r;
        ret->rotate = o->rotate || st.rotate_key;
        ret->attest = wants_attestation(o, s, &st, ret->rotate);
        return 0;
}

/* The CAs the server offers (GET /ca, EST's cacerts), over the session's
 * verified TLS. */
static int served_cas(const renew_opts *o, client_session *cs, char **ret) {
        client_response resp;
        int r;

        if (o->est)
                return est_get_cacerts(cs, ret);
        if ((r = client_session_request(cs, "GET", "/ca", NULL, NULL, 0, NULL, &resp)) < 0)
                return r;
        if (resp.status == 200)
                *ret = (char *) buf_steal(&resp.body, NULL);
        else
                r = client_error_from_response(&resp);
        client_response_clear(&resp);
        return r;
}

/* A CA rollover under way: every CA the server offers that a link proves
 * from a CA this device trusts is adopted -- DIR/ca.pem rewritten in one
 * rename -- before the renewal, whose certificate may come from it;
 * never one on the server's word alone.  *anchor: the anchors from now
 * on. */
static int follow_rollover(const renew_opts *o, client_session *cs, const device_state *s, char **anchor) {
        _cleanup_free_ char *served = NULL, *bundle = NULL;
        unsigned adopted = 0, unproven = 0;
        int r;

        if ((r = served_cas(o, cs, &served)) < 0 ||
            (r = pinned_adopt(s->ca_pem, served, (int64_t) time(NULL), &bundle, &adopted, &unproven)) < 0)
                return r;
        if (unproven)
                say(o, "warning: %s offers %u certificate%s that neither chain to a CA this device trusts nor are "
                    "proven by a link from one: not adopted", client_session_server(cs), unproven,
                    unproven == 1 ? "" : "s");
        if (!bundle)
                return 0;
        if ((r = device_write_ca(s, bundle)) < 0)
                return r;
        say(o, "adopted %u new CA%s, proven by a link certificate from a CA this device trusts: %s/ca.pem trusts "
            "both", adopted, adopted == 1 ? "" : "s", s->dir);
        free(*anchor);
        *anchor = NULL;
        return pinned_anchor(bundle, anchor);
}

/* The servers of s, the one that answered last first, with failover
 * (client.h) told through the progress callback. */
void renew_failover_opts(const renew_opts *o, const device_state *s, const char *order[DEVICE_ORDER_MAX],
                         client_opts *co) {
        device_server_order(s, order);
        co->server = s->server;
        co->servers = order;
        co->note = o->note ? o->note : o->progress;
        co->note_data = o->note ? o->note_data : o->progress_data;
}

/* Everything after the state is loaded and the current key opened. */
static int renew_with(const renew_opts *o, const device_state *s, hwid_key *current, renew_result *ret) {
        _cleanup_free_ char *anchor = NULL, *answer = NULL, *cert = NULL, *uri = NULL;
        _cleanup_(hwid_key_freep) hwid_key *fresh = NULL;
        _cleanup_(client_session_freep) client_session *cs = NULL;
        _cleanup_(device_attest_freep) device_attest *att = NULL;
        client_opts co = { .key = current, .cert_pem = s->cert_pem, .timeout = o->http_timeout };
        const char *order[DEVICE_ORDER_MAX];
        renew_plan plan;
        unsigned dropped;
        hwid_key *k;
        int r, gen;

        if ((r = pinned_anchor(s->ca_pem, &anchor)) < 0)
                return r;
        renew_failover_opts(o, s, order, &co);
        co.ca_pem = anchor;
        /* One connection for the CAs, the status, the challenge and the
         * renewal: one TLS handshake, one signature by the current key. */
        if ((r = client_session_new(&co, &cs)) < 0 || (r = follow_rollover(o, cs, s, &anchor)) < 0 ||
            (r = status_or_replay(o, cs, s, &plan)) < 0)
                return r;
        /* Held since the handshake; a key being replaced has signed its
         * last, and the new key (and the AK) need the TPM's room. */
        if (plan.rotate)
                (void) device_key_release(current, 0, o->progress, o->progress_data);
        if (plan.attest) {
                say(o, "asking %s for an attestation challenge for this TPM", client_session_server(cs));
                if ((r = device_attest_begin(cs, NULL, o->tcti, (tpm_ek_alg) o->ek, &att)) < 0)
                        return r;
        }
        if ((r = renew_pick_key(o, s, current, plan.rotate, true, &fresh, &uri)) < 0)
                return r;
        k = fresh ? fresh : current;
        /* On failure the new key stays recorded in gen-(N+1): a retry
         * reuses it, which is what lets a lost answer be replayed. */
        if ((r = new_certificate(o, s, cs, k, att, &answer)) < 0 ||
            (r = pinned_issued(answer, anchor, k, s->identity, &cert, &dropped)) < 0)
                return r;
        if (dropped > 0)
                say(o, "warning: the renewed certificate came with %u certificate%s that do%s not chain to it: "
                    "not stored", dropped, dropped == 1 ? "" : "s", dropped == 1 ? "es" : "");
        if ((r = device_write_next(s, cert, uri, &gen)) < 0)
                return r;
        (void) device_set_server(s, client_session_server(cs)); /* best effort: it is asked first next time */
        *ret = (renew_result) { .generation = gen, .rotated = strcmp(uri, s->key_uri) != 0 };
        return 0;
}

/* A new certificate valid only later than this device's clock allows for:
 * the clocks differ (it still is the CA's answer, and kept). */
static void warn_clock(const renew_opts *o, const device_state *s) {
        int64_t now = (int64_t) time(NULL);
        char nb[32];

        if (s->not_before <= now + o->clock_skew)
                return;
        device_fmt_utc(s->not_before, nb);
        say(o, "warning: the new certificate is valid from %s, %llds ahead of this device's clock: check the "
            "clocks", nb, (long long) (s->not_before - now));
}

/* The current key is held loaded from the TLS handshake to the CSR it
 * signs (or, rotating, to the end of the handshake): one load for both
 * signatures, no context saved and restored in between.  Every exit
 * releases it (hwid_key_free()). */
int renew_run(const renew_opts *o, renew_result *ret) {
        _cleanup_(hwid_key_freep) hwid_key *current = NULL;
        hsm_options ho = { .tcti = o->tcti, .hold = true };
        device_state s, fresh;
        renew_result res;
        int r;

        if ((r = load_recovered(o, &s)) < 0)
                return r;
        /* Debris of an interrupted run goes first, so it cannot pile up.
         * Whether the certificate has expired is the server's to say: this
         * device's clock may be wrong. */
        r = cleanup_state(o, &s);
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
        warn_clock(o, &fresh);
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
        _cleanup_free_ char *anchor = NULL;
        hsm_options ho = { .tcti = o->tcti };
        client_opts co = { .timeout = o->http_timeout };
        const char *order[DEVICE_ORDER_MAX];
        device_state s;
        renew_status st;
        int r;

        if ((r = load_recovered(o, &s)) < 0)
                return r;
        renew_failover_opts(o, &s, order, &co);
        co.cert_pem = s.cert_pem;
        if ((r = pinned_anchor(s.ca_pem, &anchor)) >= 0 &&
            (r = hwid_key_open(s.key_uri, &ho, &key)) >= 0) {
                co.ca_pem = anchor;
                co.key = key;
                if ((r = client_session_new(&co, &cs)) >= 0 && (r = identity_status(o, cs, &s, &st)) >= 0)
                        (void) device_set_server(&s, client_session_server(cs));
        }
        client_session_free(TAKE_PTR(cs)); /* it points into s */
        device_state_clear(&s);
        if (r < 0)
                return dead_end(o->dir, r);
        *ret = st;
        return 0;
}
