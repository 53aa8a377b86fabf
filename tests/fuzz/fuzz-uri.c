/* libFuzzer target: the key URI parser must never crash, leak or accept
 * something it cannot describe. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "uri.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        key_uri *u = NULL;

        if (!s)
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        if (key_uri_parse(s, &u) == 0) {
                /* Anything accepted names a key precisely. */
                if (u->scheme == KEY_URI_PKCS11 && (!u->token || (!u->object && !u->id)))
                        abort();
                if (u->scheme == KEY_URI_TPM2 && !u->path &&
                    (u->handle < TPM_PERSISTENT_FIRST || u->handle > TPM_PERSISTENT_LAST))
                        abort();
                key_uri_free(u);
        }
        free(s);
        return 0;
}
