/* Reading the admin API's answers (admin-answer.h). */
#include "admin-answer.h"
#include "error.h"

int answer_list(json_object *answer, const char *key, json_object **ret) {
        json_object *a;

        if (!json_object_object_get_ex(answer, key, &a) || !json_object_is_type(a, json_type_array))
                return hwid_fail(HWID_E_INVALID, "the server's answer has no list \"%s\"", key);
        *ret = a;
        return 0;
}

int answer_str(json_object *o, const char *key, bool nullable, const char **ret) {
        json_object *v = NULL;
        bool present = json_object_object_get_ex(o, key, &v);

        if ((!v && !nullable) || (v && !json_object_is_type(v, json_type_string)) || (!present && !nullable))
                return hwid_fail(HWID_E_INVALID, "the server's answer has no valid \"%s\"", key);
        *ret = v ? json_object_get_string(v) : NULL;
        return 0;
}

int answer_int(json_object *o, const char *key, int64_t *ret) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return hwid_fail(HWID_E_INVALID, "the server's answer has no valid \"%s\"", key);
        *ret = json_object_get_int64(v);
        return 0;
}

const char *answer_str_or(json_object *o, const char *key, const char *def) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return def;
        return json_object_get_string(v);
}
