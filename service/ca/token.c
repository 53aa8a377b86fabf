#include <string.h>
#include <strings.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "error.h"
#include "secret.h"
#include "token.h"

static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";

/* Uniform characters from the alphabet by rejection sampling. */
static int random_chars(char *out, size_t n) {
        size_t i = 0;

        while (i < n) {
                unsigned char b[32];
                if (RAND_bytes(b, sizeof(b)) != 1)
                        return hwid_fail(HWID_E_CRYPTO, "no randomness for a token");
                for (size_t j = 0; j < sizeof(b) && i < n; j++)
                        if (b[j] < 252) /* 252 = 7 * 36: keeps every character equally likely */
                                out[i++] = alphabet[b[j] % 36];
                secret_wipe(b, sizeof(b));
        }
        out[n] = '\0';
        return 0;
}

int token_generate(char ret_id[TOKEN_ID_LEN + 1], char **ret_secret) {
        char *secret = malloc(TOKEN_SECRET_LEN + 1);
        int r;

        if (!secret)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = random_chars(ret_id, TOKEN_ID_LEN)) < 0 || (r = random_chars(secret, TOKEN_SECRET_LEN)) < 0) {
                secret_free(secret);
                return r;
        }
        *ret_secret = secret;
        return 0;
}

int token_new(char ret_id[TOKEN_ID_LEN + 1], uint8_t ret_hash[32], char **ret_token) {
        _cleanup_secret_ char *secret = NULL;
        int r;

        if ((r = token_generate(ret_id, &secret)) < 0 || (r = token_hash(secret, ret_hash)) < 0)
                return r;
        if (asprintf(ret_token, "%s.%s", ret_id, secret) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

static bool all_in_alphabet(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(alphabet, s[i]) || !s[i])
                        return false;
        return true;
}

int token_parse(const char *s, bool bearer, char ret_id[TOKEN_ID_LEN + 1], char **ret_secret) {
        const char *dot, *sec;
        size_t sl;

        if (!s)
                return hwid_fail(HWID_E_TOKEN_INVALID, "no bootstrap token (send Authorization: Bearer <token>)");
        if (bearer) {
                if (strncasecmp(s, "Bearer ", 7) != 0)
                        return hwid_fail(HWID_E_TOKEN_INVALID, "Authorization is not a Bearer token");
                s += 7;
        }
        dot = strchr(s, '.');
        if (!dot || dot - s != TOKEN_ID_LEN || !all_in_alphabet(s, TOKEN_ID_LEN))
                return hwid_fail(HWID_E_TOKEN_INVALID, "malformed bootstrap token (expected <6-char id>.<secret>)");
        sec = dot + 1;
        sl = strnlen(sec, TOKEN_SECRET_MAX + 1);
        if (sl < TOKEN_SECRET_MIN || sl > TOKEN_SECRET_MAX || !all_in_alphabet(sec, sl))
                return hwid_fail(HWID_E_TOKEN_INVALID, "malformed bootstrap token secret");
        *ret_secret = strndup(sec, sl);
        if (!*ret_secret)
                return hwid_fail(HWID_E_NOMEM, NULL);
        memcpy(ret_id, s, TOKEN_ID_LEN);
        ret_id[TOKEN_ID_LEN] = '\0';
        return 0;
}

int token_hash(const char *secret, uint8_t ret[32]) {
        if (!EVP_Digest(secret, strlen(secret), ret, NULL, EVP_sha256(), NULL))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot hash a token secret");
        return 0;
}

bool token_secret_matches(const char *secret, const uint8_t hash[32]) {
        uint8_t h[32];
        bool ok;

        /* A secret that cannot be hashed matches nothing. */
        ok = token_hash(secret, h) == 0 && secret_equal(h, hash, sizeof(h));
        secret_wipe(h, sizeof(h));
        return ok;
}
