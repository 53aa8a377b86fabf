#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "escape.h"

size_t utf8_decode(const unsigned char *v, size_t len, uint32_t *ret) {
        uint32_t cp;
        size_t n;

        if (v[0] < 0x80) {
                *ret = v[0];
                return 1;
        }
        if (v[0] >= 0xc2 && v[0] <= 0xdf)
                n = 2, cp = v[0] & 0x1f;
        else if (v[0] >= 0xe0 && v[0] <= 0xef)
                n = 3, cp = v[0] & 0x0f;
        else if (v[0] >= 0xf0 && v[0] <= 0xf4)
                n = 4, cp = v[0] & 0x07;
        else
                return 0;
        if (len < n)
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((v[i] & 0xc0) != 0x80)
                        return 0;
                cp = (cp << 6) | (v[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
            (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret = cp;
        return n;
}

bool unicode_invisible(uint32_t cp) {
        return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069) ||
               cp == 0xfeff;
}

/* Longest escape: "\u{10FFFF}" is 10 bytes; "\xNN" 4. */
#define ESC_MAX 11

static bool unsafe_code_point(uint32_t cp) {
        return (cp >= 0x80 && cp <= 0x9f) || unicode_invisible(cp);
}

/* The next piece of s at *i: copied as it is or escaped into piece (at
 * most ESC_MAX bytes, not terminated); returns its length and advances *i. */
static size_t next_piece(const unsigned char *s, size_t len, size_t *i, char piece[ESC_MAX]) {
        uint32_t cp = 0;
        size_t n = utf8_decode(s + *i, len - *i, &cp);

        if (n == 0 || cp < 0x20 || cp == 0x7f) {
                snprintf(piece, ESC_MAX, "\\x%02x", s[*i]);
                (*i)++;
                return 4;
        }
        if (unsafe_code_point(cp)) {
                *i += n;
                return (size_t) snprintf(piece, ESC_MAX, "\\u{%04X}", (unsigned) cp);
        }
        memcpy(piece, s + *i, n);
        *i += n;
        return n;
}

/* Writes the escape of s into out (capacity cap, counting the NUL) and
 * returns how many bytes the whole escape needs (without the NUL); stops
 * copying at the first piece that does not fit. */
static size_t escape_to(const char *s, size_t len, char *out, size_t cap, bool *ret_cut) {
        const unsigned char *u = (const unsigned char *) s;
        size_t need = 0, used = 0;
        bool cut = false;
        char piece[ESC_MAX];

        for (size_t i = 0; i < len;) {
                size_t n = next_piece(u, len, &i, piece);

                if (!cut && out && used + n < cap) {
                        memcpy(out + used, piece, n);
                        used += n;
                } else
                        cut = true;
                need += n;
        }
        if (out && cap)
                out[used] = '\0';
        if (ret_cut)
                *ret_cut = cut;
        return need;
}

int text_escape(const char *s, size_t len, char **ret) {
        size_t need;
        char *out;

        if (!s) {
                *ret = NULL;
                return 0;
        }
        need = escape_to(s, len, NULL, 0, NULL);
        out = malloc(need + 1);
        if (!out)
                return hwid_fail(HWID_E_NOMEM, NULL);
        escape_to(s, len, out, need + 1, NULL);
        *ret = out;
        return 0;
}

bool text_escape_into(const char *s, char *out, size_t n) {
        bool cut = false;

        if (!out || n == 0)
                return false;
        escape_to(s ? s : "", s ? strlen(s) : 0, out, n, &cut);
        return !cut;
}

bool text_needs_escape(const char *s, size_t len) {
        const unsigned char *u = (const unsigned char *) s;
        char piece[ESC_MAX];

        for (size_t i = 0; s && i < len;) {
                size_t at = i, n = next_piece(u, len, &i, piece);

                if (n != i - at || memcmp(piece, s + at, n) != 0)
                        return true;
        }
        return false;
}
