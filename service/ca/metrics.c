/* Metrics: fixed arrays of atomics filled on the request path, and their
 * Prometheus text exposition.  Histograms are common/histogram.h; the
 * HSM/TPM signing histograms live in hsm/ (hwid_key_sign_stats()), where
 * the one signing path is. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "metrics.h"
#include "prom.h"

#define SLUGS_MAX 64 /* distinct error slugs: the error table's and the transport's */

typedef enum outcome {
        OUTCOME_SUCCESS,
        OUTCOME_PENDING, /* 202: held for approval, or still held when polled */
        OUTCOME_CLIENT_ERROR,
        OUTCOME_SERVER_ERROR,
        _OUTCOME_MAX,
} outcome;

static const char *const endpoint_names[_CA_EP_MAX] = {
        [CA_EP_CA] = "ca",           [CA_EP_ENROLL] = "enroll",   [CA_EP_POLL] = "poll",       [CA_EP_RENEW] = "renew",
        [CA_EP_CRL] = "crl",         [CA_EP_HEALTHZ] = "healthz", [CA_EP_READYZ] = "readyz",   [CA_EP_METRICS] = "metrics",
        [CA_EP_IDENTITY] = "identity", [CA_EP_ADMIN] = "admin",   [CA_EP_EST] = "est",         [CA_EP_ATTEST] = "attest", [CA_EP_CMP] = "cmp",
        [CA_EP_OCSP] = "ocsp",
        [CA_EP_OTHER] = "other",
};

static const char *const outcome_names[_OUTCOME_MAX] = { "success", "pending", "client_error", "server_error" };
static const char *const commit_names[_COMMIT_MAX] = { "certificate", "request", "audit" };

struct metrics {
        histogram requests[_CA_EP_MAX][_OUTCOME_MAX];
        histogram commits[_COMMIT_MAX];
        /* Error responses by slug; the last one counts slugs not listed. */
        const char *slugs[SLUGS_MAX];
        size_t n_slugs;
        _Atomic uint64_t errors[SLUGS_MAX + 1];
        _Atomic uint64_t syslog_dropped;
        _Atomic uint64_t challenges[_CHALLENGE_MAX];
        _Atomic uint64_t events[_EVENT_MAX];
};

static void add_slug(metrics *m, const char *slug) {
        for (size_t i = 0; i < m->n_slugs; i++)
                if (strcmp(m->slugs[i], slug) == 0)
                        return;
        if (m->n_slugs < SLUGS_MAX)
                m->slugs[m->n_slugs++] = slug;
}

int metrics_new(metrics **ret) {
        metrics *m = calloc(1, sizeof(*m));

        if (!m)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (int code = 1; code < _HWID_E_MAX; code++)
                if (hwid_err_http_status(-code) >= 400)
                        add_slug(m, hwid_err_slug(-code));
        /* The transport's own refusals (http.c, http-answer.c). */
        add_slug(m, "headers_too_large");
        add_slug(m, "uri_too_long");
        add_slug(m, "bad_request");
        add_slug(m, "not_implemented");
        add_slug(m, "http_version_not_supported");
        *ret = m;
        return 0;
}

void metrics_free(metrics *m) {
        free(m);
}

static size_t slug_index(const metrics *m, const char *slug) {
        for (size_t i = 0; slug && i < m->n_slugs; i++)
                if (strcmp(m->slugs[i], slug) == 0)
                        return i;
        return SLUGS_MAX; /* "other" */
}

void metrics_request(metrics *m, ca_endpoint ep, int status, const char *error, uint64_t ns) {
        outcome o = status >= 500   ? OUTCOME_SERVER_ERROR
                    : status >= 400 ? OUTCOME_CLIENT_ERROR
                    : status == 202 ? OUTCOME_PENDING
                                    : OUTCOME_SUCCESS;

        if ((unsigned) ep >= _CA_EP_MAX)
                ep = CA_EP_OTHER;
        histogram_observe(&m->requests[ep][o], &histogram_bounds_request, ns);
        if (status >= 400)
                atomic_fetch_add_explicit(&m->errors[slug_index(m, error)], 1, memory_order_relaxed);
}

void metrics_refusal(metrics *m, const char *error) {
        atomic_fetch_add_explicit(&m->errors[slug_index(m, error)], 1, memory_order_relaxed);
}

void metrics_commit_observe(metrics *m, metrics_commit op, uint64_t ns) {
        if ((unsigned) op < _COMMIT_MAX)
                histogram_observe(&m->commits[op], &histogram_bounds_request, ns);
}

void metrics_challenge_count(metrics *m, metrics_challenge what, unsigned long n) {
        if (m && what < _CHALLENGE_MAX)
                atomic_fetch_add_explicit(&m->challenges[what], n, memory_order_relaxed);
}

void metrics_syslog_dropped(metrics *m) {
        atomic_fetch_add_explicit(&m->syslog_dropped, 1, memory_order_relaxed);
}

/* ---- exposition ---- */

static int render_requests(metrics *m, buf *out) {
        static const char name[] = "hwid_http_request_duration_seconds";
        int r = prom_header(out, name, "histogram",
                       "Time to handle a request, from its complete arrival to its response, by endpoint and outcome.");

        for (int e = 0; r >= 0 && e < _CA_EP_MAX; e++)
                for (int o = 0; r >= 0 && o < _OUTCOME_MAX; o++) {
                        histogram_snapshot h;
                        char labels[96];

                        histogram_snapshot_take(&m->requests[e][o], &histogram_bounds_request, &h);
                        /* Series appear once they have a value: 13 x 3 empty histograms say nothing. */
                        if (h.count == 0)
                                continue;
                        snprintf(labels, sizeof(labels), "endpoint=\"%s\",outcome=\"%s\"", endpoint_names[e],
                                 outcome_names[o]);
                        r = prom_histogram(out, name, labels, &h, &histogram_bounds_request);
                }
        return r;
}

static int render_commits(metrics *m, buf *out) {
        static const char name[] = "hwid_store_commit_duration_seconds";
        int r = prom_header(out, name, "histogram",
                       "Time for the store to make a write durable (waiting for a group commit included), by what "
                       "was written.");

        for (int c = 0; r >= 0 && c < _COMMIT_MAX; c++) {
                histogram_snapshot h;
                char labels[64];

                histogram_snapshot_take(&m->commits[c], &histogram_bounds_request, &h);
                snprintf(labels, sizeof(labels), "op=\"%s\"", commit_names[c]);
                r = prom_histogram(out, name, labels, &h, &histogram_bounds_request);
        }
        return r;
}

static int render_errors(metrics *m, buf *out) {
        int r = prom_header(out, "hwid_request_errors_total", "counter",
                       "Requests answered with an error, by its code (the JSON error slug).");

        for (size_t i = 0; r >= 0 && i <= m->n_slugs; i++) {
                size_t at = i < m->n_slugs ? i : SLUGS_MAX;

                r = buf_printf(out, "hwid_request_errors_total{error=\"%s\"} %llu\n",
                               i < m->n_slugs ? m->slugs[i] : "other",
                               (unsigned long long) atomic_load_explicit(&m->errors[at], memory_order_relaxed));
        }
        return r;
}

static const char *backend_of(hwid_key *k) {
        return strncmp(hwid_key_uri(k), "tpm2:", 5) == 0 ? "tpm2" : "pkcs11";
}

static int render_signing(buf *out, const metrics_sources *src) {
        struct { const char *name; hwid_key *k; } keys[] = { { "ca", src->ca_key }, { "tls", src->tls_key } };
        hwid_sign_stats st[2];
        hsm_recovery_stats rec;
        char labels[64];
        int r = prom_header(out, "hwid_sign_duration_seconds", "histogram",
                       "Time of one signature by the HSM/TPM (failed ones included), by key.");

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++) {
                if (!keys[i].k)
                        continue;
                hwid_key_sign_stats(keys[i].k, &st[i]);
                snprintf(labels, sizeof(labels), "key=\"%s\",backend=\"%s\"", keys[i].name, backend_of(keys[i].k));
                r = prom_histogram(out, "hwid_sign_duration_seconds", labels, &st[i].duration,
                                     &histogram_bounds_sign);
        }
        if (r >= 0)
                r = prom_header(out, "hwid_sign_errors_total", "counter", "Signatures the HSM/TPM failed to make, by key.");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++)
                if (keys[i].k)
                        r = buf_printf(out, "hwid_sign_errors_total{key=\"%s\",backend=\"%s\"} %llu\n", keys[i].name,
                                       backend_of(keys[i].k), (unsigned long long) st[i].errors);
        hsm_recovery_stats_get(&rec);
        if (r >= 0)
                r = prom_header(out, "hwid_hsm_recoveries_total", "counter",
                           "Recoveries of a lost PKCS#11 token (module reinitialised, token found again and logged "
                           "in), by result.");
        if (r >= 0)
                r = buf_printf(out, "hwid_hsm_recoveries_total{result=\"recovered\"} %lu\n"
                                    "hwid_hsm_recoveries_total{result=\"failed\"} %lu\n", rec.recovered, rec.failed);
        return r;
}

static int render_challenges(metrics *m, buf *out) {
        static const char *const results[_CHALLENGE_MAX] = { "issued", "replaced", "refused" };
        int r = prom_header(out, "hwid_attest_challenges_total", "counter",
                       "Attestation challenges made, replacing an older one of the same requester (its bound), "
                       "or refused (max_pending).");

        for (size_t i = 0; r >= 0 && i < _CHALLENGE_MAX; i++)
                r = buf_printf(out, "hwid_attest_challenges_total{result=\"%s\"} %llu\n", results[i],
                               (unsigned long long) atomic_load_explicit(&m->challenges[i], memory_order_relaxed));
        return r;
}

void metrics_event_count(metrics *m, metrics_event e) {
        if ((unsigned) e < _EVENT_MAX)
                atomic_fetch_add_explicit(&m->events[e], 1, memory_order_relaxed);
}

static int render_events(metrics *m, buf *out) {
        static const struct { const char *name, *label; } ev[_EVENT_MAX] = {
                [EVENT_PBM_COMPUTED] = { "hwid_cmp_pbm_total", "result=\"computed\"" },
                [EVENT_PBM_REFUSED] = { "hwid_cmp_pbm_total", "result=\"refused\"" },
                [EVENT_REPLAY_AUDITED] = { "hwid_enroll_replays_total", "audited=\"true\"" },
                [EVENT_REPLAY_UNAUDITED] = { "hwid_enroll_replays_total", "audited=\"false\"" },
                [EVENT_TOKEN_DEVICE] = { "hwid_token_checks_total", "by=\"device\"" },
                [EVENT_TOKEN_MEMORY] = { "hwid_token_checks_total", "by=\"memory\"" },
                [EVENT_TOKEN_HASH] = { "hwid_token_checks_total", "by=\"hash\"" },
        };
        int r = prom_header(out, "hwid_cmp_pbm_total", "counter", "CMP PasswordBasedMacs computed, or refused before "
                       "any computing (parameters outside the allow-list, no such token).");

        for (int i = 0; r >= 0 && i < _EVENT_MAX; i++) {
                if (i == EVENT_REPLAY_AUDITED)
                        r = prom_header(out, "hwid_enroll_replays_total", "counter", "Enrollments answered with the "
                                   "certificate they got before: audited, or counted only (one record per "
                                   "certificate and hour).");
                if (r >= 0 && i == EVENT_TOKEN_DEVICE)
                        r = prom_header(out, "hwid_token_checks_total", "counter", "Bootstrap token secrets checked: "
                                   "by an HMAC with the token key in the HSM/TPM (device), from memory for a token "
                                   "checked before (memory), by a SHA-256 for a legacy token (hash).");
                if (r >= 0)
                        r = buf_printf(out, "%s{%s} %llu\n", ev[i].name, ev[i].label,
                                       (unsigned long long) atomic_load_explicit(&m->events[i],
                                                                                 memory_order_relaxed));
        }
        return r;
}

/* Each served CA generation's notAfter, labelled with its state: an alert
 * on the active one's nearing end (docs/OPERATIONS.md, "Rolling the CA
 * over"). */
static int render_generations(buf *out, const metrics_sources *src) {
        int r = prom_header(out, "hwid_ca_not_after_seconds", "gauge",
                            "When each CA generation served expires (Unix seconds), by generation and state.");

        for (size_t i = 0; r >= 0 && i < src->n_gens; i++)
                r = buf_printf(out, "hwid_ca_not_after_seconds{generation=\"%d\",state=\"%s\"} %lld\n",
                               src->gens[i].generation, src->gens[i].state, (long long) src->gens[i].not_after);
        return r;
}

static int render_gauges(metrics *m, buf *out, const metrics_sources *src) {
        int r = 0;

        if (src->have_stats)
                r = prom_gauge(out, "hwid_certificates_live", "Certificates valid and not expired.",
                          (double) src->stats.live_certificates);
        if (r >= 0 && src->have_stats)
                r = prom_gauge(out, "hwid_requests_pending", "Requests waiting for an approval now.",
                          (double) src->stats.pending_requests);
        if (r >= 0)
                r = prom_gauge(out, "hwid_ca_certificate_expiry_seconds",
                          "Seconds until the active CA certificate expires.", (double) (src->ca_not_after - src->now));
        if (r >= 0 && src->n_gens)
                r = render_generations(out, src);
        if (r >= 0 && src->tls_not_after)
                r = prom_gauge(out, "hwid_tls_certificate_expiry_seconds",
                          "Seconds until hwidd's TLS certificate expires.", (double) (src->tls_not_after - src->now));
        if (r >= 0 && src->crl_made_at)
                r = prom_gauge(out, "hwid_crl_age_seconds", "Seconds since the active CA's CRL was signed.",
                          (double) (src->now - src->crl_made_at));
        if (r >= 0)
                r = prom_header(out, "hwid_audit_syslog_dropped_total", "counter",
                           "Audit records the syslog copy could not deliver (the database has them all).");
        if (r >= 0)
                r = buf_printf(out, "hwid_audit_syslog_dropped_total %llu\n",
                               (unsigned long long) atomic_load_explicit(&m->syslog_dropped, memory_order_relaxed));
        if (r >= 0)
                r = render_challenges(m, out);
        if (r >= 0)
                r = render_events(m, out);
        return r;
}

static int render_counters(buf *out, const metrics_sources *src) {
        const struct { const char *name, *help; unsigned long value; } c[] = {
                { "hwid_http_requests_total", "HTTP requests handled.", src->requests },
                { "hwid_certificates_issued_total", "Certificates issued by enrollment.", src->issued },
                { "hwid_certificates_renewed_total", "Certificates issued by renewal.", src->renewed },
                { "hwid_requests_pending_total", "Requests held for manual approval.", src->pending },
                { "hwid_policy_denials_total", "Requests denied by policy.", src->denied },
                { "hwid_errors_total", "Requests that failed on the server side.", src->errors },
                { "hwid_unauthenticated_refusals_total",
                  "Requests refused without valid credentials (audited as a summary per minute).",
                  src->unauthenticated },
        };
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(c); i++)
                r = buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n%s %lu\n", c[i].name, c[i].help, c[i].name,
                               c[i].name, c[i].value);
        return r;
}

int metrics_render(metrics *m, const metrics_sources *src, buf *out) {
        int r = render_counters(out, src);

        if (r >= 0)
                r = render_requests(m, out);
        if (r >= 0)
                r = render_errors(m, out);
        if (r >= 0)
                r = render_commits(m, out);
        if (r >= 0)
                r = render_signing(out, src);
        if (r >= 0)
                r = render_gauges(m, out, src);
        return r;
}
