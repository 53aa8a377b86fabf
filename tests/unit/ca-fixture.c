/* A CA whose key is in SoftHSM2 (ca-fixture.h). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ca-fixture.h"
#include "error.h"
#include "ossl-util.h"
#include "x509-util.h"

#define PIN "1234"

static char dir[] = "/tmp/hwid-test-ca.XXXXXX";
static const char *module;

static const char *find_module(void) {
        static const char *const paths[] = {
                "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so", "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
                "/usr/lib/softhsm/libsofthsm2.so", "/usr/lib64/softhsm/libsofthsm2.so",
                "/usr/lib64/pkcs11/libsofthsm2.so", "/usr/local/lib/softhsm/libsofthsm2.so",
        };
        for (size_t i = 0; i < ELEMENTSOF(paths); i++)
                if (access(paths[i], R_OK) == 0)
                        return paths[i];
        return NULL;
}

static int softhsm_setup(void) {
        char conf[256], cmd[512];
        FILE *f;

        if (!(module = find_module()) || system("command -v softhsm2-util >/dev/null") != 0)
                return 77;
        if (!mkdtemp(dir))
                return 1;
        snprintf(conf, sizeof(conf), "%s/softhsm2.conf", dir);
        snprintf(cmd, sizeof(cmd), "mkdir -p %s/tokens && softhsm2-util --init-token --free --label ca "
                                   "--pin " PIN " --so-pin 5678 >/dev/null", dir);
        if (!(f = fopen(conf, "w")))
                return 1;
        fprintf(f, "directories.tokendir = %s/tokens\nobjectstore.backend = file\nlog.level = ERROR\n", dir);
        fclose(f);
        setenv("SOFTHSM2_CONF", conf, 1);
        return system(cmd) == 0 ? 0 : 1;
}

void ca_fixture_teardown(void) {
        char cmd[300];

        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (dir[strlen(dir) - 1] != 'X')
                (void) !system(cmd);
}

int ca_fixture_setup(const char *test) {
        int r = softhsm_setup();
        bool skip = r == 77 && getenv("HWID_ALLOW_SKIP") && strcmp(getenv("HWID_ALLOW_SKIP"), "1") == 0;

        if (r == 0)
                return 0;
        fprintf(stderr, "%s: %s\n", test, r != 77 ? "no SoftHSM2 token"
                        : skip ? "SoftHSM2 is not installed: skipped (HWID_ALLOW_SKIP=1)"
                               : "SoftHSM2 is not installed: run scripts/install-deps.sh "
                                 "(or set HWID_ALLOW_SKIP=1 to skip)");
        ca_fixture_teardown();
        return skip ? 77 : 1;
}

char *ca_key_uri(const char *object) {
        char *uri;

        return asprintf(&uri, "pkcs11:token=ca;object=%s?pin-value=" PIN "&module-path=%s", object, module) < 0 ? NULL
                                                                                                          : uri;
}

int ca_make(const char *object, hwid_key_type type, const char *subject, int days, ca *ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        _cleanup_free_ char *uri = ca_key_uri(object);
        int r;

        if (!uri)
                return -HWID_E_NOMEM;
        if ((r = hwid_key_create(uri, type, false, NULL, &ret->key)) < 0 || (r = dn_parse(subject, &name)) < 0 ||
            (r = ca_self_sign(ret->key, name, days, &ret->cert)) < 0 ||
            (r = issuer_new(ret->key, ret->cert, &ret->is)) < 0)
                return r;
        return 0;
}

void ca_done(ca *c) {
        issuer_free(c->is);
        X509_free(c->cert);
        hwid_key_free(c->key);
}
