/* EST (RFC 7030) in hwidd: est.c routes /.well-known/est/ (declared in
 * api.h); est-attrs.c says what a profile wants of a CSR. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "ca.h"

/* The CSR Attributes (RFC 7030 §4.5.2) of a profile's template p, DER:
 * challengePassword when it wants proof-of-possession linking, the key
 * algorithms (and curves) it accepts, the signature algorithm to use, and
 * the extension a request may carry (subjectAltName) when it grants any
 * SAN.  Caller frees *ret. */
int est_csrattrs_der(const ca_template *p, uint8_t **ret, size_t *ret_len);
