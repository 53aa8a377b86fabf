/* Bootstrap tokens (service/ca/token.h) without a device: legacy tokens
 * (the SHA-256 of the secret stored) check and give CMP their hex hash as
 * before; a derived token, or a new one, without a token key is refused
 * with what to do about it.  Derived tokens against a real key in
 * SoftHSM2 and swtpm: tests/integration/token-key.sh, ca-swtpm.sh. */
#include <string.h>

#include "check.h"
#include "error.h"
#include "secret.h"
#include "token.h"

static const char secret[] = "abcdefghijklmnopqrstuvwx";
/* sha256sum of the secret above (coreutils), no newline. */
static const char secret_sha256[] = "93b0cabf8668e0c534c52a568957499e12a284f59d97dc9b2725ef836804875b";

static store_token legacy_row(void) {
        store_token t = { .id = "leg001" };

        CHECK(token_hash(secret, t.secret_hash) == 0);
        return t;
}

static void legacy(void) {
        store_token t = legacy_row();
        char *shared = NULL;

        CHECK(token_verify(NULL, &t, secret) == 0);
        CHECK(token_verify(NULL, &t, "abcdefghijklmnopqrstuvwy") == -HWID_E_TOKEN_INVALID);
        CHECK(token_verify(NULL, &t, "abcdefghijklmnopqrstuvw") == -HWID_E_TOKEN_INVALID);
        CHECK(token_shared_secret(NULL, &t, &shared) == 0);
        CHECK_STREQ(shared, secret_sha256);
        secret_free(shared);
}

static void derived_without_key(void) {
        store_token t = { .id = "der001", .derived = true }, row = { 0 };
        char *out = NULL;

        memset(t.nonce, 0x5a, sizeof(t.nonce));
        CHECK(token_verify(NULL, &t, secret) == -HWID_E_CONFIG);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "der001");
        CHECK(token_shared_secret(NULL, &t, &out) == -HWID_E_CONFIG && !out);
        CHECK(token_new(NULL, &row, &out) == -HWID_E_CONFIG && !out);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "hwid ca token-key");
        CHECK(!row.derived);
}

static void parse(void) {
        char id[TOKEN_ID_LEN + 1], *s = NULL;

        CHECK(token_parse("Bearer abc123.abcdefghijklmnopqrstuvwx", true, id, &s) == 0);
        CHECK_STREQ(id, "abc123");
        CHECK_STREQ(s, secret);
        secret_free(s);
        s = NULL;
        CHECK(token_parse("abc123.ABCDEFGHIJKLMNOPQRSTUVWX", false, id, &s) == -HWID_E_TOKEN_INVALID && !s);
        CHECK(token_parse("abc123.short", false, id, &s) == -HWID_E_TOKEN_INVALID && !s);
}

int main(void) {
        legacy();
        derived_without_key();
        parse();
        return check_done("test-token");
}
