/* Inside the configuration loader: config-yaml.c (YAML plumbing),
 * config-values.c (one value each), config-profile.c (profiles) and
 * config.c (the file's top level), each using only those before it.  The
 * YAML is read with libyaml's document API; every value is checked by a
 * handler named in a table of the keys a mapping may hold, so unknown
 * keys are errors. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <yaml.h>

#include "config.h"

typedef struct cfg_ctx {
        yaml_document_t *doc;
        const char *name; /* for messages */
        const char *dir;  /* relative paths are resolved against it */
        /* the policy: section, applied to the policy object at the end */
        bool audit_only;
        bool public_metrics;
        char *admin_group;
        policy *policy;
        /* the first profile that asks for attestation, for the check that
         * attestation: is configured (the node lives as long as doc) */
        yaml_node_t *attest_profile_node;
        char attest_profile_path[256];
        yaml_node_t *ek_roots_node;
        yaml_node_t *db_connections_node; /* database_connections:, for the check that database: is PostgreSQL */
} cfg_ctx;

typedef struct cfg_field cfg_field;
typedef int (*cfg_fn)(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);

struct cfg_field {
        const char *key;
        cfg_fn fn;
        size_t off;             /* where in base the value goes */
        int64_t min, max;       /* bounds of numbers, durations, sizes, list lengths */
        const void *aux;        /* a sub-table (sections) or a name table (flags) */
        bool required;
};

/* A table entry: FIELD("key", handler, offset, .min = 1, .aux = ...). */
#define FIELD(k, handler, offset, ...) { .key = (k), .fn = (handler), .off = (offset), __VA_ARGS__ }
#define FIELD_END { .key = NULL }

/* A name table for flags and enums: {name, value}, ended by {NULL}. */
typedef struct cfg_name {
        const char *name;
        uint32_t value;
        const char *refusal; /* non-NULL: a known name that is refused, and why */
} cfg_name;

/* ---- the plumbing (config-yaml.c) ---- */

/* "FILE:LINE: path: problem"; returns -HWID_E_CONFIG. */
int cfg_fail(cfg_ctx *x, const yaml_node_t *n, const char *path, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

/* Walks a mapping: each key must be in fields (ended by {NULL}), at most
 * once; required keys must be there. */
int cfg_mapping(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *fields, void *base);
/* The text of a scalar (no NUL inside, not null); "" allowed if allow_empty. */
int cfg_scalar(cfg_ctx *x, yaml_node_t *n, const char *path, bool allow_empty, const char **ret);
yaml_node_t *cfg_node(cfg_ctx *x, int id);
/* Path of a child: "path.key" with the key made printable. */
void cfg_path(char *buf, size_t size, const char *path, const char *key);
bool cfg_printable(const char *s, bool allow_space);
/* The items of a list of at most max_items. */
int cfg_sequence(cfg_ctx *x, yaml_node_t *n, const char *path, int64_t max_items, yaml_node_item_t **ret_start,
                 size_t *ret_n);

/* A name from table: its value, or an error listing the names. */
int cfg_pick(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_name *table, uint32_t *ret);

/* Handlers shared by config.c and config-profile.c (cfg_fn_section in
 * config-yaml.c, the others in config-values.c). */
int cfg_fn_section(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_duration(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_int(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_bool(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_flags(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_name(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
/* config-values.c, for the top level */
int cfg_fn_duration_uint(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_size(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_uint(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_rate(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_string(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_key_uri(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_url(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_path(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_database(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
int cfg_fn_listen(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);

/* The profiles: mapping (config-profile.c). */
int cfg_fn_profiles(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base);
