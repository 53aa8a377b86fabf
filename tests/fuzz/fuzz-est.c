/* libFuzzer target: EST's wire format (common/est-wire.c) on hostile
 * input, both sides' parsers: a request body (base64), the PKCS#7 a
 * client receives, and an Authorization header.  Never a crash or leak;
 * what is accepted is what it claims to be. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "est-wire.h"
#include "secret.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char user[EST_USER_MAX + 1], *password = NULL, *pem = NULL, *s = malloc(size + 1);
        uint8_t *der = NULL;
        size_t len;

        if (!s)
                return 0;
        if (est_b64_decode(data, size, &der, &len) == 0) {
                if (len == 0)
                        abort();
                if (est_certs_only_to_pem(der, len, &pem) == 0 && strncmp(pem, "-----BEGIN CERTIFICATE-----", 27) != 0)
                        abort();
                free(pem);
                pem = NULL;
                free(der);
        }
        if (est_certs_only_to_pem(data, size, &pem) == 0 && !strstr(pem, "-----END CERTIFICATE-----"))
                abort();
        free(pem);
        memcpy(s, data, size);
        s[size] = '\0';
        if (est_basic_parse(s, user, &password) == 0) {
                if (!user[0] || strlen(user) > EST_USER_MAX || !password[0])
                        abort();
                secret_free(password);
        }
        free(s);
        return 0;
}
