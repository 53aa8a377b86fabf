#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "error.h"

struct hwid_err_entry {
        int status;
        const char *slug;
        const char *message;
};

static const struct hwid_err_entry table[_HWID_E_MAX] = {
        [HWID_OK] = { 200, "ok", "success" },
#define HWID_ERR_ROW(code, st, sl, msg) [code] = { st, sl, msg },
        HWID_ERROR_TABLE(HWID_ERR_ROW)
#undef HWID_ERR_ROW
};

static _Thread_local char detail[512];
static _Thread_local int detail_code;

static const struct hwid_err_entry *entry(int r) {
        int code = r < 0 ? -r : r;

        if (code <= 0 || code >= _HWID_E_MAX)
                return &table[HWID_E_INTERNAL];
        return &table[code];
}

int hwid_failv(hwid_err code, const char *fmt, va_list ap) {
        char text[sizeof(detail)];

        /* Into a copy first: a detail often wraps the one before it
         * (an argument is hwid_strerror(r), which points into detail). */
        if (fmt)
                vsnprintf(text, sizeof(text), fmt, ap);
        else
                snprintf(text, sizeof(text), "%s", entry(code)->message);
        memcpy(detail, text, sizeof(detail));
        detail_code = code;
        return -(int) code;
}

int hwid_fail(hwid_err code, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = hwid_failv(code, fmt, ap);
        va_end(ap);
        return r;
}

int hwid_fail_ossl(hwid_err code, const char *fmt, ...) {
        char reason[256] = "";
        unsigned long e = ERR_peek_last_error();
        va_list ap;
        size_t n;
        int r;

        if (e != 0)
                ERR_error_string_n(e, reason, sizeof(reason));
        ERR_clear_error();
        va_start(ap, fmt);
        r = hwid_failv(code, fmt, ap);
        va_end(ap);
        n = strlen(detail);
        if (reason[0] && n + 3 < sizeof(detail))
                snprintf(detail + n, sizeof(detail) - n, " (%s)", reason);
        return r;
}

const char *hwid_strerror(int r) {
        int code = r < 0 ? -r : r;

        if (detail_code == code && detail[0])
                return detail;
        return entry(r)->message;
}

/* The store's detail names what a client has no business knowing (a
 * file's path, a database's host, port and name, its server's message and
 * SQL context) and nothing it could act on: it stays in the log. */
const char *hwid_public_message(int r) {
        int code = r < 0 ? -r : r;

        if (code == HWID_E_STORE)
                return "the CA's store is unavailable or busy: try again later (the reason is in hwidd's log)";
        return hwid_strerror(r);
}

void hwid_error_clear(void) {
        detail[0] = '\0';
        detail_code = 0;
}

int hwid_last_error(void) {
        return detail_code ? -detail_code : 0;
}

int hwid_err_http_status(int r) {
        return entry(r)->status;
}

const char *hwid_err_slug(int r) {
        return entry(r)->slug;
}

int hwid_err_exit_code(int r) {
        return (r == -HWID_E_USAGE) ? 2 : 1;
}
