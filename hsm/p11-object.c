/* PKCS#11 objects: finding a key pair by URI and reading its public half,
 * for open and create (p11.c). */
#include <stdio.h>
#include <string.h>

#include <openssl/objects.h>
#include <openssl/x509.h>

#include "backend.h"
#include "error.h"
#include "ossl-util.h"
#include "p11-internal.h"

#define ATTR_MAX 8192 /* bytes; public-key attributes are far smaller */

DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_OBJECT *, ASN1_OBJECT_free)

/* "labelled 'x'", "with id 0a1b", or both: how messages name the key. */
char *p11_key_desc(const key_uri *uri) {
        char hex[2 * 32 + 4] = "";
        char *s;
        int n;

        for (size_t i = 0; uri->id && i < uri->id_len && i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", uri->id[i]);
        if (uri->id && uri->id_len > 32)
                strcat(hex, "...");
        if (uri->object && uri->id)
                n = asprintf(&s, "labelled '%s' with id %s", uri->object, hex);
        else if (uri->object)
                n = asprintf(&s, "labelled '%s'", uri->object);
        else
                n = asprintf(&s, "with id %s", hex);
        return n < 0 ? NULL : s;
}

/* ---- finding objects ---- */

CK_ULONG p11_uri_template(const key_uri *uri, CK_OBJECT_CLASS *cls, CK_ATTRIBUTE tmpl[3]) {
        CK_ULONG n = 0;

        tmpl[n++] = (CK_ATTRIBUTE) { CKA_CLASS, cls, sizeof(*cls) };
        if (uri->object)
                tmpl[n++] = (CK_ATTRIBUTE) { CKA_LABEL, uri->object, strlen(uri->object) };
        if (uri->id)
                tmpl[n++] = (CK_ATTRIBUTE) { CKA_ID, uri->id, uri->id_len };
        return n;
}

int p11_find_objects(p11_token *t, CK_SESSION_HANDLE s, CK_ATTRIBUTE *tmpl, CK_ULONG n,
                     CK_OBJECT_HANDLE found[P11_MATCH_MAX], CK_ULONG *ret_count) {
        CK_ULONG count = 0;
        CK_RV rv, rv_final;

        rv = t->mod->C_FindObjectsInit(s, tmpl, n);
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "C_FindObjectsInit");
        rv = t->mod->C_FindObjects(s, found, P11_MATCH_MAX, &count);
        rv_final = t->mod->C_FindObjectsFinal(s);
        if (rv == CKR_OK)
                rv = rv_final;
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "C_FindObjects");
        *ret_count = count;
        return 0;
}

int p11_find_private(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri, const char *desc,
                     CK_OBJECT_HANDLE *ret) {
        CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
        CK_OBJECT_HANDLE found[P11_MATCH_MAX];
        CK_ATTRIBUTE tmpl[3];
        CK_ULONG n;
        int r;

        r = p11_find_objects(t, s, tmpl, p11_uri_template(uri, &cls, tmpl), found, &n);
        if (r < 0)
                return r;
        if (n == 0)
                return hwid_fail(HWID_E_KEY_NOT_FOUND, "no key %s on token '%s'", desc, t->label);
        if (n > 1)
                return hwid_fail(HWID_E_INVALID, "the key %s on token '%s' matches %s%lu keys; "
                                                 "add id= to the URI", desc, t->label,
                                 n == P11_MATCH_MAX ? "at least " : "", (unsigned long) n);
        *ret = found[0];
        return 0;
}

/* Reads a variable-length attribute; a zero length gives NULL. */
int p11_attr_get(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE h, CK_ATTRIBUTE_TYPE type,
                 const char *what, uint8_t **ret, size_t *ret_len) {
        CK_ATTRIBUTE a = { type, NULL, 0 };
        _cleanup_free_ uint8_t *buf = NULL;
        CK_RV rv;

        rv = t->mod->C_GetAttributeValue(s, h, &a, 1);
        if (rv == CKR_OK && a.ulValueLen == CK_UNAVAILABLE_INFORMATION)
                rv = CKR_ATTRIBUTE_TYPE_INVALID;
        if (rv == CKR_OK && a.ulValueLen > ATTR_MAX)
                return hwid_fail(HWID_E_HSM, "%s: token '%s' returned %lu bytes", what, t->label,
                                 (unsigned long) a.ulValueLen);
        if (rv == CKR_OK && a.ulValueLen > 0) {
                a.pValue = buf = malloc(a.ulValueLen);
                if (!buf)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                rv = t->mod->C_GetAttributeValue(s, h, &a, 1);
        }
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, what);
        *ret = TAKE_PTR(buf);
        *ret_len = a.ulValueLen;
        return 0;
}

/* The public object of a key pair shares its CKA_ID (PKCS#11 convention)
 * and usually its label; the first search that finds exactly one wins. */
int p11_find_public(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, const key_uri *uri,
                    const char *desc, CK_OBJECT_HANDLE *ret) {
        _cleanup_free_ uint8_t *id = NULL;
        CK_OBJECT_CLASS cls = CKO_PUBLIC_KEY;
        CK_OBJECT_HANDLE found[P11_MATCH_MAX];
        size_t id_len = 0;
        CK_ULONG n;
        int r;

        r = p11_attr_get(t, s, priv, CKA_ID, "reading CKA_ID", &id, &id_len);
        if (r < 0)
                return r;
        for (int pass = 0; pass < 3; pass++) {
                bool with_id = pass < 2 && id_len > 0, with_label = pass != 1 && uri->object;
                CK_ATTRIBUTE tmpl[3] = { { CKA_CLASS, &cls, sizeof(cls) } };
                CK_ULONG nt = 1;

                if (!with_id && !with_label)
                        continue;
                if (with_id)
                        tmpl[nt++] = (CK_ATTRIBUTE) { CKA_ID, id, id_len };
                if (with_label)
                        tmpl[nt++] = (CK_ATTRIBUTE) { CKA_LABEL, uri->object, strlen(uri->object) };
                r = p11_find_objects(t, s, tmpl, nt, found, &n);
                if (r < 0)
                        return r;
                if (n == 1) {
                        *ret = found[0];
                        return 0;
                }
        }
        return hwid_fail(HWID_E_KEY_NOT_FOUND, "the key %s on token '%s' has no matching public-key "
                                               "object (same CKA_ID)", desc, t->label);
}

/* ---- public key ---- */

static int ec_params_nid(p11_token *t, const uint8_t *der, size_t len, int *ret) {
        const unsigned char *p = der;
        _cleanup_(ASN1_OBJECT_freep) ASN1_OBJECT *o = der ? d2i_ASN1_OBJECT(NULL, &p, (long) len) : NULL;
        int nid = o && p == der + len ? OBJ_obj2nid(o) : NID_undef;

        if (nid == NID_undef)
                return hwid_fail(HWID_E_KEY_TYPE, "EC key on token '%s' does not name a known curve "
                                                  "(CKA_EC_PARAMS is not a curve OID)", t->label);
        *ret = nid;
        return 0;
}

/* CKA_EC_POINT is a DER OCTET STRING holding the point, but some tokens
 * hand out the bare point.  A bare uncompressed point also starts with
 * 0x04, so the reading that gives a point on the curve wins. */
static int ec_pub_from_point(int nid, const uint8_t *q, size_t len, EVP_PKEY **ret) {
        const unsigned char *p = q;
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *os =
                q ? d2i_ASN1_OCTET_STRING(NULL, &p, (long) len) : NULL;

        if (os && p == q + len &&
            hsm_pub_from_ec_point(nid, ASN1_STRING_get0_data(os), (size_t) ASN1_STRING_length(os), ret) == 0)
                return 0;
        return hsm_pub_from_ec_point(nid, q, len, ret);
}

static int read_public(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE pub, CK_KEY_TYPE kt,
                       EVP_PKEY **ret) {
        _cleanup_free_ uint8_t *a = NULL, *b = NULL;
        size_t a_len = 0, b_len = 0;
        int r, nid = NID_undef;

        if (kt == CKK_EC) {
                if ((r = p11_attr_get(t, s, pub, CKA_EC_PARAMS, "reading CKA_EC_PARAMS", &a, &a_len)) < 0 ||
                    (r = ec_params_nid(t, a, a_len, &nid)) < 0 ||
                    (r = p11_attr_get(t, s, pub, CKA_EC_POINT, "reading CKA_EC_POINT", &b, &b_len)) < 0)
                        return r;
                return ec_pub_from_point(nid, b, b_len, ret);
        }
        if (kt == CKK_RSA) {
                if ((r = p11_attr_get(t, s, pub, CKA_MODULUS, "reading CKA_MODULUS", &a, &a_len)) < 0 ||
                    (r = p11_attr_get(t, s, pub, CKA_PUBLIC_EXPONENT, "reading CKA_PUBLIC_EXPONENT",
                                      &b, &b_len)) < 0)
                        return r;
                if (!a || !b)
                        return hwid_fail(HWID_E_HSM, "token '%s' returned an empty RSA public key", t->label);
                return hsm_pub_from_rsa(a, a_len, b, b_len, ret);
        }
        return hwid_fail(HWID_E_KEY_TYPE, "key on token '%s' is neither EC nor RSA (CKK 0x%lx)",
                         t->label, (unsigned long) kt);
}

/* Reads the key type and public key of a pair; ret_type from the key. */
int p11_load_public(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, CK_OBJECT_HANDLE pub,
                    CK_KEY_TYPE *ret_kt, EVP_PKEY **ret_pub, hwid_key_type *ret_type) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        CK_KEY_TYPE kt;
        CK_ATTRIBUTE a = { CKA_KEY_TYPE, &kt, sizeof(kt) };
        hwid_key_type type;
        CK_RV rv;
        int r;

        rv = t->mod->C_GetAttributeValue(s, priv, &a, 1);
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "reading CKA_KEY_TYPE");
        r = read_public(t, s, pub, kt, &pkey);
        if (r < 0)
                return r;
        r = hwid_key_type_of_pkey(pkey, &type);
        if (r < 0)
                return r;
        *ret_kt = kt;
        *ret_type = type;
        *ret_pub = TAKE_PTR(pkey);
        return 0;
}
