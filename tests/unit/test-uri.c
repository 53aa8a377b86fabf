/* Key URI parsing: what is accepted, what is refused, and that every
 * refusal says what is wrong. */
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>

#include <p11-kit/p11-kit.h>

#include "check.h"
#include "error.h"
#include "uri.h"

/* Whether the page holding p is locked (smaps of the mapping: "Locked: > 0"). */
static bool page_locked(const void *p) {
        FILE *f = fopen("/proc/self/smaps", "re");
        uintptr_t a = (uintptr_t) p, lo, hi;
        char line[512];
        long kb = 0;
        bool in = false;

        while (f && fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
                        in = a >= lo && a < hi;
                else if (in && sscanf(line, "Locked: %ld kB", &kb) == 1)
                        break;
        }
        if (f)
                fclose(f);
        return kb > 0;
}

static void accepts_pkcs11(void) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;

        CHECK(key_uri_parse("pkcs11:token=ca;object=ca-key?pin-source=file:/etc/hwid/pin", &u) == 0);
        CHECK(u && u->scheme == KEY_URI_PKCS11);
        CHECK_STREQ(u->token, "ca");
        CHECK_STREQ(u->object, "ca-key");
        CHECK_STREQ(u->pin_source, "file:/etc/hwid/pin");
        CHECK(u->pin_value == NULL);
        CHECK(u->id == NULL);
}

static void accepts_pkcs11_id_module_pin_value(void) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;

        /* RFC 7512: module-path is a query attribute. */
        CHECK(key_uri_parse("pkcs11:token=my%20token;id=%01%02%ff"
                            "?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-value=1234", &u) == 0);
        CHECK_STREQ(u->token, "my token");
        CHECK(u->object == NULL);
        CHECK(u->id_len == 3 && u->id[0] == 1 && u->id[1] == 2 && u->id[2] == 0xff);
        CHECK_STREQ(u->module_path, "/usr/lib/softhsm/libsofthsm2.so");
        CHECK_STREQ(u->pin_value, "1234");
        /* The PIN lives in locked memory only: p11-kit's copy is gone. */
        CHECK(page_locked(u->pin_value));
        CHECK(p11_kit_uri_get_pin_value(u->p11) == NULL);
}

/* Attributes that share a prefix, or a value that looks like another
 * attribute, are not duplicates. */
static void accepts_distinct_attributes(void) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;

        CHECK(key_uri_parse("pkcs11:token=ca;object=token?module-name=softhsm2&module-path=/m&pin-source=file:/p",
                            &u) == 0);
        CHECK_STREQ(u->object, "token");
        CHECK_STREQ(u->module_name, "softhsm2");
        CHECK_STREQ(u->module_path, "/m");
}

/* RFC 7512 lets a query value hold ';', '/' and '?': not attributes. */
static void accepts_query_punctuation(void) {
        _cleanup_(key_uri_freep) key_uri *u = NULL, *v = NULL;

        CHECK(key_uri_parse("pkcs11:token=ca;object=k;type=private?pin-source=file:/a;b?c", &u) == 0);
        CHECK_STREQ(u->pin_source, "file:/a;b?c");
        CHECK(key_uri_parse("pkcs11:token=ca;object=k;serial=1;manufacturer=m;model=x;slot-id=1"
                            "?module-name=softhsm2", &v) == 0);
}

/* id is bytes, not text (RFC 7512): a zero byte is one of them; %00
 * elsewhere is refused (refused[] below), %001 is not a NUL in a label. */
static void accepts_binary_id(void) {
        _cleanup_(key_uri_freep) key_uri *u = NULL, *v = NULL;

        CHECK(key_uri_parse("pkcs11:token=ca;id=%00%01%00?pin-value=%30%31", &u) == 0);
        CHECK(u->id_len == 3 && u->id[0] == 0 && u->id[1] == 1 && u->id[2] == 0);
        CHECK_STREQ(u->pin_value, "01");
        CHECK(key_uri_parse("pkcs11:token=ca;object=a%2500b", &v) == 0);
        CHECK_STREQ(v->object, "a%00b");
}

static void accepts_tpm2(void) {
        _cleanup_(key_uri_freep) key_uri *a = NULL, *b = NULL;

        CHECK(key_uri_parse("tpm2:handle=0x81000001", &a) == 0);
        CHECK(a && a->scheme == KEY_URI_TPM2 && a->handle == 0x81000001 && !a->path);
        CHECK(key_uri_parse("tpm2:file=/var/lib/hwid/device.tss2.pem", &b) == 0);
        CHECK(b && b->handle == 0);
        CHECK_STREQ(b->path, "/var/lib/hwid/device.tss2.pem");
}

static const struct {
        const char *uri;
        const char *message; /* a piece of the detail the user sees */
} refused[] = {
        { "", "empty" },
        { "file:/x", "must start with pkcs11: or tpm2:" },
        { "pkcs11:object=k", "names no token" },
        { "pkcs11:token=ca", "names no key" },
        { "pkcs11:token=ca;objekt=k", "path attribute 'objekt' hwid does not know" },
        /* Unknown query attributes: p11-kit would ignore them (a typo'd
         * pin-value= dropped the PIN without a word). */
        { "pkcs11:token=ca;object=k?pin-source=file:/p&pin-valu=1234", "query attribute 'pin-valu' hwid does not know" },
        { "pkcs11:token=ca;object=k?pin-source=file:/p&frobnicate=1", "query attribute 'frobnicate'" },
        { "pkcs11:token=ca;object=k?frobnicate", "query attribute 'frobnicate'" },
        { "pkcs11:token=ca;object=k?x-vendor=1&pin-value=1", "query attribute 'x-vendor'" },
        /* A query attribute in the path, a path attribute in the query. */
        { "pkcs11:token=ca;object=k;pin-value=1", "path attribute 'pin-value'" },
        { "pkcs11:token=ca?object=k", "query attribute 'object'" },
        { "pkcs11:token=ca;object=k%zz", "malformed PKCS#11 URI" },
        { "pkcs11:token=ca;object=k?pin-value=1&pin-source=file:/p", "both pin-source and pin-value" },
        /* p11-kit would keep the last one: ambiguous, refused. */
        { "pkcs11:token=ca;object=k?pin-source=file:/a&pin-source=file:/b", "names 'pin-source' more than once" },
        { "pkcs11:token=ca;object=k;token=other", "names 'token' more than once" },
        { "pkcs11:object=k;token=ca;object=j", "names 'object' more than once" },
        { "pkcs11:token=ca;object=k?pin-value=1&module-path=/m&pin-value=2", "names 'pin-value' more than once" },
        { "pkcs11:token=ca;id=%01;object=k;id=%02", "names 'id' more than once" },
        /* A NUL byte (%00) in any attribute but the binary id: p11-kit
         * would hand each on cut short at it. */
        { "pkcs11:token=ca;object=k?pin-value=1234%00zz", "attribute 'pin-value' holds a NUL byte" },
        { "pkcs11:token=ca;object=k?pin-source=file:/x%00/etc/passwd", "attribute 'pin-source' holds a NUL byte" },
        { "pkcs11:token=ca%00x;object=k", "attribute 'token' holds a NUL byte" },
        { "pkcs11:token=ca;object=k%00x", "attribute 'object' holds a NUL byte" },
        { "pkcs11:token=ca;object=k;serial=1%00", "attribute 'serial' holds a NUL byte" },
        { "pkcs11:token=ca;object=k;manufacturer=%00", "attribute 'manufacturer' holds a NUL byte" },
        { "pkcs11:token=ca;object=k;slot-description=a%00b", "attribute 'slot-description' holds a NUL byte" },
        { "pkcs11:token=ca;object=k?module-path=/usr/lib/x.so%00/y", "attribute 'module-path' holds a NUL byte" },
        { "pkcs11:token=ca;object=k?module-name=soft%00hsm2", "attribute 'module-name' holds a NUL byte" },
        { "tpm2:", "tpm2:handle=0x81xxxxxx or tpm2:file=PATH" },
        { "tpm2:handle=81000001", "hexadecimal" },
        { "tpm2:handle=0x80000001", "not a persistent handle" },
        { "tpm2:handle=0x81800001", "not a persistent handle" }, /* the platform's range */
        { "tpm2:handle=0x81000001x", "not a persistent handle" },
        { "tpm2:handle=0x1000000000", "not a persistent handle" },
        { "tpm2:file=", "needs a path" },
        { "tpm2:file=/a\nb", "control character" },
        { "tpm2:key=1", "tpm2:handle=0x81xxxxxx or tpm2:file=PATH" },
        { "tpm2:file=/k.tss2.pem?frobnicate=1", "query attribute 'frobnicate' hwid does not know" },
        { "tpm2:handle=0x81000001?pin-value=1&x=2", "query attribute 'pin-value'" },
};

static void refuses_bad_uris(void) {
        for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
                key_uri *u = NULL;
                int r = key_uri_parse(refused[i].uri, &u);

                CHECK(r == -HWID_E_URI);
                CHECK(u == NULL);
                CHECK_CONTAINS(hwid_strerror(r), refused[i].message);
        }
}

static void refuses_overlong(void) {
        char big[5000];
        key_uri *u = NULL;

        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        memcpy(big, "tpm2:file=", 10);
        CHECK(key_uri_parse(big, &u) == -HWID_E_URI);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_URI), "longer than");
}

int main(void) {
        accepts_pkcs11();
        accepts_pkcs11_id_module_pin_value();
        accepts_tpm2();
        accepts_binary_id();
        accepts_distinct_attributes();
        accepts_query_punctuation();
        refuses_bad_uris();
        refuses_overlong();
        return check_done("test-uri");
}
