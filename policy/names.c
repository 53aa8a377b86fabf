/* Names: glob patterns, validity of subject values and SANs, CIDR ranges,
 * templates.  Pure functions over bytes with explicit lengths: a value may
 * hold a NUL, and a NUL is never taken for its end. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "escape.h"
#include "policy-internal.h"

/* ---------- glob ---------- */

typedef enum unit_kind {
        U_LIT,   /* a character written in the pattern */
        U_CN,    /* a character of the CN, from "{cn}" */
        U_STAR,
        U_ONE,
} unit_kind;

typedef struct gpat {
        const char *p;
        size_t plen;
        const char *cn; /* NULL: "{cn}" is plain text */
        size_t cn_len;
} gpat;

/* Where the matcher is in the pattern: pi, and ci inside a "{cn}". */
typedef struct gpos {
        size_t pi;
        size_t ci;
} gpos;

static bool cn_at(const gpat *g, size_t pi) {
        return g->cn && g->plen - pi >= 4 && memcmp(g->p + pi, "{cn}", 4) == 0;
}

static bool next_unit(const gpat *g, gpos *pos, unit_kind *kind, unsigned char *ch) {
        while (pos->pi < g->plen && cn_at(g, pos->pi)) {
                if (pos->ci < g->cn_len) {
                        *kind = U_CN;
                        *ch = (unsigned char) g->cn[pos->ci++];
                        if (pos->ci == g->cn_len) {
                                pos->pi += 4;
                                pos->ci = 0;
                        }
                        return true;
                }
                pos->pi += 4; /* empty CN */
        }
        if (pos->pi >= g->plen)
                return false;
        *ch = (unsigned char) g->p[pos->pi++];
        *kind = *ch == '*' ? U_STAR : *ch == '?' ? U_ONE : U_LIT;
        if (*ch == '\\' && pos->pi < g->plen) {
                *kind = U_LIT;
                *ch = (unsigned char) g->p[pos->pi++];
        }
        return true;
}

static unsigned char fold(unsigned char c, unsigned flags) {
        return (flags & GLOB_NOCASE) && c >= 'A' && c <= 'Z' ? (unsigned char) (c - 'A' + 'a') : c;
}

/* May a wildcard (or a CN character) stand for c? */
static bool wild_ok(unsigned char c, unsigned flags) {
        return c != '\0' && !((flags & GLOB_STAR_LITERAL) && c == '*');
}

static bool unit_matches(unit_kind kind, unsigned char u, unsigned char c, unsigned flags) {
        switch (kind) {
        case U_ONE:
                return wild_ok(c, flags);
        case U_CN:
                if ((flags & GLOB_STAR_LITERAL) && c == '*')
                        return false;
                return fold(u, flags) == fold(c, flags);
        default:
                return fold(u, flags) == fold(c, flags);
        }
}

/* The classic linear glob with backtracking to the last star.  It stays
 * exact with stars that may not absorb some characters: such a character
 * can only be matched by a literal, so no earlier star could take it. */
bool glob_match_ex(const char *pattern, const char *cn, size_t cn_len, const char *s, size_t len,
                   unsigned flags) {
        gpat g = { pattern ? pattern : "", pattern ? strlen(pattern) : 0, cn, cn_len };
        gpos pos = { 0, 0 }, star_pos = { 0, 0 };
        size_t si = 0, star_si = 0;
        bool have_star = false;

        if (!s)
                len = 0;
        for (;;) {
                unit_kind kind;
                unsigned char u;

                if (next_unit(&g, &pos, &kind, &u)) {
                        if (kind == U_STAR) {
                                have_star = true;
                                star_pos = pos;
                                star_si = si;
                                continue;
                        }
                        if (si < len && unit_matches(kind, u, (unsigned char) s[si], flags)) {
                                si++;
                                continue;
                        }
                } else if (si == len) {
                        return true;
                }
                if (!have_star || star_si >= len || !wild_ok((unsigned char) s[star_si], flags))
                        return false;
                si = ++star_si;
                pos = star_pos;
        }
}

bool policy_glob_match(const char *pattern, const char *s, size_t len) {
        return glob_match_ex(pattern, NULL, 0, s, len, 0);
}

bool policy_identity_equal(const char *a, size_t a_len, const char *b) {
        size_t b_len = b ? strlen(b) : 0;

        if (!a || !b || a_len != b_len)
                return false;
        for (size_t i = 0; i < a_len; i++)
                if (fold((unsigned char) a[i], GLOB_NOCASE) != fold((unsigned char) b[i], GLOB_NOCASE))
                        return false;
        return true;
}

/* ---------- printable names ---------- */

name_fault name_check(const char *v, size_t len, size_t max) {
        const unsigned char *u = (const unsigned char *) v;

        if (!v || len == 0)
                return NAME_EMPTY;
        if (memchr(v, '\0', len))
                return NAME_NUL;
        if (len > max)
                return NAME_TOO_LONG;
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t n = utf8_decode(u + i, len - i, &cp);

                if (n == 0)
                        return NAME_BAD_UTF8;
                if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
                        return NAME_CONTROL;
                if (unicode_invisible(cp))
                        return NAME_FORMAT_CHAR;
                i += n;
        }
        return NAME_OK;
}

const char *name_fault_str(name_fault f) {
        switch (f) {
        case NAME_OK: return "is valid";
        case NAME_EMPTY: return "is empty";
        case NAME_NUL: return "contains a NUL byte";
        case NAME_TOO_LONG: return "is longer than 64 bytes";
        case NAME_CONTROL: return "contains a control character";
        case NAME_BAD_UTF8: return "is not valid UTF-8";
        case NAME_FORMAT_CHAR: return "contains an invisible formatting character";
        }
        return "is invalid";
}

const char *name_quote(char *buf, size_t size, const char *v, size_t len) {
        size_t o = 0, shown = len < POLICY_QUOTE_MAX ? len : POLICY_QUOTE_MAX;

        if (size == 0)
                return buf;
        for (size_t i = 0; v && i < shown && o + 5 < size; i++) {
                unsigned char c = (unsigned char) v[i];
                if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
                        buf[o++] = (char) c;
                else
                        o += (size_t) snprintf(buf + o, size - o, "\\x%02x", c);
        }
        if (shown < len && o + 4 < size) {
                memcpy(buf + o, "...", 3);
                o += 3;
        }
        buf[o < size ? o : size - 1] = '\0';
        return buf;
}

bool ascii_printable(const char *v, size_t len) {
        for (size_t i = 0; i < len; i++)
                if ((unsigned char) v[i] < 0x21 || (unsigned char) v[i] > 0x7e)
                        return false;
        return true;
}

/* ---------- DNS names ---------- */

static bool ldh(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static const char *label_problem(const char *l, size_t n, bool first, bool *wildcard) {
        if (n == 0)
                return "has an empty label";
        if (n > 63)
                return "has a label longer than 63 bytes";
        if (n == 1 && l[0] == '*') {
                if (!first)
                        return "has '*' outside the first label";
                *wildcard = true;
                return NULL;
        }
        for (size_t i = 0; i < n; i++) {
                if (l[i] == '*')
                        return "has '*' inside a label (only a whole first label may be '*')";
                if (!ldh((unsigned char) l[i]))
                        return "has a character other than letters, digits, '-' and '.'";
        }
        if (l[0] == '-' || l[n - 1] == '-')
                return "has a label that starts or ends with '-'";
        return NULL;
}

/* An IPv6 address, bracketed or not ("::1", "[fe80::1]"). */
static bool ipv6_literal(const char *v, size_t len) {
        char buf[64];
        struct in6_addr a;

        if (len >= 2 && v[0] == '[' && v[len - 1] == ']')
                v++, len -= 2;
        if (len == 0 || len >= sizeof(buf) || !memchr(v, ':', len))
                return false;
        memcpy(buf, v, len);
        buf[len] = '\0';
        return inet_pton(AF_INET6, buf, &a) == 1;
}

/* A name whose last label is a number, decimal or 0x hexadecimal: what
 * resolvers (inet_aton) and URL parsers (WHATWG's "ends in a number")
 * take for an IPv4 address -- 127.0.0.1, but also 127.1, 2130706433 and
 * 0x7f.1 -- and so never a host name (no top-level domain is numeric). */
static bool ipv4_like(const char *v, size_t len) {
        const char *last = v;
        size_t n, i = 0;

        for (size_t k = 0; k < len; k++)
                if (v[k] == '.')
                        last = v + k + 1;
        n = len - (size_t) (last - v);
        if (n >= 2 && last[0] == '0' && (last[1] == 'x' || last[1] == 'X'))
                for (i = 2; i < n && isxdigit((unsigned char) last[i]); i++)
                        ;
        else
                for (; i < n && last[i] >= '0' && last[i] <= '9'; i++)
                        ;
        return n > 0 && i == n;
}

const char *dns_name_problem(const char *v, size_t len, bool *ret_wildcard) {
        bool wildcard = false;
        size_t start = 0;

        if (!v || len == 0)
                return "is empty";
        if (memchr(v, '\0', len))
                return "contains a NUL byte";
        if (len > 253)
                return "is longer than 253 bytes";
        if (ipv6_literal(v, len))
                return "is an IPv6 address, not a DNS name (an address belongs in an IP SAN)";
        for (size_t i = 0; i <= len; i++) {
                if (i < len && v[i] != '.')
                        continue;
                const char *why = label_problem(v + start, i - start, start == 0, &wildcard);
                if (why)
                        return why;
                start = i + 1;
        }
        if (ipv4_like(v, len))
                return "is an IPv4 address (its last label is a number), not a DNS name (an address belongs in an "
                       "IP SAN)";
        *ret_wildcard = wildcard;
        return NULL;
}

const char *policy_dns_name_problem(const char *v, size_t len) {
        bool wildcard;

        return dns_name_problem(v, len, &wildcard);
}

/* ---------- IP ranges ---------- */

bool cidr_contains(const policy_cidr *c, const uint8_t *ip, int ip_len) {
        int full, rest;

        if (!((c->family == 4 && ip_len == 4) || (c->family == 6 && ip_len == 16)))
                return false;
        if (c->prefix < 0 || c->prefix > ip_len * 8)
                return false;
        full = c->prefix / 8;
        rest = c->prefix % 8;
        if (memcmp(c->addr, ip, (size_t) full) != 0)
                return false;
        if (rest == 0)
                return true;
        uint8_t mask = (uint8_t) (0xff << (8 - rest));
        return (c->addr[full] & mask) == (ip[full] & mask);
}

const char *ip_format(char *buf, size_t size, const uint8_t *ip, int ip_len) {
        if (!inet_ntop(ip_len == 4 ? AF_INET : AF_INET6, ip, buf, (socklen_t) size))
                snprintf(buf, size, "(an address of %d bytes)", ip_len);
        return buf;
}

/* ---------- templates ---------- */

bool policy_dns_is_template(const char *pattern) {
        return pattern && !strpbrk(pattern, "*?\\");
}

bool template_has_cn(const char *tmpl) {
        return tmpl && strstr(tmpl, "{cn}") != NULL;
}

/* RFC 3986 unreserved characters; "." and ".." would be path segments. */
bool cn_uri_safe(const char *cn, size_t len) {
        if (len == 0 || (len == 1 && cn[0] == '.') || (len == 2 && cn[0] == '.' && cn[1] == '.'))
                return false;
        for (size_t i = 0; i < len; i++) {
                unsigned char c = (unsigned char) cn[i];
                if (!(ldh(c) || c == '.' || c == '_' || c == '~'))
                        return false;
        }
        return true;
}

int template_expand(const char *tmpl, const char *cn, size_t cn_len, char *out, size_t size, size_t *ret_len) {
        size_t o = 0;

        for (const char *t = tmpl; *t;) {
                const char *piece = t;
                size_t n = 1;

                if (strncmp(t, "{cn}", 4) == 0) {
                        piece = cn;
                        n = cn_len;
                        t += 4;
                } else {
                        t++;
                }
                if (n >= size - o)
                        return -1;
                memcpy(out + o, piece, n);
                o += n;
        }
        if (o >= size)
                return -1;
        out[o] = '\0';
        *ret_len = o;
        return 0;
}

/* ---------- attribute types ---------- */

static const struct {
        const char *sn;
        const char *oid;
} rdn_types[] = {
        { "CN", "2.5.4.3" },
        { "serialNumber", "2.5.4.5" },
        { "C", "2.5.4.6" },
        { "L", "2.5.4.7" },
        { "ST", "2.5.4.8" },
        { "O", "2.5.4.10" },
        { "OU", "2.5.4.11" },
        { "DC", "0.9.2342.19200300.100.1.25" },
        { "emailAddress", "1.2.840.113549.1.9.1" },
        { "SN", "2.5.4.4" },
        { "street", "2.5.4.9" },
        { "title", "2.5.4.12" },
        { "description", "2.5.4.13" },
        { "postalCode", "2.5.4.17" },
        { "GN", "2.5.4.42" },
        { "initials", "2.5.4.43" },
        { "dnQualifier", "2.5.4.46" },
        { "pseudonym", "2.5.4.65" },
        { "UID", "0.9.2342.19200300.100.1.1" },
};

static bool dotted_oid(const char *s) {
        bool digit = false;

        for (; *s; s++) {
                if (*s >= '0' && *s <= '9')
                        digit = true;
                else if (*s == '.' && digit)
                        digit = false;
                else
                        return false;
        }
        return digit;
}

const char *policy_rdn_canonical(const char *type) {
        if (!type)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(rdn_types); i++)
                if (strcasecmp(type, rdn_types[i].sn) == 0 || strcmp(type, rdn_types[i].oid) == 0)
                        return rdn_types[i].sn;
        return dotted_oid(type) && strchr(type, '.') ? type : NULL;
}

bool rdn_is(const char *type, const char *short_name) {
        const char *c = policy_rdn_canonical(type);

        return c && strcmp(c, short_name) == 0;
}
