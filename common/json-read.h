/* json-read.h — the one way hwid reads JSON, server and client alike:
 * request bodies of the admin and attestation APIs, answers of the CA,
 * device.json, EK manifests, JWS headers, what the store keeps as JSON.
 *
 * Strict RFC 8259 (UTF-8, no NUL, one value and nothing after it), a
 * bounded depth, and no object that names a member twice: json-c, whose
 * tree every reader walks, keeps the last of two members with the same
 * name without a word, so {"profile":"a",...,"profile":"b"} would mean
 * "b" to hwid and "a" to a proxy or an auditor's script that keeps the
 * first.  json-c cannot tell; jansson (libjansson, JSON_REJECT_DUPLICATES)
 * can, and is asked about the same text (json-read-dup.c). */
#pragma once

#include <stddef.h>

#include <json-c/json.h>

enum {
        JSON_READ_NO_TRAILING_SPACE = 1u << 0, /* nothing, not even white space, after the object */
};

/* text (len bytes, NUL-terminated or not) as one JSON object, at most
 * max_depth (1-64) levels deep.  what names the text in errors ("the
 * request body", "the server's answer", a file name): "WHAT is not one
 * JSON object", or "WHAT is not valid JSON: an object names a member
 * twice (line L, column C)"; -HWID_E_INVALID, or -HWID_E_NOMEM. */
int json_read(const void *text, size_t len, unsigned max_depth, unsigned flags, const char *what,
              json_object **ret);
