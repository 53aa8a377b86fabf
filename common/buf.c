#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "error.h"
#include "secret.h"

void buf_init(buf *b, size_t max) {
        *b = (buf) { .max = max };
}

int buf_reserve(buf *b, size_t n) {
        if (n > b->max || b->len > b->max - n)
                return hwid_fail(HWID_E_TOO_LARGE, "more than %zu bytes", b->max);
        if (b->len + n + 1 > b->alloc) {
                size_t want = b->alloc ? b->alloc : 256;
                uint8_t *d;

                while (want < b->len + n + 1)
                        want *= 2;
                if (want > b->max + 1)
                        want = b->max + 1;
                d = realloc(b->data, want);
                if (!d)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                b->data = d;
                b->alloc = want;
        }
        return 0;
}

int buf_append(buf *b, const void *p, size_t n) {
        int r = buf_reserve(b, n);

        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

int buf_append_str(buf *b, const char *s) {
        return buf_append(b, s, strlen(s));
}

int buf_printf(buf *b, const char *fmt, ...) {
        char small[512];
        va_list ap;
        int n, r;

        va_start(ap, fmt);
        n = vsnprintf(small, sizeof(small), fmt, ap);
        va_end(ap);
        if (n < 0)
                return hwid_fail(HWID_E_INTERNAL, "formatting failed");
        if ((size_t) n < sizeof(small))
                return buf_append(b, small, (size_t) n);

        char *big = malloc((size_t) n + 1);
        if (!big)
                return hwid_fail(HWID_E_NOMEM, NULL);
        va_start(ap, fmt);
        vsnprintf(big, (size_t) n + 1, fmt, ap);
        va_end(ap);
        r = buf_append(b, big, (size_t) n);
        free(big);
        return r;
}

uint8_t *buf_steal(buf *b, size_t *ret_len) {
        uint8_t *d = b->data;

        if (!d && buf_append(b, "", 0) == 0)
                d = b->data;
        if (ret_len)
                *ret_len = b->len;
        b->data = NULL;
        b->len = b->alloc = 0;
        return d;
}

void buf_reset(buf *b) {
        free(b->data);
        b->data = NULL;
        b->len = b->alloc = 0;
}

void buf_wipe(buf *b) {
        secret_wipe(b->data, b->alloc);
        buf_reset(b);
}
