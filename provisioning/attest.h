/* The device's half of TPM attestation over HTTP (docs/ATTESTATION.md),
 * for hwid join --attest, hwid factory --attest and hwid renew:
 *
 *   device_attest_begin()  reads the EK certificate, makes the AK (kept
 *                          loaded: it is answered at once) and asks the CA
 *                          for a challenge (POST /v1/attest);
 *   device_attest_body()   answers it for the device key (ActivateCredential,
 *                          Certify; the AK is flushed) and returns the JSON
 *                          body of POST /csr or POST /v1/renew.
 *
 * Whatever fails, device_attest_free() leaves nothing loaded in the TPM. */
#pragma once

#include "client.h"
#include "hsm.h"
#include "tpm-attest.h"

typedef struct device_attest device_attest;

/* auth: "Bearer <token>", or NULL (a TPM on the CA's EK allowlist, or a
 * renewal whose session cs authenticates with the current certificate). */
int device_attest_begin(client_session *cs, const char *auth, const char *tcti, tpm_ek_alg alg,
                        device_attest **ret);
/* The same for a device coming back by attestation without a token
 * (reenroll.h): the challenge names identity, the name it comes back as. */
int device_attest_begin_as(client_session *cs, const char *auth, const char *identity, const char *tcti,
                           tpm_ek_alg alg, device_attest **ret);
/* {"csr": csr_pem, "attestation": {...}}; caller frees. */
int device_attest_body(device_attest *d, hwid_key *key, const char *csr_pem, char **ret_json);
/* The EK the CA was asked about ("ecc-p256", ...), for progress lines. */
const char *device_attest_ek(const device_attest *d);
void device_attest_free(device_attest *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(device_attest *, device_attest_free)
