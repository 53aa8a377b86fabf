/* Capped buffers, secrets and atomic files. */
#include <stdlib.h>
#include <sys/stat.h>

#include "buf.h"
#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "secret.h"

static void buf_is_capped(void) {
        _cleanup_buf_ buf b;

        buf_init(&b, 8);
        CHECK(buf_append_str(&b, "12345678") == 0);
        CHECK(b.len == 8 && b.data[8] == '\0');
        CHECK(buf_append_str(&b, "9") == -HWID_E_TOO_LARGE);
        CHECK(b.len == 8);
        CHECK(buf_printf(&b, "%s", "") == 0);
        buf_reset(&b);
        CHECK(buf_printf(&b, "%d-%s", 12, "ab") == 0);
        CHECK_STREQ((char *) b.data, "12-ab");
}

static void secrets_compare(void) {
        CHECK(secret_streq("abc", "abc"));
        CHECK(!secret_streq("abd", "abc"));
        CHECK(!secret_streq("ab", "abc"));
        CHECK(!secret_streq("abcd", "abc"));
        CHECK(!secret_streq("", "abc"));
        CHECK(secret_equal("xyz", "xyz", 3));
        CHECK(!secret_equal("xyz", "xyZ", 3));
}

static void files_are_atomic_and_capped(void) {
        char dir[] = "/tmp/hwid-test-XXXXXX";
        _cleanup_free_ char *path = NULL, *data = NULL, *pin = NULL;
        struct stat st;
        size_t len;

        CHECK(mkdtemp(dir) != NULL);
        path = path_join(dir, "f");
        CHECK(write_file_atomic(path, "hello\n", 6, 0600) == 0);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
        CHECK(read_file_capped(path, 6, &data, &len) == 0 && len == 6);
        CHECK_STREQ(data, "hello\n");
        CHECK(read_file_capped(path, 5, &pin, &len) == -HWID_E_TOO_LARGE);
        CHECK(secret_read_file(path, 16, &pin) == 0);
        CHECK_STREQ(pin, "hello");
        secret_free(TAKE_PTR(pin));
        CHECK(secret_read_file(path, 3, &pin) == -HWID_E_TOO_LARGE);
        CHECK(read_file_capped("/nonexistent/x", 10, &pin, &len) == -HWID_E_NOT_FOUND);
        unlink(path);
        rmdir(dir);
}

int main(void) {
        buf_is_capped();
        secrets_compare();
        files_are_atomic_and_capped();
        return check_done("test-common");
}
