/* hwidd's configuration: the handlers that check and store one value
 * each — numbers, durations, sizes, booleans, names from a table, strings,
 * paths, key URIs, URLs and listen addresses. */
#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "config-internal.h"
#include "duration.h"
#include "error.h"
#include "fsutil.h"

#define AT(base, f, type) ((type *) ((char *) (base) + (f)->off))

/* ---------- numbers, durations, sizes ---------- */

int config_parse_duration(const char *s, int64_t *ret) {
        return duration_parse(s, ret);
}

int config_parse_size(const char *s, size_t *ret) {
        static const struct {
                const char *suffix;
                uint64_t mul;
        } units[] = { { "", 1 }, { "B", 1 }, { "KiB", 1024 }, { "MiB", 1024 * 1024 }, { "GiB", 1024 * 1024 * 1024 } };
        const char *p = s;
        uint64_t v;

        if (!s || parse_u64(&p, &v) < 0)
                return hwid_fail(HWID_E_INVALID, "'%s' is not a size", s ? s : "");
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                if (strcmp(p, units[i].suffix) != 0)
                        continue;
                if (v > (uint64_t) SIZE_MAX / units[i].mul)
                        return hwid_fail(HWID_E_INVALID, "size '%s' is too large", s);
                *ret = (size_t) (v * units[i].mul);
                return 0;
        }
        return hwid_fail(HWID_E_INVALID, "'%s' is not a size", s);
}

static int in_range(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, int64_t v, const char *text) {
        if (v < f->min || v > f->max)
                return cfg_fail(x, n, path, "'%s' is out of range (%lld to %lld)", text, (long long) f->min,
                                (long long) f->max);
        return 0;
}

/* A duration as people write it: the largest unit that divides it. */
static const char *human(char *buf, size_t size, int64_t secs) {
        static const struct {
                char unit;
                int64_t secs;
        } units[] = { { 'w', 604800 }, { 'd', 86400 }, { 'h', 3600 }, { 'm', 60 } };

        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (secs > 0 && secs % units[i].secs == 0 && (units[i].unit != 'w' || secs % 86400 != 0)) {
                        snprintf(buf, size, "%lld%c", (long long) (secs / units[i].secs), units[i].unit);
                        return buf;
                }
        snprintf(buf, size, "%llds", (long long) secs);
        return buf;
}

static int get_duration(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, int64_t *ret) {
        char lo[32], hi[32];
        const char *s;
        int64_t v;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (config_parse_duration(s, &v) < 0)
                return cfg_fail(x, n, path, "'%s' is not a duration (a number and s, m, h, d or w: 30s, 12h, 30d)", s);
        if (v < f->min || v > f->max)
                return cfg_fail(x, n, path, "'%s' is out of range (%s to %s)", s, human(lo, sizeof(lo), f->min),
                                human(hi, sizeof(hi), f->max));
        *ret = v;
        return 0;
}

int cfg_fn_duration(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        return get_duration(x, n, path, f, AT(base, f, int64_t));
}

int cfg_fn_duration_uint(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        int64_t v = 0;
        int r = get_duration(x, n, path, f, &v);

        if (r >= 0)
                *AT(base, f, unsigned) = (unsigned) v;
        return r;
}

int cfg_fn_size(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        size_t v;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (config_parse_size(s, &v) < 0)
                return cfg_fail(x, n, path, "'%s' is not a size (bytes, or a number and KiB, MiB or GiB)", s);
        if (v > (size_t) INT64_MAX)
                v = (size_t) INT64_MAX;
        if ((r = in_range(x, n, path, f, (int64_t) v, s)) < 0)
                return r;
        *AT(base, f, size_t) = v;
        return 0;
}

static int get_int(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, int64_t *ret) {
        const char *s, *p;
        uint64_t v;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        p = s;
        if (parse_u64(&p, &v) < 0 || *p || v > (uint64_t) INT64_MAX)
                return cfg_fail(x, n, path, "'%s' is not a whole number", s);
        if ((r = in_range(x, n, path, f, (int64_t) v, s)) < 0)
                return r;
        *ret = (int64_t) v;
        return 0;
}

int cfg_fn_int(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        int64_t v = 0;
        int r = get_int(x, n, path, f, &v);

        if (r >= 0)
                *AT(base, f, int) = (int) v;
        return r;
}

int cfg_fn_uint(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        int64_t v = 0;
        int r = get_int(x, n, path, f, &v);

        if (r >= 0)
                *AT(base, f, unsigned) = (unsigned) v;
        return r;
}

int cfg_fn_rate(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        char *end;
        double v;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        v = strtod(s, &end);
        if (*end || end == s || !isfinite(v) || s[0] == '-' || s[0] == '+' || s[0] == ' ')
                return cfg_fail(x, n, path, "'%s' is not a number", s);
        if (v < (double) f->min || v > (double) f->max)
                return cfg_fail(x, n, path, "'%s' is out of range (%lld to %lld)", s, (long long) f->min,
                                (long long) f->max);
        *AT(base, f, double) = v;
        return 0;
}

int cfg_fn_bool(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        static const char *yes[] = { "true", "yes", "on" }, *no[] = { "false", "no", "off" };
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
                        *AT(base, f, bool) = strcasecmp(s, yes[i]) == 0;
                        return 0;
                }
        }
        return cfg_fail(x, n, path, "'%s' is not true or false", s);
}

static const char *names_of(const cfg_name *t, char *buf, size_t size) {
        size_t o = 0;

        buf[0] = '\0';
        for (; t->name && o < size; t++)
                if (!t->refusal)
                        o += (size_t) snprintf(buf + o, size - o, "%s%s", o ? ", " : "", t->name);
        return buf;
}

int cfg_pick(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_name *table, uint32_t *ret) {
        const cfg_name *t = table;
        char names[256];
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        for (; t->name && strcmp(t->name, s) != 0; t++)
                ;
        if (!t->name)
                return cfg_fail(x, n, path, "'%s' is not one of: %s", s, names_of(table, names, sizeof(names)));
        if (t->refusal)
                return cfg_fail(x, n, path, "'%s' is refused: %s", s, t->refusal);
        *ret = t->value;
        return 0;
}

int cfg_fn_flags(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        yaml_node_item_t *items;
        uint32_t v = 0, one;
        size_t count;
        int r;

        if ((r = cfg_sequence(x, n, path, 16, &items, &count)) < 0)
                return r;
        if ((int64_t) count < f->min)
                return cfg_fail(x, n, path, "needs at least %lld item(s)", (long long) f->min);
        for (size_t i = 0; i < count; i++) {
                char sub[280];

                snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
                if ((r = cfg_pick(x, cfg_node(x, items[i]), sub, f->aux, &one)) < 0)
                        return r;
                v |= one;
        }
        *AT(base, f, uint32_t) = v;
        return 0;
}

/* A name for people (admin group, O/OU values): printable, at most 64 bytes. */
int cfg_fn_name(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        char *copy;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (strlen(s) > 64 || !cfg_printable(s, true))
                return cfg_fail(x, n, path, "must be printable and at most 64 bytes");
        if (!(copy = strdup(s)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        free(*AT(base, f, char *));
        *AT(base, f, char *) = copy;
        return 0;
}

/* ---------- strings, paths, addresses ---------- */

static int set_string(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base,
                      const char *s) {
        char *copy = strdup(s);

        if (!copy)
                return hwid_fail(HWID_E_NOMEM, NULL);
        free(*AT(base, f, char *));
        *AT(base, f, char *) = copy;
        return 0;
}

int cfg_fn_string(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (!cfg_printable(s, false))
                return cfg_fail(x, n, path, "must not contain spaces or control characters");
        return set_string(x, n, path, f, base, s);
}

int cfg_fn_key_uri(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if ((strncmp(s, "pkcs11:", 7) != 0 && strncmp(s, "tpm2:", 5) != 0) || !cfg_printable(s, false))
                return cfg_fail(x, n, path, "'%s' is not a key URI (pkcs11:... or tpm2:...)", s);
        return set_string(x, n, path, f, base, s);
}

int cfg_fn_url(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if ((strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0) || !cfg_printable(s, false) ||
            strlen(s) > 1024)
                return cfg_fail(x, n, path, "'%s' is not an http:// or https:// URL", s);
        return set_string(x, n, path, f, base, s);
}

/* Relative paths are relative to the directory of the file. */
int cfg_fn_path(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        _cleanup_free_ char *full = NULL;
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (!cfg_printable(s, true))
                return cfg_fail(x, n, path, "contains a control character");
        if (s[0] != '/' && x->dir && x->dir[0] && strcmp(x->dir, ".") != 0) {
                if (!(full = path_join(x->dir, s)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
                s = full;
        }
        return set_string(x, n, path, f, base, s);
}

/* database: a SQLite file (a path, relative to the config's directory) or
 * a PostgreSQL server (a postgresql:// URI, kept as written; the store
 * refuses one that holds a password). */
int cfg_fn_database(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (strncmp(s, "postgresql://", 13) != 0 && strncmp(s, "postgres://", 11) != 0)
                return cfg_fn_path(x, n, path, f, base);
        if (!cfg_printable(s, false))
                return cfg_fail(x, n, path, "contains a control character");
        return set_string(x, n, path, f, base, s);
}

static bool listen_valid(const char *s) {
        const char *colon = strrchr(s, ':'), *p;
        char host[64];
        uint8_t addr[16];
        uint64_t port;
        size_t hl;

        if (!colon || colon == s || (size_t) (colon - s) >= sizeof(host))
                return false;
        p = colon + 1;
        if (parse_u64(&p, &port) < 0 || *p || port > 65535 || strlen(colon + 1) > 5)
                return false;
        hl = (size_t) (colon - s);
        memcpy(host, s, hl);
        host[hl] = '\0';
        if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
                host[hl - 1] = '\0';
                return inet_pton(AF_INET6, host + 1, addr) == 1;
        }
        return inet_pton(AF_INET, host, addr) == 1;
}

int cfg_fn_listen(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (!listen_valid(s))
                return cfg_fail(x, n, path, "'%s' is not ADDR:PORT (e.g. 127.0.0.1:8443 or [::1]:8443)", s);
        return set_string(x, n, path, f, base, s);
}
