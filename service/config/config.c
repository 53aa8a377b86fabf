/* hwidd's configuration: one YAML file read with libyaml's document API
 * (no hand-written parser), walked with tables of the keys each mapping
 * may hold (config-yaml.c).  Every problem is reported as "FILE:LINE:
 * field.path: what", and the loader never prints: hwidd decides what to
 * do with it.  This file: the file's top level and its loading. */
#include <libgen.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cert-bundle.h"
#include "config-internal.h"
#include "error.h"
#include "fsutil.h"

#define CONFIG_MAX_BYTES (1024 * 1024)
#define MINUTE 60
#define DAY (24 * 3600)

/* ---------- the file ---------- */

#define CFG(f) offsetof(hwidd_config, f)

static const cfg_field ca_fields[] = {
        FIELD("key", cfg_fn_key_uri, CFG(ca_key), .required = true),
        FIELD("token_key", cfg_fn_key_uri, CFG(token_key)),
        FIELD("certificate", cfg_fn_path, CFG(ca_cert), .required = true),
        FIELD("chain", cfg_fn_path, CFG(ca_chain)),
        FIELD("crl_url", cfg_fn_url, CFG(crl_url)),
        FIELD("crl_validity", cfg_fn_duration, CFG(crl_validity), .min = MINUTE, .max = 365 * DAY),
        FIELD("ocsp_url", cfg_fn_url, CFG(ocsp_url)),
        FIELD("ocsp_validity", cfg_fn_duration, CFG(ocsp_validity), .min = MINUTE, .max = 7 * DAY),
        FIELD("expiry_warning", cfg_fn_duration, CFG(ca_expiry_warning), .min = 0, .max = 36500LL * DAY),
        FIELD_END,
};

static const cfg_field tls_fields[] = {
        FIELD("key", cfg_fn_key_uri, CFG(tls_key), .required = true),
        FIELD("certificate", cfg_fn_path, CFG(tls_cert), .required = true),
        FIELD_END,
};

static const cfg_field limit_fields[] = {
        FIELD("max_body", cfg_fn_size, CFG(max_body), .min = 1024, .max = 64 * 1024 * 1024),
        FIELD("max_header", cfg_fn_size, CFG(max_header), .min = 1024, .max = 1024 * 1024),
        FIELD("timeout", cfg_fn_duration_uint, CFG(timeout), .min = 1, .max = 3600),
        FIELD("max_connections", cfg_fn_uint, CFG(max_connections), .min = 1, .max = 1000000),
        FIELD("max_connections_per_ip", cfg_fn_uint, CFG(max_connections_per_ip), .min = 1, .max = 1000000),
        FIELD("handshake_cap", cfg_fn_uint, CFG(handshake_cap), .min = 1, .max = 1000000),
        FIELD("handshake_timeout", cfg_fn_duration_uint, CFG(handshake_timeout), .min = 1, .max = 3600),
        FIELD("workers", cfg_fn_uint, CFG(workers), .min = 1, .max = 1024),
        FIELD("rate_per_ip", cfg_fn_rate, CFG(rate_per_ip), .min = 0, .max = 1000000),
        FIELD("rate_burst", cfg_fn_uint, CFG(rate_burst), .min = 1, .max = 1000000),
        FIELD("retry_after", cfg_fn_duration, CFG(retry_after), .min = 1, .max = DAY),
        FIELD("ocsp_cache_entries", cfg_fn_size, CFG(ocsp_cache_entries), .min = 16, .max = 10000000),
        FIELD("ocsp_sign_rate_per_ip", cfg_fn_rate, CFG(ocsp_sign_rate_per_ip), .min = 1, .max = 1000000),
        FIELD("ocsp_sign_burst_per_ip", cfg_fn_uint, CFG(ocsp_sign_burst_per_ip), .min = 1, .max = 1000000),
        FIELD("ocsp_sign_rate", cfg_fn_rate, CFG(ocsp_sign_rate), .min = 1, .max = 1000000),
        FIELD("ocsp_sign_burst", cfg_fn_uint, CFG(ocsp_sign_burst), .min = 1, .max = 1000000),
        FIELD_END,
};

static const cfg_field audit_fields[] = {
        FIELD("retention", cfg_fn_duration, CFG(audit_retention), .min = DAY, .max = 36500LL * DAY),
        FIELD("checkpoint_records", cfg_fn_uint, CFG(audit_checkpoint_records), .min = 1, .max = 1000000),
        FIELD("checkpoint_interval", cfg_fn_duration, CFG(audit_checkpoint_interval), .min = 1, .max = DAY),
        FIELD("syslog", cfg_fn_bool, CFG(audit_syslog)),
        FIELD("syslog_socket", cfg_fn_path, CFG(audit_syslog_socket)),
        FIELD_END,
};

static const cfg_field policy_fields[] = {
        FIELD("audit_only", cfg_fn_bool, offsetof(cfg_ctx, audit_only)),
        FIELD("admin_group", cfg_fn_name, offsetof(cfg_ctx, admin_group)),
        FIELD("public_metrics", cfg_fn_bool, offsetof(cfg_ctx, public_metrics)),
        FIELD_END,
};

/* The policy: section fills the loader's context, not the config. */
static int fn_policy(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        return cfg_mapping(x, n, path, policy_fields, x);
}

#define EK_ROOTS_MAX 64

/* attestation.ek_roots: a list of files or directories, each resolved
 * against the configuration's directory. */
static int fn_ek_roots(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        hwidd_config *c = base;
        static const cfg_field item = FIELD("", cfg_fn_path, 0);
        yaml_node_item_t *items;
        size_t count;
        char **v;
        int r;

        if ((r = cfg_sequence(x, n, path, EK_ROOTS_MAX, &items, &count)) < 0)
                return r;
        x->ek_roots_node = n;
        if (count == 0)
                return cfg_fail(x, n, path, "needs at least one file or directory of TPM manufacturer CA certificates");
        if (!(v = calloc(count + 1, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        c->ek_root_paths = v;
        for (size_t i = 0; i < count; i++) {
                char sub[280];

                snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
                if ((r = cfg_fn_path(x, cfg_node(x, items[i]), sub, &item, &v[i])) < 0)
                        return r;
        }
        return 0;
}

static const cfg_field attestation_fields[] = {
        FIELD("ek_roots", fn_ek_roots, 0, .required = true),
        FIELD("challenge_ttl", cfg_fn_duration, CFG(attest_ttl), .min = 10, .max = 10 * MINUTE),
        FIELD("max_pending", cfg_fn_size, CFG(attest_max_pending), .min = 1, .max = 1000000),
        FIELD("max_pending_per_requester", cfg_fn_size, CFG(attest_max_per_requester), .min = 1, .max = 1000),
        FIELD_END,
};

/* database_connections: a PostgreSQL store's pool (store-pg.h). */
static int fn_db_connections(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        x->db_connections_node = n;
        return cfg_fn_uint(x, n, path, f, base);
}

static bool database_is_uri(const char *s) {
        return s && (strncmp(s, "postgresql://", 13) == 0 || strncmp(s, "postgres://", 11) == 0);
}

static const cfg_field root_fields[] = {
        FIELD("listen", cfg_fn_listen, CFG(listen)),
        FIELD("http_listen", cfg_fn_listen, CFG(http_listen)),
        FIELD("clock_skew", cfg_fn_duration, CFG(clock_skew), .min = 0, .max = 3600),
        FIELD("database", cfg_fn_database, CFG(database), .required = true),
        FIELD("database_connections", fn_db_connections, CFG(database_connections), .min = 1, .max = 64),
        FIELD("tcti", cfg_fn_string, CFG(tcti)),
        FIELD("ca", cfg_fn_section, 0, .aux = ca_fields, .required = true),
        FIELD("tls", cfg_fn_section, 0, .aux = tls_fields, .required = true),
        FIELD("limits", cfg_fn_section, 0, .aux = limit_fields),
        FIELD("audit", cfg_fn_section, 0, .aux = audit_fields),
        FIELD("policy", fn_policy, 0),
        FIELD("attestation", cfg_fn_section, 0, .aux = attestation_fields),
        FIELD("profiles", cfg_fn_profiles, 0, .required = true),
        FIELD_END,
};

static void set_defaults(hwidd_config *c) {
        c->crl_validity = 7 * DAY;
        c->ocsp_validity = 3600;
        c->ocsp_cache_entries = 10000;
        c->ocsp_sign_rate_per_ip = 10;
        c->ocsp_sign_burst_per_ip = 100;
        c->ocsp_sign_rate = 100;
        c->ocsp_sign_burst = 500;
        c->ca_expiry_warning = 90 * DAY;
        c->max_body = 64 * 1024;
        c->max_header = 8 * 1024;
        c->timeout = 30;
        c->max_connections = 16384;
        c->max_connections_per_ip = 1024;
        c->handshake_cap = 1024;
        c->handshake_timeout = 10;
        c->workers = 32;
        c->rate_per_ip = 200;
        c->rate_burst = 500;
        c->retry_after = 5;
        c->clock_skew = 5 * MINUTE;
        c->audit_retention = 365 * DAY;
        c->audit_checkpoint_records = 1000;
        c->audit_checkpoint_interval = MINUTE;
        c->attest_ttl = MINUTE;
        c->attest_max_pending = 1000;
        c->attest_max_per_requester = 4;
}

static int syntax_error(cfg_ctx *x, const yaml_parser_t *p) {
        const char *problem = p->problem ? p->problem : "cannot be parsed";

        if (p->error == YAML_MEMORY_ERROR)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (p->context)
                return hwid_fail(HWID_E_CONFIG, "%s:%lu: YAML syntax error: %s %s", x->name,
                                 (unsigned long) p->problem_mark.line + 1, problem, p->context);
        return hwid_fail(HWID_E_CONFIG, "%s:%lu: YAML syntax error: %s", x->name,
                         (unsigned long) p->problem_mark.line + 1, problem);
}

/* One document per file: a second one is a mistake, not ignored. */
static int only_document(cfg_ctx *x, yaml_parser_t *p) {
        yaml_document_t next;
        yaml_node_t *root;
        int r = 0;

        if (!yaml_parser_load(p, &next))
                return syntax_error(x, p);
        root = yaml_document_get_root_node(&next);
        if (root)
                r = hwid_fail(HWID_E_CONFIG, "%s:%lu: a second YAML document; the file must hold one", x->name,
                              (unsigned long) root->start_mark.line + 1);
        yaml_document_delete(&next);
        return r;
}

/* The roots are read now, so that a configuration naming roots that
 * cannot be read is refused at start and on SIGHUP, not at the first
 * attestation. */
static int load_ek_roots(cfg_ctx *x, hwidd_config *c) {
        size_t n = 0;
        int r;

        while (c->ek_root_paths[n])
                n++;
        r = cert_bundle_load("EK roots", (const char *const *) c->ek_root_paths, n, &c->ek_roots);
        if (r < 0)
                return cfg_fail(x, x->ek_roots_node, "attestation.ek_roots", "%s", hwid_strerror(r));
        return 0;
}

static int parse_document(cfg_ctx *x, const char *text, size_t len, hwidd_config *c) {
        yaml_parser_t parser;
        yaml_document_t doc;
        yaml_node_t *root;
        int r;

        if (!yaml_parser_initialize(&parser))
                return hwid_fail(HWID_E_NOMEM, NULL);
        yaml_parser_set_input_string(&parser, (const unsigned char *) text, len);
        if (!yaml_parser_load(&parser, &doc)) {
                r = syntax_error(x, &parser);
                yaml_parser_delete(&parser);
                return r;
        }
        x->doc = &doc;
        root = yaml_document_get_root_node(&doc);
        if (!root)
                r = cfg_fail(x, NULL, "", "the file holds no configuration");
        else
                r = cfg_mapping(x, root, "", root_fields, c);
        if (r >= 0 && x->attest_profile_node && !c->ek_root_paths)
                r = cfg_fail(x, x->attest_profile_node, x->attest_profile_path,
                             "asks for TPM attestation, which needs the top-level attestation.ek_roots (the TPM "
                             "manufacturers' EK CA certificates)");
        if (r >= 0 && x->db_connections_node && !database_is_uri(c->database))
                r = cfg_fail(x, x->db_connections_node, "database_connections",
                             "applies to a PostgreSQL database (database: postgresql://...) only: a SQLite file "
                             "has one connection");
        if (r >= 0 && c->ek_root_paths)
                r = load_ek_roots(x, c);
        if (r >= 0)
                r = only_document(x, &parser);
        x->doc = NULL;
        yaml_document_delete(&doc);
        yaml_parser_delete(&parser);
        return r;
}

static int load(const char *text, size_t len, const char *name, const char *dir, hwidd_config **ret) {
        _cleanup_(config_freep) hwidd_config *c = calloc(1, sizeof(*c));
        cfg_ctx x = { .name = name, .dir = dir };
        int r;

        if (!c || !(c->path = strdup(name)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        set_defaults(c);
        if ((r = policy_new(&c->policy)) < 0)
                return r;
        x.policy = c->policy;
        r = parse_document(&x, text, len, c);
        if (r >= 0 && !c->listen && !(c->listen = strdup("127.0.0.1:8443")))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0 && !c->audit_syslog_socket && !(c->audit_syslog_socket = strdup("/dev/log")))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0)
                r = policy_set_admin_group(c->policy, x.admin_group);
        free(x.admin_group);
        /* Scopes name other profiles, and roles hang on the admin group. */
        if (r >= 0 && (r = policy_check_scopes(c->policy)) < 0) {
                char why[512];

                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
                r = hwid_fail(HWID_E_CONFIG, "%s: %s", name, why);
        }
        if (r < 0)
                return r;
        policy_set_audit_only(c->policy, x.audit_only);
        policy_set_public_metrics(c->policy, x.public_metrics);
        *ret = TAKE_PTR(c);
        return 0;
}

static char *dir_of(const char *path) {
        _cleanup_free_ char *copy = strdup(path);

        return copy ? strdup(dirname(copy)) : NULL;
}

int config_load_string(const char *text, size_t len, const char *name, hwidd_config **ret) {
        _cleanup_free_ char *dir = NULL;

        if (!name)
                name = "(config)";
        if (!(dir = dir_of(name)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return load(text, len, name, dir, ret);
}

int config_load(const char *path, hwidd_config **ret) {
        _cleanup_free_ char *text = NULL, *dir = NULL, *abs_dir = NULL;
        char cwd[PATH_MAX];
        size_t len;
        int r;

        if ((r = read_file_capped(path, CONFIG_MAX_BYTES, &text, &len)) < 0)
                return r;
        if (!(dir = dir_of(path)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* Anchor relative paths now: hwidd may change directory later. */
        if (dir[0] != '/') {
                if (!getcwd(cwd, sizeof(cwd)))
                        return hwid_fail(HWID_E_IO, "cannot find the current directory");
                if (!(abs_dir = strcmp(dir, ".") == 0 ? strdup(cwd) : path_join(cwd, dir)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return load(text, len, path, abs_dir ? abs_dir : dir, ret);
}

void config_free(hwidd_config *c) {
        if (!c)
                return;
        free(c->path);
        free(c->listen);
        free(c->http_listen);
        free(c->database);
        free(c->tcti);
        free(c->ca_key);
        free(c->token_key);
        free(c->ca_cert);
        free(c->ca_chain);
        free(c->crl_url);
        free(c->ocsp_url);
        free(c->tls_key);
        free(c->tls_cert);
        free(c->audit_syslog_socket);
        for (size_t i = 0; c->ek_root_paths && c->ek_root_paths[i]; i++)
                free(c->ek_root_paths[i]);
        free(c->ek_root_paths);
        cert_bundle_free(c->ek_roots);
        policy_free(c->policy);
        free(c);
}
