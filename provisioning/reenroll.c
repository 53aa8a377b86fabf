/* hwid agent's way back by TPM attestation (reenroll.h). */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "pinned.h"
#include "reenroll.h"
#include "renew-key.h"
#include "renew-parts.h"

#define say(o, ...) progress_say((o)->progress, (o)->progress_data, __VA_ARGS__)

bool reenroll_refused(int r) {
        int status = hwid_err_http_status(r);

        /* 4xx is the CA's decision (429 only asks for patience); the
         * device's own usage errors (a key that is no TPM key) are final too. */
        return r == -HWID_E_USAGE || (status >= 400 && status < 500 && status != 429);
}

/* POST /csr with no credential but the attestation in body. */
static int post_enroll(client_session *cs, const char *body, char **ret_cert) {
        client_response resp;
        int r = client_session_request(cs, "POST", "/csr", NULL, (const uint8_t *) body, strlen(body),
                                       "application/json", &resp);

        if (r < 0)
                return r;
        if (resp.status == 201 || resp.status == 200)
                *ret_cert = (char *) buf_steal(&resp.body, NULL);
        else
                r = client_error_from_response(&resp);
        client_response_clear(&resp);
        return r;
}

/* The new key (gen-(N+1), of the current key's type), certified by the
 * TPM for the challenge att, enrolled; the certificate checked against
 * the pinned CA into *ret_cert. */
static int enroll_new_key(const renew_opts *o, const device_state *s, client_session *cs, device_attest *att,
                          const char *anchor, char **ret_cert, char **ret_uri) {
        _cleanup_(hwid_key_freep) hwid_key *current = NULL, *fresh = NULL;
        _cleanup_free_ char *body = NULL, *answer = NULL;
        hsm_options ho = { .tcti = o->tcti };
        unsigned dropped;
        int r;

        /* The old key is opened for its type only: nothing of it is held. */
        if ((r = hwid_key_open(s->key_uri, &ho, &current)) < 0 ||
            (r = renew_pick_key(o, s, current, true, true, &fresh, ret_uri)) < 0)
                return r;
        if (!fresh)
                return hwid_fail(HWID_E_USAGE, "coming back needs a new key, and none could be made");
        if ((r = renew_request_body(o, s, fresh, att, &body)) < 0)
                return r;
        say(o, "asking %s to let %s back in with TPM attestation alone (no token)", client_session_server(cs),
            s->identity);
        if ((r = post_enroll(cs, body, &answer)) < 0 ||
            (r = pinned_issued(answer, anchor, fresh, s->identity, ret_cert, &dropped)) < 0)
                return r;
        if (dropped > 0)
                say(o, "warning: the certificate came with %u certificate%s that do%s not chain to it: not stored",
                    dropped, dropped == 1 ? "" : "s", dropped == 1 ? "es" : "");
        return 0;
}

static int come_back(const renew_opts *o, const device_state *s, int *ret_gen) {
        _cleanup_free_ char *anchor = NULL, *cert = NULL, *uri = NULL;
        _cleanup_(client_session_freep) client_session *cs = NULL;
        _cleanup_(device_attest_freep) device_attest *att = NULL;
        client_opts co = { .timeout = o->http_timeout };
        const char *order[DEVICE_ORDER_MAX];
        int r;

        if (strncmp(s->key_uri, "tpm2:", 5) != 0)
                return hwid_fail(HWID_E_USAGE, "%s's key is no TPM key: it cannot come back by TPM attestation",
                                 s->identity);
        if ((r = pinned_anchor(s->ca_pem, &anchor)) < 0)
                return r;
        renew_failover_opts(o, s, order, &co);
        co.ca_pem = anchor;
        /* No client certificate: the TPM's evidence is the only credential. */
        if ((r = client_session_new(&co, &cs)) < 0)
                return r;
        say(o, "asking %s for an attestation challenge for this TPM, as %s", client_session_server(cs), s->identity);
        if ((r = device_attest_begin_as(cs, NULL, s->identity, o->tcti, (tpm_ek_alg) o->ek, &att)) < 0 ||
            (r = enroll_new_key(o, s, cs, att, anchor, &cert, &uri)) < 0)
                return r;
        if ((r = device_write_next(s, cert, uri, ret_gen)) < 0)
                return r;
        (void) device_set_server(s, client_session_server(cs)); /* best effort */
        return 0;
}

int reenroll_run(const renew_opts *o, renew_result *ret) {
        device_state s;
        renew_result res = { .rotated = true };
        int r = device_load(o->dir, &s);

        if (r < 0)
                return r;
        r = come_back(o, &s, &res.generation);
        device_state_clear(&s);
        if (r < 0)
                return r;
        /* The new certificate is on disk: the old keys go. */
        if ((r = device_load(o->dir, &s)) < 0)
                return r;
        res.not_before = s.not_before;
        res.not_after = s.not_after;
        device_state_clear(&s);
        if ((r = renew_cleanup(o)) < 0)
                return r;
        *ret = res;
        return 0;
}
