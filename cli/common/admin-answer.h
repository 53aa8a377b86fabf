/* Reading the admin API's answers (admin-json.h names their members),
 * whichever connection brought them (admin-conn.h).  A member missing or
 * of another type is -HWID_E_INVALID, "the server's answer has no valid
 * \"KEY\"". */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

/* The array under key. */
int answer_list(json_object *answer, const char *key, json_object **ret);
/* A string (NULL for null or absent, if nullable). */
int answer_str(json_object *o, const char *key, bool nullable, const char **ret);
int answer_int(json_object *o, const char *key, int64_t *ret);
/* A string, or def when absent or null. */
const char *answer_str_or(json_object *o, const char *key, const char *def);
