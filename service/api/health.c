/* Health and metrics endpoints.
 *
 * GET /healthz: liveness, cheap: the process answers and the store reads.
 * GET /readyz: readiness, proven (the CA core's checks, ca-ready.c): 503
 *   names what failed.
 * GET /metrics: Prometheus text format: the CA's series (metrics.c), then
 *   the HTTPS listener's connections, rendered here from what the
 *   transport counts (http_server_stats()). */
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "api.h"
#include "error.h"
#include "prom.h"

/* A read of the core: refused, or res to answer. */
static bool read_call(ca_service *ca, const http_request *req, ca_read what, buf *out, ca_result *res,
                      http_response *resp) {
        int64_t now = (int64_t) time(NULL);
        ca_request in = { .op = CA_OP_READ, .what = what, .now = now, .peer = door_peer(req), .out = out };

        if (ca_call(ca, &in, res) == CA_DONE)
                return true;
        door_respond_refusal(resp, res, NULL, now);
        return false;
}

void api_healthz(ca_service *ca, const http_request *req, http_response *resp) {
        ca_result res;

        if (read_call(ca, req, CA_READ_HEALTH, NULL, &res, resp))
                http_respond_json(resp, 200, "{\"status\":\"ok\"}");
        ca_result_clear(&res);
}

/* ---- readiness ---- */

static json_object *checks_json(const ca_readiness *rd, json_object *failed) {
        json_object *checks = json_object_new_object();

        for (size_t i = 0; i < CA_READY_CHECKS; i++) {
                json_object *c = json_object_new_object();
                int r = rd->checks[i].error;

                json_object_object_add(c, "ok", json_object_new_boolean(r >= 0));
                if (r < 0) {
                        json_object_object_add(c, "error", json_object_new_string(hwid_err_slug(r)));
                        json_object_object_add(c, "message", json_object_new_string(rd->checks[i].message));
                        json_object_array_add(failed, json_object_new_string(rd->checks[i].name));
                }
                json_object_object_add(checks, rd->checks[i].name, c);
        }
        return checks;
}

static void respond_ready(const ca_readiness *rd, http_response *resp) {
        json_object *o = json_object_new_object(), *failed = json_object_new_array();
        json_object *checks = checks_json(rd, failed);

        json_object_object_add(o, "status", json_object_new_string(rd->ok ? "ready" : "unready"));
        if (!rd->ok) {
                json_object_object_add(o, "error", json_object_new_string(hwid_err_slug(-HWID_E_NOT_READY)));
                json_object_object_add(o, "message", json_object_new_string(rd->summary));
                json_object_object_add(o, "failed", json_object_get(failed));
        }
        json_object_object_add(o, "checked_at", json_object_new_int64(rd->checked_at));
        if (rd->warning[0]) { /* ready all the same: a CA nearing its end still signs */
                json_object *w = json_object_new_array();

                json_object_array_add(w, json_object_new_string(rd->warning));
                json_object_object_add(o, "warnings", w);
        }
        json_object_object_add(o, "checks", checks);
        http_respond_json(resp, rd->ok ? 200 : 503,
                          json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        resp->error = rd->ok ? NULL : "not_ready";
        json_object_put(failed);
        json_object_put(o);
}

void api_readyz(ca_service *ca, const http_request *req, http_response *resp) {
        ca_result res;

        if (read_call(ca, req, CA_READ_READY, NULL, &res, resp))
                respond_ready(&res.ready, resp);
        ca_result_clear(&res);
}

/* ---- metrics ---- */

static int render_connections(buf *out, const http_stats *t) {
        static const char *const states[] = { "handshaking", "idle", "active", "closing" };
        const unsigned n[] = { t->handshaking, t->idle, t->active, t->closing };
        int r = prom_header(out, "hwid_connections", "gauge", "Open connections by state: in their TLS handshake, "
                            "waiting for a request, in a request, evicted and being closed.");

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(states); i++)
                r = buf_printf(out, "hwid_connections{state=\"%s\"} %u\n", states[i], n[i]);
        if (r >= 0)
                r = prom_header(out, "hwid_connections_evicted_total", "counter",
                                "Connections the server closed to keep its budgets, by reason.");
        for (int i = 0; r >= 0 && i < _HTTP_EVICT_MAX; i++)
                r = buf_printf(out, "hwid_connections_evicted_total{reason=\"%s\"} %llu\n", http_evict_name(i),
                               (unsigned long long) t->evicted[i]);
        if (r >= 0)
                r = prom_header(out, "hwid_connections_refused_total", "counter",
                                "Connections refused when accepted (before TLS), by reason.");
        for (int i = 0; r >= 0 && i < _HTTP_REFUSE_MAX; i++)
                r = buf_printf(out, "hwid_connections_refused_total{reason=\"%s\"} %llu\n", http_refuse_name(i),
                               (unsigned long long) t->refused[i]);
        return r;
}

/* The HTTPS listener's connections and handshakes (http-guard.c says
 * what each means). */
static int render_transport(buf *out, const http_stats *t) {
        int r = render_connections(out, t);

        if (r >= 0)
                r = prom_header(out, "hwid_tls_handshake_duration_seconds", "histogram",
                                "Time from accepting a connection to the end of its TLS handshake.");
        if (r >= 0)
                r = prom_histogram(out, "hwid_tls_handshake_duration_seconds", "", &t->handshake,
                                   &histogram_bounds_sign);
        if (r >= 0)
                r = buf_printf(out, "# HELP hwid_tls_handshake_failures_total TLS handshakes that failed.\n"
                                    "# TYPE hwid_tls_handshake_failures_total counter\n"
                                    "hwid_tls_handshake_failures_total %llu\n",
                               (unsigned long long) t->tls_failures);
        if (r >= 0)
                r = prom_gauge(out, "hwid_tls_handshakes_signing",
                               "TLS handshakes waiting for the TLS key's signature now (at most one per I/O thread).",
                               (double) t->signing);
        if (r >= 0)
                r = prom_gauge(out, "hwid_http_requests_queued", "Complete requests waiting for a worker thread.",
                               (double) t->queued);
        if (r >= 0)
                r = prom_gauge(out, "hwid_http_requests_working", "Requests a worker thread is handling now.",
                               (double) t->working);
        return r;
}

void api_metrics(ca_service *ca, http_server *transport, const http_request *req, http_response *resp) {
        http_stats stats;
        ca_result res;
        int r = 0;

        if (read_call(ca, req, CA_READ_METRICS, &resp->body, &res, resp)) {
                if (transport) {
                        http_server_stats(transport, &stats);
                        r = render_transport(&resp->body, &stats);
                }
                if (r < 0) {
                        ca_service_count_error(ca, "request", r);
                        http_respond_error(resp, r);
                } else {
                        resp->status = 200;
                        resp->content_type = "text/plain; version=0.0.4";
                }
        }
        ca_result_clear(&res);
}
