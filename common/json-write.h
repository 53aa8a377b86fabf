/* Writing JSON with json-c, server and client alike (the admin API's
 * answers, hwid's requests to it): strings that may be absent, and the
 * strings that held a secret. */
#pragma once

#include <json-c/json.h>

/* Puts a string into the JSON object; NULL as null. */
void json_set_str(json_object *o, const char *key, const char *value);
/* Overwrites a JSON string's bytes in place (a secret) before it is freed. */
void json_wipe_string(json_object *s);
