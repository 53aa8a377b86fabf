/* The keys of renewals: which key a renewal certifies, and which keys it
 * may delete afterwards.  The rule is that hwid touches only keys it made:
 * a renewal records the URI of a new key in DIR before making it, and its
 * public key hash (key.spki) before the TPM keeps it (persists it or its
 * file is written; right after, for a PKCS#11 key), always before the CA
 * is asked; a later
 * run reuses a key at that URI only if its hash matches, and a key is
 * deleted only if DIR knows its hash (its certificate's, or key.spki).
 * Anything else found at a URI (another program's key, a persistent
 * handle taken meanwhile) is left alone. */
#pragma once

#include <stdbool.h>

#include "device.h"
#include "renew.h"

/* The key the next certificate will carry, recorded in DIR (gen-(N+1))
 * before the server is asked: the current one (*ret NULL: use current),
 * the one an interrupted renewal made, or — when rotating — a new one
 * made in the device at a fresh URI (a persistent key at a handle the TPM
 * lists as free).  hold: a new key stays loaded (hsm_options.hold), for a
 * renewal that signs the CSR and certifies the key one after the other. */
int renew_pick_key(const renew_opts *o, const device_state *s, hwid_key *current, bool rotate, bool hold,
                   hwid_key **ret, char **ret_uri);

/* Deletes the key at ref->uri if it is the one DIR knows (ref->spki);
 * another key found there is left alone, and said so through fn. */
int renew_delete_known_key(const device_key_ref *ref, const char *tcti, progress_fn fn, void *userdata);
