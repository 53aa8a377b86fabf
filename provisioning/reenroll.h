/* A device whose renewal was refused for good (its certificate expired,
 * or was superseded) comes back by TPM attestation alone, without a
 * bootstrap token, where the CA's profile allows it
 * (reenroll_by_attestation, docs/ATTESTATION.md "Coming back by
 * attestation"): the TPM proves its EK and certifies a new key made in
 * it (the attestation of hwid join --attest, the challenge naming the
 * identity), POST /csr carries no credential but that evidence, and the
 * certificate becomes DIR's next generation (the old keys are deleted
 * once it is on disk).  hwid agent does it by itself. */
#pragma once

#include <stdbool.h>

#include "renew.h"

/* Uses o's dir, tcti, ek, http_timeout, progress and note.  Fails with
 * the CA's refusal (4xx: reenroll_refused()), or with what may pass
 * (server or TPM unavailable). */
int reenroll_run(const renew_opts *o, renew_result *ret);

/* Whether r, a failure of reenroll_run, is the CA's answer (the device
 * must join again with a token) rather than something to try again. */
bool reenroll_refused(int r);
