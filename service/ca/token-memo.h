/* The derived bootstrap tokens whose secret was checked, remembered so
 * that checking the same token again costs no HMAC in the HSM/TPM (in
 * SoftHSM2 that HMAC was 57 µs, a tenth of an issuance's CPU: bench/
 * NOTES.md).  A derived secret is a function of the token key, the id
 * and the nonce, so a token that has its entry here is checked against
 * the entry alone, a wrong secret included.
 *
 * In memory only, never at rest, and no secret there either: an entry is
 * the id, the nonce and HMAC-SHA256(salt, secret), the salt random for
 * each process.  A table of a fixed number of slots, a token's slot
 * chosen by its nonce (random, so tokens spread evenly), the entry
 * matched on id and nonce: a token checked later takes the slot of an
 * earlier one, which then costs one HMAC in the device again.  Safe to
 * use from any thread. */
#pragma once

#include <stddef.h>

#include "cleanup.h"
#include "store.h"

typedef struct token_memo token_memo;

int token_memo_new(size_t slots, token_memo **ret);
void token_memo_free(token_memo *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(token_memo *, token_memo_free)

/* What the memo knows of t (a derived token) and secret. */
typedef enum token_memo_verdict {
        TOKEN_MEMO_UNKNOWN,  /* t has no entry: check it in the device */
        TOKEN_MEMO_MATCH,    /* secret is t's */
        TOKEN_MEMO_MISMATCH, /* secret is not t's */
} token_memo_verdict;
token_memo_verdict token_memo_check(token_memo *m, const store_token *t, const char *secret);

/* After the device said secret is t's. */
void token_memo_remember(token_memo *m, const store_token *t, const char *secret);
