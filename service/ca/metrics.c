/* Metrics: fixed arrays of atomics filled on the request path, and their
 * Prometheus text exposition.  Histograms are common/histogram.h; the
 * HSM/TPM signing histograms live in hsm/ (hwid_key_sign_stats()), where
 * the one signing path is. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "metrics.h"

#define SLUGS_MAX 64 /* distinct error slugs: the error table's and the transport's */

typedef enum outcome {
        OUTCOME_SUCCESS,
        OUTCOME_PENDING, /* 202: held for approval, or still held when polled */
        OUTCOME_CLIENT_ERROR,
        OUTCOME_SERVER_ERROR,
        _OUTCOME_MAX,
} outcome;

static const char *const endpoint_names[_EP_MAX] = {
        [EP_CA] = "ca",           [EP_ENROLL] = "enroll",   [EP_POLL] = "poll",       [EP_RENEW] = "renew",
        [EP_CRL] = "crl",         [EP_HEALTHZ] = "healthz", [EP_READYZ] = "readyz",   [EP_METRICS] = "metrics",
        [EP_IDENTITY] = "identity", [EP_ADMIN] = "admin",   [EP_EST] = "est",         [EP_ATTEST] = "attest", [EP_CMP] = "cmp",
        [EP_OTHER] = "other",
};

static const char *const outcome_names[_OUTCOME_MAX] = { "success", "pending", "client_error", "server_error" };
static const char *const commit_names[_COMMIT_MAX] = { "certificate", "request", "audit" };

struct metrics {
        histogram requests[_EP_MAX][_OUTCOME_MAX];
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

typedef struct route {
        const char *method; /* NULL: any */
        const char *path;
        bool prefix;
        metrics_endpoint ep;
} route;

static const route routes[] = {
        { "GET", "/ca", false, EP_CA },
        { "POST", "/csr", false, EP_ENROLL },
        { "GET", "/v1/requests/", true, EP_POLL },
        { "POST", "/v1/renew", false, EP_RENEW },
        { "GET", "/crl", false, EP_CRL },
        { "GET", "/healthz", false, EP_HEALTHZ },
        { "GET", "/readyz", false, EP_READYZ },
        { "GET", "/metrics", false, EP_METRICS },
        { "GET", "/v1/identities/", true, EP_IDENTITY },
        { NULL, "/v1/admin/", true, EP_ADMIN },
        { NULL, "/.well-known/est/", true, EP_EST },
        { NULL, "/v1/attest", true, EP_ATTEST },
        { NULL, "/.well-known/cmp", true, EP_CMP },
};

metrics_endpoint metrics_endpoint_of(const char *method, const char *path) {
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                const route *r = &routes[i];
                bool path_ok = r->prefix ? strncmp(path, r->path, strlen(r->path)) == 0 : strcmp(path, r->path) == 0;

                if (path_ok && (!r->method || strcmp(method, r->method) == 0))
                        return r->ep;
        }
        return EP_OTHER;
}

static size_t slug_index(const metrics *m, const char *slug) {
        for (size_t i = 0; slug && i < m->n_slugs; i++)
                if (strcmp(m->slugs[i], slug) == 0)
                        return i;
        return SLUGS_MAX; /* "other" */
}

void metrics_request(metrics *m, metrics_endpoint ep, int status, const char *error, uint64_t ns) {
        outcome o = status >= 500   ? OUTCOME_SERVER_ERROR
                    : status >= 400 ? OUTCOME_CLIENT_ERROR
                    : status == 202 ? OUTCOME_PENDING
                                    : OUTCOME_SUCCESS;

        if ((unsigned) ep >= _EP_MAX)
                ep = EP_OTHER;
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

static int header(buf *out, const char *name, const char *type, const char *help) {
        return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One histogram's series; labels is "k=\"v\",..." (without braces), or "". */
static int histogram_series(buf *out, const char *name, const char *labels, const histogram_snapshot *h,
                            const histogram_bounds *b) {
        const char *sep = *labels ? "," : "", *open = *labels ? "{" : "", *close = *labels ? "}" : "";
        int r = 0;

        for (size_t i = 0; r >= 0 && i < b->n; i++)
                r = buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, (double) b->le_ns[i] / 1e9,
                               (unsigned long long) h->cumulative[i]);
        if (r >= 0)
                r = buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n%s_sum%s%s%s %.9f\n%s_count%s%s%s %llu\n", name,
                               labels, sep, (unsigned long long) h->count, name, open, labels, close, h->sum_seconds,
                               name, open, labels, close, (unsigned long long) h->count);
        return r;
}

static int render_requests(metrics *m, buf *out) {
        static const char name[] = "hwid_http_request_duration_seconds";
        int r = header(out, name, "histogram",
                       "Time to handle a request, from its complete arrival to its response, by endpoint and outcome.");

        for (int e = 0; r >= 0 && e < _EP_MAX; e++)
                for (int o = 0; r >= 0 && o < _OUTCOME_MAX; o++) {
                        histogram_snapshot h;
                        char labels[96];

                        histogram_snapshot_take(&m->requests[e][o], &histogram_bounds_request, &h);
                        /* Series appear once they have a value: 13 x 3 empty histograms say nothing. */
                        if (h.count == 0)
                                continue;
                        snprintf(labels, sizeof(labels), "endpoint=\"%s\",outcome=\"%s\"", endpoint_names[e],
                                 outcome_names[o]);
                        r = histogram_series(out, name, labels, &h, &histogram_bounds_request);
                }
        return r;
}

static int render_commits(metrics *m, buf *out) {
        static const char name[] = "hwid_store_commit_duration_seconds";
        int r = header(out, name, "histogram",
                       "Time for the store to make a write durable (waiting for a group commit included), by what "
                       "was written.");

        for (int c = 0; r >= 0 && c < _COMMIT_MAX; c++) {
                histogram_snapshot h;
                char labels[64];

                histogram_snapshot_take(&m->commits[c], &histogram_bounds_request, &h);
                snprintf(labels, sizeof(labels), "op=\"%s\"", commit_names[c]);
                r = histogram_series(out, name, labels, &h, &histogram_bounds_request);
        }
        return r;
}

static int render_errors(metrics *m, buf *out) {
        int r = header(out, "hwid_request_errors_total", "counter",
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
        int r = header(out, "hwid_sign_duration_seconds", "histogram",
                       "Time of one signature by the HSM/TPM (failed ones included), by key.");

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++) {
                if (!keys[i].k)
                        continue;
                hwid_key_sign_stats(keys[i].k, &st[i]);
                snprintf(labels, sizeof(labels), "key=\"%s\",backend=\"%s\"", keys[i].name, backend_of(keys[i].k));
                r = histogram_series(out, "hwid_sign_duration_seconds", labels, &st[i].duration,
                                     &histogram_bounds_sign);
        }
        if (r >= 0)
                r = header(out, "hwid_sign_errors_total", "counter", "Signatures the HSM/TPM failed to make, by key.");
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++)
                if (keys[i].k)
                        r = buf_printf(out, "hwid_sign_errors_total{key=\"%s\",backend=\"%s\"} %llu\n", keys[i].name,
                                       backend_of(keys[i].k), (unsigned long long) st[i].errors);
        hsm_recovery_stats_get(&rec);
        if (r >= 0)
                r = header(out, "hwid_hsm_recoveries_total", "counter",
                           "Recoveries of a lost PKCS#11 token (module reinitialised, token found again and logged "
                           "in), by result.");
        if (r >= 0)
                r = buf_printf(out, "hwid_hsm_recoveries_total{result=\"recovered\"} %lu\n"
                                    "hwid_hsm_recoveries_total{result=\"failed\"} %lu\n", rec.recovered, rec.failed);
        return r;
}

static int gauge(buf *out, const char *name, const char *help, double v) {
        int r = header(out, name, "gauge", help);

        return r < 0 ? r : buf_printf(out, "%s %.0f\n", name, v);
}

static int render_challenges(metrics *m, buf *out) {
        static const char *const results[_CHALLENGE_MAX] = { "issued", "replaced", "refused" };
        int r = header(out, "hwid_attest_challenges_total", "counter",
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
        };
        int r = header(out, "hwid_cmp_pbm_total", "counter", "CMP PasswordBasedMacs computed, or refused before "
                       "any computing (parameters outside the allow-list, no such token).");

        for (int i = 0; r >= 0 && i < _EVENT_MAX; i++) {
                if (i == EVENT_REPLAY_AUDITED)
                        r = header(out, "hwid_enroll_replays_total", "counter", "Enrollments answered with the "
                                   "certificate they got before: audited, or counted only (one record per "
                                   "certificate and hour).");
                if (r >= 0)
                        r = buf_printf(out, "%s{%s} %llu\n", ev[i].name, ev[i].label,
                                       (unsigned long long) atomic_load_explicit(&m->events[i],
                                                                                 memory_order_relaxed));
        }
        return r;
}

static int render_gauges(metrics *m, buf *out, const metrics_sources *src) {
        int r = 0;

        if (src->have_stats)
                r = gauge(out, "hwid_certificates_live", "Certificates valid and not expired.",
                          (double) src->stats.live_certificates);
        if (r >= 0 && src->have_stats)
                r = gauge(out, "hwid_requests_pending", "Requests waiting for an approval now.",
                          (double) src->stats.pending_requests);
        if (r >= 0)
                r = gauge(out, "hwid_ca_certificate_expiry_seconds", "Seconds until the CA certificate expires.",
                          (double) (src->ca_not_after - src->now));
        if (r >= 0 && src->tls_not_after)
                r = gauge(out, "hwid_tls_certificate_expiry_seconds",
                          "Seconds until hwidd's TLS certificate expires.", (double) (src->tls_not_after - src->now));
        if (r >= 0 && src->crl_made_at)
                r = gauge(out, "hwid_crl_age_seconds", "Seconds since the CRL being served was signed.",
                          (double) (src->now - src->crl_made_at));
        if (r >= 0)
                r = header(out, "hwid_audit_syslog_dropped_total", "counter",
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

/* The HTTPS listener's connections (http-guard.c says what each means). */
static int render_transport(buf *out, const http_stats *t) {
        static const char *const states[] = { "handshaking", "idle", "active", "closing" };
        const unsigned n[] = { t->handshaking, t->idle, t->active, t->closing };
        int r = header(out, "hwid_connections", "gauge", "Open connections by state: in their TLS handshake, "
                       "waiting for a request, in a request, evicted and being closed.");

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(states); i++)
                r = buf_printf(out, "hwid_connections{state=\"%s\"} %u\n", states[i], n[i]);
        if (r >= 0)
                r = header(out, "hwid_connections_evicted_total", "counter",
                           "Connections the server closed to keep its budgets, by reason.");
        for (int i = 0; r >= 0 && i < _HTTP_EVICT_MAX; i++)
                r = buf_printf(out, "hwid_connections_evicted_total{reason=\"%s\"} %llu\n", http_evict_name(i),
                               (unsigned long long) t->evicted[i]);
        if (r >= 0)
                r = header(out, "hwid_connections_refused_total", "counter",
                           "Connections refused when accepted (before TLS), by reason.");
        for (int i = 0; r >= 0 && i < _HTTP_REFUSE_MAX; i++)
                r = buf_printf(out, "hwid_connections_refused_total{reason=\"%s\"} %llu\n", http_refuse_name(i),
                               (unsigned long long) t->refused[i]);
        if (r >= 0)
                r = header(out, "hwid_tls_handshake_duration_seconds", "histogram",
                           "Time from accepting a connection to the end of its TLS handshake.");
        if (r >= 0)
                r = histogram_series(out, "hwid_tls_handshake_duration_seconds", "", &t->handshake,
                                     &histogram_bounds_sign);
        if (r >= 0)
                r = buf_printf(out, "# HELP hwid_tls_handshake_failures_total TLS handshakes that failed.\n"
                                    "# TYPE hwid_tls_handshake_failures_total counter\n"
                                    "hwid_tls_handshake_failures_total %llu\n",
                               (unsigned long long) t->tls_failures);
        if (r >= 0)
                r = gauge(out, "hwid_tls_handshakes_signing",
                          "TLS handshakes waiting for the TLS key's signature now (at most one per I/O thread).",
                          (double) t->signing);
        if (r >= 0)
                r = gauge(out, "hwid_http_requests_queued", "Complete requests waiting for a worker thread.",
                          (double) t->queued);
        if (r >= 0)
                r = gauge(out, "hwid_http_requests_working", "Requests a worker thread is handling now.",
                          (double) t->working);
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
        if (r >= 0 && src->have_transport)
                r = render_transport(out, &src->transport);
        return r;
}
