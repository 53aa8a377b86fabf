/* hwid ek add | import | list | remove against a remote hwidd's admin API
 * (/v1/admin/ek), as an operator: the server checks the entry as `hwid ek`
 * does on the CA host (ek-entry.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base64.h"
#include "ek.h"
#include "error.h"
#include "fsutil.h"
#include "remote.h"
#include "tpm-attest.h"

/* {"cn", "profile", "ek_cert" (the file's bytes, base64) | "ek_pub_sha256"} */
static int add_body(const char *cn, const char *profile, const char *cert_file, const char *hash,
                    json_object **ret) {
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        json_object *o;
        size_t len;
        int r;

        if (cert_file && ((r = read_file_capped(cert_file, TPM_EK_CERT_MAX * 2, &data, &len)) < 0 ||
                          (r = base64_encode((const uint8_t *) data, len, false, &b64)) < 0))
                return r;
        if (!(o = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(o, "cn", cn);
        json_set_str(o, "profile", profile);
        if (b64)
                json_set_str(o, "ek_cert", b64);
        else
                json_set_str(o, "ek_pub_sha256", hash);
        *ret = o;
        return 0;
}

int ek_remote_add(const remote_opts *ro, const char *cn, const char *profile, const char *cert_file,
                  const char *hash, store_ek *ret) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        int r;

        if ((r = add_body(cn, profile, cert_file, hash, &body)) < 0 || (r = remote_open(ro, &rm)) < 0 ||
            (r = remote_call(rm, "POST", "/v1/admin/ek", body, &answer)) < 0)
                return r;
        return admin_json_to_ek(answer, ret);
}

/* The manifest goes whole, base64, in one request: hwidd's limits.max_body
 * bounds it (a larger manifest is refused with 413 and adds nothing). */
#define REMOTE_MANIFEST_MAX (16u << 20)

int ek_remote_import(const remote_opts *ro, const char *path, const char *profile, size_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        json_object *added;
        size_t len;
        int r;

        if ((r = read_file_capped(path, REMOTE_MANIFEST_MAX, &data, &len)) < 0 ||
            (r = base64_encode((const uint8_t *) data, len, false, &b64)) < 0)
                return r;
        if (!(body = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(body, "manifest", b64);
        json_set_str(body, "profile", profile);
        if ((r = remote_open(ro, &rm)) < 0 || (r = remote_call(rm, "POST", "/v1/admin/ek/import", body, &answer)) < 0)
                return r;
        if (!json_object_object_get_ex(answer, "added", &added) || !json_object_is_type(added, json_type_int) ||
            json_object_get_int64(added) < 0)
                return hwid_fail(HWID_E_INVALID, "the server's answer has no \"added\" count");
        *ret_n = (size_t) json_object_get_int64(added);
        return 0;
}

int ek_remote_list(const remote_opts *ro, store_ek **ret, size_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *list;
        store_ek *v;
        size_t n = 0;
        int r;

        if ((r = remote_open(ro, &rm)) < 0 || (r = remote_call(rm, "GET", "/v1/admin/ek", NULL, &answer)) < 0 ||
            (r = remote_list(answer, "entries", &list)) < 0)
                return r;
        if (!(v = calloc(json_object_array_length(list) + 1, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < json_object_array_length(list); n += r >= 0)
                r = admin_json_to_ek(json_object_array_get_idx(list, n), &v[n]);
        if (r < 0) {
                store_ek_list_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int ek_remote_remove(const remote_opts *ro, const char *key) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(key), *path = NULL;
        int r;

        if (!esc || asprintf(&path, "/v1/admin/ek/%s/remove", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = remote_open(ro, &rm)) < 0)
                return r;
        return remote_call(rm, "POST", path, NULL, &answer);
}
