/* common/escape.c: what may fake a row or a column is made visible. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cleanup.h"
#include "escape.h"

static void check_escape(const char *in, size_t len, const char *want) {
        _cleanup_free_ char *out = NULL, *again = NULL;

        CHECK(text_escape(in, len, &out) == 0);
        CHECK_STREQ(out, want);
        /* Escaping what is escaped changes nothing. */
        CHECK(out && text_escape(out, strlen(out), &again) == 0);
        CHECK_STREQ(again, want);
        CHECK(text_needs_escape(in, len) == (strlen(want) != len || memcmp(want, in, len) != 0));
}

#define ESC(lit, want) check_escape(lit, sizeof(lit) - 1, want)

static void escapes(void) {
        ESC("edge-1", "edge-1");
        ESC("caf\xc3\xa9 \xe6\x97\xa5 back\\slash", "caf\xc3\xa9 \xe6\x97\xa5 back\\slash");
        /* A forged row: CR LF and a fake date. */
        ESC("x\r\n2030-01-01  admin:root  revoke", "x\\x0d\\x0a2030-01-01  admin:root  revoke");
        ESC("a\tb\x1b[2Jc\x7f", "a\\x09b\\x1b[2Jc\\x7f");
        ESC("nul\0in", "nul\\x00in");
        /* C1: NEL, CSI. */
        ESC("a\xc2\x85" "b\xc2\x9b", "a\\u{0085}b\\u{009B}");
        ESC("\xc2\xa0", "\xc2\xa0"); /* U+00A0 is printable */
        /* Bidi: RLO, LRE..PDF range ends, isolates, marks, separators, BOM. */
        ESC("evil\xe2\x80\xaetxt.exe", "evil\\u{202E}txt.exe");
        ESC("\xe2\x80\xaa\xe2\x81\xa6\xe2\x81\xa9", "\\u{202A}\\u{2066}\\u{2069}");
        ESC("\xe2\x80\x8e\xe2\x80\x8f\xe2\x80\x8b", "\\u{200E}\\u{200F}\\u{200B}");
        ESC("l\xe2\x80\xa8p\xe2\x80\xa9", "l\\u{2028}p\\u{2029}");
        ESC("\xef\xbb\xbfx", "\\u{FEFF}x");
        ESC("\xe2\x80\xaf", "\xe2\x80\xaf"); /* U+202F (narrow no-break space) is kept */
        /* Not UTF-8: each byte. */
        ESC("\xff\xfe", "\\xff\\xfe");
        ESC("\xe2\x80", "\\xe2\\x80");          /* truncated */
        ESC("\xc0\xaf", "\\xc0\\xaf");          /* overlong '/' */
        ESC("\xed\xa0\x80", "\\xed\\xa0\\x80"); /* surrogate */
        ESC("\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80"); /* beyond U+10FFFF */
        ESC("", "");
}

static void null_and_into(void) {
        char *out = (char *) "untouched";
        char small[12];

        CHECK(text_escape(NULL, 0, &out) == 0 && out == NULL);
        CHECK(text_escape_into("ab\ncd", small, sizeof(small)));
        CHECK_STREQ(small, "ab\\x0acd");
        /* Cut at a whole escape, never inside one. */
        CHECK(!text_escape_into("abcdefg\n", small, 10));
        CHECK_STREQ(small, "abcdefg");
        CHECK(!text_escape_into("abc\xe2\x80\xae", small, 10));
        CHECK_STREQ(small, "abc");
        CHECK(!text_escape_into("\xe6\x97\xa5\xe6\x97\xa5\xe6\x97\xa5", small, 8));
        CHECK_STREQ(small, "\xe6\x97\xa5\xe6\x97\xa5");
        CHECK(text_escape_into(NULL, small, sizeof(small)) && small[0] == '\0');
}

/* Whatever the input, the output is UTF-8 with nothing left to escape. */
static void random_inputs(void) {
        unsigned seed = 12345;

        for (int round = 0; round < 20000; round++) {
                char in[24];
                _cleanup_free_ char *out = NULL;
                size_t len = (size_t) (rand_r(&seed) % sizeof(in));

                for (size_t i = 0; i < len; i++) {
                        /* Bias towards the interesting lead bytes. */
                        static const unsigned char pick[] = { 0x0a, 0x0d, 0x1b, 0x7f, 0xc2, 0x85, 0xe2, 0x80,
                                                              0xae, 0x81, 0xa6, 0xef, 0xbb, 0xbf, 'a', 0xff };
                        in[i] = (char) (rand_r(&seed) % 2 ? pick[rand_r(&seed) % sizeof(pick)] : rand_r(&seed));
                }
                CHECK(text_escape(in, len, &out) == 0);
                CHECK(out && !text_needs_escape(out, strlen(out)));
                for (const char *p = out; p && *p; p++)
                        CHECK((unsigned char) *p >= 0x20 && *p != 0x7f);
        }
}

/* The one UTF-8 reader (policy/'s name rules use it too). */
static void decodes_utf8(void) {
        static const struct { const char *s; size_t len, n; uint32_t cp; } cases[] = {
                { "A", 1, 1, 'A' },
                { "\xc3\xa9", 2, 2, 0xe9 },
                { "\xe2\x80\xa8", 3, 3, 0x2028 },
                { "\xf0\x9f\x94\x91", 4, 4, 0x1f511 },
                { "\xc0\xaf", 2, 0, 0 },         /* overlong '/' */
                { "\xe0\x80\xaf", 3, 0, 0 },     /* overlong, three bytes */
                { "\xed\xa0\x80", 3, 0, 0 },     /* a surrogate */
                { "\xf4\x90\x80\x80", 4, 0, 0 }, /* beyond U+10FFFF */
                { "\xe2\x82", 2, 0, 0 },         /* truncated */
                { "\xe2\x28\xa1", 3, 0, 0 },     /* a bad continuation */
                { "\xff", 1, 0, 0 },
        };

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint32_t cp = 0;
                size_t n = utf8_decode((const unsigned char *) cases[i].s, cases[i].len, &cp);

                CHECK(n == cases[i].n);
                CHECK(n == 0 || cp == cases[i].cp);
        }
        CHECK(unicode_invisible(0x200b) && unicode_invisible(0x2028) && unicode_invisible(0x2029) &&
              unicode_invisible(0x202e) && unicode_invisible(0x2066) && unicode_invisible(0xfeff));
        CHECK(!unicode_invisible(0x85) && !unicode_invisible(0xe9) && !unicode_invisible(0x2030));
}

int main(void) {
        decodes_utf8();
        escapes();
        null_and_into();
        random_inputs();
        return check_done("test-escape");
}
