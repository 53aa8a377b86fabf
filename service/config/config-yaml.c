/* hwidd's configuration: the YAML plumbing under every handler -- nodes,
 * scalars, sequences, mappings walked against a table of the keys they may
 * hold, and the "FILE:LINE: field.path: what" of every problem.  Below
 * config-values.c and config-profile.c, which use it; config.c reads the
 * file's top level with it. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "config-internal.h"
#include "error.h"

#define VALUE_MAX 4096

int cfg_fail(cfg_ctx *x, const yaml_node_t *n, const char *path, const char *fmt, ...) {
        unsigned long line = n ? (unsigned long) n->start_mark.line + 1 : 1;
        char msg[320];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (!path || !path[0])
                return hwid_fail(HWID_E_CONFIG, "%s:%lu: %s", x->name, line, msg);
        return hwid_fail(HWID_E_CONFIG, "%s:%lu: %s: %s", x->name, line, path, msg);
}

yaml_node_t *cfg_node(cfg_ctx *x, int id) {
        return yaml_document_get_node(x->doc, id);
}

bool cfg_printable(const char *s, bool allow_space) {
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                if (c < 0x20 || c == 0x7f || (c == ' ' && !allow_space))
                        return false;
        }
        return true;
}

void cfg_path(char *buf, size_t size, const char *path, const char *key) {
        char k[65];
        size_t i;

        for (i = 0; key[i] && i < sizeof(k) - 1; i++)
                k[i] = (unsigned char) key[i] < 0x20 || key[i] == 0x7f ? '?' : key[i];
        k[i] = '\0';
        snprintf(buf, size, "%s%s%s", path, path[0] ? "." : "", k);
}

static const char *node_kind(const yaml_node_t *n) {
        if (!n)
                return "nothing";
        return n->type == YAML_MAPPING_NODE ? "mapping" : n->type == YAML_SEQUENCE_NODE ? "list" : "value";
}

int cfg_scalar(cfg_ctx *x, yaml_node_t *n, const char *path, bool allow_empty, const char **ret) {
        const char *v;
        size_t len;

        if (!n || n->type != YAML_SCALAR_NODE)
                return cfg_fail(x, n, path, "expected a single value, not a %s", node_kind(n));
        v = (const char *) n->data.scalar.value;
        len = n->data.scalar.length;
        if (strlen(v) != len)
                return cfg_fail(x, n, path, "contains a NUL byte");
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            (len == 0 || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
             strcmp(v, "NULL") == 0))
                return cfg_fail(x, n, path, "needs a value");
        if (!allow_empty && len == 0)
                return cfg_fail(x, n, path, "is empty");
        if (len > VALUE_MAX)
                return cfg_fail(x, n, path, "is longer than %d bytes", VALUE_MAX);
        *ret = v;
        return 0;
}

int cfg_sequence(cfg_ctx *x, yaml_node_t *n, const char *path, int64_t max_items, yaml_node_item_t **ret_start,
                 size_t *ret_n) {
        size_t count;

        if (!n || n->type != YAML_SEQUENCE_NODE)
                return cfg_fail(x, n, path, "expected a list, not a %s", node_kind(n));
        count = (size_t) (n->data.sequence.items.top - n->data.sequence.items.start);
        if (max_items > 0 && count > (size_t) max_items)
                return cfg_fail(x, n, path, "has %zu items (at most %lld)", count, (long long) max_items);
        *ret_start = n->data.sequence.items.start;
        *ret_n = count;
        return 0;
}

/* A required key that is missing: name the first required field in it. */
static int missing(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f) {
        char sub[256];

        cfg_path(sub, sizeof(sub), path, f->key);
        if (f->fn == cfg_fn_section)
                for (const cfg_field *s = f->aux; s->key; s++)
                        if (s->required)
                                return missing(x, n, sub, s);
        return cfg_fail(x, n, sub, "is required");
}

int cfg_mapping(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *fields, void *base) {
        bool seen[32] = { false };
        int r;

        if (!n || n->type != YAML_MAPPING_NODE)
                return cfg_fail(x, n, path, "expected a mapping of keys to values, not a %s", node_kind(n));
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                yaml_node_t *k = cfg_node(x, p->key);
                const char *key = NULL;
                char sub[256];
                size_t i;

                if ((r = cfg_scalar(x, k, path, false, &key)) < 0)
                        return r;
                cfg_path(sub, sizeof(sub), path, key);
                for (i = 0; fields[i].key && strcmp(fields[i].key, key) != 0; i++)
                        ;
                if (!fields[i].key)
                        return cfg_fail(x, k, sub, "unknown key");
                if (i >= ELEMENTSOF(seen))
                        return hwid_fail(HWID_E_INTERNAL, "configuration table too large");
                if (seen[i])
                        return cfg_fail(x, k, sub, "is given more than once");
                seen[i] = true;
                if ((r = fields[i].fn(x, cfg_node(x, p->value), sub, &fields[i], base)) < 0)
                        return r;
        }
        for (size_t i = 0; fields[i].key; i++)
                if (fields[i].required && !seen[i])
                        return missing(x, n, path, &fields[i]);
        return 0;
}

int cfg_fn_section(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        return cfg_mapping(x, n, path, f->aux, base);
}
