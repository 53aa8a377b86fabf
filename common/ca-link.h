/* Link certificates between two CA keys (RFC 4210 §4.4, a CA rollover):
 * NewWithOld certifies the new CA's key with the old one's, OldWithNew
 * the old key with the new one's.  A device adopts a new CA only through
 * a link from a key it already trusts, and hwidd serves only links that
 * hold: both make this one check. */
#pragma once

#include <stdint.h>

#include <openssl/x509.h>

/* Whether link certifies the CA certificate ca's key with signer's: its
 * signature verifies with signer's public key and names signer's subject
 * as its issuer; its subject and its public key are ca's; it and ca are
 * CA certificates that may sign certificates (CA:TRUE, keyCertSign); and
 * it is valid at now.  0, or -HWID_E_UNTRUSTED saying which failed. */
int ca_link_verify(X509 *link, X509 *signer, X509 *ca, int64_t now);
