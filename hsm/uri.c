/* Key URI parsing.  PKCS#11 URIs are RFC 7512 and parsed by p11-kit; hwid
 * adds validation so that a typo fails here, with a message naming it,
 * instead of matching the wrong object later. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <p11-kit/p11-kit.h>

#include "error.h"
#include "secret.h"
#include "uri.h"

#define URI_MAX 4096

void key_uri_free(key_uri *u) {
        if (!u)
                return;
        if (u->p11)
                p11_kit_uri_free(u->p11); /* its pin-value is wiped and gone: see take_pin_value() */
        free(u->token);
        free(u->object);
        free(u->id);
        free(u->module_path);
        free(u->module_name);
        free(u->pin_source);
        secret_locked_free(u->pin_value);
        free(u->path);
        free(u);
}

/* Copies a CK_UTF8CHAR label attribute into a C string. */
static int attr_string(P11KitUri *p, CK_ATTRIBUTE_TYPE type, char **ret) {
        CK_ATTRIBUTE *a = p11_kit_uri_get_attribute(p, type);
        char *s;

        if (!a || a->ulValueLen == (CK_ULONG) -1)
                return 0;
        s = strndup(a->pValue ? a->pValue : "", a->ulValueLen);
        if (!s)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (strlen(s) != a->ulValueLen) {
                free(s);
                return hwid_fail(HWID_E_URI, "object label contains a NUL byte");
        }
        *ret = s;
        return 0;
}

static int dup_opt(const char *s, char **ret) {
        if (!s)
                return 0;
        *ret = strdup(s);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* pin-value= moves into locked memory (common/secret.h); p11-kit's copy
 * is wiped and dropped at once (p11-kit frees it without wiping). */
static int take_pin_value(key_uri *u) {
        const char *pin = p11_kit_uri_get_pin_value(u->p11);
        int r;

        if (!pin)
                return 0;
        r = secret_locked_dup(pin, &u->pin_value);
        secret_wipe((char *) pin, strlen(pin));
        p11_kit_uri_set_pin_value(u->p11, NULL);
        return r;
}

static int token_label(P11KitUri *p, char **ret) {
        CK_TOKEN_INFO *ti = p11_kit_uri_get_token_info(p);
        const unsigned char *l = ti->label;
        size_t n = sizeof(ti->label);

        /* p11-kit stores the label blank-padded, and leaves it all NUL when
         * the URI has no token=; either means "any token", which hwid
         * refuses: the URI must say which one. */
        while (n > 0 && (l[n - 1] == ' ' || l[n - 1] == '\0'))
                n--;
        if (n == 0)
                return 0;
        *ret = strndup((const char *) l, n);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* The name of segment seg (up to '=' or its end). */
static size_t attr_name_len(const char *seg, size_t seg_len) {
        const char *eq = memchr(seg, '=', seg_len);

        return eq ? (size_t) (eq - seg) : seg_len;
}

/* The attributes p11-kit recognises (RFC 7512): a path attribute names
 * what to match, a query attribute how to reach it. */
#define PATH_ATTRS "token, object, id, type, serial, manufacturer, model, slot-id, slot-description, " \
                   "slot-manufacturer, library-description, library-manufacturer, library-version"
#define QUERY_ATTRS "pin-source, pin-value, module-name, module-path"

/* Whether name (n bytes) is one of the comma-separated names in list. */
static bool attr_known(const char *list, const char *name, size_t n) {
        for (const char *p = list; *p; p += strspn(p, ", ")) {
                size_t len = strcspn(p, ",");
                if (len == n && memcmp(p, name, n) == 0)
                        return true;
                p += len;
        }
        return false;
}

/* Whether an attribute's value (len bytes, percent-encoded) decodes to a
 * NUL byte somewhere.  Only id is binary (RFC 7512: any bytes); every
 * other value is text that p11-kit hands on as a C string, cut short at
 * the NUL: pin-value=1234%00zz would log in with 1234, pin-source=
 * file:/x%00/etc/passwd read /x, a token= or module-path= name another. */
static bool value_has_nul(const char *name, size_t n, const char *value, size_t len) {
        if (n == 2 && memcmp(name, "id", 2) == 0)
                return false;
        for (size_t i = 0; i + 2 < len; i++)
                if (value[i] == '%' && value[i + 1] == '0' && value[i + 2] == '0')
                        return true;
        return false;
}

/* One part of a PKCS#11 URI (the path, separated by ';', or the query,
 * by '&'): every attribute is one hwid knows, none occurs twice, and none
 * but id holds a NUL byte.  p11-kit itself ignores an unknown query
 * attribute (a typo such as pin-valu= would drop the PIN without a word)
 * and keeps the last of two equal attributes (two pin-source, two
 * token): both are refused. */
static int check_part(const char *part, size_t len, char sep, const char *known, const char *kind) {
        const char *end = part + len;

        for (const char *p = part; p < end;) {
                const char *q = memchr(p, sep, (size_t) (end - p));
                size_t seg_len = q ? (size_t) (q - p) : (size_t) (end - p), n = attr_name_len(p, seg_len);

                if (n > 0 && !attr_known(known, p, n))
                        return hwid_fail(HWID_E_URI, "PKCS#11 URI has a %s attribute '%.*s' hwid does not know "
                                         "(known: %s)", kind, (int) n, p, known);
                if (n > 0 && value_has_nul(p, n, p + n, seg_len - n))
                        return hwid_fail(HWID_E_URI, "PKCS#11 URI attribute '%.*s' holds a NUL byte (%%00): its "
                                         "value would be cut short there", (int) n, p);
                for (const char *o = part; n > 0 && o < p;) {
                        const char *oq = memchr(o, sep, (size_t) (p - o));
                        size_t o_len = oq ? (size_t) (oq - o) : (size_t) (p - o);
                        if (attr_name_len(o, o_len) == n && memcmp(o, p, n) == 0)
                                return hwid_fail(HWID_E_URI, "PKCS#11 URI names '%.*s' more than once", (int) n, p);
                        o += o_len + 1;
                }
                p += seg_len + 1;
        }
        return 0;
}

static int check_pkcs11_attributes(const char *s) {
        const char *body = s + strlen("pkcs11:");
        size_t path_len = strcspn(body, "?");
        int r = check_part(body, path_len, ';', PATH_ATTRS, "path");

        if (r < 0 || !body[path_len])
                return r;
        return check_part(body + path_len + 1, strlen(body + path_len + 1), '&', QUERY_ATTRS, "query");
}

static int parse_pkcs11(const char *s, key_uri *u) {
        CK_ATTRIBUTE *id;
        int r;

        u->scheme = KEY_URI_PKCS11;
        if ((r = check_pkcs11_attributes(s)) < 0)
                return r;
        u->p11 = p11_kit_uri_new();
        if (!u->p11)
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = p11_kit_uri_parse(s, P11_KIT_URI_FOR_ANY, u->p11);
        if (r != P11_KIT_URI_OK)
                return hwid_fail(HWID_E_URI, "malformed PKCS#11 URI: %s", p11_kit_uri_message(r));
        /* Only if the lists above and p11-kit's part ways (a newer p11-kit). */
        if (p11_kit_uri_any_unrecognized(u->p11))
                return hwid_fail(HWID_E_URI, "PKCS#11 URI has an attribute p11-kit does not know");
        if ((r = token_label(u->p11, &u->token)) < 0 ||
            (r = attr_string(u->p11, CKA_LABEL, &u->object)) < 0 ||
            (r = dup_opt(p11_kit_uri_get_module_path(u->p11), &u->module_path)) < 0 ||
            (r = dup_opt(p11_kit_uri_get_module_name(u->p11), &u->module_name)) < 0 ||
            (r = dup_opt(p11_kit_uri_get_pin_source(u->p11), &u->pin_source)) < 0 ||
            (r = take_pin_value(u)) < 0)
                return r;
        id = p11_kit_uri_get_attribute(u->p11, CKA_ID);
        if (id && id->ulValueLen > 0 && id->ulValueLen != (CK_ULONG) -1) {
                u->id = malloc(id->ulValueLen);
                if (!u->id)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                memcpy(u->id, id->pValue, id->ulValueLen);
                u->id_len = id->ulValueLen;
        }
        if (!u->token)
                return hwid_fail(HWID_E_URI, "PKCS#11 URI names no token (add token=LABEL)");
        if (!u->object && !u->id)
                return hwid_fail(HWID_E_URI, "PKCS#11 URI names no key (add object=LABEL or id=%%XX)");
        if (u->pin_source && u->pin_value)
                return hwid_fail(HWID_E_URI, "PKCS#11 URI has both pin-source and pin-value");
        return 0;
}

static int parse_tpm_handle(const char *v, key_uri *u) {
        char *end;
        unsigned long h;

        if (strncmp(v, "0x", 2) != 0 && strncmp(v, "0X", 2) != 0)
                return hwid_fail(HWID_E_URI, "TPM handle '%s' must be hexadecimal (0x81......)", v);
        errno = 0;
        h = strtoul(v + 2, &end, 16);
        if (errno || end == v + 2 || *end || h < TPM_PERSISTENT_FIRST || h > TPM_PERSISTENT_LAST)
                return hwid_fail(HWID_E_URI, "TPM handle '%s' is not a persistent handle "
                                             "(0x81000000-0x817fffff)", v);
        if (h >= TPM_EK_FIRST && h <= TPM_EK_LAST)
                return hwid_fail(HWID_E_URI, "TPM handle '%s' is in the range reserved for "
                                             "endorsement keys (0x81010000-0x8101ffff)", v);
        u->handle = (uint32_t) h;
        return 0;
}

/* tpm2: URIs have no query attributes: a '?' would otherwise become part
 * of a handle (refused as a bad number) or of a path (a key file nobody
 * meant), and the attribute after it would be ignored. */
static int refuse_tpm2_query(const char *body) {
        const char *q = strchr(body, '?');
        size_t n;

        if (!q)
                return 0;
        q++;
        n = attr_name_len(q, strcspn(q, "&"));
        return hwid_fail(HWID_E_URI, "TPM URI has a query attribute '%.*s' hwid does not know "
                         "(tpm2: URIs take none)", (int) n, q);
}

static int parse_tpm2(const char *s, key_uri *u) {
        const char *body = s + strlen("tpm2:");
        int r;

        u->scheme = KEY_URI_TPM2;
        if ((r = refuse_tpm2_query(body)) < 0)
                return r;
        if (strncmp(body, "handle=", 7) == 0)
                return parse_tpm_handle(body + 7, u);
        if (strncmp(body, "file=", 5) == 0) {
                if (!body[5])
                        return hwid_fail(HWID_E_URI, "tpm2:file= needs a path");
                u->path = strdup(body + 5);
                return u->path ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        return hwid_fail(HWID_E_URI, "TPM URI must be tpm2:handle=0x81xxxxxx or tpm2:file=PATH");
}

int key_uri_parse(const char *s, key_uri **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        int r;

        if (!s || !*s)
                return hwid_fail(HWID_E_URI, "empty key URI");
        if (strnlen(s, URI_MAX + 1) > URI_MAX)
                return hwid_fail(HWID_E_URI, "key URI longer than %d bytes", URI_MAX);
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return hwid_fail(HWID_E_URI, "key URI contains a control character");
        u = calloc(1, sizeof(*u));
        if (!u)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (strncmp(s, "pkcs11:", 7) == 0)
                r = parse_pkcs11(s, u);
        else if (strncmp(s, "tpm2:", 5) == 0)
                r = parse_tpm2(s, u);
        else
                r = hwid_fail(HWID_E_URI, "key URI must start with pkcs11: or tpm2:");
        if (r < 0)
                return r;
        *ret = TAKE_PTR(u);
        return 0;
}
