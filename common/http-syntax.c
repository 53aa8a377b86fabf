/* HTTP/1.1 request syntax that libmicrohttpd 0.9 lets through (see
 * http-syntax.h). */
#include <string.h>
#include <strings.h>

#include "http-syntax.h"

/* tchar (RFC 9110 5.6.2): letters, digits and !#$%&'*+-.^_`|~ */
static bool tchar(unsigned char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
               (ch != 0 && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* name begins with prefix (any case) and goes on. */
static bool extends(const char *name, const char *prefix) {
        size_t n = strlen(prefix);

        return strncasecmp(name, prefix, n) == 0 && name[n] != '\0';
}

bool http_field_name_ok(const char *name) {
        if (!name || !*name)
                return false;
        for (const unsigned char *p = (const unsigned char *) name; *p; p++)
                if (!tchar(*p))
                        return false;
        return !extends(name, "Content-Length") && !extends(name, "Transfer-Encoding");
}

bool http_field_value_ok(const char *value) {
        for (const unsigned char *p = (const unsigned char *) (value ? value : ""); *p; p++)
                if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
                        return false;
        return true;
}

bool http_target_bad(const char *raw) {
        for (const char *p = raw; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f || (p[0] == '%' && p[1] == '0' && p[2] == '0'))
                        return true;
        return false;
}

/* One Transfer-Encoding field: a comma-separated list of codings. */
static void add_codings(http_framing *f, const char *v) {
        while (*v) {
                size_t n;

                v += strspn(v, " \t,");
                n = strcspn(v, ",");
                while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                        n--;
                if (n == 7 && strncasecmp(v, "chunked", 7) == 0)
                        f->chunked++;
                else if (n > 0)
                        f->unknown_coding = true;
                v += strcspn(v, ",");
        }
}

void http_framing_add(http_framing *f, const char *name, const char *value) {
        if (!name || !value)
                return;
        if (strcasecmp(name, "Content-Length") == 0) {
                if (f->lengths++ == 0)
                        f->length = value;
                else if (strcmp(f->length, value) != 0)
                        f->lengths_differ = true;
        } else if (strcasecmp(name, "Transfer-Encoding") == 0) {
                f->encodings++;
                add_codings(f, value);
        }
}

int http_framing_check(const http_framing *f, bool http11, const char **ret_msg) {
        *ret_msg = NULL;
        if (f->lengths_differ)
                *ret_msg = "the request has Content-Length fields that differ";
        else if (f->lengths > 0 && f->encodings > 0)
                *ret_msg = "the request has both Content-Length and Transfer-Encoding";
        else if (f->encodings > 0 && !http11)
                *ret_msg = "Transfer-Encoding needs HTTP/1.1";
        else if (f->unknown_coding) {
                *ret_msg = "the only transfer coding served is chunked";
                return 501;
        } else if (f->chunked > 1)
                *ret_msg = "the request is chunked more than once";
        return *ret_msg ? 400 : 0;
}
