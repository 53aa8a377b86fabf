#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "error.h"
#include "secret.h"

void secret_wipe(void *p, size_t n) {
        if (p && n)
                OPENSSL_cleanse(p, n);
}

void secret_free(char *s) {
        if (!s)
                return;
        secret_wipe(s, strlen(s));
        free(s);
}

bool secret_equal(const void *a, const void *b, size_t n) {
        return CRYPTO_memcmp(a, b, n) == 0;
}

bool secret_streq(const char *given, const char *known) {
        size_t gl = strlen(given), kl = strlen(known);
        unsigned char diff = (unsigned char) (gl != kl);

        /* Walk the whole of `known` whatever `given` holds. */
        for (size_t i = 0; i < kl; i++) {
                unsigned char g = i < gl ? (unsigned char) given[i] : 0;
                diff |= (unsigned char) (g ^ (unsigned char) known[i]);
        }
        return diff == 0;
}

/* --- locked memory ----------------------------------------------------------- */

/* A locked secret is a mapping of its own: SECRET_HDR bytes holding the
 * mapping's length, then the secret.  Never swapped (mlock, when the
 * memlock limit allows), never in a core dump (MADV_DONTDUMP), wiped
 * whole before it is unmapped. */
#define SECRET_HDR 16

int secret_locked_new(size_t n, char **ret) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE), len;
        char *base;

        if (n > SIZE_MAX - SECRET_HDR - page)
                return hwid_fail(HWID_E_NOMEM, NULL);
        len = (n + SECRET_HDR + page - 1) / page * page;
        base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (base == MAP_FAILED)
                return hwid_fail(HWID_E_NOMEM, NULL);
        (void) madvise(base, len, MADV_DONTDUMP);
        /* Best effort: over RLIMIT_MEMLOCK it stays unlocked.  The system
         * call itself: AddressSanitizer turns mlock() into a no-op. */
        (void) syscall(SYS_mlock, base, len);
        memcpy(base, &len, sizeof(len));
        *ret = base + SECRET_HDR;
        return 0;
}

void secret_locked_free(char *s) {
        char *base;
        size_t len;

        if (!s)
                return;
        base = s - SECRET_HDR;
        memcpy(&len, base, sizeof(len));
        secret_wipe(base, len);
        (void) syscall(SYS_munlock, base, len);
        (void) munmap(base, len);
}

int secret_locked_dup(const char *s, char **ret) {
        size_t n = strlen(s);
        char *p;
        int r;

        if ((r = secret_locked_new(n + 1, &p)) < 0)
                return r;
        memcpy(p, s, n + 1);
        *ret = p;
        return 0;
}

/* --- secret files ------------------------------------------------------------- */

/* Reads up to n bytes with read(2): no stdio buffer keeps a copy. */
static int read_all(int fd, char *buf, size_t n, size_t *ret) {
        size_t got = 0;

        while (got < n) {
                ssize_t k = read(fd, buf + got, n - got);

                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                got += (size_t) k;
        }
        *ret = got;
        return 0;
}

/* A file only its owner may use: a regular file with a group or other
 * permission bit is refused (a pipe or a device is what it is). */
static int check_private(int fd, const char *path) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return hwid_fail(HWID_E_IO, "cannot read secret file %s: %s", path, strerror(errno));
        if (S_ISREG(st.st_mode) && (st.st_mode & 077))
                return hwid_fail(HWID_E_CONFIG, "secret file %s is open to its group or others (mode %04o): "
                                 "run chmod 600 %s (and chown it to the user that reads it)", path,
                                 (unsigned) (st.st_mode & 07777), path);
        return 0;
}

/* The first line of path, at most max bytes, into buf (max + 2 bytes); a
 * NUL byte in it is refused, not taken for its end. */
static int read_secret(const char *path, size_t max, bool private_file, char *buf) {
        size_t n = 0, len = 0;
        int fd, e;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return hwid_fail(errno == ENOENT ? HWID_E_NOT_FOUND : HWID_E_IO,
                                 "cannot read secret file %s: %s", path, strerror(errno));
        if (private_file && (e = check_private(fd, path)) < 0) {
                close(fd);
                return e;
        }
        e = read_all(fd, buf, max + 1, &n);
        close(fd);
        if (e < 0)
                return hwid_fail(HWID_E_IO, "cannot read secret file %s: %s", path, strerror(-e));
        while (len < n && buf[len] != '\r' && buf[len] != '\n')
                len++;
        if (memchr(buf, '\0', len))
                return hwid_fail(HWID_E_INVALID, "secret file %s holds a NUL byte: it would be cut short there "
                                 "(write the secret alone, e.g. printf '%%s' SECRET >%s)", path, path);
        buf[len] = '\0';
        if (len > max)
                return hwid_fail(HWID_E_TOO_LARGE, "secret in %s is longer than %zu bytes", path, max);
        if (!len)
                return hwid_fail(HWID_E_INVALID, "secret file %s is empty", path);
        return 0;
}

int secret_read_file(const char *path, size_t max, char **ret) {
        _cleanup_secret_ char *buf = NULL;
        int r;

        buf = calloc(1, max + 2);
        if (!buf)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = read_secret(path, max, false, buf)) < 0) {
                secret_wipe(buf, max + 2);
                return r;
        }
        *ret = TAKE_PTR(buf);
        return 0;
}

static int read_locked(const char *path, size_t max, bool private_file, char **ret) {
        char *buf = NULL;
        int r;

        if ((r = secret_locked_new(max + 2, &buf)) < 0)
                return r;
        if ((r = read_secret(path, max, private_file, buf)) < 0) {
                secret_locked_free(buf);
                return r;
        }
        *ret = buf;
        return 0;
}

int secret_read_file_locked(const char *path, size_t max, char **ret) {
        return read_locked(path, max, false, ret);
}

int secret_read_private_file_locked(const char *path, size_t max, char **ret) {
        return read_locked(path, max, true, ret);
}

/* --- the process -------------------------------------------------------------- */

int secret_protect_process(void) {
        struct rlimit none = { 0, 0 };

        if (setrlimit(RLIMIT_CORE, &none) < 0)
                return hwid_fail(HWID_E_INTERNAL, "cannot turn core dumps off: %s", strerror(errno));
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                return hwid_fail(HWID_E_INTERNAL, "cannot make the process non-dumpable: %s", strerror(errno));
        return 0;
}
