/* The OCSP responder's cache of signed answers (service/ca/ocsp-cache.c):
 * an answer is served only while it says what the store says and is
 * valid, fresh for the first half of its validity; at its cap the least
 * recently used entry gives way. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "ocsp-cache.h"

static const ocsp_answer good = { .status = OCSP_CERT_GOOD, .this_update = 1000, .next_update = 1000 + 3600 };

/* A key of its own per n, and an answer's bytes. */
static size_t key_of(int n, uint8_t key[8]) {
        memcpy(key, "certid", 6);
        key[6] = (uint8_t) (n >> 8);
        key[7] = (uint8_t) n;
        return 8;
}

static int get(ocsp_cache *c, int n, const ocsp_answer *a, int64_t now, bool *fresh, char *out, size_t size) {
        uint8_t key[8];
        size_t len = key_of(n, key);
        _cleanup_buf_ buf b;
        int r;

        buf_init(&b, 1024);
        *fresh = false;
        r = ocsp_cache_get(c, key, len, a, now, &b, fresh);
        snprintf(out, size, "%.*s", (int) b.len, b.len ? (const char *) b.data : "");
        return r;
}

static void put(ocsp_cache *c, int n, const ocsp_answer *a, const char *der) {
        uint8_t key[8];
        size_t len = key_of(n, key);

        CHECK(ocsp_cache_put(c, key, len, a, (const uint8_t *) der, strlen(der)) == 0);
}

static void test_fresh_valid(void) {
        _cleanup_(ocsp_cache_freep) ocsp_cache *c = NULL;
        char out[64];
        bool fresh;

        CHECK(ocsp_cache_new(16, &c) == 0);
        CHECK(get(c, 1, &good, 1000, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        put(c, 1, &good, "answer-1");
        CHECK(get(c, 1, &good, 1000, &fresh, out, sizeof(out)) == 0 && fresh);
        CHECK_STREQ(out, "answer-1");
        CHECK(get(c, 1, &good, 1000 + 1799, &fresh, out, sizeof(out)) == 0 && fresh);
        /* Less than half left: served, but no longer fresh. */
        CHECK(get(c, 1, &good, 1000 + 1800, &fresh, out, sizeof(out)) == 0 && !fresh);
        CHECK(get(c, 1, &good, 1000 + 3599, &fresh, out, sizeof(out)) == 0 && !fresh);
        /* At nextUpdate it is gone. */
        CHECK(get(c, 1, &good, 1000 + 3600, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        CHECK(ocsp_cache_size(c) == 0);
}

static void test_status_changed(void) {
        _cleanup_(ocsp_cache_freep) ocsp_cache *c = NULL;
        ocsp_answer revoked = good, other_time, other_reason;
        char out[64];
        bool fresh;

        revoked.status = OCSP_CERT_REVOKED;
        revoked.revoked_at = 1500;
        revoked.reason = 1;
        other_time = revoked;
        other_time.revoked_at = 1501;
        other_reason = revoked;
        other_reason.reason = 4;
        CHECK(ocsp_cache_new(16, &c) == 0);
        put(c, 1, &good, "good");
        /* Revoked since: the good answer is not served, and is dropped. */
        CHECK(get(c, 1, &revoked, 1001, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        CHECK(get(c, 1, &good, 1001, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        put(c, 1, &revoked, "revoked");
        CHECK(get(c, 1, &revoked, 1001, &fresh, out, sizeof(out)) == 0);
        CHECK_STREQ(out, "revoked");
        CHECK(get(c, 1, &other_time, 1001, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        put(c, 1, &revoked, "revoked");
        CHECK(get(c, 1, &other_reason, 1001, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        /* Each key its own. */
        put(c, 2, &good, "two");
        put(c, 3, &revoked, "three");
        CHECK(get(c, 2, &good, 1001, &fresh, out, sizeof(out)) == 0);
        CHECK_STREQ(out, "two");
        CHECK(get(c, 3, &revoked, 1001, &fresh, out, sizeof(out)) == 0);
        CHECK_STREQ(out, "three");
}

static void test_lru(void) {
        _cleanup_(ocsp_cache_freep) ocsp_cache *c = NULL;
        char out[64], der[16];
        bool fresh;

        CHECK(ocsp_cache_new(16, &c) == 0);
        for (int i = 0; i < 16; i++) {
                snprintf(der, sizeof(der), "a%d", i);
                put(c, i, &good, der);
        }
        /* 0 used again: 1 is now the least recently used. */
        CHECK(get(c, 0, &good, 1001, &fresh, out, sizeof(out)) == 0);
        put(c, 100, &good, "new");
        CHECK(ocsp_cache_size(c) == 16);
        CHECK(get(c, 1, &good, 1001, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        CHECK(get(c, 0, &good, 1001, &fresh, out, sizeof(out)) == 0);
        CHECK(get(c, 100, &good, 1001, &fresh, out, sizeof(out)) == 0);
        /* A flood of new keys keeps it at its cap. */
        for (int i = 200; i < 1200; i++)
                put(c, i, &good, "flood");
        CHECK(ocsp_cache_size(c) == 16);
        CHECK(get(c, 1199, &good, 1001, &fresh, out, sizeof(out)) == 0);
        CHECK(get(c, 0, &good, 1001, &fresh, out, sizeof(out)) == -HWID_E_NOT_FOUND);
        /* Replacing a key's answer keeps one entry. */
        put(c, 1199, &good, "again");
        CHECK(ocsp_cache_size(c) == 16);
        CHECK(get(c, 1199, &good, 1001, &fresh, out, sizeof(out)) == 0);
        CHECK_STREQ(out, "again");
}

int main(void) {
        test_fresh_valid();
        test_status_changed();
        test_lru();
        return check_failures ? 1 : 0;
}
