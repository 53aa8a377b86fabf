#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base64.h"
#include "cleanup.h"
#include "error.h"
#include "secret.h"

#define B64_MAX ((size_t) 64 * 1024 * 1024)

static const char std_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char url_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int base64_encode(const uint8_t *data, size_t len, bool url, char **ret) {
        size_t n;
        char *out;
        int w;

        if (len > B64_MAX)
                return hwid_fail(HWID_E_TOO_LARGE, "%zu bytes are too many to encode", len);
        if (!(out = malloc(4 * ((len + 2) / 3) + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        w = EVP_EncodeBlock((unsigned char *) out, data, (int) len);
        n = w < 0 ? 0 : (size_t) w;
        out[n] = '\0';
        if (url) {
                for (size_t i = 0; i < n; i++)
                        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
                while (n > 0 && out[n - 1] == '=')
                        out[--n] = '\0';
        }
        *ret = out;
        return 0;
}

/* The text in the standard alphabet with its padding, or why not. */
static const char *to_standard(const char *text, size_t len, bool url, char *out, size_t *ret_len) {
        const char *alphabet = url ? url_alphabet : std_alphabet;
        size_t n = len, pad = 0;

        if (!url)
                while (pad < 2 && n > 0 && text[n - 1] == '=')
                        n--, pad++;
        for (size_t i = 0; i < n; i++) {
                const char *p = text[i] ? strchr(alphabet, text[i]) : NULL;
                if (!p)
                        return url ? "holds a character outside the base64url alphabet (or '=' padding)"
                                   : "holds a character outside the base64 alphabet";
                out[i] = std_alphabet[p - alphabet];
        }
        if (n % 4 == 1 || (!url && (n + pad) % 4 != 0))
                return "has an impossible length";
        for (; (n % 4) != 0; n++)
                out[n] = '=';
        out[n] = '\0';
        *ret_len = n;
        return NULL;
}

/* Decodes text into out (len + 1 bytes), by way of std (len + 4 bytes),
 * and checks that it is the value's one encoding. */
static int decode_checked(const char *text, size_t len, bool url, char *std, uint8_t *out, size_t *ret_len) {
        _cleanup_secret_ char *again = NULL;
        size_t n, pad = 0, bytes;
        const char *why;
        int r;

        if ((why = to_standard(text, len, url, std, &n)))
                return hwid_fail(HWID_E_INVALID, "the %s text %s", url ? "base64url" : "base64", why);
        while (pad < 2 && n > pad && std[n - 1 - pad] == '=')
                pad++;
        r = EVP_DecodeBlock(out, (const unsigned char *) std, (int) n);
        if (r < 0 || (size_t) r < pad)
                return hwid_fail(HWID_E_INVALID, "the %s text does not decode", url ? "base64url" : "base64");
        bytes = (size_t) r - pad;
        out[bytes] = '\0';
        /* One encoding per value: unused bits must be zero. */
        if ((r = base64_encode(out, bytes, url, &again)) < 0)
                return r;
        if (strlen(again) != len || memcmp(again, text, len) != 0)
                return hwid_fail(HWID_E_INVALID, "the %s text is not in canonical form", url ? "base64url" : "base64");
        *ret_len = bytes;
        return 0;
}

/* What is decoded may be a secret (an attestation answer): every copy made
 * along the way is wiped before it is freed, the result too on failure. */
int base64_decode(const char *text, size_t len, bool url, uint8_t **ret, size_t *ret_len) {
        char *std;
        uint8_t *out;
        int r;

        if (len > B64_MAX)
                return hwid_fail(HWID_E_TOO_LARGE, "%zu characters are too many to decode", len);
        std = malloc(len + 4);
        out = malloc(len + 1);
        r = std && out ? decode_checked(text, len, url, std, out, ret_len) : hwid_fail(HWID_E_NOMEM, NULL);
        if (std)
                secret_wipe(std, len + 4);
        free(std);
        if (r < 0 && out)
                secret_wipe(out, len + 1);
        if (r < 0)
                free(out);
        else
                *ret = out;
        return r;
}
