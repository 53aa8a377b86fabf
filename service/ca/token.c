/* Bootstrap tokens (token.h): made, derived with the token key, checked. */
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

/* Base 36 of the 256-bit big-endian number n (wiped as it is consumed):
 * its last TOKEN_SECRET_LEN digits.  36^24 < 2^125, so each secret is as
 * likely as any other to within 2^-131. */
static void base36(uint8_t n[HWID_MAC_LEN], char out[TOKEN_SECRET_LEN + 1]) {
        for (int d = TOKEN_SECRET_LEN - 1; d >= 0; d--) {
                unsigned rem = 0;

                for (size_t i = 0; i < HWID_MAC_LEN; i++) {
                        unsigned cur = rem * 256 + n[i];

                        n[i] = (uint8_t) (cur / 36);
                        rem = cur % 36;
                }
                out[d] = alphabet[rem];
        }
        out[TOKEN_SECRET_LEN] = '\0';
        secret_wipe(n, HWID_MAC_LEN);
}

int token_derive(hwid_mac_key *key, const char *id, const uint8_t nonce[TOKEN_NONCE_LEN],
                 char ret[TOKEN_SECRET_LEN + 1]) {
        static const char label[] = "hwid-token-v2"; /* what the HMAC is for, and its version */
        uint8_t in[sizeof(label) - 1 + TOKEN_ID_LEN + TOKEN_NONCE_LEN], mac[HWID_MAC_LEN];
        int r;

        /* Each part has a fixed length: the concatenation is unambiguous. */
        if (strlen(id) != TOKEN_ID_LEN)
                return hwid_fail(HWID_E_INVALID, "a token id is %d characters", TOKEN_ID_LEN);
        memcpy(in, label, sizeof(label) - 1);
        memcpy(in + sizeof(label) - 1, id, TOKEN_ID_LEN);
        memcpy(in + sizeof(label) - 1 + TOKEN_ID_LEN, nonce, TOKEN_NONCE_LEN);
        r = hwid_mac_key_hmac_sha256(key, in, sizeof(in), mac);
        if (r < 0) {
                secret_wipe(mac, sizeof(mac));
                return r;
        }
        base36(mac, ret);
        return 0;
}

int token_key_check(hwid_mac_key *key, hwid_custody *ret_custody) {
        hwid_custody c;
        bool p11;
        int r = hwid_mac_key_custody(key, &c);

        if (r < 0)
                return r;
        p11 = strcmp(c.backend, "pkcs11") == 0;
        if (p11 ? (!c.sensitive || c.extractable || c.value_readable)
                : !(c.fixed_tpm && c.fixed_parent && c.sensitive_data_origin))
                return hwid_fail(HWID_E_CONFIG, "the token key %s can leave its device (%s): make one that cannot "
                                 "(hwid ca token-key)", hwid_mac_key_uri(key),
                                 p11 ? "not sensitive, extractable, or its value readable"
                                     : "not fixedTPM|fixedParent|sensitiveDataOrigin");
        *ret_custody = c;
        return 0;
}

int token_new(hwid_mac_key *key, store_token *row, char **ret_token) {
        char secret[TOKEN_SECRET_LEN + 1];
        int r;

        if (!key)
                return hwid_fail(HWID_E_CONFIG, TOKEN_KEY_MISSING);
        if ((r = random_chars(row->id, TOKEN_ID_LEN)) < 0)
                return r;
        if (RAND_bytes(row->nonce, sizeof(row->nonce)) != 1)
                return hwid_fail_ossl(HWID_E_CRYPTO, "no randomness for a token");
        row->derived = true;
        if ((r = token_derive(key, row->id, row->nonce, secret)) < 0)
                return r;
        r = asprintf(ret_token, "%s.%s", row->id, secret) < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
        secret_wipe(secret, sizeof(secret));
        return r;
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

/* The lower-case hex SHA-256 of a legacy token's secret, as stored. */
static void hash_hex(const uint8_t hash[32], char out[65]) {
        static const char hex[] = "0123456789abcdef";

        for (size_t i = 0; i < 32; i++) {
                out[2 * i] = hex[hash[i] >> 4];
                out[2 * i + 1] = hex[hash[i] & 0xf];
        }
        out[64] = '\0';
}

/* A derived token, and no key to derive its secret with. */
static int no_key(const store_token *t) {
        return hwid_fail(HWID_E_CONFIG, "bootstrap token %s was derived with a token key, and hwidd.yaml names "
                         "none (ca.token_key) to check it with", t->id);
}

int token_verify(hwid_mac_key *key, const store_token *t, const char *secret) {
        char want[TOKEN_SECRET_LEN + 1];
        uint8_t h[32];
        bool ok;
        int r;

        if (!t->derived) {
                /* A secret that cannot be hashed matches nothing. */
                ok = token_hash(secret, h) == 0 && secret_equal(h, t->secret_hash, sizeof(h));
                secret_wipe(h, sizeof(h));
                return ok ? 0 : hwid_fail(HWID_E_TOKEN_INVALID, "wrong bootstrap token secret");
        }
        if (!key)
                return no_key(t);
        if ((r = token_derive(key, t->id, t->nonce, want)) < 0)
                return r;
        ok = secret_streq(secret, want);
        secret_wipe(want, sizeof(want));
        return ok ? 0 : hwid_fail(HWID_E_TOKEN_INVALID, "wrong bootstrap token secret");
}

int token_shared_secret(hwid_mac_key *key, const store_token *t, char **ret) {
        char *s = calloc(1, 65); /* zeroed: secret_free() reads a string */
        int r = 0;

        if (!s)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!t->derived)
                hash_hex(t->secret_hash, s);
        else if (!key)
                r = no_key(t);
        else
                r = token_derive(key, t->id, t->nonce, s);
        if (r < 0) {
                secret_free(s);
                return r;
        }
        *ret = s;
        return 0;
}
