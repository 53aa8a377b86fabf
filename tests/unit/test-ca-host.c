/* The CA host's administrator (ca.h: ca_service_new_host(),
 * ca_request.host_admin), as hwid-admin asks the core in process:
 *   - a service of ca_service_new() (hwidd's) refuses a request naming
 *     the host's administrator (401) and audits nothing of it: only the
 *     host's own service takes that name instead of a certificate;
 *   - the host's service opens no CA key (its configuration names one
 *     that does not exist) and no token key unless given one;
 *   - on it the administrator may do anything; reads are not audited,
 *     changes and refusals are, under its name; a refusal is told in
 *     full;
 *   - on it a request naming no one (no certificate either) is refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "ca-fixture.h"
#include "ca.h"
#include "check.h"
#include "config.h"
#include "error.h"
#include "store.h"

#define ACTOR "admin:unit"

static char dir[] = "/tmp/hwid-test-ca-host.XXXXXX";

/* hwidd.yaml for the CA, its certificate and store in dir; key_uri the
 * CA key (and the TLS key's: nothing here serves TLS). */
static int write_config(const ca *c, const char *key_uri, char *path, size_t size) {
        char pem_path[256];
        FILE *f;

        snprintf(pem_path, sizeof(pem_path), "%s/ca.pem", dir);
        if (!(f = fopen(pem_path, "w")) || PEM_write_X509(f, c->cert) != 1)
                return -1;
        fclose(f);
        snprintf(path, size, "%s/hwidd-%s.yaml", dir, strstr(key_uri, "no-such") ? "nokey" : "ok");
        if (!(f = fopen(path, "w")))
                return -1;
        fprintf(f, "listen: \"127.0.0.1:8443\"\ndatabase: %s/hwid.db\nca:\n  key: \"%s\"\n  certificate: ca.pem\n"
                   "tls:\n  key: \"%s\"\n  certificate: ca.pem\nprofiles:\n  default:\n    validity: 30d\n"
                   "    key_types: [ec-p256]\n    subject:\n      allowed_rdns: [CN]\n    approval: auto\n",
                dir, key_uri, key_uri);
        fclose(f);
        return 0;
}

static int count(const store_audit *a, void *userdata) {
        (*(int64_t *) userdata)++;
        return 0;
}

/* The audit records in the store at db. */
static int64_t audit_rows(const char *db) {
        _cleanup_(store_freep) store *s = NULL;
        int64_t n = 0;

        if (store_open(db, &s) < 0 || store_audit_foreach(s, 100000, count, &n) < 0)
                return -1;
        return n;
}

/* One admin call: op on arg, as who (NULL: no one). */
static ca_outcome admin(ca_service *svc, const char *who, ca_admin_op op, const char *arg, ca_result *res) {
        ca_admin_args a = { .op = op, .arg = arg, .profile = "default", .ttl = 3600, .uses = 1, .count = 1 };
        ca_request in = { .op = CA_OP_ADMIN, .now = 1800000000, .admin = &a, .host_admin = who };

        return ca_call(svc, &in, res);
}

/* hwidd's service: the host's administrator's name is refused. */
static void hwidd_refuses(hwidd_config *cfg, const char *db) {
        _cleanup_(ca_service_freep) ca_service *svc = NULL;
        ca_result res;
        int64_t before;

        CHECK(ca_service_new(cfg, &svc) == 0);
        if (!svc)
                return;
        before = audit_rows(db);
        CHECK(admin(svc, ACTOR, CA_ADMIN_TOKEN_LIST, NULL, &res) == CA_REFUSED);
        CHECK(res.error == -HWID_E_UNAUTHENTICATED);
        ca_result_clear(&res);
        CHECK(admin(svc, ACTOR, CA_ADMIN_TOKEN_REVOKE, "abcdef", &res) == CA_REFUSED);
        CHECK(res.error == -HWID_E_UNAUTHENTICATED);
        ca_result_clear(&res);
        CHECK(audit_rows(db) == before);
}

static void host_admin(hwidd_config *nokey, const char *db) {
        _cleanup_(ca_service_freep) ca_service *svc = NULL;
        ca_result res;
        int64_t before;

        /* Its CA key does not exist: the host's service does not open it. */
        CHECK(ca_service_new_host(nokey, NULL, &svc) == 0);
        if (!svc)
                return;
        before = audit_rows(db);
        CHECK(admin(svc, ACTOR, CA_ADMIN_TOKEN_LIST, NULL, &res) == CA_DONE);
        ca_result_clear(&res);
        CHECK(admin(svc, ACTOR, CA_ADMIN_CERT_LIST, NULL, &res) == CA_DONE);
        ca_result_clear(&res);
        CHECK(admin(svc, ACTOR, CA_ADMIN_CERT_SHOW, "0BAD", &res) == CA_REFUSED);
        CHECK_STREQ(res.message, "no certificate 0BAD");
        ca_result_clear(&res);
        CHECK(audit_rows(db) == before);
        /* A change, refused: audited under the administrator's name. */
        CHECK(admin(svc, ACTOR, CA_ADMIN_TOKEN_REVOKE, "abcdef", &res) == CA_REFUSED);
        CHECK(res.error == -HWID_E_NOT_FOUND);
        ca_result_clear(&res);
        CHECK(audit_rows(db) == before + 1);
        /* No token key given: no token is made. */
        CHECK(admin(svc, ACTOR, CA_ADMIN_TOKEN_CREATE, NULL, &res) == CA_REFUSED);
        CHECK(res.error == -HWID_E_CONFIG);
        CHECK_CONTAINS(res.message, "ca.token_key");
        ca_result_clear(&res);
        /* No one named, no certificate: refused. */
        CHECK(admin(svc, NULL, CA_ADMIN_TOKEN_LIST, NULL, &res) == CA_REFUSED);
        CHECK(res.error == -HWID_E_UNAUTHENTICATED);
        ca_result_clear(&res);
}

int main(void) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL, *nokey = NULL;
        _cleanup_free_ char *uri = NULL;
        char path[300], nokey_path[300], db[300];
        ca c = { 0 };
        int r = ca_fixture_setup("test-ca-host");

        if (r != 0)
                return r;
        CHECK(mkdtemp(dir) != NULL);
        snprintf(db, sizeof(db), "%s/hwid.db", dir);
        CHECK(ca_make("ca-key", HWID_KEY_EC_P256, "/CN=Test host CA", 30, &c) == 0);
        CHECK((uri = ca_key_uri("ca-key")) != NULL);
        if (c.cert && uri && write_config(&c, uri, path, sizeof(path)) == 0 &&
            write_config(&c, "pkcs11:token=no-such-token;object=ca-key", nokey_path, sizeof(nokey_path)) == 0) {
                CHECK(config_load(path, &cfg) == 0);
                CHECK(config_load(nokey_path, &nokey) == 0);
                if (cfg && nokey) {
                        hwidd_refuses(cfg, db);
                        host_admin(nokey, db);
                }
        }
        ca_done(&c);
        ca_fixture_teardown();
        snprintf(path, sizeof(path), "rm -rf %s", dir);
        (void) !system(path);
        return check_done("test-ca-host");
}
