/* json-read-dup.h — inside json_read() (json-read.h): jansson's half,
 * apart because jansson's and json-c's headers clash (both define
 * json_object). */
#pragma once

#include <stddef.h>

/* Whether no object in text (which json-c already read strictly, so its
 * depth is bounded) names a member twice: 0, or -HWID_E_INVALID naming
 * the place ("WHAT is not valid JSON: an object names a member twice
 * (line L, column C)"), -HWID_E_NOMEM. */
int json_read_no_duplicates(const char *text, size_t len, const char *what);
