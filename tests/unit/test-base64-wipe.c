/* The base64 decoders leave no copy of what they decoded behind.
 * base64_decode() may decode a secret (an attestation answer): the copies
 * it makes on the way (the text in the standard alphabet, the re-encoding
 * that proves the text canonical, the result when it refuses the text)
 * are wiped before they are freed.  EST's HTTP Basic credentials hold a
 * token secret: refused because they hold a NUL, they are wiped whole,
 * not only up to the NUL.
 *
 * How: after a decode, this process's writable memory is searched for
 * those copies, read through /proc/self/mem so that freed blocks are read
 * as they are (AddressSanitizer keeps them, unpoisoned to no one, in its
 * quarantine).  The test's own buffers are mappings of their own, skipped
 * by the search. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "base64.h"
#include "est-wire.h"
#include "check.h"
#include "error.h"
#include "secret.h"

#define CHUNK ((size_t) 1 << 20)
#define REGION_MAX ((uintptr_t) 1 << 30) /* larger: AddressSanitizer's shadow */
#define SECRET_LEN 48

static uint8_t *own;  /* the test's buffers: one mapping, never searched */
static uint8_t *scan; /* where memory is read into */

static bool region_holds(int mem, uintptr_t start, uintptr_t end, const uint8_t *needle, size_t n) {
        for (uintptr_t at = start; at < end; at += CHUNK - n) {
                size_t want = end - at < CHUNK ? end - at : CHUNK;
                ssize_t got = pread(mem, scan, want, (off_t) at);

                if (got > 0 && memmem(scan, (size_t) got, needle, n))
                        return true;
                if (end - at <= CHUNK)
                        break;
        }
        return false;
}

/* Whether any writable mapping but the test's own holds needle. */
static bool memory_holds(const uint8_t *needle, size_t n) {
        FILE *maps = fopen("/proc/self/maps", "re");
        int mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
        char line[512], perms[8];
        uintptr_t start, end;
        bool found = false;

        CHECK(maps && mem >= 0);
        while (maps && mem >= 0 && !found && fgets(line, sizeof(line), maps))
                if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && perms[0] == 'r' && perms[1] == 'w' &&
                    end - start <= REGION_MAX && (start > (uintptr_t) own || end <= (uintptr_t) own) &&
                    (start > (uintptr_t) scan || end <= (uintptr_t) scan))
                        found = region_holds(mem, start, end, needle, n);
        if (maps)
                fclose(maps);
        if (mem >= 0)
                close(mem);
        return found;
}

/* SECRET_LEN random bytes whose base64url form uses '-' or '_', so that
 * its standard form is a string of its own. */
static void new_secret(uint8_t *secret, char *url_text) {
        char *enc = NULL;

        do {
                free(enc);
                CHECK(RAND_bytes(secret, SECRET_LEN) == 1);
                CHECK(base64_encode(secret, SECRET_LEN, true, &enc) == 0);
        } while (!strpbrk(enc, "-_"));
        strcpy(url_text, enc);
        secret_free(enc);
}

/* Decoded: the standard form and the re-encoding are gone with the input. */
static void decoded(void) {
        uint8_t *secret = own, *out = NULL;
        char *url = (char *) own + 64, *std = (char *) own + 192;
        size_t n = 0;

        new_secret(secret, url);
        for (size_t i = 0; i <= strlen(url); i++)
                std[i] = url[i] == '-' ? '+' : url[i] == '_' ? '/' : url[i];
        CHECK(base64_decode(url, strlen(url), true, &out, &n) == 0);
        CHECK(n == SECRET_LEN && memcmp(out, secret, n) == 0);
        secret_wipe(out, n);
        free(out);
        /* Past their first 16 bytes, which a freed block may lend to the
         * allocator's own bookkeeping. */
        CHECK(!memory_holds((const uint8_t *) std + 16, strlen(std) - 16));
        CHECK(!memory_holds((const uint8_t *) url + 16, strlen(url) - 16));
}

/* Refused (not canonical): the bytes it had decoded are gone. */
static void refused(void) {
        uint8_t *secret = own, *out = NULL;
        static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        char *std = (char *) own + 64, *enc = NULL;
        const char *last;
        size_t n = 0;

        CHECK(RAND_bytes(secret, SECRET_LEN - 1) == 1);
        CHECK(base64_encode(secret, SECRET_LEN - 1, false, &enc) == 0);
        strcpy(std, enc);
        secret_free(enc);
        /* 47 bytes end in "x=", whose x carries two unused bits: with one
         * of them set, the text decodes to the same bytes but is not their
         * encoding. */
        last = strchr(alphabet, std[strlen(std) - 2]);
        CHECK(last && (last - alphabet) % 2 == 0);
        std[strlen(std) - 2] = alphabet[(last - alphabet) + 1];
        CHECK(base64_decode(std, strlen(std), false, &out, &n) == -HWID_E_INVALID);
        CHECK(out == NULL);
        CHECK(!memory_holds(secret + 16, SECRET_LEN - 1 - 16)); /* as above */
}

/* Basic credentials with a NUL in them: refused, and wiped past the NUL. */
static void basic_refused(void) {
        uint8_t *plain = own;
        char *header = (char *) own + 128, *password = NULL, user[EST_USER_MAX + 1];
        char *enc = NULL;

        memcpy(plain, "abc123:x\0", 9);
        CHECK(RAND_bytes(plain + 9, 39) == 1);
        CHECK(base64_encode(plain, 48, false, &enc) == 0);
        snprintf(header, 256, "Basic %s", enc);
        secret_free(enc);
        CHECK(est_basic_parse(header, user, &password) == -HWID_E_INVALID);
        CHECK(password == NULL);
        CHECK(!memory_holds(plain + 24, 24)); /* as above */
}

int main(void) {
        own = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        scan = mmap(NULL, CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(own != MAP_FAILED && scan != MAP_FAILED);
        decoded();
        refused();
        basic_refused();
        return check_done("test-base64-wipe");
}
