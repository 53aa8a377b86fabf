/* DER framing (see der-write.h for why it is hand-written at all). */
#include <string.h>

#include "der-write.h"
#include "error.h"

/* Bytes of the header for a content of len bytes. */
static size_t header_size(size_t len) {
        size_t n = 2;

        for (size_t l = len; len >= 0x80 && l > 0; l >>= 8)
                n++;
        return n;
}

static void header_put(uint8_t *out, uint8_t tag, size_t len, size_t hdr) {
        out[0] = tag;
        if (hdr == 2) {
                out[1] = (uint8_t) len;
                return;
        }
        out[1] = (uint8_t) (0x80 | (hdr - 2));
        for (size_t i = hdr - 1; i >= 2; i--, len >>= 8)
                out[i] = (uint8_t) len;
}

int der_append_header(buf *b, uint8_t tag, size_t len) {
        uint8_t h[2 + sizeof(size_t)];
        size_t hdr = header_size(len);

        if (hdr > 6)
                return hwid_fail(HWID_E_TOO_LARGE, "a DER length of %zu bytes", len);
        header_put(h, tag, len, hdr);
        return buf_append(b, h, hdr);
}

int der_append_tlv(buf *b, uint8_t tag, const void *p, size_t n) {
        int r = der_append_header(b, tag, n);

        return r < 0 ? r : buf_append(b, p, n);
}

int der_wrap(buf *b, size_t start, uint8_t tag) {
        size_t len, hdr;
        int r;

        if (start > b->len)
                return hwid_fail(HWID_E_INTERNAL, "DER wrap from past the end");
        len = b->len - start;
        if ((hdr = header_size(len)) > 6)
                return hwid_fail(HWID_E_TOO_LARGE, "a DER length of %zu bytes", len);
        if ((r = buf_reserve(b, hdr)) < 0)
                return r;
        memmove(b->data + start + hdr, b->data + start, len);
        header_put(b->data + start, tag, len, hdr);
        b->len += hdr;
        b->data[b->len] = '\0';
        return 0;
}

int der_append_uint(buf *b, const uint8_t *mag, size_t n) {
        static const uint8_t zero = 0;
        size_t start = b->len;
        int r;

        while (n > 0 && mag[0] == 0) {
                mag++;
                n--;
        }
        if (n == 0 || mag[0] & 0x80)
                r = buf_append(b, &zero, 1);
        else
                r = 0;
        if (r < 0 || (r = buf_append(b, mag, n)) < 0)
                return r;
        return der_wrap(b, start, DER_INTEGER);
}

int der_append_bit_string(buf *b, const void *p, size_t n) {
        static const uint8_t no_unused_bits = 0;
        int r;

        if ((r = der_append_header(b, DER_BIT_STRING, n + 1)) < 0 || (r = buf_append(b, &no_unused_bits, 1)) < 0)
                return r;
        return buf_append(b, p, n);
}

int der_append_item(buf *b, const void *obj, const ASN1_ITEM *it) {
        int len = ASN1_item_i2d((const ASN1_VALUE *) obj, NULL, it), r;
        unsigned char *p;

        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode an ASN.1 value");
        if ((r = buf_reserve(b, (size_t) len)) < 0)
                return r;
        p = b->data + b->len;
        if (ASN1_item_i2d((const ASN1_VALUE *) obj, &p, it) != len)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode an ASN.1 value");
        b->len += (size_t) len;
        b->data[b->len] = '\0';
        return 0;
}
