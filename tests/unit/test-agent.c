/* The device side's pure parts: the agent's schedule and backoff, the
 * factory's devices file. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agent.h"
#include "check.h"
#include "error.h"
#include "factory.h"
#include "fsutil.h"

static const agent_opts defaults = {
        .renew_at = 0.66, .jitter = 0.05, .min_backoff = 5, .max_backoff = 600,
};

static void renewal_time(void) {
        const agent_opts *o = &defaults;

        /* 30 days from t=1000: two thirds in, plus 0..5% of jitter. */
        CHECK(agent_renewal_time(o, 1000, 1000 + 3000000, -1, 0.0) == 1000 + 1980000);
        CHECK(agent_renewal_time(o, 1000, 1000 + 3000000, -1, 0.999) <= 1000 + 2130000);
        CHECK(llabs(agent_renewal_time(o, 1000, 1000 + 3000000, -1, 0.5) - (1000 + 2055000)) <= 1);
        /* Never before the server's window opens. */
        CHECK(agent_renewal_time(o, 1000, 1000 + 3000000, 1000 + 2500000, 0.0) == 1000 + 2500000);
        CHECK(agent_renewal_time(o, 1000, 1000 + 3000000, 500, 0.0) == 1000 + 1980000);
        /* Nor after the last second, whatever the server says. */
        CHECK(agent_renewal_time(o, 1000, 1100, 5000, 0.0) == 1099);
        /* A start after notAfter (clock trouble) still gives a moment in range. */
        CHECK(agent_renewal_time(o, 2000, 1100, -1, 0.0) <= 1099);
}

static void backoff(void) {
        const agent_opts *o = &defaults;
        int64_t far = 10000000;

        CHECK(agent_backoff(o, 1, 0, far) == 5);
        CHECK(agent_backoff(o, 2, 0, far) == 10);
        CHECK(agent_backoff(o, 3, 0, far) == 20);
        CHECK(agent_backoff(o, 8, 0, far) == 600); /* 640 capped */
        CHECK(agent_backoff(o, 1000, 0, far) == 600);
        /* A quarter of what is left, so that retries come before expiry. */
        CHECK(agent_backoff(o, 8, 0, 400) == 100);
        CHECK(agent_backoff(o, 8, 1000, 1400) == 100);
        /* But never under the floor, even just before expiry. */
        CHECK(agent_backoff(o, 8, 0, 8) == 5);
        /* Past expiry by this clock (the server decides whether it is):
         * exponential again, up to max_backoff, not a retry every 5s. */
        CHECK(agent_backoff(o, 3, 500, 400) == 20);
        CHECK(agent_backoff(o, 9, 500, 400) == 600);
        /* Unknown expiry (0): only max_backoff caps. */
        CHECK(agent_backoff(o, 20, 1000, 0) == 600);
}

static char *write_tmp(const char *text) {
        char *p = strdup("/tmp/hwid-test-agent.XXXXXX");
        int fd = p ? mkstemp(p) : -1;

        if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t) strlen(text))
                abort();
        close(fd);
        return p;
}

static int read_devices(const char *text, factory_device **v, size_t *n) {
        char *p = write_tmp(text);
        int r = factory_read_devices(p, "/base", v, n);

        unlink(p);
        free(p);
        return r;
}

static void free_devices(factory_device *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].name);
                free(v[i].tcti);
                free(v[i].key_uri);
                free(v[i].dir);
        }
        free(v);
}

static void devices_file(void) {
        factory_device *v = NULL;
        size_t n = 0;

        CHECK(read_devices("# NAME TCTI KEY [DIR]\n\n"
                           "edge-1 swtpm:host=h,port=1 tpm2:file=/k1  # first\n"
                           "  edge-2\t-\ttpm2:handle=0x81000001 /elsewhere/e2\n", &v, &n) == 0);
        CHECK(n == 2);
        if (n == 2) {
                CHECK_STREQ(v[0].name, "edge-1");
                CHECK_STREQ(v[0].tcti, "swtpm:host=h,port=1");
                CHECK_STREQ(v[0].key_uri, "tpm2:file=/k1");
                CHECK_STREQ(v[0].dir, "/base/edge-1");
                CHECK(v[0].line == 3);
                CHECK(v[1].tcti == NULL);
                CHECK_STREQ(v[1].dir, "/elsewhere/e2");
                CHECK(v[1].line == 4);
        }
        free_devices(v, n);

        CHECK(read_devices("edge-1 tcti\n", &v, &n) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), ":1: expected NAME TCTI KEY-URI [DIR]");
        CHECK(read_devices("edge-1 t k d extra\n", &v, &n) == -HWID_E_INVALID);
        CHECK(read_devices("../up t k\n", &v, &n) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "is not a device name");
        CHECK(read_devices("a/b t k\n", &v, &n) == -HWID_E_INVALID);
        CHECK(read_devices("a t k\nb t k\na t k2\n", &v, &n) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "device 'a' appears twice");
        CHECK(read_devices("a t k /d\nb t k /d\n", &v, &n) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "directory '/d' appears twice");
        CHECK(read_devices("# nothing\n\n", &v, &n) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "names no device");
}

int main(void) {
        renewal_time();
        backoff();
        devices_file();
        return check_done("test-agent");
}
