/* Readiness (GET /readyz), proven: the store commits a write, the CA key
 * and the TLS key each sign (and the signature verifies with the public
 * key), the token key (if any) makes an HMAC.  The verdict is kept for a second, so that however often it is
 * asked the HSM makes at most one test signature per key per second. */
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "ca-internal.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"
#include "rollover.h"

#define READY_CACHE_MS 1000

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

static bool check(ca_readiness *rd, size_t i, const char *name, int r) {
        rd->checks[i].name = name;
        rd->checks[i].error = r < 0 ? r : 0;
        if (r < 0) {
                if (strcmp(hwid_public_message(r), hwid_strerror(r)) != 0)
                        log_warning("readiness check %s: %s", name, hwid_strerror(r));
                snprintf(rd->checks[i].message, sizeof(rd->checks[i].message), "%s", hwid_public_message(r));
                snprintf(rd->summary + strlen(rd->summary), sizeof(rd->summary) - strlen(rd->summary), " %s", name);
        }
        return r >= 0;
}

/* The active generation's key signs; and the generations the store
 * records now could be loaded (a replica that cannot open a new
 * generation's key keeps signing with the old one: not ready). */
static int ca_key_probe(ca_service *ca, int64_t now) {
        if (ca->gens_error < 0)
                return hwid_fail((hwid_err) -ca->gens_error, "cannot switch to the CA generations the store records: "
                                 "%s", ca->gens_why);
        return sign_probe(ca_active(ca)->key, now);
}

/* The token key (ca.token_key) makes an HMAC: without it no derived
 * bootstrap token can be checked.  None configured: nothing to prove
 * (legacy tokens need none). */
static int token_key_probe(ca_service *ca, int64_t now) {
        uint8_t mac[HWID_MAC_LEN];
        char msg[64];
        int n = snprintf(msg, sizeof(msg), "hwid readiness probe %lld", (long long) now);

        return ca->token_key ? hwid_mac_key_hmac_sha256(ca->token_key, msg, (size_t) n, mac) : 0;
}

/* Runs every check. */
static void evaluate(ca_service *ca, int64_t now, ca_readiness *ret) {
        const ca_gen *a = ca_active(ca);
        bool ok = true;

        *ret = (ca_readiness) { .checked_at = now };
        snprintf(ret->summary, sizeof(ret->summary), "not ready:");
        hwid_error_clear();
        ok &= check(ret, 0, "store", store_probe_write(ca->store, now));
        ok &= check(ret, 1, "ca_key", ca_key_probe(ca, now));
        ok &= check(ret, 2, "tls_key", ca->tls_key ? sign_probe(ca->tls_key, now)
                                                   : hwid_fail(HWID_E_NOT_READY, "no TLS key yet"));
        ok &= check(ret, 3, "token_key", token_key_probe(ca, now));
        ret->ok = ok;
        if (!ok)
                log_warning("%s", ret->summary);
        rollover_expiry_warning(a->n, a->not_after, now, policy_longest_validity(ca->cfg->policy),
                                ca->cfg->ca_expiry_warning, ret->warning, sizeof(ret->warning));
}

int ca_readiness_get(ca_service *ca, ca_readiness *ret) {
        uint64_t now_ms = mono_ms();

        /* Held while checking: whoever asks meanwhile gets this verdict. */
        pthread_mutex_lock(&ca->ready_lock);
        if (!ca->ready_known || now_ms - ca->ready_checked_ms >= READY_CACHE_MS) {
                evaluate(ca, (int64_t) time(NULL), &ca->ready);
                ca->ready_known = true;
                ca->ready_checked_ms = mono_ms();
        }
        *ret = ca->ready;
        pthread_mutex_unlock(&ca->ready_lock);
        return 0;
}
