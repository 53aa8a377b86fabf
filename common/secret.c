#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "error.h"
#include "secret.h"

void secret_wipe(void *p, size_t n) {
        if (p && n)
                OPENSSL_cleanse(p, n);
}

void secret_free(char *s) {
        if (!s)
                return;
        secret_wipe(s, strlen(s));
        free(s);
}

bool secret_equal(const void *a, const void *b, size_t n) {
        return CRYPTO_memcmp(a, b, n) == 0;
}

bool secret_streq(const char *given, const char *known) {
        size_t gl = strlen(given), kl = strlen(known);
        unsigned char diff = (unsigned char) (gl != kl);

        /* Walk the whole of `known` whatever `given` holds. */
        for (size_t i = 0; i < kl; i++) {
                unsigned char g = i < gl ? (unsigned char) given[i] : 0;
                diff |= (unsigned char) (g ^ (unsigned char) known[i]);
        }
        return diff == 0;
}

int secret_read_file(const char *path, size_t max, char **ret) {
        _cleanup_secret_ char *buf = NULL;
        FILE *f;
        size_t n;

        f = fopen(path, "re");
        if (!f)
                return hwid_fail(errno == ENOENT ? HWID_E_NOT_FOUND : HWID_E_IO,
                                 "cannot read secret file %s: %s", path, strerror(errno));
        buf = calloc(1, max + 2);
        if (!buf) {
                fclose(f);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        n = fread(buf, 1, max + 1, f);
        fclose(f);
        buf[n] = '\0';
        buf[strcspn(buf, "\r\n")] = '\0';
        if (strlen(buf) > max)
                return hwid_fail(HWID_E_TOO_LARGE, "secret in %s is longer than %zu bytes", path, max);
        if (!buf[0])
                return hwid_fail(HWID_E_INVALID, "secret file %s is empty", path);
        *ret = TAKE_PTR(buf);
        return 0;
}
