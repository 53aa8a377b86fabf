/* Capped buffers, secrets, atomic files, and the one JSON reader. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "buf.h"
#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "json-read.h"
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

/* After buf_reserve(n), appends of n bytes in all never move the data
 * (a secret would be left behind in the freed block), and the cap holds. */
static void buf_reserve_keeps_data_in_place(void) {
        _cleanup_buf_ buf b;
        const uint8_t *at;

        buf_init(&b, 4096);
        CHECK(buf_append_str(&b, "x") == 0);
        CHECK(buf_reserve(&b, 1000) == 0);
        at = b.data;
        for (int i = 0; i < 100; i++)
                CHECK(buf_append_str(&b, "0123456789") == 0);
        CHECK(b.data == at);
        CHECK(b.len == 1001);
        CHECK(buf_reserve(&b, 4096) == -HWID_E_TOO_LARGE);
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

/* VmLck of this process, in kB (-1 if unknown). */
static long vm_locked_kb(void) {
        FILE *f = fopen("/proc/self/status", "re");
        char line[256];
        long kb = -1;

        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb;
}

/* The "Locked:" size (kB) and VmFlags of the mapping holding p. */
static bool mapping_of(const void *p, long *ret_locked, char *flags, size_t n) {
        FILE *f = fopen("/proc/self/smaps", "re");
        uintptr_t a = (uintptr_t) p, lo, hi;
        char line[512];
        bool in = false, found = false;

        while (f && fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
                        in = a >= lo && a < hi;
                else if (in && sscanf(line, "Locked: %ld kB", ret_locked) == 1)
                        found = true;
                else if (in && strncmp(line, "VmFlags:", 8) == 0)
                        snprintf(flags, n, "%s", line + 8);
        }
        if (f)
                fclose(f);
        return found;
}

static void secrets_are_locked(void) {
        char dir[] = "/tmp/hwid-test-XXXXXX", flags[256] = "";
        _cleanup_free_ char *path = NULL;
        long before = vm_locked_kb(), locked = 0;
        char *pin = NULL;

        CHECK(before >= 0);
        CHECK(secret_locked_dup("1234", &pin) == 0);
        CHECK_STREQ(pin, "1234");
        /* Locked (never swapped) and left out of core dumps. */
        CHECK(vm_locked_kb() >= before + 4);
        CHECK(mapping_of(pin, &locked, flags, sizeof(flags)) && locked >= 4);
        CHECK_CONTAINS(flags, " lo");
        CHECK_CONTAINS(flags, " dd");
        secret_locked_free(pin);
        CHECK(vm_locked_kb() == before);
        secret_locked_free(NULL);

        CHECK(mkdtemp(dir) != NULL);
        path = path_join(dir, "pin");
        CHECK(write_file_atomic(path, "s3cret\nignored", 14, 0600) == 0);
        CHECK(secret_read_file_locked(path, 16, &pin) == 0);
        CHECK_STREQ(pin, "s3cret");
        CHECK(mapping_of(pin, &locked, flags, sizeof(flags)) && locked >= 4);
        secret_locked_free(pin);
        CHECK(secret_read_file_locked(path, 3, &pin) == -HWID_E_TOO_LARGE);
        CHECK(vm_locked_kb() == before);
        unlink(path);
        rmdir(dir);
}

/* A NUL byte in a secret's line is refused, not taken for its end (after
 * the newline it is not the secret's); a PIN file (private) is refused
 * with a group or other permission bit, naming the chmod, and read at
 * 0600 and 0400; a pipe is not a file with a mode to judge. */
static void secret_files_whole_and_private(void) {
        char dir[] = "/tmp/hwid-test-XXXXXX";
        _cleanup_free_ char *path = NULL;
        char *pin = NULL;
        int fds[2];

        CHECK(mkdtemp(dir) != NULL);
        path = path_join(dir, "pin");
        CHECK(write_file_atomic(path, "1234\0junk\n", 10, 0600) == 0);
        CHECK(secret_read_file(path, 16, &pin) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "holds a NUL byte");
        CHECK(secret_read_file_locked(path, 16, &pin) == -HWID_E_INVALID);
        CHECK(secret_read_private_file_locked(path, 16, &pin) == -HWID_E_INVALID);
        CHECK(write_file_atomic(path, "1234\n\0", 6, 0600) == 0);
        CHECK(secret_read_private_file_locked(path, 16, &pin) == 0);
        CHECK_STREQ(pin, "1234");
        secret_locked_free(pin);
        for (mode_t m = 01; m <= 040; m <<= 1) {
                CHECK(chmod(path, 0600 | m) == 0);
                CHECK(secret_read_private_file_locked(path, 16, &pin) == -HWID_E_CONFIG);
                CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "is open to its group or others");
                CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "chmod 600 ");
                CHECK(secret_read_file_locked(path, 16, &pin) == 0); /* not a PIN file's rule */
                secret_locked_free(pin);
        }
        CHECK(chmod(path, 0400) == 0);
        CHECK(secret_read_private_file_locked(path, 16, &pin) == 0);
        secret_locked_free(pin);
        unlink(path);
        rmdir(dir);
        CHECK(pipe(fds) == 0 && write(fds[1], "5678\n", 5) == 5);
        close(fds[1]);
        free(path);
        CHECK(asprintf(&path, "/proc/self/fd/%d", fds[0]) > 0);
        CHECK(secret_read_private_file_locked(path, 16, &pin) == 0);
        CHECK_STREQ(pin, "5678");
        secret_locked_free(pin);
        close(fds[0]);
}

/* In a child: after secret_protect_process(), no core dumps at all. */
static void process_is_protected(void) {
        pid_t pid = fork();
        int status = 0;

        if (pid == 0) {
                struct rlimit rl;

                if (secret_protect_process() < 0 || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0 ||
                    getrlimit(RLIMIT_CORE, &rl) < 0 || rl.rlim_cur != 0 || rl.rlim_max != 0)
                        _exit(1);
                _exit(0);
        }
        CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 1); /* the parent is untouched */
}

/* json_read(): strict, bounded, and no member named twice at any depth,
 * however the name is spelt (escapes are the same name). */
static const struct {
        const char *text;
        bool ok;
        const char *why; /* part of the error */
} json_cases[] = {
        { "{\"profile\":\"a\",\"count\":1}", true, NULL },
        { " {\"a\":{\"b\":[1,2,null]}}\r\n", true, NULL },
        { "{\"profile\":\"a\",\"count\":1,\"profile\":\"b\"}", false, "an object names a member twice (line 1, column 34)" },
        { "{\"a\":{\"x\":1,\"x\":1}}", false, "names a member twice" },
        { "{\"a\":[{\"x\":1},{\"x\":2}],\"b\":{\"z\":1,\"z\":2}}", false, "names a member twice" },
        { "{\"profile\":1,\"\\u0070rofile\":2}", false, "names a member twice" },
        { "{\"a\":1} x", false, "is not one JSON object" },
        { "{\"a\":1}{\"a\":1}", false, "is not one JSON object" },
        { "[1,2]", false, "is not one JSON object" },
        { "{'a':1}", false, "is not valid JSON" }, /* json-c takes it; jansson does not */
        { "{\"a\":\"\xff\"}", false, "is not one JSON object" },
        { "{\"a\":{\"b\":{\"c\":{\"d\":{}}}}}", false, "is not one JSON object" }, /* deeper than 4 */
        { "{\"a\":{\"b\":{\"c\":1}}}", true, NULL },
        { "", false, "is not one JSON object" },
};

static void json_reads_strictly(void) {
        for (size_t i = 0; i < ELEMENTSOF(json_cases); i++) {
                json_object *o = NULL;
                int r = json_read(json_cases[i].text, strlen(json_cases[i].text), 4, 0, "the body", &o);

                if (json_cases[i].ok) {
                        CHECK(r == 0 && json_object_is_type(o, json_type_object));
                } else {
                        CHECK(r == -HWID_E_INVALID && !o);
                        CHECK_CONTAINS(hwid_strerror(r), "the body ");
                        CHECK_CONTAINS(hwid_strerror(r), json_cases[i].why);
                }
                json_object_put(o);
        }
        /* Not NUL-terminated, a NUL inside, trailing space when refused. */
        json_object *o = NULL;
        CHECK(json_read("{\"a\":1}xyz", 7, 4, 0, "t", &o) == 0);
        json_object_put(o);
        o = NULL;
        CHECK(json_read("{\"a\":1}\0", 8, 4, 0, "t", &o) == -HWID_E_INVALID && !o);
        CHECK(json_read("{\"a\":1} ", 8, 4, JSON_READ_NO_TRAILING_SPACE, "t", &o) == -HWID_E_INVALID && !o);
}

int main(void) {
        buf_is_capped();
        buf_reserve_keeps_data_in_place();
        secrets_compare();
        files_are_atomic_and_capped();
        secrets_are_locked();
        secret_files_whole_and_private();
        process_is_protected();
        json_reads_strictly();
        return check_done("test-common");
}
