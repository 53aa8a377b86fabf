/* The OCSP responder (CA_OP_OCSP, RFC 6960 and RFC 5019's profile): who
 * the request is about, the certificate's status read from the store at
 * every request (so a revocation shows at once, on every replica), and
 * the signed answer -- from the cache while it is fresh, else signed by
 * the CA key within the signing budgets.
 *
 * What a signature costs is bounded before it is made: every signature
 * (a cache miss, or a nonce, which no cached answer can echo) takes a
 * token of the client address's bucket and of everyone's.  Past either,
 * a nonce goes unechoed (RFC 8954 lets a responder leave it out) and the
 * cached answer is served while it is valid; else the answer is the
 * unsigned tryLater, which costs nothing.  A flood of random serials
 * thus costs the flooding address its own budget, and nobody else's
 * cached answers (an `unknown` is never cached). */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"
#include "ocsp-cache.h"
#include "ocsp-sign.h"
#include "ossl-util.h"
#include "prom.h"
#include "ratelimit.h"

/* A cached answer read before it is served (an OCSP answer with the CA
 * certificate is 1 to 3 KiB). */
#define OCSP_ANSWER_MAX (64 * 1024)

struct ca_ocsp_state {
        ocsp_cache *cache;
        ratelimit *per_ip, *all;
        atomic_ulong answers[_CA_OCSP_MAX], hits, signatures;
};

int ca_ocsp_new(const hwidd_config *cfg, ca_ocsp_state **ret) {
        ca_ocsp_state *o = calloc(1, sizeof(*o));
        int r;

        if (!o)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = ocsp_cache_new(cfg->ocsp_cache_entries, &o->cache)) < 0 ||
            (r = ratelimit_new(cfg->ocsp_sign_rate_per_ip, cfg->ocsp_sign_burst_per_ip, 0, &o->per_ip)) < 0 ||
            (r = ratelimit_new(cfg->ocsp_sign_rate, cfg->ocsp_sign_burst, 8, &o->all)) < 0) {
                ca_ocsp_free(o);
                return r;
        }
        *ret = o;
        return 0;
}

void ca_ocsp_free(ca_ocsp_state *o) {
        if (!o)
                return;
        ocsp_cache_free(o->cache);
        ratelimit_free(o->per_ip);
        ratelimit_free(o->all);
        free(o);
}

/* The client's bucket, keyed as the transport keys its rate limit: an
 * IPv4 address, an IPv6 /64; clients whose address is unknown share one. */
static size_t client_key(const char *client, uint8_t key[16]) {
        static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };

        if (client && inet_pton(AF_INET, client, key) == 1)
                return 4;
        if (!client || inet_pton(AF_INET6, client, key) != 1) {
                key[0] = 0xff;
                return 1;
        }
        if (memcmp(key, v4mapped, sizeof(v4mapped)) != 0)
                return 8;
        memmove(key, key + 12, 4);
        return 4;
}

/* A token of the client's budget and of everyone's, for one signature;
 * false when either is spent (the client's is spared when everyone's
 * is). */
static bool budget_take(ca_ocsp_state *o, const char *client) {
        static const uint8_t everyone[1] = { 0 };
        uint8_t key[16];
        size_t n = client_key(client, key);

        if (ratelimit_peek(o->all, everyone, 1) > 0 || ratelimit_take(o->per_ip, key, n) > 0)
                return false;
        return ratelimit_take(o->all, everyone, 1) == 0;
}

/* The served CA generation whose certificate the certID names as the
 * issuer (its name and key hashed), else NULL: after a rollover each
 * generation answers for its own certificates. */
static const ca_gen *issuer_of(const ca_service *ca, const ocsp_query *q) {
        for (size_t i = 0; i < ca->gens->n; i++)
                if (ocsp_query_names_issuer(q, ca->gens->v[i].cert))
                        return &ca->gens->v[i];
        return NULL;
}

/* The certificate's status as the store has it now: never issued by
 * generation gen is unknown. */
static int read_status(ca_service *ca, const ca_gen *gen, const ocsp_query *q, ocsp_answer *ret) {
        store_cert c = { 0 };
        int r = store_cert_get(ca->store, q->serial, &c);

        if (r >= 0 && (c.generation ? c.generation : 1) != gen->n) {
                store_cert_clear(&c);
                r = -HWID_E_NOT_FOUND;
        }
        if (r == -HWID_E_NOT_FOUND) {
                *ret = (ocsp_answer) { .status = OCSP_CERT_UNKNOWN };
                return 0;
        }
        if (r < 0)
                return r;
        *ret = (ocsp_answer) { .status = OCSP_CERT_GOOD };
        if (c.status == CERT_REVOKED)
                *ret = (ocsp_answer) { .status = OCSP_CERT_REVOKED, .revoked_at = c.revoked_at,
                                       .reason = c.revocation_reason };
        store_cert_clear(&c);
        return 0;
}

/* The cache's key: the certID's DER (hash algorithm, issuer, serial). */
static int certid_key(const ocsp_query *q, uint8_t key[OCSP_CACHE_KEY_MAX], size_t *ret_len) {
        unsigned char *p = key;
        int n = i2d_OCSP_CERTID((OCSP_CERTID *) q->id, NULL);

        if (n <= 0 || n > OCSP_CACHE_KEY_MAX || i2d_OCSP_CERTID((OCSP_CERTID *) q->id, &p) != n)
                return hwid_fail_ossl(HWID_E_INVALID, "a certID hwidd cannot encode");
        *ret_len = (size_t) n;
        return 0;
}

/* Signs a (the certificate's status) for q now with generation gen's
 * key, its nonce echoed if it has one, into out; kept in the cache when
 * it has none and is about a certificate issued: an `unknown` is not
 * kept, so that random serials never push out the answers relying
 * parties poll. */
static int sign_now(ca_service *ca, const ca_gen *gen, const ca_request *req, ocsp_answer *a, const uint8_t *key,
                    size_t key_len) {
        const ocsp_query *q = req->ocsp;
        _cleanup_(OPENSSL_freep) uint8_t *der = NULL;
        size_t len = 0;
        int r;

        a->this_update = req->now;
        a->next_update = req->now + ca->cfg->ocsp_validity;
        a->echo_nonce = q->nonce_len > 0;
        if ((r = issuer_ocsp_sign(gen->issuer, q, a, &der, &len)) < 0)
                return r;
        atomic_fetch_add(&ca->ocsp->signatures, 1);
        if (!a->echo_nonce && a->status != OCSP_CERT_UNKNOWN && (r = ocsp_cache_put(ca->ocsp->cache, key, key_len, a, der, len)) < 0)
                return r;
        return buf_append(req->out, der, len);
}

/* The signed answer a to the request, into req->out: the cache's while it
 * is fresh and no nonce is asked; else one signed now, within the
 * budgets; else the cache's while it is valid.  -HWID_E_RATE_LIMITED when
 * none of these. */
static int signed_answer(ca_service *ca, const ca_gen *gen, const ca_request *req, ocsp_answer *a) {
        ca_ocsp_state *o = ca->ocsp;
        uint8_t key[OCSP_CACHE_KEY_MAX];
        size_t key_len;
        _cleanup_buf_ buf cached;
        bool fresh = false, have;
        int r;

        buf_init(&cached, OCSP_ANSWER_MAX);
        if ((r = certid_key(req->ocsp, key, &key_len)) < 0)
                return r;
        have = ocsp_cache_get(o->cache, key, key_len, a, req->now, &cached, &fresh) >= 0;
        if (!(have && fresh && req->ocsp->nonce_len == 0) && budget_take(o, req->client))
                return sign_now(ca, gen, req, a, key, key_len);
        if (!have)
                return hwid_fail(HWID_E_RATE_LIMITED, "over the OCSP signing budget of %s",
                                 req->client ? req->client : "an unknown address");
        atomic_fetch_add(&o->hits, 1);
        return buf_append(req->out, cached.data, cached.len);
}

/* An answer without a signature: malformedRequest, unauthorized or
 * tryLater. */
static int unsigned_answer(const ca_request *req, int code) {
        _cleanup_(OPENSSL_freep) uint8_t *der = NULL;
        size_t len = 0;
        int r = ocsp_status_response(code, &der, &len);

        return r < 0 ? r : buf_append(req->out, der, len);
}

static int answer(ca_service *ca, const ca_request *req, ca_ocsp_status *ret) {
        static const ca_ocsp_status said[] = {
                [OCSP_CERT_GOOD] = CA_OCSP_GOOD, [OCSP_CERT_REVOKED] = CA_OCSP_REVOKED,
                [OCSP_CERT_UNKNOWN] = CA_OCSP_UNKNOWN,
        };
        const ca_gen *gen;
        ocsp_answer a;
        int r;

        if (req->refused || !req->ocsp) {
                *ret = CA_OCSP_MALFORMED;
                return unsigned_answer(req, OCSP_RESPONSE_STATUS_MALFORMEDREQUEST);
        }
        if (!(gen = issuer_of(ca, req->ocsp))) {
                *ret = CA_OCSP_UNAUTHORIZED;
                return unsigned_answer(req, OCSP_RESPONSE_STATUS_UNAUTHORIZED);
        }
        if ((r = read_status(ca, gen, req->ocsp, &a)) >= 0 && (r = signed_answer(ca, gen, req, &a)) >= 0) {
                *ret = said[a.status];
                return 0;
        }
        /* The store or the key failed (counted and logged, as the core's
         * failures are), or the budget is spent: asking again later can
         * succeed. */
        if (hwid_err_http_status(r) >= 500) {
                atomic_fetch_add(&ca->n_errors, 1);
                log_error("an OCSP answer failed: %s", hwid_strerror(r));
        }
        *ret = CA_OCSP_TRYLATER;
        return unsigned_answer(req, OCSP_RESPONSE_STATUS_TRYLATER);
}

void ca_ocsp(ca_service *ca, const ca_request *req, ca_result *res) {
        ca_ocsp_status st = CA_OCSP_TRYLATER;
        int r = ca->ocsp && req->out ? answer(ca, req, &st) : hwid_fail(HWID_E_INTERNAL, "no OCSP responder here");

        if (r < 0) {
                ca_refuse(ca, res, r);
                return;
        }
        res->ocsp = st;
        atomic_fetch_add(&ca->ocsp->answers[st], 1);
}

int ca_ocsp_metrics(ca_service *ca, buf *out) {
        static const char *const names[_CA_OCSP_MAX] = {
                [CA_OCSP_GOOD] = "good",           [CA_OCSP_REVOKED] = "revoked",
                [CA_OCSP_UNKNOWN] = "unknown",     [CA_OCSP_UNAUTHORIZED] = "unauthorized",
                [CA_OCSP_MALFORMED] = "malformed", [CA_OCSP_TRYLATER] = "trylater",
        };
        ca_ocsp_state *o = ca->ocsp;
        int r;

        if (!o)
                return 0;
        r = prom_header(out, "hwid_ocsp_requests_total", "counter",
                        "OCSP requests answered, by what the answer said: a certificate's status (signed), or "
                        "unauthorized, malformed, trylater (unsigned).");
        for (int i = 0; r >= 0 && i < _CA_OCSP_MAX; i++)
                r = buf_printf(out, "hwid_ocsp_requests_total{status=\"%s\"} %lu\n", names[i],
                               atomic_load(&o->answers[i]));
        if (r >= 0)
                r = buf_printf(out, "# HELP hwid_ocsp_cache_hits_total OCSP answers served from the cache, "
                                    "without a signature.\n# TYPE hwid_ocsp_cache_hits_total counter\n"
                                    "hwid_ocsp_cache_hits_total %lu\n"
                                    "# HELP hwid_ocsp_signatures_total OCSP answers signed by the CA key.\n"
                                    "# TYPE hwid_ocsp_signatures_total counter\nhwid_ocsp_signatures_total %lu\n",
                               atomic_load(&o->hits), atomic_load(&o->signatures));
        if (r >= 0)
                r = prom_gauge(out, "hwid_ocsp_cache_entries", "Signed OCSP answers kept now.",
                               (double) ocsp_cache_size(o->cache));
        return r;
}
