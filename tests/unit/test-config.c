/* hwidd's configuration: the documented example loads and means what its
 * comments say; defaults; and a table of broken files, each refused with
 * exactly "FILE:LINE: field: problem". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "config.h"
#include "error.h"
#include "fsutil.h"

/* Finds docs/hwidd.example.yaml: -DHWID_SRCDIR, $SRCDIR, or relative to
 * the build or source directory. */
static char *example_path(void) {
        const char *candidates[] = {
#ifdef HWID_SRCDIR
                HWID_SRCDIR "/docs/hwidd.example.yaml",
#endif
                "docs/hwidd.example.yaml",
                "../docs/hwidd.example.yaml",
                "../../docs/hwidd.example.yaml",
        };
        const char *src = getenv("SRCDIR");
        char *p;

        if (src && (p = path_join(src, "docs/hwidd.example.yaml")) && access(p, R_OK) == 0)
                return p;
        for (size_t i = 0; i < ELEMENTSOF(candidates); i++)
                if (access(candidates[i], R_OK) == 0)
                        return strdup(candidates[i]);
        return NULL;
}

static bool strv_is(char **v, const char *a, const char *b) {
        return v && v[0] && strcmp(v[0], a) == 0 && (b ? v[1] && strcmp(v[1], b) == 0 && !v[2] : !v[1]);
}

static void example_loads(void) {
        _cleanup_free_ char *path = example_path();
        _cleanup_(config_freep) hwidd_config *c = NULL;
        const policy_profile *edge, *server, *admin;
        int r;

        CHECK(path != NULL);
        if (!path)
                return;
        r = config_load(path, &c);
        if (r < 0)
                fprintf(stderr, "example: %s\n", hwid_strerror(r));
        CHECK(r == 0);
        if (r < 0)
                return;
        CHECK_STREQ(c->path, path);
        CHECK_STREQ(c->listen, "0.0.0.0:8443");
        CHECK_STREQ(c->http_listen, "0.0.0.0:8080");
        CHECK(c->clock_skew == 300);
        CHECK_STREQ(c->database, "/var/lib/hwid/hwid.db");
        CHECK_STREQ(c->tcti, "device:/dev/tpmrm0");
        CHECK_STREQ(c->ca_key, "pkcs11:token=ca;object=ca-key?pin-source=file:/etc/hwid/pin");
        CHECK_STREQ(c->token_key, "pkcs11:token=ca;object=ca-key-tokens?pin-source=file:/etc/hwid/pin");
        /* Relative to the file's directory, made absolute. */
        CHECK(c->ca_cert && c->ca_cert[0] == '/');
        CHECK(c->ca_cert && strstr(c->ca_cert, "docs/ca.pem"));
        CHECK(c->ca_chain && strstr(c->ca_chain, "docs/chain.pem"));
        CHECK_STREQ(c->crl_url, "http://ca.example.org:8080/crl");
        CHECK(c->crl_validity == 7 * 86400);
        CHECK_STREQ(c->ocsp_url, "http://ca.example.org:8080/ocsp");
        CHECK(c->ocsp_validity == 3600 && c->ocsp_cache_entries == 10000);
        CHECK(c->ocsp_sign_rate_per_ip == 10 && c->ocsp_sign_burst_per_ip == 100);
        CHECK(c->ocsp_sign_rate == 50 && c->ocsp_sign_burst == 200);
        CHECK_STREQ(c->tls_key, "tpm2:handle=0x81000002");
        CHECK(c->tls_cert && strstr(c->tls_cert, "docs/tls.pem"));
        CHECK(c->max_body == 64 * 1024 && c->max_header == 8 * 1024 && c->timeout == 30);
        CHECK(c->max_connections == 1024);
        CHECK(c->rate_per_ip == 20.0 && c->rate_burst == 40 && c->retry_after == 10);
        CHECK(!policy_audit_only(c->policy) && !policy_public_metrics(c->policy));
        CHECK_STREQ(policy_admin_group(c->policy), "hwid-admins");

        edge = policy_profile_find(c->policy, "edge");
        CHECK(edge != NULL);
        if (edge) {
                CHECK(edge->validity == 30 * 86400);
                CHECK(edge->key_algs == (KEYALG_EC_P256 | KEYALG_EC_P384) && edge->rsa_min_bits == 2048);
                CHECK(edge->key_usage == KU_DIGITAL_SIGNATURE && edge->eku == EKU_CLIENT_AUTH);
                CHECK(edge->allowed_rdns && strcmp(edge->allowed_rdns[0], "CN") == 0 && edge->allowed_rdns[1] &&
                      strcmp(edge->allowed_rdns[1], "O") == 0 && edge->allowed_rdns[2] &&
                      strcmp(edge->allowed_rdns[2], "OU") == 0 && !edge->allowed_rdns[3]);
                CHECK_STREQ(edge->cn_pattern, "edge-*");
                CHECK(strv_is(edge->fixed_o, "edge-nodes", NULL) && strv_is(edge->fixed_ou, "factory-1", NULL));
                CHECK(strv_is(edge->dns_patterns, "{cn}.edge.example.org", "{cn}.local"));
                CHECK(edge->n_ip_ranges == 2 && edge->ip_ranges[0].family == 4 && edge->ip_ranges[0].prefix == 16);
                CHECK(edge->ip_ranges[0].addr[0] == 10 && edge->ip_ranges[0].addr[1] == 20);
                CHECK(edge->ip_ranges[1].family == 6 && edge->ip_ranges[1].prefix == 48);
                CHECK(strv_is(edge->uri_templates, "spiffe://example.org/node/{cn}", NULL));
                CHECK(edge->san_from_templates && edge->approval == APPROVAL_AUTO);
                CHECK(edge->san_dns_from_templates);
                CHECK(edge->renew_window > 0.333 && edge->renew_window < 0.334 && edge->rotate_key);
                CHECK(!edge->allow_reenroll && edge->ungranted == UNGRANTED_REFUSE);
                CHECK(edge->role_given && edge->role == ROLE_NODE && policy_profile_role(c->policy, edge) == ROLE_NODE);
        }
        server = policy_profile_find(c->policy, "server");
        CHECK(server != NULL);
        if (server) {
                CHECK(server->validity == 90 * 86400 && server->key_algs == (KEYALG_EC_P256 | KEYALG_RSA));
                CHECK(server->rsa_min_bits == 3072);
                CHECK(server->key_usage == (KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT));
                CHECK(server->eku == (EKU_SERVER_AUTH | EKU_CLIENT_AUTH));
                CHECK(strv_is(server->allowed_rdns, "CN", NULL));
                CHECK(strv_is(server->dns_patterns, "{cn}", "\\*.apps.example.org"));
                CHECK(server->n_ip_ranges == 1 && server->ip_ranges[0].prefix == 32);
                CHECK(server->approval == APPROVAL_MANUAL && server->renew_window == 0.5 && !server->rotate_key);
                CHECK(server->allow_reenroll && server->ungranted == UNGRANTED_DROP);
                CHECK(!server->san_from_templates && !server->uri_templates);
                CHECK(!server->san_dns_from_templates);
        }
        admin = policy_profile_find(c->policy, "admin");
        CHECK(admin && strv_is(admin->fixed_o, "hwid-admins", NULL) && admin->validity == 7 * 86400);
        /* Defaults of a profile that says little. */
        CHECK(admin && admin->key_algs == (KEYALG_EC_P256 | KEYALG_EC_P384) && admin->eku == EKU_CLIENT_AUTH);
        CHECK(admin && admin->renew_window > 0.333 && admin->ungranted == UNGRANTED_REFUSE && !admin->allowed_rdns);
        CHECK(admin && admin->role == ROLE_ADMIN && policy_profile_role(c->policy, admin) == ROLE_ADMIN);
        CHECK(server && !server->role_given && policy_profile_role(c->policy, server) == ROLE_NODE);
        server = policy_profile_find(c->policy, "station");
        CHECK(server && server->role == ROLE_PROVISIONER && strv_is(server->scope_profiles, "edge", NULL) &&
              strv_is(server->scope_name_patterns, "edge-line3-*", NULL));
}

#define HEAD                                      \
        "database: hwid.db\n"                     \
        "ca:\n"                                   \
        "  key: \"pkcs11:token=ca;object=ca\"\n"  \
        "  certificate: ca.pem\n"                 \
        "tls:\n"                                  \
        "  key: \"tpm2:handle=0x81000002\"\n"     \
        "  certificate: tls.pem\n"
/* HEAD has 7 lines; PROFILE's first field is on line 10. */
#define PROFILE HEAD "profiles:\n  edge:\n"
/* A valid file of 10 lines. */
#define PROFILE_OK PROFILE "    validity: 1d\n"

static void defaults(void) {
        static const char text[] = PROFILE "    validity: 1h\n";
        _cleanup_(config_freep) hwidd_config *c = NULL;
        const policy_profile *p;
        int r = config_load_string(text, sizeof(text) - 1, "etc/hwid/hwidd.yaml", &c);

        CHECK(r == 0);
        if (r < 0) {
                fprintf(stderr, "defaults: %s\n", hwid_strerror(r));
                return;
        }
        CHECK_STREQ(c->listen, "127.0.0.1:8443");
        CHECK_STREQ(c->database, "etc/hwid/hwid.db"); /* relative to the name as given */
        CHECK_STREQ(c->ca_cert, "etc/hwid/ca.pem");
        CHECK(c->tcti == NULL && c->ca_chain == NULL && c->crl_url == NULL && c->ocsp_url == NULL);
        CHECK(c->ocsp_validity == 3600 && c->ocsp_cache_entries == 10000);
        CHECK(c->ocsp_sign_rate_per_ip == 10 && c->ocsp_sign_burst_per_ip == 100);
        CHECK(c->ocsp_sign_rate == 100 && c->ocsp_sign_burst == 500);
        CHECK(c->crl_validity == 7 * 86400 && c->max_body == 65536 && c->max_header == 8192);
        CHECK(c->timeout == 30 && c->max_connections == 16384 && c->max_connections_per_ip == 1024);
        CHECK(c->handshake_cap == 1024 && c->handshake_timeout == 10 && c->workers == 32);
        CHECK(c->rate_per_ip == 200 && c->rate_burst == 500 && c->retry_after == 5);
        CHECK(!policy_audit_only(c->policy) && policy_admin_group(c->policy) == NULL);
        CHECK(c->http_listen == NULL && c->clock_skew == 300);
        CHECK(!c->audit_syslog);
        CHECK_STREQ(c->audit_syslog_socket, "/dev/log");
        p = policy_profile_find(c->policy, "edge");
        CHECK(p && p->role == ROLE_NODE && !p->role_given && policy_profile_role(c->policy, p) == ROLE_NODE);
        CHECK(p && p->validity == 3600 && p->approval == APPROVAL_AUTO && p->key_usage == KU_DIGITAL_SIGNATURE);
        CHECK(p && !p->dns_patterns && p->n_ip_ranges == 0 && !p->rotate_key && !p->allow_reenroll);
}

static void variants(void) {
        static const char text[] = "listen: \"[::1]:0\"\n" PROFILE
                                   "    renewal: {window: 25%}\n"
                                   "    san: {ip: [\"2001:db8::/32\", 192.0.2.1], dns: ['\\*.x.org']}\n"
                                   "    subject: {allowed_rdns: [cn, 2.5.4.10, 1.2.3.4], cn_pattern: \"dev *\"}\n"
                                   "  op:\n    est: {pop_linking: true, enroll_by_certificate: "
                                   "{from_profiles: [edge, later], name: \"{cn}-op\"}}\n"
                                   "  later: {}\n"
                                   "policy: {audit_only: yes, public_metrics: on}\n"
                                   "limits: {max_body: 1MiB, timeout: 2m, rate_per_ip: 0.5, retry_after: 1d,\n"
                                   "         max_connections_per_ip: 5, handshake_cap: 7, handshake_timeout: 3s, workers: 4}\n"
                                   "audit: {syslog: true, syslog_socket: run/log.sock}\n";
        _cleanup_(config_freep) hwidd_config *c = NULL;
        const policy_profile *p;
        int r = config_load_string(text, sizeof(text) - 1, "hwidd.yaml", &c);

        if (r < 0)
                fprintf(stderr, "variants: %s\n", hwid_strerror(r));
        CHECK(r == 0);
        if (r < 0)
                return;
        CHECK_STREQ(c->listen, "[::1]:0");
        CHECK_STREQ(c->database, "hwid.db");
        CHECK(policy_audit_only(c->policy) && policy_public_metrics(c->policy));
        CHECK(c->max_body == 1024 * 1024 && c->timeout == 120 && c->rate_per_ip == 0.5 && c->retry_after == 86400);
        CHECK(c->max_connections_per_ip == 5 && c->handshake_cap == 7 && c->handshake_timeout == 3 && c->workers == 4);
        CHECK(c->audit_syslog);
        CHECK_STREQ(c->audit_syslog_socket, "run/log.sock");
        p = policy_profile_find(c->policy, "edge");
        CHECK(p && p->renew_window == 0.25 && p->n_ip_ranges == 2 && p->ip_ranges[1].prefix == 32);
        CHECK(p && strv_is(p->dns_patterns, "\\*.x.org", NULL));
        CHECK(p && p->allowed_rdns && strcmp(p->allowed_rdns[0], "CN") == 0 && strcmp(p->allowed_rdns[1], "O") == 0);
        CHECK(p && p->allowed_rdns && strcmp(p->allowed_rdns[2], "1.2.3.4") == 0);
        CHECK(p && p->cn_pattern && strcmp(p->cn_pattern, "dev *") == 0);
        CHECK(p && !p->est_enroll_from && !p->est_enroll_name);
        p = policy_profile_find(c->policy, "op");
        CHECK(p && p->est_pop_linking && strv_is(p->est_enroll_from, "edge", "later"));
        CHECK(p && p->est_enroll_name && strcmp(p->est_enroll_name, "{cn}-op") == 0);
        CHECK(policy_cert_enroll_target(c->policy, "later", NULL) == p);
}

/* A TPM manufacturer's root, as a deployment installs it. */
static const char ek_root_pem[] =
        "-----BEGIN CERTIFICATE-----\n"
        "MIIBhTCCASugAwIBAgIUOMAJxT3tiVs++WMU5/QEdZBueT8wCgYIKoZIzj0EAwIw\n"
        "FzEVMBMGA1UEAwwMdGVzdCBFSyByb290MCAXDTI2MTEyMzE4MzcwM1oYDzIxMjYx\n"
        "MDMwMTgzNzAzWjAXMRUwEwYDVQQDDAx0ZXN0IEVLIHJvb3QwWTATBgcqhkjOPQIB\n"
        "BggqhkjOPQMBBwNCAAQBzfK6X6OehC+mGXfquQ32ZvJEbir5KlckNNqglWnrtCwb\n"
        "ZuyaFTL1Sw10gNG9kXoykc+D73Td0INfTDIhC9z+o1MwUTAdBgNVHQ4EFgQUAVSm\n"
        "Q0H5ux9HhQ2y0xm3Nslc0AcwHwYDVR0jBBgwFoAUAVSmQ0H5ux9HhQ2y0xm3Nslc\n"
        "0AcwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNIADBFAiBNuurrmO5Ptjjf\n"
        "9Gt7BzOTZP/19G3Ywxqshf6KlhtAYgIhAL0VGe1pMffjbEiRh4ScYmYNjB4H3MSK\n"
        "x/qMwfPlRgt0\n"
        "-----END CERTIFICATE-----\n";

/* attestation: the roots read at load time, relative to the file; the
 * profiles' modes; the defaults. */
static void attestation(void) {
        static const char text[] = "attestation:\n  ek_roots: [roots/ek.pem]\n  challenge_ttl: 2m\n" PROFILE
                                   "    attestation: required\n    reenroll_by_attestation: last-certificate\n  lab:\n"
                                   "    attestation: optional\n    reenroll_by_attestation: allowlist\n  old: {}\n";
        char dir[] = "/tmp/hwid-config-XXXXXX";
        _cleanup_free_ char *sub = NULL, *pem = NULL, *cfg = NULL;
        _cleanup_(config_freep) hwidd_config *c = NULL;
        int r;

        CHECK(mkdtemp(dir) != NULL);
        sub = path_join(dir, "roots");
        pem = path_join(sub, "ek.pem");
        cfg = path_join(dir, "hwidd.yaml");
        CHECK(mkdir(sub, 0700) == 0);
        CHECK(write_file_atomic(pem, ek_root_pem, strlen(ek_root_pem), 0644) == 0);
        CHECK(write_file_atomic(cfg, text, strlen(text), 0600) == 0);
        r = config_load(cfg, &c);
        if (r < 0)
                fprintf(stderr, "attestation: %s\n", hwid_strerror(r));
        CHECK(r == 0);
        if (r >= 0) {
                CHECK(c->ek_roots != NULL && c->attest_ttl == 120 && c->attest_max_pending == 1000);
                CHECK(c->ek_root_paths && strcmp(c->ek_root_paths[0], pem) == 0 && !c->ek_root_paths[1]);
                CHECK(policy_profile_find(c->policy, "edge")->attestation == ATTESTATION_REQUIRED);
                CHECK(policy_profile_find(c->policy, "lab")->attestation == ATTESTATION_OPTIONAL);
                CHECK(policy_profile_find(c->policy, "old")->attestation == ATTESTATION_NONE);
                CHECK(policy_profile_find(c->policy, "edge")->reenroll_by_attestation == REENROLL_LAST_CERTIFICATE);
                CHECK(policy_profile_find(c->policy, "lab")->reenroll_by_attestation == REENROLL_ALLOWLIST);
                CHECK(policy_profile_find(c->policy, "old")->reenroll_by_attestation == REENROLL_OFF);
        }
        config_free(TAKE_PTR(c));
        /* Without the section: nothing configured. */
        CHECK(config_load_string(PROFILE_OK, sizeof(PROFILE_OK) - 1, "x.yaml", &c) == 0);
        CHECK(c && !c->ek_roots && !c->ek_root_paths && c->attest_ttl == 60);
        unlink(pem);
        unlink(cfg);
        rmdir(sub);
        rmdir(dir);
}

static void parsers(void) {
        int64_t d;
        size_t s;

        CHECK(config_parse_duration("30d", &d) == 0 && d == 30 * 86400);
        CHECK(config_parse_duration("12h", &d) == 0 && d == 12 * 3600);
        CHECK(config_parse_duration("90m", &d) == 0 && d == 5400);
        CHECK(config_parse_duration("45s", &d) == 0 && d == 45);
        CHECK(config_parse_duration("1w", &d) == 0 && d == 604800);
        CHECK(config_parse_duration("0s", &d) == 0 && d == 0);
        d = 7;
        CHECK(config_parse_duration("30", &d) < 0 && d == 7);
        CHECK(config_parse_duration("30x", &d) < 0);
        CHECK(config_parse_duration("-1s", &d) < 0);
        CHECK(config_parse_duration(" 1s", &d) < 0);
        CHECK(config_parse_duration("1ss", &d) < 0);
        CHECK(config_parse_duration("d", &d) < 0);
        CHECK(config_parse_duration("", &d) < 0);
        CHECK(config_parse_duration("99999999999999999999s", &d) < 0);
        CHECK(config_parse_duration("99999999999999w", &d) < 0);
        CHECK(config_parse_size("64KiB", &s) == 0 && s == 65536);
        CHECK(config_parse_size("1MiB", &s) == 0 && s == 1048576);
        CHECK(config_parse_size("512", &s) == 0 && s == 512);
        CHECK(config_parse_size("2GiB", &s) == 0 && s == 2147483648u);
        CHECK(config_parse_size("512B", &s) == 0 && s == 512);
        CHECK(config_parse_size("64KB", &s) < 0);
        CHECK(config_parse_size("64 KiB", &s) < 0);
        CHECK(config_parse_size("KiB", &s) < 0);
        CHECK(config_parse_size("-1", &s) < 0);
        CHECK(config_parse_size("99999999999999999999GiB", &s) < 0);
        CHECK(config_parse_size("18446744073709551615GiB", &s) < 0);
}

/* ---------- broken files ---------- */

typedef struct broken {
        const char *text;
        int line;
        const char *field;   /* NULL: a message without a field */
        const char *problem; /* a piece of what follows */
} broken;

static const broken broken_files[] = {
        { PROFILE "    validity: 30x\n", 10, "profiles.edge.validity", "'30x' is not a duration" },
        { PROFILE "    valdity: 30d\n", 10, "profiles.edge.valdity", "unknown key" },
        { "databse: x\n" PROFILE "    validity: 1d\n", 1, "databse", "unknown key" },
        { "ca: {key: \"pkcs11:token=a;object=b\", certificate: c}\n"
          "tls: {key: \"tpm2:handle=0x81000001\", certificate: t}\nprofiles: {e: {}}\n",
          1, "database", "is required" },
        { "database: d\nca:\n  certificate: ca.pem\ntls: {key: \"tpm2:handle=0x81000001\", certificate: t}\n"
          "profiles: {e: {}}\n", 3, "ca.key", "is required" },
        { "database: d\nca: {key: \"pkcs11:token=a;object=b\", certificate: c}\nprofiles: {e: {}}\n", 1, "tls.key",
          "is required" },
        { HEAD, 1, "profiles", "is required" },
        { HEAD "profiles: {}\n", 8, "profiles", "needs at least one profile" },
        { HEAD "profiles:\n", 8, "profiles", "expected a mapping" },
        { PROFILE "    approval: sometimes\n", 10, "profiles.edge.approval", "'sometimes' is not one of: auto, manual" },
        { PROFILE "    key_types: [ec-p256, ec-p521]\n", 10, "profiles.edge.key_types[1]",
          "'ec-p521' is not one of: ec-p256, ec-p384, rsa" },
        { PROFILE "    key_types: []\n", 10, "profiles.edge.key_types", "needs at least 1" },
        { PROFILE "    key_usage: [digitalSignature, keyCertSign]\n", 10, "profiles.edge.key_usage[1]",
          "'keyCertSign' is refused: hwid never issues CA certificates" },
        { PROFILE "    key_usage: [cRLSign]\n", 10, "profiles.edge.key_usage[0]", "never issues CA" },
        { PROFILE "    extended_key_usage: [codeSigning]\n", 10, "profiles.edge.extended_key_usage[0]",
          "not one of: clientAuth, serverAuth" },
        { PROFILE "    rsa_min_bits: 1024\n", 10, "profiles.edge.rsa_min_bits", "out of range (2048 to 16384)" },
        { PROFILE "    validity: 0s\n", 10, "profiles.edge.validity", "out of range" },
        { PROFILE "    validity: 30\n", 10, "profiles.edge.validity", "is not a duration" },
        { PROFILE "    renewal:\n      window: 0\n", 11, "profiles.edge.renewal.window", "out of range" },
        { PROFILE "    renewal:\n      window: 1.5\n", 11, "profiles.edge.renewal.window", "out of range" },
        { PROFILE "    renewal:\n      window: third\n", 11, "profiles.edge.renewal.window", "not a fraction" },
        { PROFILE "    renewal:\n      rotate_key: maybe\n", 11, "profiles.edge.renewal.rotate_key",
          "'maybe' is not true or false" },
        { PROFILE "    renewal: 0.3\n", 10, "profiles.edge.renewal", "expected a mapping" },
        { PROFILE "    san:\n      ip: [10.0.0.0/8, 10.0.0.0/33]\n", 11, "profiles.edge.san.ip[1]",
          "'10.0.0.0/33' is not an address" },
        { PROFILE "    san:\n      ip: [10.0.0.1/8]\n", 11, "profiles.edge.san.ip[0]", "bits set beyond its /8" },
        { PROFILE "    san:\n      ip: [300.1.1.1]\n", 11, "profiles.edge.san.ip[0]", "not an address" },
        { PROFILE "    san:\n      ip: 10.0.0.0/8\n", 11, "profiles.edge.san.ip", "expected a list" },
        { PROFILE "    san:\n      dns: [\"{host}.example.org\"]\n", 11, "profiles.edge.san.dns[0]",
          "not part of {cn}" },
        { PROFILE "    san:\n      dns: [\"a b.org\"]\n", 11, "profiles.edge.san.dns[0]", "letters, digits" },
        { PROFILE "    san:\n      dns: [ok.example.org, 127.0.0.1]\n", 11, "profiles.edge.san.dns[1]",
          "is an IPv4 address" },
        { PROFILE "    san:\n      dns: [-bad.example.org]\n", 11, "profiles.edge.san.dns[0]", "starts or ends with" },
        { PROFILE "    san:\n      uri: [\"{cn}\"]\n", 11, "profiles.edge.san.uri[0]", "URI scheme" },
        { PROFILE "    san:\n      add_uri_templates: true\n", 10, "profiles.edge.san.add_uri_templates",
          "no san.uri templates" },
        { PROFILE "    san:\n      dns: [\"*.example.org\"]\n      add_dns_templates: true\n", 10,
          "profiles.edge.san.add_dns_templates", "no san.dns pattern is a template" },
        { PROFILE "    subject:\n      allowed_rdns: [O]\n", 11, "profiles.edge.subject.allowed_rdns",
          "must include CN" },
        { PROFILE "    subject:\n      allowed_rdns: [CN, Foo]\n", 11, "profiles.edge.subject.allowed_rdns[1]",
          "not a known attribute" },
        { PROFILE "    subject:\n      fixed_o: [a, b, c, d, e, f, g]\n", 11, "profiles.edge.subject.fixed_o",
          "7 items (at most 6)" },
        { PROFILE "    subject:\n      cn_pattern: \"a\\x01\"\n", 11, "profiles.edge.subject.cn_pattern",
          "printable" },
        { PROFILE "    ungranted: ignore\n", 10, "profiles.edge.ungranted", "not one of: refuse, drop" },
        { HEAD "profiles:\n  edge: {}\n  edge: {}\n", 10, "profiles.edge", "defined more than once" },
        { HEAD "profiles:\n  \"ed ge\": {}\n", 9, "profiles.ed ge", "a profile name" },
        { HEAD "profiles:\n  edge: 1\n", 9, "profiles.edge", "expected a mapping" },
        { HEAD "profiles:\n  edge: &base\n    validity: 1d\n  edge2:\n    <<: *base\n", 12, "profiles.edge2.<<",
          "unknown key" },
        { "listen: localhost:8443\n" PROFILE, 1, "listen", "is not ADDR:PORT" },
        { "listen: \"1.2.3.4:99999\"\n" PROFILE, 1, "listen", "is not ADDR:PORT" },
        { "listen: \"::1:80\"\n" PROFILE, 1, "listen", "is not ADDR:PORT" },
        { PROFILE_OK "limits:\n  max_body: 64KB\n", 12, "limits.max_body", "'64KB' is not a size" },
        { PROFILE_OK "limits:\n  max_body: 100\n", 12, "limits.max_body", "out of range" },
        { PROFILE_OK "limits:\n  timeout: 30\n", 12, "limits.timeout", "not a duration" },
        { PROFILE_OK "limits:\n  max_connections: -1\n", 12, "limits.max_connections", "not a whole number" },
        { PROFILE_OK "limits:\n  max_connections: 0\n", 12, "limits.max_connections", "out of range" },
        { PROFILE_OK "limits:\n  handshake_cap: 0\n", 12, "limits.handshake_cap", "out of range" },
        { PROFILE_OK "limits:\n  workers: 2000\n", 12, "limits.workers", "out of range" },
        { PROFILE_OK "limits:\n  rate_per_ip: fast\n", 12, "limits.rate_per_ip", "not a number" },
        { PROFILE_OK "limits:\n  rate_per_ip: nan\n", 12, "limits.rate_per_ip", "not a number" },
        { PROFILE_OK "limits:\n  retry_after: 2d\n", 12, "limits.retry_after", "out of range" },
        { "tcti:\n" PROFILE, 1, "tcti", "needs a value" },
        { "database_connections: 8\n" PROFILE_OK, 1, "database_connections", "PostgreSQL database" },
        { "database_connections: 0\n" PROFILE_OK, 1, "database_connections", "out of range" },
        { "database_connections: 65\n" PROFILE_OK, 1, "database_connections", "out of range" },
        { "http_listen: \"localhost:80\"\n" PROFILE, 1, "http_listen", "is not ADDR:PORT" },
        { "clock_skew: 2h\n" PROFILE, 1, "clock_skew", "out of range" },
        { "clock_skew: 300\n" PROFILE, 1, "clock_skew", "not a duration" },
        { PROFILE "    role: root\n", 10, "profiles.edge.role", "root" },
        { PROFILE "    attestation: always\n", 10, "profiles.edge.attestation",
          "'always' is not one of: none, optional, required" },
        { PROFILE "    attestation: required\n", 10, "profiles.edge.attestation",
          "needs the top-level attestation.ek_roots" },
        { PROFILE "    reenroll_by_attestation: yes\n", 10, "profiles.edge.reenroll_by_attestation",
          "'yes' is not one of: off, allowlist, last-certificate" },
        { PROFILE "    reenroll_by_attestation: allowlist\n", 10, "profiles.edge.reenroll_by_attestation",
          "needs the top-level attestation.ek_roots" },
        { "attestation: {}\n" PROFILE_OK, 1, "attestation.ek_roots", "is required" },
        { "attestation:\n  ek_roots: []\n" PROFILE_OK, 2, "attestation.ek_roots", "needs at least one" },
        { "attestation:\n  ek_roots: /etc/roots\n" PROFILE_OK, 2, "attestation.ek_roots", "expected a list" },
        { "attestation:\n  ek_roots: [/nonexistent/ek-roots.pem]\n" PROFILE_OK, 2, "attestation.ek_roots",
          "/nonexistent/ek-roots.pem" },
        { "attestation:\n  ek_roots: [r]\n  challenge_ttl: 5s\n" PROFILE_OK, 3, "attestation.challenge_ttl",
          "out of range" },
        { "attestation:\n  ek_roots: [r]\n  max_pending: 0\n" PROFILE_OK, 3, "attestation.max_pending",
          "out of range" },
        { "attestation:\n  roots: [r]\n" PROFILE_OK, 2, "attestation.roots", "unknown key" },
        { PROFILE "    role: provisioner\n    scope:\n      profiles: [edge]\n", 12,
          "profiles.edge.scope.name_patterns", "is required" },
        { PROFILE "    role: provisioner\n    scope:\n      profiles: [edge]\n      name_patterns: [a]\n"
                  "      tokens: 5\n", 14, "profiles.edge.scope.tokens", "unknown key" },
        { PROFILE "    scope:\n      profiles: [\"a b\"]\n      name_patterns: [a]\n", 11,
          "profiles.edge.scope.profiles[0]", "not a profile name" },
        { PROFILE "    scope:\n      profiles: [a]\n      name_patterns: [\"a\\x01\"]\n", 12,
          "profiles.edge.scope.name_patterns[0]", "printable" },
        /* est.enroll_by_certificate: the profiles it names exist (checked once all are read, with the line). */
        { PROFILE "    est:\n      enroll_by_certificate:\n        from_profiles: [gone]\n"
                  "        name: \"{cn}-op\"\n", 12, "profiles.edge.est.enroll_by_certificate.from_profiles[0]",
          "'gone' is not a profile of this configuration" },
        /* ... and do not enroll by certificate themselves: no chains, no loops. */
        { PROFILE "    est:\n      enroll_by_certificate:\n        from_profiles: [edge]\n"
                  "        name: \"{cn}-op\"\n", 12, "profiles.edge.est.enroll_by_certificate.from_profiles[0]",
          "'edge' enrolls by certificate itself" },
        { PROFILE_OK "  a: {}\n  b:\n    est: {enroll_by_certificate: {from_profiles: [a], name: \"{cn}-b\"}}\n"
                  "  c:\n    est: {enroll_by_certificate: {from_profiles: [a, b], name: \"{cn}-c\"}}\n", 15,
          "profiles.c.est.enroll_by_certificate.from_profiles[1]", "'b' enrolls by certificate itself" },
        { PROFILE "    est:\n      enroll_by_certificate:\n        from_profiles: [edge]\n", 12,
          "profiles.edge.est.enroll_by_certificate.name", "is required" },
        { PROFILE "    est:\n      enroll_by_certificate:\n        name: \"{cn}-op\"\n", 12,
          "profiles.edge.est.enroll_by_certificate.from_profiles", "is required" },
        { PROFILE "    est:\n      enroll_by_certificate:\n        from_profiles: []\n        name: \"{cn}\"\n", 12,
          "profiles.edge.est.enroll_by_certificate.from_profiles", "needs at least 1" },
        { PROFILE "    est:\n      enroll_by_certificate:\n        from_profiles: [edge]\n        name: op\n", 13,
          "profiles.edge.est.enroll_by_certificate.name", "has no {cn}" },
        { PROFILE "    est:\n      enroll_by_certificate:\n        from_profiles: [edge]\n        name: \"{id}\"\n",
          13, "profiles.edge.est.enroll_by_certificate.name", "not part of {cn}" },
        { PROFILE "    approval: manual\n    est:\n      enroll_by_certificate:\n        from_profiles: [edge]\n"
                  "        name: \"{cn}-op\"\n", 13, "profiles.edge.est.enroll_by_certificate",
          "cannot be used with approval: manual" },
        { PROFILE "    est:\n      enroll_by_certificate: {from_profiles: [edge], name: \"{cn}\", extra: 1}\n", 11,
          "profiles.edge.est.enroll_by_certificate.extra", "unknown key" },
        { "database: hwid.db\ndatabase: other.db\n" PROFILE, 2, "database", "given more than once" },
        { "database: \"a\\0b\"\n" PROFILE, 1, "database", "contains a NUL byte" },
        { "policy:\n  audit_only: maybe\n" PROFILE, 2, "policy.audit_only", "not true or false" },
        { "audit:\n  syslog: sometimes\n" PROFILE, 2, "audit.syslog", "not true or false" },
        { "audit:\n  syslog_socket: \"a\\x01b\"\n" PROFILE, 2, "audit.syslog_socket", "control character" },
        { "policy:\n  admin_group: \"" "0123456789012345678901234567890123456789012345678901234567890123456789"
          "\"\n" PROFILE, 2, "policy.admin_group", "at most 64 bytes" },
        { "policy:\n  auditonly: true\n" PROFILE, 2, "policy.auditonly", "unknown key" },
        { HEAD "  crl_url: ftp://x\n" "profiles: {e: {}}\n", 8, "tls.crl_url", "unknown key" },
        { "database: d\nca:\n  key: /etc/ca.pem\n  certificate: c\n", 3, "ca.key", "is not a key URI" },
        { "database: d\nca:\n  key: \"pkcs11:x\"\n  token_key: /etc/k\n  certificate: c\n", 4, "ca.token_key",
          "is not a key URI" },
        { "database: d\nca:\n  key: \"pkcs11:x\"\n  certificate: c\n  crl_url: ftp://x/crl\n", 5, "ca.crl_url",
          "not an http:// or https:// URL" },
        { "database: d\nca:\n  key: \"pkcs11:x\"\n  certificate: c\n  crl_validity: 2y\n", 5, "ca.crl_validity",
          "not a duration" },
        { "database: d\nca:\n  key: \"pkcs11:x\"\n  certificate: c\n  ocsp_url: \"ldap://x\"\n", 5, "ca.ocsp_url",
          "not an http:// or https:// URL" },
        { "database: d\nca:\n  key: \"pkcs11:x\"\n  certificate: c\n  ocsp_validity: 30s\n", 5, "ca.ocsp_validity",
          "out of range" },
        { "limits:\n  ocsp_sign_rate_per_ip: 0\n" PROFILE, 2, "limits.ocsp_sign_rate_per_ip", "out of range" },
        { "limits:\n  ocsp_sign_burst: 0\n" PROFILE, 2, "limits.ocsp_sign_burst", "out of range" },
        { "limits:\n  ocsp_cache_entries: 8\n" PROFILE, 2, "limits.ocsp_cache_entries", "out of range" },
        { "database: [a, b]\n", 1, "database", "expected a single value, not a list" },
        { "- database\n", 1, "", "expected a mapping of keys to values, not a list" },
        { "", 1, NULL, "holds no configuration" },
        { "# only a comment\n", 1, NULL, "holds no configuration" },
        { PROFILE_OK "---\ndatabase: x\n", 12, NULL, "a second YAML document" },
        { PROFILE "  bad: [unclosed\n", 11, NULL, "YAML syntax error" },
        { "database: d\n\tca: x\n", 2, NULL, "YAML syntax error" },
        { "{a: b\n", 2, NULL, "YAML syntax error" },
        { "database: *nowhere\n", 1, NULL, "YAML syntax error" },
};

static void broken_file(const char *dir, size_t i, const broken *b) {
        _cleanup_free_ char *path = path_join(dir, "hwidd.yaml");
        _cleanup_(config_freep) hwidd_config *c = NULL;
        char want[512];
        const char *got;
        int r;

        CHECK(write_file_atomic(path, b->text, strlen(b->text), 0600) == 0);
        r = config_load(path, &c);
        got = hwid_strerror(r);
        if (b->field && b->field[0])
                snprintf(want, sizeof(want), "%s:%d: %s: ", path, b->line, b->field);
        else
                snprintf(want, sizeof(want), "%s:%d: ", path, b->line);
        if (r != -HWID_E_CONFIG || c || strncmp(got, want, strlen(want)) != 0 || !strstr(got, b->problem)) {
                fprintf(stderr, "broken file %zu: got %d \"%s\"\n    want \"%s...%s\"\n", i, r, got, want, b->problem);
                check_failures++;
        }
        unlink(path);
}

static void broken_files_are_refused(void) {
        char dir[] = "/tmp/hwid-config-XXXXXX";

        CHECK(mkdtemp(dir) != NULL);
        for (size_t i = 0; i < ELEMENTSOF(broken_files); i++)
                broken_file(dir, i, &broken_files[i]);
        rmdir(dir);
}

/* role: provisioner with its scope; the rules that tie profiles together
 * are checked once all are read (no line to name: the file and profile). */
static void scopes(void) {
        static const char ok[] = HEAD "profiles:\n"
                                      "  station:\n    role: provisioner\n"
                                      "    scope:\n      profiles: [line]\n      name_patterns: [\"line-3-*\", l4]\n"
                                      "  line: {}\n  ops: {role: auditor}\n"
                                      "  lead: {role: approver, scope: {profiles: [line], name_patterns: [\"line-3-*\"]}}\n"
                                      "  any: {role: approver}\n";
        static const struct {
                const char *text, *problem;
        } bad[] = {
                { HEAD "profiles:\n  s: {role: provisioner}\n", "profile 's' (role provisioner) needs a scope" },
                { HEAD "profiles:\n  s: {role: provisioner, scope: {profiles: [], name_patterns: [x]}}\n",
                  "needs a scope with profiles and name_patterns" },
                { HEAD "profiles:\n  s: {role: provisioner, scope: {profiles: [gone], name_patterns: [x]}}\n",
                  "scope.profiles names 'gone', which is not a profile" },
                { HEAD "profiles:\n  s: {role: provisioner, scope: {profiles: [a], name_patterns: [x]}}\n"
                       "  a: {role: admin}\n",
                  "names 'a', which issues admin certificates" },
                { HEAD "profiles:\n  s: {scope: {profiles: [s], name_patterns: [x]}}\n",
                  "profile 's' has a scope but its role is neither provisioner nor approver" },
                { HEAD "profiles:\n  s: {role: approver, scope: {profiles: [s], name_patterns: [x]}}\n",
                  "names 's', which issues approver certificates; an approver decides requests for node profiles" },
        };
        _cleanup_(config_freep) hwidd_config *c = NULL;
        const policy_profile *p;

        CHECK(config_load_string(ok, sizeof(ok) - 1, "hwidd.yaml", &c) == 0);
        p = c ? policy_profile_find(c->policy, "station") : NULL;
        CHECK(p && p->role == ROLE_PROVISIONER && strv_is(p->scope_profiles, "line", NULL) &&
              strv_is(p->scope_name_patterns, "line-3-*", "l4"));
        p = c ? policy_profile_find(c->policy, "ops") : NULL;
        CHECK(p && policy_profile_role(c->policy, p) == ROLE_AUDITOR && !p->scope_profiles);
        p = c ? policy_profile_find(c->policy, "lead") : NULL;
        CHECK(p && p->role == ROLE_APPROVER && strv_is(p->scope_profiles, "line", NULL) &&
              strv_is(p->scope_name_patterns, "line-3-*", NULL));
        p = c ? policy_profile_find(c->policy, "any") : NULL;
        CHECK(p && p->role == ROLE_APPROVER && !p->scope_profiles && !p->scope_name_patterns);
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                _cleanup_(config_freep) hwidd_config *b = NULL;
                int r = config_load_string(bad[i].text, strlen(bad[i].text), "hwidd.yaml", &b);

                if (r != -HWID_E_CONFIG || b || !strstr(hwid_strerror(r), bad[i].problem) ||
                    strncmp(hwid_strerror(r), "hwidd.yaml: ", 12) != 0) {
                        fprintf(stderr, "scope %zu: got %d \"%s\", want \"%s\"\n", i, r, hwid_strerror(r),
                                bad[i].problem);
                        check_failures++;
                }
        }
}

static void files(void) {
        _cleanup_(config_freep) hwidd_config *c = NULL;

        CHECK(config_load("/nonexistent/hwidd.yaml", &c) == -HWID_E_NOT_FOUND && !c);
        /* Binary junk is a syntax error, not a crash. */
        CHECK(config_load_string("\xff\xfe\x00\x01", 4, "junk", &c) == -HWID_E_CONFIG && !c);
        CHECK(config_load_string("a: b\0c: d\n", 10, "nul", &c) == -HWID_E_CONFIG && !c);
}

/* A postgresql:// URI is kept as written: not a path under the config's
 * directory. */
static void database_uri(void) {
        static const char text[] =
                "database: \"postgresql://hwid@db1:5432/hwid?passfile=/etc/hwid/pgpass&sslmode=verify-full\"\n"
                "database_connections: 16\n"
                "ca: {key: \"pkcs11:token=ca;object=ca\", certificate: ca.pem}\n"
                "tls: {key: \"tpm2:handle=0x81000002\", certificate: tls.pem}\n"
                "profiles:\n  edge:\n    validity: 1d\n";
        _cleanup_(config_freep) hwidd_config *c = NULL;
        int r = config_load_string(text, sizeof(text) - 1, "etc/hwid/hwidd.yaml", &c);

        CHECK(r == 0);
        if (r < 0) {
                fprintf(stderr, "database_uri: %s\n", hwid_strerror(r));
                return;
        }
        CHECK_STREQ(c->database, "postgresql://hwid@db1:5432/hwid?passfile=/etc/hwid/pgpass&sslmode=verify-full");
        CHECK_STREQ(c->ca_cert, "etc/hwid/ca.pem");
        CHECK(c->database_connections == 16);
}

int main(void) {
        example_loads();
        database_uri();
        defaults();
        variants();
        parsers();
        broken_files_are_refused();
        attestation();
        scopes();
        files();
        if (!check_failures)
                printf("test-config: example, defaults and %zu broken files passed\n", ELEMENTSOF(broken_files));
        return check_done("test-config");
}
