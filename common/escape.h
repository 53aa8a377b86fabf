/* Text from outside (a CSR's CN, a reason quoting it) made safe to store
 * and show one record per line, one field per column: every character
 * that could end a line, move the cursor or reorder what a terminal shows
 * is written as a visible escape.
 *
 *   C0 controls (tab, CR, LF, ESC, ...), DEL      \xNN
 *   bytes that are not UTF-8 (each byte)         \xNN
 *   C1 controls U+0080..U+009F                   \u{0085}
 *   bidi controls U+202A..U+202E, U+2066..U+2069,
 *   marks and zero-width U+200B..U+200F, U+FEFF,
 *   line and paragraph separators U+2028, U+2029 \u{202E}
 *
 * Everything else, backslashes included, is kept as it is: the escaping
 * is for the eye, not reversible, and escaping twice changes nothing
 * (text_escape(text_escape(s)) == text_escape(s)), so records escaped when
 * written can be escaped again when shown. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A new NUL-terminated string for the len bytes at s (which may hold
 * NULs); NULL s gives NULL.  0, or -HWID_E_NOMEM. */
int text_escape(const char *s, size_t len, char **ret);

/* The escaped form of the string s into out (n > 0 bytes), cut at a whole
 * character or escape when it does not fit; always NUL-terminated.
 * Returns true if nothing was cut. */
bool text_escape_into(const char *s, char *out, size_t n);

/* Whether s (len bytes) holds anything text_escape() would change. */
bool text_needs_escape(const char *s, size_t len);

/* Length of the UTF-8 sequence at v (1..4, len >= 1 bytes there) with its
 * code point in *ret, or 0 if it is malformed (overlong, a surrogate,
 * beyond U+10FFFF, truncated).  The one UTF-8 reader of hwid: escaping
 * here and the name rules of policy/ use it. */
size_t utf8_decode(const unsigned char *v, size_t len, uint32_t *ret);

/* Whether cp is invisible and changes how text reads or where it breaks:
 * marks and zero-width characters U+200B..U+200F, line and paragraph
 * separators U+2028, U+2029, bidi controls U+202A..U+202E and
 * U+2066..U+2069, the BOM U+FEFF.  What text_escape() writes as an escape
 * (with the C1 controls) and what a name may not hold. */
bool unicode_invisible(uint32_t cp);
