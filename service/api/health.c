/* Health and metrics endpoints.
 *
 * GET /healthz: liveness, cheap: the process answers and the store reads.
 * GET /readyz: readiness, proven: the store commits a write, the CA key
 *   and the TLS key each sign (and the signature verifies with the public
 *   key).  The verdict is kept for a second, so that however often it is
 *   asked the HSM makes at most one test signature per key per second.
 *   503 names what failed.
 * GET /metrics: Prometheus text format (metrics.c). */
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "api.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"
#include "x509-util.h"

#define READY_CACHE_MS 1000

void ca_get_healthz(ca_service *ca, const http_request *req, http_response *resp) {
        int r = ca_allow_read(ca, req, ACTION_HEALTH);

        if (r >= 0)
                r = store_ping(ca->store);
        if (r < 0) {
                ca_respond_error(ca, resp, r);
                return;
        }
        http_respond_json(resp, 200, "{\"status\":\"ok\"}");
}

/* ---- readiness ---- */

static uint64_t mono_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

/* One signature through hsm/ over a message that changes every time, and
 * its verification with the key's public half. */
static int sign_probe(hwid_key *k, int64_t now) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new(), *vctx = EVP_MD_CTX_new();
        unsigned char sig[1024];
        size_t len = sizeof(sig);
        char msg[64];
        int n = snprintf(msg, sizeof(msg), "hwid readiness probe %lld", (long long) now), r;

        if (!mctx || !vctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = hwid_key_sign_init(k, mctx, NULL)) < 0)
                return r;
        hwid_error_clear();
        if (EVP_DigestSign(mctx, sig, &len, (const unsigned char *) msg, (size_t) n) <= 0)
                return hwid_fail_signing("the readiness probe");
        if (EVP_DigestVerifyInit_ex(vctx, NULL, hwid_key_default_digest(k), NULL, NULL, hwid_key_public(k), NULL) <= 0 ||
            EVP_DigestVerify(vctx, sig, len, (const unsigned char *) msg, (size_t) n) != 1)
                return hwid_fail_ossl(HWID_E_HSM, "the signature of %s does not verify with its public key",
                                      hwid_key_uri(k));
        return 0;
}

static bool check(json_object *checks, json_object *failed, const char *name, int r) {
        json_object *c = json_object_new_object();

        json_object_object_add(c, "ok", json_object_new_boolean(r >= 0));
        if (r < 0) {
                if (strcmp(hwid_public_message(r), hwid_strerror(r)) != 0)
                        log_warning("readiness check %s: %s", name, hwid_strerror(r));
                json_object_object_add(c, "error", json_object_new_string(hwid_err_slug(r)));
                json_object_object_add(c, "message", json_object_new_string(hwid_public_message(r)));
                json_object_array_add(failed, json_object_new_string(name));
        }
        json_object_object_add(checks, name, c);
        return r >= 0;
}

/* Runs every check and makes the answer: status and JSON body. */
static int evaluate(ca_service *ca, int64_t now, char **ret_json) {
        json_object *o = json_object_new_object(), *checks = json_object_new_object(), *failed = json_object_new_array();
        bool ok = true;
        char msg[256] = "not ready:";
        const char *s;

        hwid_error_clear();
        ok &= check(checks, failed, "store", store_probe_write(ca->store, now));
        ok &= check(checks, failed, "ca_key", sign_probe(ca->ca_key, now));
        ok &= check(checks, failed, "tls_key", ca->tls_key ? sign_probe(ca->tls_key, now)
                                                             : hwid_fail(HWID_E_NOT_READY, "no TLS key yet"));
        json_object_object_add(o, "status", json_object_new_string(ok ? "ready" : "unready"));
        if (!ok) {
                for (size_t i = 0; i < json_object_array_length(failed); i++)
                        snprintf(msg + strlen(msg), sizeof(msg) - strlen(msg), " %s",
                                 json_object_get_string(json_object_array_get_idx(failed, i)));
                json_object_object_add(o, "error", json_object_new_string(hwid_err_slug(-HWID_E_NOT_READY)));
                json_object_object_add(o, "message", json_object_new_string(msg));
                json_object_object_add(o, "failed", json_object_get(failed));
        }
        json_object_object_add(o, "checked_at", json_object_new_int64(now));
        json_object_object_add(o, "checks", checks);
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        *ret_json = s ? strdup(s) : NULL;
        json_object_put(failed);
        json_object_put(o);
        if (!*ret_json)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!ok)
                log_warning("%s", msg);
        return ok ? 200 : 503;
}

void ca_get_readyz(ca_service *ca, const http_request *req, http_response *resp) {
        int r = ca_allow_read(ca, req, ACTION_HEALTH);
        uint64_t now_ms = mono_ms();

        if (r < 0) {
                ca_respond_error(ca, resp, r);
                return;
        }
        /* Held while checking: whoever asks meanwhile gets this verdict. */
        pthread_mutex_lock(&ca->ready_lock);
        if (!ca->ready_json || now_ms - ca->ready_checked_ms >= READY_CACHE_MS) {
                char *json = NULL;

                r = evaluate(ca, (int64_t) time(NULL), &json);
                if (r > 0) {
                        free(ca->ready_json);
                        ca->ready_json = json;
                        ca->ready_status = r;
                        ca->ready_checked_ms = mono_ms();
                }
        }
        if (r >= 0) {
                http_respond_json(resp, ca->ready_status, ca->ready_json);
                resp->error = ca->ready_status == 200 ? NULL : "not_ready";
        }
        pthread_mutex_unlock(&ca->ready_lock);
        if (r < 0)
                ca_respond_error(ca, resp, r);
}

/* ---- metrics ---- */

void ca_get_metrics(ca_service *ca, const http_request *req, http_response *resp) {
        metrics_sources src = {
                .now = (int64_t) time(NULL),
                .requests = atomic_load(&ca->n_requests),
                .issued = atomic_load(&ca->n_issued),
                .renewed = atomic_load(&ca->n_renewed),
                .pending = atomic_load(&ca->n_pending),
                .denied = atomic_load(&ca->n_denied),
                .errors = atomic_load(&ca->n_errors),
                .unauthenticated = refusals_total(ca->refusals),
                .ca_key = ca->ca_key,
                .tls_key = ca->tls_key,
                .tls_not_after = ca->tls_not_after,
        };
        http_server *srv = atomic_load(&ca->transport);
        int r = ca_allow_read(ca, req, ACTION_METRICS);

        if (r >= 0)
                r = x509_not_after(ca->ca_cert, &src.ca_not_after);
        /* Without the store the rest is still worth showing. */
        src.have_stats = r >= 0 && store_stats_get(ca->store, src.now, &src.stats) >= 0;
        pthread_mutex_lock(&ca->crl_lock);
        src.crl_made_at = ca->crl_made_at;
        pthread_mutex_unlock(&ca->crl_lock);
        if (srv) {
                http_server_stats(srv, &src.transport);
                src.have_transport = true;
        }
        if (r >= 0)
                r = metrics_render(ca->metrics, &src, &resp->body);
        if (r < 0) {
                ca_respond_error(ca, resp, r);
                return;
        }
        resp->status = 200;
        resp->content_type = "text/plain; version=0.0.4";
}
