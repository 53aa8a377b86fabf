/* p11-read-secret: asks a PKCS#11 token for the secret value of a key, the
 * way an attacker holding the PIN would, and reports what the token says.
 * It is the device-side proof that a key's private value is refused, and
 * independent of hwid (its own few PKCS#11 calls, no hwid code): OpenSC's
 * pkcs11-tool cannot do this ("--read-object --type privkey" only prints
 * "reading private keys not (yet) supported" and exits 0 for any key).
 *
 *   p11-read-secret MODULE TOKEN_LABEL OBJECT_LABEL PIN_FILE
 *
 * Finds the one private or secret key labelled OBJECT_LABEL and asks for
 * CKA_VALUE, CKA_PRIVATE_EXPONENT, CKA_PRIME_1 and CKA_PRIME_2, printing a
 * line per attribute: "refused (CKR_ATTRIBUTE_SENSITIVE)", "absent" or
 * "READABLE (N bytes)".  Values are never printed and are wiped after use.
 * Exit 0: nothing readable and at least one refusal; 1: a secret value was
 * handed out; 2: setup error (message on stderr). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <p11-kit/pkcs11.h>

#define MAX_SLOTS 64
#define MAX_FOUND 8

static CK_FUNCTION_LIST *p11;

static int die(const char *what, CK_RV rv) {
        fprintf(stderr, "p11-read-secret: %s failed (0x%lx)\n", what, (unsigned long) rv);
        return 2;
}

static int load_module(const char *path) {
        CK_RV (*get_list)(CK_FUNCTION_LIST_PTR_PTR);
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        CK_RV rv;

        if (!h) {
                fprintf(stderr, "p11-read-secret: %s\n", dlerror());
                return 2;
        }
        *(void **) &get_list = dlsym(h, "C_GetFunctionList");
        if (!get_list)
                return die("finding C_GetFunctionList", CKR_GENERAL_ERROR);
        rv = get_list(&p11);
        if (rv != CKR_OK)
                return die("C_GetFunctionList", rv);
        rv = p11->C_Initialize(NULL);
        return rv == CKR_OK ? 0 : die("C_Initialize", rv);
}

static int find_slot(const char *label, CK_SLOT_ID *ret) {
        CK_SLOT_ID slots[MAX_SLOTS];
        CK_ULONG n = MAX_SLOTS;
        char padded[32];
        CK_RV rv;

        memset(padded, ' ', sizeof(padded));
        memcpy(padded, label, strnlen(label, sizeof(padded)));
        rv = p11->C_GetSlotList(CK_TRUE, slots, &n);
        if (rv != CKR_OK)
                return die("C_GetSlotList", rv);
        for (CK_ULONG i = 0; i < n; i++) {
                CK_TOKEN_INFO ti;

                if (p11->C_GetTokenInfo(slots[i], &ti) == CKR_OK && memcmp(ti.label, padded, 32) == 0) {
                        *ret = slots[i];
                        return 0;
                }
        }
        fprintf(stderr, "p11-read-secret: no token labelled '%s'\n", label);
        return 2;
}

static int login(CK_SESSION_HANDLE s, const char *pin_file) {
        char pin[256] = "";
        FILE *f = fopen(pin_file, "re");
        size_t len;
        CK_RV rv;

        if (!f) {
                perror("p11-read-secret: PIN file");
                return 2;
        }
        len = fread(pin, 1, sizeof(pin) - 1, f);
        fclose(f);
        while (len > 0 && (pin[len - 1] == '\n' || pin[len - 1] == '\r'))
                len--;
        rv = p11->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR) pin, len);
        memset(pin, 0, sizeof(pin));
        return rv == CKR_OK ? 0 : die("C_Login", rv);
}

/* The one private or secret key labelled label (public keys share it). */
static int find_key(CK_SESSION_HANDLE s, const char *label, CK_OBJECT_HANDLE *ret) {
        CK_ATTRIBUTE tmpl = { CKA_LABEL, (void *) label, strlen(label) };
        CK_OBJECT_HANDLE found[MAX_FOUND];
        CK_ULONG n = 0, keys = 0;
        CK_RV rv;

        rv = p11->C_FindObjectsInit(s, &tmpl, 1);
        if (rv == CKR_OK)
                rv = p11->C_FindObjects(s, found, MAX_FOUND, &n);
        p11->C_FindObjectsFinal(s);
        if (rv != CKR_OK)
                return die("C_FindObjects", rv);
        for (CK_ULONG i = 0; i < n; i++) {
                CK_OBJECT_CLASS cls;
                CK_ATTRIBUTE a = { CKA_CLASS, &cls, sizeof(cls) };

                if (p11->C_GetAttributeValue(s, found[i], &a, 1) == CKR_OK &&
                    (cls == CKO_PRIVATE_KEY || cls == CKO_SECRET_KEY)) {
                        *ret = found[i];
                        keys++;
                }
        }
        if (keys == 1)
                return 0;
        fprintf(stderr, "p11-read-secret: %lu private/secret keys labelled '%s'\n", (unsigned long) keys, label);
        return 2;
}

/* 1 if the token handed out the value, 0 if it refused, -1 if absent. */
static int try_read(CK_SESSION_HANDLE s, CK_OBJECT_HANDLE key, CK_ATTRIBUTE_TYPE type, const char *name) {
        CK_ATTRIBUTE a = { type, NULL, 0 };
        CK_RV rv = p11->C_GetAttributeValue(s, key, &a, 1);

        if (rv == CKR_OK && a.ulValueLen != CK_UNAVAILABLE_INFORMATION && a.ulValueLen > 0) {
                a.pValue = calloc(1, a.ulValueLen);
                rv = a.pValue ? p11->C_GetAttributeValue(s, key, &a, 1) : CKR_HOST_MEMORY;
                if (a.pValue)
                        memset(a.pValue, 0, a.ulValueLen);
                free(a.pValue);
                if (rv == CKR_OK) {
                        printf("%s: READABLE (%lu bytes)\n", name, (unsigned long) a.ulValueLen);
                        return 1;
                }
        }
        if (rv == CKR_ATTRIBUTE_SENSITIVE) {
                printf("%s: refused (CKR_ATTRIBUTE_SENSITIVE)\n", name);
                return 0;
        }
        printf("%s: absent (0x%lx)\n", name, (unsigned long) rv);
        return -1;
}

int main(int argc, char **argv) {
        static const struct {
                CK_ATTRIBUTE_TYPE type;
                const char *name;
        } secrets[] = {
                { CKA_VALUE, "CKA_VALUE" },
                { CKA_PRIVATE_EXPONENT, "CKA_PRIVATE_EXPONENT" },
                { CKA_PRIME_1, "CKA_PRIME_1" },
                { CKA_PRIME_2, "CKA_PRIME_2" },
        };
        CK_SESSION_HANDLE s;
        CK_OBJECT_HANDLE key;
        CK_SLOT_ID slot;
        int r, readable = 0, refused = 0;
        CK_RV rv;

        if (argc != 5) {
                fprintf(stderr, "usage: p11-read-secret MODULE TOKEN_LABEL OBJECT_LABEL PIN_FILE\n");
                return 2;
        }
        if ((r = load_module(argv[1])) || (r = find_slot(argv[2], &slot)))
                return r;
        rv = p11->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s);
        if (rv != CKR_OK)
                return die("C_OpenSession", rv);
        if ((r = login(s, argv[4])) || (r = find_key(s, argv[3], &key)))
                return r;
        for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
                r = try_read(s, key, secrets[i].type, secrets[i].name);
                readable += r == 1;
                refused += r == 0;
        }
        p11->C_Logout(s);
        p11->C_CloseSession(s);
        p11->C_Finalize(NULL);
        return readable ? 1 : refused ? 0 : 2;
}
