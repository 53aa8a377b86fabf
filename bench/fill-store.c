/* fill-store: fills an hwid store (made by `hwid ca init`) with many
 * certificates quickly, for the scale benchmark (bench/run.sh).
 *
 *   fill-store --db hwid.db --ca ca.pem [--valid N] [--revoked M] [--no-audit]
 *
 * Inserts N 'valid' and M 'revoked' certificates (identities fill-<i>),
 * issued over the last 60 days for 90 days (so every revoked one belongs
 * in the CRL), each with an audit record as hwidd writes one per
 * issuance and per revocation.  The DER of every row is a real leaf
 * certificate shaped like hwidd's (P-256 key, the same extensions, the
 * CA's name and key identifier) with its own random serial and name; its
 * signature is made by a throwaway key once, so the rows have realistic
 * sizes without a million signatures.  Direct SQL in large transactions
 * with synchronous=OFF: this is a fixture, not an issuance path. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sqlite3.h>

#define BATCH 50000
#define DAY 86400

static void die(const char *what, sqlite3 *db) __attribute__((noreturn));
static void die(const char *what, sqlite3 *db) {
        fprintf(stderr, "fill-store: %s%s%s\n", what, db ? ": " : "", db ? sqlite3_errmsg(db) : "");
        exit(1);
}

static void add_ext(X509 *x, X509 *ca, int nid, const char *value) {
        X509V3_CTX ctx;
        X509_EXTENSION *e;

        X509V3_set_ctx(&ctx, ca, x, NULL, NULL, 0);
        e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
        if (!e || !X509_add_ext(x, e, -1))
                die("cannot add an extension", NULL);
        X509_EXTENSION_free(e);
}

/* A leaf like hwidd's, CN=fill-0000000 and serial 0x40 0x11 0x11 ...:
 * both patched per row. */
static unsigned char *make_template(const char *ca_path, int *ret_len) {
        FILE *f = fopen(ca_path, "r");
        X509 *ca = f ? PEM_read_X509(f, NULL, NULL, NULL) : NULL;
        EVP_PKEY *key = EVP_EC_gen("P-256"), *signer = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        X509_NAME *name = X509_NAME_new();
        unsigned char serial[16], *der = NULL;
        BIGNUM *bn;

        if (f)
                fclose(f);
        if (!ca || !key || !signer || !x || !name)
                die("cannot read the CA certificate or make keys", NULL);
        memset(serial, 0x11, sizeof(serial));
        serial[0] = 0x40;
        bn = BN_bin2bn(serial, sizeof(serial), NULL);
        X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *) "fill-0000000", -1, -1, 0);
        if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || !X509_set_version(x, X509_VERSION_3) ||
            !X509_set_subject_name(x, name) || !X509_set_issuer_name(x, X509_get_subject_name(ca)) ||
            !X509_set_pubkey(x, key) || !X509_gmtime_adj(X509_getm_notBefore(x), 0) ||
            !X509_gmtime_adj(X509_getm_notAfter(x), 90L * DAY))
                die("cannot fill in the template", NULL);
        add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE");
        add_ext(x, ca, NID_key_usage, "critical,digitalSignature");
        add_ext(x, ca, NID_ext_key_usage, "clientAuth");
        add_ext(x, ca, NID_subject_key_identifier, "hash");
        add_ext(x, ca, NID_authority_key_identifier, "keyid:always");
        if (X509_sign(x, signer, EVP_sha256()) <= 0 || (*ret_len = i2d_X509(x, &der)) <= 0)
                die("cannot sign the template", NULL);
        BN_free(bn);
        X509_NAME_free(name);
        X509_free(x);
        X509_free(ca);
        EVP_PKEY_free(key);
        EVP_PKEY_free(signer);
        return der;
}

static size_t find(const unsigned char *hay, size_t n, const void *needle, size_t len) {
        for (size_t i = 0; i + len <= n; i++)
                if (memcmp(hay + i, needle, len) == 0)
                        return i;
        die("template lacks a field it was made with", NULL);
}

static void hex(const unsigned char *in, size_t n, char *out, bool upper) {
        const char *digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";

        for (size_t i = 0; i < n; i++) {
                out[2 * i] = digits[in[i] >> 4];
                out[2 * i + 1] = digits[in[i] & 15];
        }
        out[2 * n] = '\0';
}

static void exec(sqlite3 *db, const char *sql) {
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
                die(sql, db);
}

static sqlite3_stmt *prepare(sqlite3 *db, const char *sql) {
        sqlite3_stmt *st = NULL;

        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
                die("cannot prepare a statement", db);
        return st;
}

static void step(sqlite3 *db, sqlite3_stmt *st) {
        if (sqlite3_step(st) != SQLITE_DONE)
                die("cannot insert a row", db);
        sqlite3_reset(st);
}

static void audit(sqlite3 *db, sqlite3_stmt *st, int64_t at, const char *actor, const char *action,
                  const char *target, const char *reason) {
        sqlite3_bind_int64(st, 1, at);
        sqlite3_bind_text(st, 2, actor, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, action, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 4, target, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 5, "allow", -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 6, reason, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 7, "fill00", -1, SQLITE_STATIC);
        step(db, st);
}

int main(int argc, char **argv) {
        static const struct option lo[] = {
                { "db", required_argument, NULL, 'd' },    { "ca", required_argument, NULL, 'c' },
                { "valid", required_argument, NULL, 'v' }, { "revoked", required_argument, NULL, 'r' },
                { "no-audit", no_argument, NULL, 'A' },    {},
        };
        static const int reasons[] = { 1, 4, 5, 0, 3 }; /* keyCompromise, superseded, cessation, -, affiliationChanged */
        const char *db_path = NULL, *ca_path = NULL;
        long n_valid = 1000000, n_revoked = 100000, total;
        bool with_audit = true;
        unsigned char *der, serial[16], spki[32], marker[16];
        size_t serial_at, cn_at;
        int der_len, c;
        int64_t now = (int64_t) time(NULL);
        sqlite3 *db;
        sqlite3_stmt *ins, *aud;

        while ((c = getopt_long(argc, argv, "", lo, NULL)) >= 0) {
                switch (c) {
                case 'd': db_path = optarg; break;
                case 'c': ca_path = optarg; break;
                case 'v': n_valid = atol(optarg); break;
                case 'r': n_revoked = atol(optarg); break;
                case 'A': with_audit = false; break;
                default: die("usage: fill-store --db DB --ca CA.pem [--valid N] [--revoked M] [--no-audit]", NULL);
                }
        }
        if (!db_path || !ca_path || n_valid < 0 || n_revoked < 0 || n_valid + n_revoked > 99999999)
                die("usage: fill-store --db DB --ca CA.pem [--valid N] [--revoked M] [--no-audit]", NULL);
        total = n_valid + n_revoked;
        der = make_template(ca_path, &der_len);
        memset(marker, 0x11, sizeof(marker));
        marker[0] = 0x40;
        serial_at = find(der, (size_t) der_len, marker, sizeof(marker));
        cn_at = find(der, (size_t) der_len, "fill-0000000", 12) + 5;

        if (sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
                die("cannot open the database", db);
        exec(db, "PRAGMA synchronous=OFF; PRAGMA cache_size=-524288; PRAGMA foreign_keys=OFF;");
        ins = prepare(db, "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, "
                          "not_before, not_after, status, revoked_at, revocation_reason, request_id, created_at) "
                          "VALUES (?1, ?2, ?3, 'default', ?4, ?5, ?6, ?7, ?8, ?9, ?10, NULL, ?11)");
        aud = prepare(db, "INSERT INTO audit (at, actor, action, target, outcome, reason, token_id) "
                          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)");
        exec(db, "BEGIN");
        /* Every 11th row is revoked when the mix is 10:1; in general the
         * revoked rows are spread evenly over the issuance period. */
        for (long i = 0, rev = 0; i < total; i++) {
                char serial_hex[33], spki_hex[65], ident[32], subject[40];
                bool revoked = rev < n_revoked && (i + 1) * n_revoked / total > rev;
                int64_t created = now - 60L * DAY + (int64_t) ((double) i / (double) total * 60.0 * DAY);
                int64_t revoked_at = revoked ? created + (now - created) / 2 : 0;

                RAND_bytes(serial, sizeof(serial));
                serial[0] = (serial[0] & 0x7f) | 0x40;
                RAND_bytes(spki, sizeof(spki));
                snprintf(ident, sizeof(ident), "fill-%07ld", i);
                snprintf(subject, sizeof(subject), "CN=%s", ident);
                memcpy(der + serial_at, serial, sizeof(serial));
                memcpy(der + cn_at, ident + 5, 7);
                hex(serial, sizeof(serial), serial_hex, true);
                hex(spki, sizeof(spki), spki_hex, false);
                sqlite3_bind_text(ins, 1, serial_hex, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(ins, 2, ident, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(ins, 3, subject, -1, SQLITE_TRANSIENT);
                sqlite3_bind_text(ins, 4, spki_hex, -1, SQLITE_TRANSIENT);
                sqlite3_bind_blob(ins, 5, der, der_len, SQLITE_TRANSIENT);
                sqlite3_bind_int64(ins, 6, created - 60);
                sqlite3_bind_int64(ins, 7, created + 90L * DAY);
                sqlite3_bind_text(ins, 8, revoked ? "revoked" : "valid", -1, SQLITE_STATIC);
                sqlite3_bind_int64(ins, 9, revoked_at);
                sqlite3_bind_int(ins, 10, revoked ? reasons[rev % 5] : 0);
                sqlite3_bind_int64(ins, 11, created);
                step(db, ins);
                if (with_audit) {
                        audit(db, aud, created, "token:fill00", "enroll", ident, "issued under profile default");
                        if (revoked)
                                audit(db, aud, revoked_at, "admin:bench", "revoke", serial_hex, "bench fill");
                }
                if (revoked)
                        rev++;
                if ((i + 1) % BATCH == 0) {
                        exec(db, "COMMIT; BEGIN");
                        fprintf(stderr, "\rfill-store: %ld/%ld", i + 1, total);
                }
        }
        exec(db, "COMMIT");
        exec(db, "UPDATE meta SET value = value + 1 WHERE key = 'revocation_seq'");
        sqlite3_finalize(ins);
        sqlite3_finalize(aud);
        exec(db, "PRAGMA wal_checkpoint(TRUNCATE)");
        if (sqlite3_close(db) != SQLITE_OK)
                die("cannot close the database", db);
        fprintf(stderr, "\rfill-store: %ld certificates (%ld revoked), DER %d bytes each\n", total, n_revoked,
                der_len);
        OPENSSL_free(der);
        return 0;
}
