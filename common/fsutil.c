#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "buf.h"
#include "cleanup.h"
#include "error.h"
#include "fsutil.h"

char *path_join(const char *dir, const char *name) {
        size_t dl = strlen(dir), nl = strlen(name);
        char *p = malloc(dl + nl + 2);

        if (!p)
                return NULL;
        memcpy(p, dir, dl);
        p[dl] = '/';
        memcpy(p + dl + 1, name, nl + 1);
        return p;
}

int fsync_parent_dir(const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        _cleanup_close_ int fd = -1;

        if (!copy)
                return hwid_fail(HWID_E_NOMEM, NULL);
        fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || fsync(fd) < 0)
                return hwid_fail(HWID_E_IO, "cannot sync directory of %s: %s", path, strerror(errno));
        return 0;
}

static int write_all(int fd, const void *data, size_t len) {
        const char *p = data;

        while (len > 0) {
                ssize_t n = write(fd, p, len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -1;
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -1;
        int saved;

        if (asprintf(&tmp, "%s.tmp.%ld", path, (long) getpid()) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return hwid_fail(HWID_E_IO, "cannot create %s: %s", tmp, strerror(errno));
        /* open() honours the umask; the mode asked for is the mode wanted. */
        if (fchmod(fd, mode) < 0 || write_all(fd, data, len) < 0 || fsync(fd) < 0)
                goto fail;
        if (close(TAKE_FD(fd)) < 0 || rename(tmp, path) < 0)
                goto fail;
        return fsync_parent_dir(path);
fail:
        saved = errno;
        unlink(tmp);
        return hwid_fail(HWID_E_IO, "cannot write %s: %s", path, strerror(saved));
}

int read_file_capped(const char *path, size_t max, char **ret_data, size_t *ret_len) {
        _cleanup_buf_ buf b;
        _cleanup_close_ int fd = -1;
        char chunk[4096];
        int r;

        buf_init(&b, max);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return hwid_fail(errno == ENOENT ? HWID_E_NOT_FOUND : HWID_E_IO,
                                 "cannot read %s: %s", path, strerror(errno));
        for (;;) {
                ssize_t n = read(fd, chunk, sizeof(chunk));
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return hwid_fail(HWID_E_IO, "cannot read %s: %s", path, strerror(errno));
                if (n == 0)
                        break;
                r = buf_append(&b, chunk, (size_t) n);
                if (r < 0)
                        return hwid_fail(HWID_E_TOO_LARGE, "%s is larger than %zu bytes", path, max);
        }
        *ret_data = (char *) buf_steal(&b, ret_len);
        return 0;
}

int mkdir_parents(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = '\0';
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return hwid_fail(HWID_E_IO, "cannot create %s: %s", p, strerror(errno));
                *s = '/';
        }
        if (mkdir(p, mode) < 0 && errno != EEXIST)
                return hwid_fail(HWID_E_IO, "cannot create %s: %s", p, strerror(errno));
        return 0;
}

int copy_file(const char *from, const char *to, mode_t mode) {
        _cleanup_close_ int in = open(from, O_RDONLY | O_CLOEXEC);
        _cleanup_close_ int out = -1;
        char chunk[65536];
        ssize_t n;
        int saved;

        if (in < 0)
                return hwid_fail(HWID_E_IO, "cannot open %s: %s", from, strerror(errno));
        out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
        if (out < 0)
                return hwid_fail(errno == EEXIST ? HWID_E_EXISTS : HWID_E_IO, "cannot create %s: %s", to,
                                 strerror(errno));
        while ((n = read(in, chunk, sizeof(chunk))) > 0)
                if (write_all(out, chunk, (size_t) n) < 0)
                        goto fail;
        if (n < 0 || fchmod(out, mode) < 0 || fsync(out) < 0)
                goto fail;
        return 0;
fail:
        saved = errno;
        unlink(to);
        return hwid_fail(HWID_E_IO, "cannot copy %s to %s: %s", from, to, strerror(saved));
}
