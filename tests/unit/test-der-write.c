/* The DER writer (common/der-write.h): every length form, wrapping and
 * nesting, INTEGER and BIT STRING contents, and OpenSSL reading back
 * what it wrote. */
#include <openssl/asn1.h>
#include <openssl/x509.h>

#include "check.h"
#include "der-write.h"
#include "error.h"
#include "ossl-util.h"

#define CHECK_BYTES(b, off, ...)                                                         \
        do {                                                                             \
                static const uint8_t _want[] = { __VA_ARGS__ };                          \
                CHECK((b)->len >= (off) + sizeof(_want) &&                               \
                      memcmp((b)->data + (off), _want, sizeof(_want)) == 0);             \
        } while (0)

/* An OCTET STRING of n bytes: its header in each length form. */
static void length_forms(void) {
        static uint8_t zeros[70000];
        static const struct { size_t n; size_t hdr; uint8_t h[5]; } cases[] = {
                { 0, 2, { 0x04, 0x00 } },
                { 127, 2, { 0x04, 0x7f } },
                { 128, 3, { 0x04, 0x81, 0x80 } },
                { 255, 3, { 0x04, 0x81, 0xff } },
                { 256, 4, { 0x04, 0x82, 0x01, 0x00 } },
                { 65535, 4, { 0x04, 0x82, 0xff, 0xff } },
                { 65536, 5, { 0x04, 0x83, 0x01, 0x00, 0x00 } },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_buf_ buf b;
                const unsigned char *p;
                long len = 0;
                int tag = 0, cls = 0;

                buf_init(&b, 1 << 20);
                CHECK(der_append_tlv(&b, DER_OCTET_STRING, zeros, cases[i].n) == 0);
                CHECK(b.len == cases[i].hdr + cases[i].n);
                CHECK(memcmp(b.data, cases[i].h, cases[i].hdr) == 0);
                /* OpenSSL reads the same length back. */
                p = b.data;
                CHECK(ASN1_get_object(&p, &len, &tag, &cls, (long) b.len) == 0);
                CHECK(tag == V_ASN1_OCTET_STRING && (size_t) len == cases[i].n &&
                      (size_t) (p - b.data) == cases[i].hdr);
        }
}

/* der_wrap() makes the header of whatever is already there, and
 * wrapping again nests: [3] { SEQUENCE { 200 bytes } } crosses from the
 * 0x81 to the 0x82 form on the way out. */
static void wrap_nests(void) {
        static uint8_t body[200];
        _cleanup_buf_ buf b;

        buf_init(&b, 4096);
        CHECK(buf_append(&b, "x", 1) == 0); /* a prefix that stays put */
        CHECK(buf_append(&b, body, 125) == 0);
        CHECK(der_wrap(&b, 1, DER_SEQUENCE) == 0);
        CHECK(b.len == 1 + 2 + 125);
        CHECK_BYTES(&b, 0, 'x', 0x30, 0x7d);
        CHECK(der_wrap(&b, 1, DER_EXPLICIT(3)) == 0);
        CHECK_BYTES(&b, 0, 'x', 0xa3, 0x7f, 0x30, 0x7d);
        CHECK(der_wrap(&b, 1, DER_SEQUENCE) == 0);
        CHECK_BYTES(&b, 0, 'x', 0x30, 0x81, 0x81, 0xa3, 0x7f, 0x30, 0x7d);

        buf_reset(&b);
        CHECK(buf_append(&b, body, sizeof(body)) == 0);
        CHECK(der_wrap(&b, 0, DER_SEQUENCE) == 0);
        CHECK_BYTES(&b, 0, 0x30, 0x81, 0xc8);
        CHECK(der_wrap(&b, 0, DER_EXPLICIT(0)) == 0);
        CHECK_BYTES(&b, 0, 0xa0, 0x81, 0xcb, 0x30, 0x81, 0xc8);
        /* 206 bytes wrapped 20 times: 0x81 headers while the contents are
         * under 256 bytes, 0x82 ones from then on; 265 inside the last. */
        for (int i = 0; i < 20; i++)
                CHECK(der_wrap(&b, 0, DER_SEQUENCE) == 0);
        CHECK_BYTES(&b, 0, 0x30, 0x82, 0x01, 0x09, 0x30, 0x82, 0x01, 0x05, 0x30, 0x82, 0x01, 0x01, 0x30, 0x81, 0xfe);
        CHECK(b.len == 4 + 265);
        CHECK(der_wrap(&b, b.len + 1, DER_SEQUENCE) < 0);
}

static void integers(void) {
        static const uint8_t zero[2] = { 0, 0 }, small[3] = { 0, 0, 0x05 }, high[2] = { 0x80, 0x01 };
        static const uint8_t serial[16] = { 0x40, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff };
        _cleanup_buf_ buf b;
        const unsigned char *p;
        _cleanup_(ASN1_INTEGER_freep) ASN1_INTEGER *back = NULL;

        buf_init(&b, 4096);
        CHECK(der_append_uint(&b, zero, sizeof(zero)) == 0);
        CHECK(der_append_uint(&b, small, sizeof(small)) == 0);
        CHECK(der_append_uint(&b, high, sizeof(high)) == 0);
        CHECK(b.len == 3 + 3 + 5);
        CHECK_BYTES(&b, 0, 0x02, 0x01, 0x00, 0x02, 0x01, 0x05, 0x02, 0x03, 0x00, 0x80, 0x01);

        /* A serial as the issuer makes them: 16 bytes, no padding, and
         * OpenSSL's own encoding of the same number is the same. */
        buf_reset(&b);
        CHECK(der_append_uint(&b, serial, sizeof(serial)) == 0);
        CHECK(b.len == 18);
        CHECK_BYTES(&b, 0, 0x02, 0x10, 0x40, 1);
        p = b.data;
        back = d2i_ASN1_INTEGER(NULL, &p, (long) b.len);
        CHECK(back && ASN1_STRING_length(back) == 16 && memcmp(ASN1_STRING_get0_data(back), serial, 16) == 0);
        {
                _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
                int len = back ? i2d_ASN1_INTEGER(back, &der) : 0;
                CHECK(len == 18 && memcmp(der, b.data, 18) == 0);
        }
}

static void bit_strings_and_items(void) {
        static const uint8_t sig[3] = { 0xde, 0xad, 0x01 };
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *os = ASN1_OCTET_STRING_new();
        _cleanup_(OPENSSL_freep) unsigned char *want = NULL;
        _cleanup_buf_ buf b;
        int want_len;

        buf_init(&b, 4096);
        CHECK(der_append_bit_string(&b, sig, sizeof(sig)) == 0);
        CHECK(b.len == 6);
        CHECK_BYTES(&b, 0, 0x03, 0x04, 0x00, 0xde, 0xad, 0x01);

        /* An OpenSSL value goes in as OpenSSL encodes it. */
        buf_reset(&b);
        CHECK(os && ASN1_OCTET_STRING_set(os, sig, sizeof(sig)));
        want_len = i2d_ASN1_OCTET_STRING(os, &want);
        CHECK(buf_append(&b, "ab", 2) == 0);
        CHECK(der_append_item(&b, os, ASN1_ITEM_rptr(ASN1_OCTET_STRING)) == 0);
        CHECK(want_len == 5 && b.len == 7 && memcmp(b.data + 2, want, 5) == 0);
}

/* The cap of the buffer holds. */
static void respects_the_cap(void) {
        static uint8_t body[100];
        _cleanup_buf_ buf b;

        buf_init(&b, 101);
        CHECK(buf_append(&b, body, 100) == 0);
        CHECK(der_wrap(&b, 0, DER_SEQUENCE) == -HWID_E_TOO_LARGE);
        CHECK(der_append_tlv(&b, DER_OCTET_STRING, body, 1) == -HWID_E_TOO_LARGE);
}

int main(void) {
        length_forms();
        wrap_nests();
        integers();
        bit_strings_and_items();
        respects_the_cap();
        return check_done("test-der-write");
}
