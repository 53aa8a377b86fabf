/* Growable byte buffers with a hard cap, after curl's curlx_dyn: every
 * input hwid accumulates (request bodies, responses, files) goes through
 * one, so nothing grows without bound. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"

typedef struct buf {
        uint8_t *data;
        size_t len;
        size_t alloc;
        size_t max; /* append past this fails with -HWID_E_TOO_LARGE */
} buf;

void buf_init(buf *b, size_t max);
/* Makes room for n more bytes (and the NUL) at once, so that the appends
 * that follow never move the data: nothing is left behind in freed memory
 * when the data is a secret. */
int buf_reserve(buf *b, size_t n);
/* Appends n bytes; keeps data NUL-terminated for text use. */
int buf_append(buf *b, const void *p, size_t n);
int buf_append_str(buf *b, const char *s);
int buf_printf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the data out (NUL-terminated); the buffer is left empty. */
uint8_t *buf_steal(buf *b, size_t *ret_len);
void buf_reset(buf *b);
/* Wipes the contents before freeing: for buffers that held secrets. */
void buf_wipe(buf *b);

static inline void buf_resetp(buf *b) {
        buf_reset(b);
}
#define _cleanup_buf_ _cleanup_(buf_resetp)
