#include <string.h>

#include <json-c/json.h>

#include "cert-scope.h"
#include "error.h"
#include "json-read.h"

#define SCOPE_LIST_MAX 32

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put)

static json_object *strv_to_json(char **v) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && v && v[i]; i++)
                if (json_object_array_add(a, json_object_new_string(v[i])) < 0) {
                        json_object_put(a);
                        return NULL;
                }
        return a;
}

int cert_scope_encode(const policy_profile *prof, char **ret) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *profiles, *patterns;
        const char *s;

        if (!prof->scope_profiles && !prof->scope_name_patterns) {
                *ret = NULL;
                return 0;
        }
        o = json_object_new_object();
        profiles = strv_to_json(prof->scope_profiles);
        patterns = strv_to_json(prof->scope_name_patterns);
        if (!o || json_object_object_add(o, "profiles", profiles) < 0 ||
            json_object_object_add(o, "name_patterns", patterns) < 0 || !profiles || !patterns)
                return hwid_fail(HWID_E_NOMEM, NULL);
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (!s || !(*ret = strdup(s)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

void cert_scope_strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

static int json_to_strv(json_object *o, const char *key, char ***ret) {
        json_object *a;
        size_t n;
        char **v;

        if (!json_object_object_get_ex(o, key, &a) || !json_object_is_type(a, json_type_array))
                return hwid_fail(HWID_E_INVALID, "the recorded scope has no list '%s'", key);
        n = json_object_array_length(a);
        if (n > SCOPE_LIST_MAX)
                return hwid_fail(HWID_E_INVALID, "the recorded scope has more than %d %s", SCOPE_LIST_MAX, key);
        if (!(v = calloc(n + 1, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < n; i++) {
                json_object *item = json_object_array_get_idx(a, i);
                if (!json_object_is_type(item, json_type_string) || !(v[i] = strdup(json_object_get_string(item)))) {
                        cert_scope_strv_free(v);
                        return hwid_fail(HWID_E_INVALID, "the recorded scope's %s holds something not a string", key);
                }
        }
        *ret = v;
        return 0;
}

int cert_scope_decode(const char *json, char ***ret_profiles, char ***ret_name_patterns) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        char **profiles = NULL, **patterns = NULL;
        int r;

        if (!json) {
                *ret_profiles = *ret_name_patterns = NULL;
                return 0;
        }
        if (json_read(json, strlen(json), 4, 0, "the recorded scope", &o) < 0)
                return hwid_fail(HWID_E_INVALID, "the recorded scope is not a JSON object");
        if ((r = json_to_strv(o, "profiles", &profiles)) < 0)
                return r;
        if ((r = json_to_strv(o, "name_patterns", &patterns)) < 0) {
                cert_scope_strv_free(profiles);
                return r;
        }
        *ret_profiles = profiles;
        *ret_name_patterns = patterns;
        return 0;
}
