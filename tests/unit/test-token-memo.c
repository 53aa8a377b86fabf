/* The memo of checked token secrets (service/ca/token-memo.h): what it
 * remembered it tells apart from every change of what it compares (the
 * secret, even its last character; the id; the nonce, even its last
 * byte), a legacy token it never knows, and a token checked later takes
 * an earlier one's slot.  That hwidd checks a remembered token without
 * the device, and still refuses a wrong secret of it: token-key.sh. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "token-memo.h"

static const char secret[] = "abcdefghijklmnopqrstuvwx";

static store_token derived_row(const char *id, uint8_t fill) {
        store_token t = { .derived = true };

        snprintf(t.id, sizeof(t.id), "%s", id);
        memset(t.nonce, fill, sizeof(t.nonce));
        return t;
}

static void remembers(void) {
        _cleanup_(token_memo_freep) token_memo *m = NULL;
        store_token t = derived_row("der001", 0x5a), other_nonce = t, other_id = t;

        CHECK(token_memo_new(64, &m) == 0);
        CHECK(token_memo_check(m, &t, secret) == TOKEN_MEMO_UNKNOWN);
        token_memo_remember(m, &t, secret);
        CHECK(token_memo_check(m, &t, secret) == TOKEN_MEMO_MATCH);
        CHECK(token_memo_check(m, &t, "abcdefghijklmnopqrstuvwy") == TOKEN_MEMO_MISMATCH);
        CHECK(token_memo_check(m, &t, "bbcdefghijklmnopqrstuvwx") == TOKEN_MEMO_MISMATCH);
        CHECK(token_memo_check(m, &t, "abcdefghijklmnopqrstuvw") == TOKEN_MEMO_MISMATCH);
        CHECK(token_memo_check(m, &t, "") == TOKEN_MEMO_MISMATCH);
        /* The same slot (the nonce's first bytes), another token. */
        other_nonce.nonce[sizeof(other_nonce.nonce) - 1] ^= 1;
        CHECK(token_memo_check(m, &other_nonce, secret) == TOKEN_MEMO_UNKNOWN);
        other_id.id[5] = '2';
        CHECK(token_memo_check(m, &other_id, secret) == TOKEN_MEMO_UNKNOWN);
}

static void never_legacy(void) {
        _cleanup_(token_memo_freep) token_memo *m = NULL;
        store_token t = derived_row("leg001", 0x11);

        t.derived = false;
        CHECK(token_memo_new(64, &m) == 0);
        token_memo_remember(m, &t, secret);
        CHECK(token_memo_check(m, &t, secret) == TOKEN_MEMO_UNKNOWN);
}

static void slot_taken(void) {
        _cleanup_(token_memo_freep) token_memo *m = NULL;
        store_token a = derived_row("aaa001", 0x01), b = derived_row("bbb002", 0x02);

        CHECK(token_memo_new(1, &m) == 0);
        token_memo_remember(m, &a, secret);
        token_memo_remember(m, &b, "zyxwvutsrqponmlkjihgfedc");
        CHECK(token_memo_check(m, &a, secret) == TOKEN_MEMO_UNKNOWN);
        CHECK(token_memo_check(m, &b, "zyxwvutsrqponmlkjihgfedc") == TOKEN_MEMO_MATCH);
}

int main(void) {
        remembers();
        never_legacy();
        slot_taken();
        return check_done("test-token-memo");
}
