/* Writing JSON (json-write.h). */
#include "json-write.h"
#include "secret.h"

void json_set_str(json_object *o, const char *key, const char *value) {
        json_object_object_add(o, key, value ? json_object_new_string(value) : NULL);
}

void json_wipe_string(json_object *s) {
        const char *p = s && json_object_is_type(s, json_type_string) ? json_object_get_string(s) : NULL;

        /* json-c hands out its own buffer: wipe it where it is. */
        if (p)
                secret_wipe((char *) p, (size_t) json_object_get_string_len(s));
}
