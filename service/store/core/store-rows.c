/* store-rows.h: what both stores share, whatever the database. */
#include <string.h>

#include "error.h"
#include "cleanup.h"
#include "store-rows.h"

static const char *const request_status_names[] = {
        [REQUEST_PENDING] = "pending",
        [REQUEST_APPROVED] = "approved",
        [REQUEST_DENIED] = "denied",
        [REQUEST_ISSUED] = "issued",
};

static const char *const cert_status_names[] = {
        [CERT_VALID] = "valid",
        [CERT_REVOKED] = "revoked",
        [CERT_SUPERSEDED] = "superseded",
};

const char *store_request_status_name(store_request_status s) {
        return (size_t) s < ELEMENTSOF(request_status_names) ? request_status_names[s] : "unknown";
}

store_request_status store_request_status_parse(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(request_status_names); i++)
                if (strcmp(s, request_status_names[i]) == 0)
                        return (store_request_status) i;
        return REQUEST_DENIED;
}

store_cert_status store_cert_status_parse(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(cert_status_names); i++)
                if (strcmp(s, cert_status_names[i]) == 0)
                        return (store_cert_status) i;
        return CERT_REVOKED;
}

bool store_str_ok(const char *s, size_t max) {
        return s && s[0] && strnlen(s, max + 1) <= max;
}

bool store_serial_ok(const char *serial) {
        size_t n = serial ? strnlen(serial, 65) : 0;

        return n > 0 && n <= 64 && strspn(serial, "0123456789ABCDEF") == n;
}

bool store_token_id_ok(const char *id) {
        if (!id || strnlen(id, 7) != 6)
                return false;
        return strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789") == 6;
}

int store_token_refusal(store_token_state st, const char *id) {
        switch (st) {
        case TOKEN_ACTIVE: return 0;
        case TOKEN_EXPIRED: return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has expired", id);
        case TOKEN_USED_UP: return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has been used up", id);
        default: return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has been revoked", id);
        }
}

int store_tokens_check(const store_token *t, size_t n) {
        if (!t || n == 0)
                return hwid_fail(HWID_E_INVALID, "no token to store");
        for (size_t i = 0; i < n; i++)
                if (!store_token_id_ok(t[i].id) || !store_str_ok(t[i].profile, 256) || t[i].uses_left < 0 ||
                    t[i].uses_left > t[i].uses_total)
                        return hwid_fail(HWID_E_INVALID, "token to store has a bad id, profile or number of uses");
        return 0;
}

bool store_request_id_ok(const char *id) {
        return store_str_ok(id, sizeof(((store_request *) NULL)->id) - 1);
}

bool store_hex_ok(const char *s, size_t min, size_t max) {
        size_t n = strnlen(s, max + 1);

        return n >= min && n <= max && strspn(s, "0123456789abcdef") == n;
}

bool store_attestation_ok(const store_attestation *a) {
        if (!a->ek_pub_sha256[0])
                return !a->ek_cert_sha256[0] && !a->ak_name[0];
        return store_hex_ok(a->ek_pub_sha256, 64, 64) &&
               (!a->ek_cert_sha256[0] || store_hex_ok(a->ek_cert_sha256, 64, 64)) &&
               (!a->ak_name[0] || (store_hex_ok(a->ak_name, 4, 132) && strlen(a->ak_name) % 2 == 0));
}

bool store_ek_ok(const store_ek *e) {
        return store_str_ok(e->identity, STORE_EK_NAME_MAX) && store_str_ok(e->profile, STORE_EK_NAME_MAX) &&
               (e->ek_cert_sha256[0] || e->ek_pub_sha256[0]) &&
               (!e->ek_cert_sha256[0] || store_hex_ok(e->ek_cert_sha256, 64, 64)) &&
               (!e->ek_pub_sha256[0] || store_hex_ok(e->ek_pub_sha256, 64, 64));
}

int store_cert_check(const store_cert *c) {
        if (!c || !store_serial_ok(c->serial))
                return hwid_fail(HWID_E_INVALID, "certificate to store has no serial in upper-case hex");
        if (!store_str_ok(c->identity, 1024) || !c->subject || !store_str_ok(c->profile, 256))
                return hwid_fail(HWID_E_INVALID, "certificate %s lacks an identity, subject or profile", c->serial);
        if (strnlen(c->spki_sha256, sizeof(c->spki_sha256)) != 64 || !c->der || c->der_len == 0)
                return hwid_fail(HWID_E_INVALID, "certificate %s lacks its key hash or DER", c->serial);
        if (c->not_after < c->not_before)
                return hwid_fail(HWID_E_INVALID, "certificate %s ends before it starts", c->serial);
        if (!store_attestation_ok(&c->attestation))
                return hwid_fail(HWID_E_INVALID, "certificate %s has a malformed attestation record", c->serial);
        return 0;
}

int store_dns_canonical(const char *name, char *out, size_t size) {
        size_t n = name ? strnlen(name, STORE_DNS_NAME_MAX + 2) : 0;

        if (n > 0 && name[n - 1] == '.')
                n--;
        if (n == 0 || n > STORE_DNS_NAME_MAX || n >= size)
                return hwid_fail(HWID_E_INVALID, "a DNS name is 1 to %d characters", STORE_DNS_NAME_MAX);
        for (size_t i = 0; i < n; i++) {
                unsigned char c = (unsigned char) name[i];
                if (c <= 0x20 || c >= 0x7f)
                        return hwid_fail(HWID_E_INVALID, "a DNS name is printable ASCII");
                out[i] = (char) (c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
        }
        out[n] = '\0';
        return 0;
}
