/* A factory line's manifest of TPMs for the EK allowlist (ek-entry.h),
 * read by the admin API for `hwid ek import`.  Two forms
 * (docs/ATTESTATION.md):
 *
 *   JSON  {"devices": [{"cn": "edge-0001", "profile": "edge",
 *                       "ek_cert": "<base64 DER or PEM>"}, ...]}
 *   CSV   a header naming the columns, then one device per line:
 *         cn,profile,ek_pub_sha256
 *         edge-0001,edge,3f1c...
 *
 * An entry names its TPM by ek_cert (the EK certificate: both hashes are
 * taken of it, and it must chain to attestation.ek_roots), ek_pub_sha256
 * (the EK public key's hash) or ek_cert_sha256 (the certificate's hash).
 * The CSV form has no quoting: none of its fields can hold a comma. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "base64.h"
#include "ek-entry.h"
#include "error.h"
#include "json-read.h"

#define WHAT_MAX 320

/* The fields of one manifest entry, as text (borrowed). */
typedef struct ek_fields {
        const char *cn, *profile, *ek_cert, *ek_cert_sha256, *ek_pub_sha256;
} ek_fields;

static int cert_hash(const char *s, const char *what, store_ek *e) {
        if (strncmp(s, "sha256:", 7) == 0)
                s += 7;
        if (strlen(s) != 64 || strspn(s, "0123456789abcdefABCDEF") != 64)
                return hwid_fail(HWID_E_INVALID, "%s: ek_cert_sha256 is 64 hex digits", what);
        for (size_t i = 0; i < 64; i++)
                e->ek_cert_sha256[i] = (char) (s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
        e->ek_cert_sha256[64] = '\0';
        return 0;
}

/* The certificate of an entry: PEM text, or base64 of its DER. */
static int entry_cert(const hwidd_config *cfg, const char *text, const char *what, store_ek *e) {
        _cleanup_free_ uint8_t *der = NULL;
        size_t len;
        int r;

        if (strstr(text, "-----BEGIN"))
                return ek_entry_from_cert(cfg, (const uint8_t *) text, strlen(text), what, e);
        if ((r = base64_decode(text, strlen(text), false, &der, &len)) < 0)
                return hwid_fail(HWID_E_INVALID, "%s: ek_cert is neither PEM nor base64 DER: %s", what,
                                 hwid_strerror(r));
        return ek_entry_from_cert(cfg, der, len, what, e);
}

/* A hash given beside the certificate must be the certificate's. */
static int same_hash(const char *given, const char *computed, const char *field, const char *what) {
        if (strncmp(given, "sha256:", 7) == 0)
                given += 7;
        if (strcasecmp(given, computed) != 0)
                return hwid_fail(HWID_E_INVALID, "%s: %s is not the hash of its ek_cert", what, field);
        return 0;
}

static int entry_make(const hwidd_config *cfg, const ek_fields *f, const char *profile, const char *what,
                      store_ek *e) {
        int r = 0;

        if (!f->ek_cert && !f->ek_cert_sha256 && !f->ek_pub_sha256)
                return hwid_fail(HWID_E_INVALID, "%s: names no EK (ek_cert, ek_pub_sha256 or ek_cert_sha256)", what);
        if (f->ek_cert) {
                if ((r = entry_cert(cfg, f->ek_cert, what, e)) >= 0 && f->ek_pub_sha256)
                        r = same_hash(f->ek_pub_sha256, e->ek_pub_sha256, "ek_pub_sha256", what);
                if (r >= 0 && f->ek_cert_sha256)
                        r = same_hash(f->ek_cert_sha256, e->ek_cert_sha256, "ek_cert_sha256", what);
        } else {
                if (f->ek_pub_sha256)
                        r = ek_entry_pub_hash(f->ek_pub_sha256, what, e);
                if (r >= 0 && f->ek_cert_sha256)
                        r = cert_hash(f->ek_cert_sha256, what, e);
        }
        if (r >= 0)
                r = ek_entry_names(cfg, f->cn, f->profile && f->profile[0] ? f->profile : profile, what, e);
        return r;
}

/* ---------- JSON ---------- */

static int json_fields(json_object *o, const char *what, ek_fields *f) {
        static const char *const keys[] = { "cn", "profile", "ek_cert", "ek_cert_sha256", "ek_pub_sha256" };
        const char **slots[] = { &f->cn, &f->profile, &f->ek_cert, &f->ek_cert_sha256, &f->ek_pub_sha256 };

        if (!json_object_is_type(o, json_type_object))
                return hwid_fail(HWID_E_INVALID, "%s is not a JSON object", what);
        *f = (ek_fields) { 0 };
        json_object_object_foreach(o, key, v) {
                size_t i;

                for (i = 0; i < ELEMENTSOF(keys) && strcmp(keys[i], key) != 0; i++)
                        ;
                if (i == ELEMENTSOF(keys))
                        return hwid_fail(HWID_E_INVALID, "%s has an unknown member \"%.64s\"", what, key);
                if (!json_object_is_type(v, json_type_string))
                        return hwid_fail(HWID_E_INVALID, "%s.%s must be a string", what, key);
                *slots[i] = json_object_get_string(v);
        }
        return 0;
}

/* *v is allocated for the devices listed (*n of them filled, also on failure). */
static int json_manifest(const hwidd_config *cfg, const char *path, const char *text, const char *profile,
                         store_ek **v, size_t *n) {
        json_object *o = NULL, *devices = NULL;
        size_t count;
        int r = json_read(text, strlen(text), 8, 0, path, &o);

        if (r < 0)
                return r;
        if (!json_object_object_get_ex(o, "devices", &devices) ||
            !json_object_is_type(devices, json_type_array) || json_object_object_length(o) != 1)
                r = hwid_fail(HWID_E_INVALID, "%s is not a JSON manifest {\"devices\": [...]}", path);
        count = r < 0 ? 0 : json_object_array_length(devices);
        if (r >= 0 && count > EK_IMPORT_MAX)
                r = hwid_fail(HWID_E_TOO_LARGE, "%s lists more than %d devices", path, EK_IMPORT_MAX);
        if (r >= 0 && !(*v = calloc(count ? count : 1, sizeof(**v))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; r >= 0 && i < count; i++) {
                char what[WHAT_MAX];
                ek_fields f;

                snprintf(what, sizeof(what), "%s: devices[%zu]", path, i);
                r = json_fields(json_object_array_get_idx(devices, i), what, &f);
                if (r >= 0 && (r = entry_make(cfg, &f, profile, what, &(*v)[*n])) >= 0)
                        (*n)++;
        }
        json_object_put(o);
        return r;
}

/* ---------- CSV ---------- */

static char *trim(char *s) {
        char *e;

        s += strspn(s, " \t");
        e = s + strlen(s);
        while (e > s && strchr(" \t\r", e[-1]))
                *--e = '\0';
        return s;
}

/* Splits line at commas into at most max fields; -1 if more. */
static int split(char *line, char **f, int max) {
        int n = 0;

        for (char *p = line, *c; p; p = c ? c + 1 : NULL) {
                if (n == max)
                        return -1;
                c = strchr(p, ',');
                if (c)
                        *c = '\0';
                f[n++] = trim(p);
        }
        return n;
}

typedef struct csv_header {
        int n;
        int col[5]; /* cn, profile, ek_cert, ek_cert_sha256, ek_pub_sha256: column, or -1 */
} csv_header;

static int csv_header_parse(char *line, const char *what, csv_header *h) {
        static const char *const names[] = { "cn", "profile", "ek_cert", "ek_cert_sha256", "ek_pub_sha256" };
        char *f[8];
        int n = split(line, f, 8);

        if (n < 0)
                return hwid_fail(HWID_E_INVALID, "%s: the header has more than 5 columns", what);
        h->n = n;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                h->col[i] = -1;
        for (int c = 0; c < n; c++) {
                size_t i;
                for (i = 0; i < ELEMENTSOF(names) && strcmp(names[i], f[c]) != 0; i++)
                        ;
                if (i == ELEMENTSOF(names) || h->col[i] >= 0)
                        return hwid_fail(HWID_E_INVALID, "%s: '%.64s' is not a column (cn, profile, ek_cert, "
                                         "ek_cert_sha256, ek_pub_sha256), or is there twice", what, f[c]);
                h->col[i] = c;
        }
        if (h->col[0] < 0)
                return hwid_fail(HWID_E_INVALID, "%s: the header names no cn column", what);
        return 0;
}

static int csv_row(char *line, const char *what, const csv_header *h, ek_fields *out) {
        const char **slots[] = { &out->cn, &out->profile, &out->ek_cert, &out->ek_cert_sha256, &out->ek_pub_sha256 };
        char *f[8];
        int n;

        if (strchr(line, '"'))
                return hwid_fail(HWID_E_INVALID, "%s: quoted fields are not supported (no field holds a comma)", what);
        n = split(line, f, 8);
        if (n != h->n)
                return hwid_fail(HWID_E_INVALID, "%s: %d fields, the header has %d", what, n < 0 ? 9 : n, h->n);
        *out = (ek_fields) { 0 };
        for (size_t i = 0; i < ELEMENTSOF(slots); i++)
                if (h->col[i] >= 0 && f[h->col[i]][0])
                        *slots[i] = f[h->col[i]];
        return 0;
}

/* *v is allocated for a device per line, at most EK_IMPORT_MAX. */
static int csv_manifest(const hwidd_config *cfg, const char *path, char *text, const char *profile,
                        store_ek **ret_v, size_t *n) {
        size_t lines = 1;
        csv_header h = { 0 };
        unsigned lineno = 0;
        store_ek *v;
        char *line;
        int r = 0;

        for (const char *p = text; *p; p++)
                lines += *p == '\n';
        if (!(v = *ret_v = calloc(lines < EK_IMPORT_MAX ? lines : EK_IMPORT_MAX, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);

        for (char *rest = text; r >= 0 && (line = strsep(&rest, "\n"));) {
                char what[WHAT_MAX];
                ek_fields f;

                lineno++;
                snprintf(what, sizeof(what), "%s:%u", path, lineno);
                line = trim(line);
                if (!line[0] || line[0] == '#')
                        continue;
                if (h.n == 0)
                        r = csv_header_parse(line, what, &h);
                else if (*n == EK_IMPORT_MAX)
                        r = hwid_fail(HWID_E_TOO_LARGE, "%s lists more than %d devices", path, EK_IMPORT_MAX);
                else if ((r = csv_row(line, what, &h, &f)) >= 0 && (r = entry_make(cfg, &f, profile, what, &v[*n])) >= 0)
                        (*n)++;
        }
        if (r >= 0 && h.n == 0)
                r = hwid_fail(HWID_E_INVALID, "%s: no header line (e.g. cn,profile,ek_pub_sha256)", path);
        return r;
}

int ek_manifest_parse(const hwidd_config *cfg, const char *what, char *text, size_t len, const char *profile,
                      store_ek **ret, size_t *ret_n) {
        store_ek *v = NULL;
        size_t n = 0;
        int r;

        if (memchr(text, '\0', len))
                return hwid_fail(HWID_E_INVALID, "%s is not text", what);
        r = text[strspn(text, " \t\r\n")] == '{' ? json_manifest(cfg, what, text, profile, &v, &n)
                                                 : csv_manifest(cfg, what, text, profile, &v, &n);
        if (r >= 0 && n == 0)
                r = hwid_fail(HWID_E_INVALID, "%s lists no device", what);
        if (r < 0) {
                store_ek_list_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
