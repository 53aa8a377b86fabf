/* What the store tests share: one database file per test in the test
 * binary's temporary directory, a second raw connection to look at a file
 * (as an admin with the sqlite3 shell would), and short ways to create
 * tokens, requests and certificates.  The helpers abort() when they cannot
 * set a test up; they check nothing themselves. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "check.h"
#include "error.h"
#include "store.h"

#define NOW ((int64_t) 1700000000)

#define REQ1 "00000000000000000000000000000001"
#define REQ2 "00000000000000000000000000000002"
#define REQ3 "00000000000000000000000000000003"

/* The temporary directory: each test binary defines it and mkdtemp()s it. */
extern char dir[];

static const uint8_t der[] = { 0x30, 0x03, 0x02, 0x01, 0x01 };
static const char spki[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* Hashes (lower-case hex SHA-256s) of four EKs, certificates or keys. */
#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEX_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define HEX_D "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"

/* expr is refused with code, its message containing part. */
#define CHECK_REFUSED(expr, code, part)                                                        \
        do {                                                                                  \
                int _r = (expr);                                                              \
                CHECK(_r == -(code));                                                         \
                if (_r == -(code))                                                            \
                        CHECK_CONTAINS(hwid_strerror(_r), part);                              \
        } while (0)

/* The AK and EK every fixture_challenge() names. */
extern uint8_t fixture_ak_bytes[3], fixture_ek_bytes[3];
/* A challenge whose id, secret hash and nonce are filled with c (the
 * nonce with c + 1), expiring at expires_at. */
store_challenge fixture_challenge(char c, int64_t expires_at);

/* Creates dir (mkdtemp); false if it cannot. */
bool fixture_begin(void);
/* Removes dir unless a check failed (then keeps it for a look with the
 * sqlite3 shell); returns the test's exit code. */
int fixture_end(const char *name);

/* dir/name, removed first: each test starts from a fresh file. */
char *db_path(const char *name);
store *open_fresh(const char *path);

/* First column of the first row of sql on a separate connection; -1 on error. */
int64_t raw_int(const char *path, const char *sql);
/* Concatenated "detail" column of EXPLAIN QUERY PLAN for sql. */
char *raw_plan(const char *path, const char *sql);
int raw_exec(const char *path, const char *sql);

int add_token(store *s, const char *id, int uses, int64_t expires_at);
/* A derived token (ca/token.h): its nonce all `fill`, no hash. */
int add_derived_token(store *s, const char *id, uint8_t fill, int64_t expires_at);
/* n (at most 8) such tokens in one store_token_insert(). */
int add_tokens(store *s, const char *const *ids, size_t n, int uses, int64_t expires_at);
int uses_left(store *s, const char *id);
/* A certificate record; its key (spki_sha256) is spki with the serial
 * written over its tail, so that each serial has a key of its own. */
store_cert make_cert(const char *serial, const char *identity, int64_t not_after);
/* The spki_sha256 make_cert() gives serial (static buffer). */
const char *spki_of(const char *serial);
/* A commit with the usual parts; NULL/false leave a part out. */
int commit(store *s, const char *serial, const char *identity, int64_t not_after, int64_t now,
           const store_issue *extra);
int cert_status(store *s, const char *serial);
int request_status(store *s, const char *id);
int add_request(store *s, const char *id, const char *identity, const char *token, int64_t now);
int audit_rows(store *s);

/* A SQLite file of schema 1, as hwid 1 made it (no certificate DNS names,
 * identities compared with case, audit records unchained), at path. */
void create_v1_store(const char *path);
/* A live certificate in it, its DER with the subjectAltName dns
 * ("DNS:a.example,DNS:b.example"). */
void insert_v1_cert(const char *path, const char *serial, const char *identity, int64_t created, const char *dns);
