#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "progress.h"
#include "renew-key.h"
#include "uri.h"
#include "x509-util.h"

#define say(o, ...) progress_say((o)->progress, (o)->progress_data, __VA_ARGS__)

static int uri_printf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int uri_printf(char **ret, const char *fmt, ...) {
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(ret, fmt, ap);
        va_end(ap);
        return n < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
}

/* A PKCS#11 key of generation gen: the current label without its "-gN"
 * suffix, plus "-g<gen>". */
static int p11_key_uri(key_uri *u, int gen, char **ret) {
        char label[300];
        const char *base = u->object ? u->object : "hwid";
        const char *dash = strstr(base, "-g");
        int n = dash && dash[2] && strspn(dash + 2, "0123456789") == strlen(dash + 2) ? (int) (dash - base)
                                                                                      : (int) strlen(base);
        CK_ATTRIBUTE attr = { CKA_LABEL, label, 0 };

        snprintf(label, sizeof(label), "%.*s-g%d", n, base, gen);
        attr.ulValueLen = strlen(label);
        p11_kit_uri_clear_attribute(u->p11, CKA_ID);
        if (p11_kit_uri_set_attribute(u->p11, &attr) != P11_KIT_URI_OK ||
            p11_kit_uri_format(u->p11, P11_KIT_URI_FOR_ANY, ret) != P11_KIT_URI_OK)
                return hwid_fail(HWID_E_URI, "cannot derive the next key's URI");
        return 0;
}

/* Where a new key for the next generation goes: a TPM key file in that
 * generation's directory; a persistent TPM key at a handle the TPM lists
 * as free, from the current one up; a PKCS#11 key under a "-gN" label. */
static int fresh_key_uri(const renew_opts *o, const device_state *s, char **ret) {
        _cleanup_(key_uri_freep) key_uri *u = NULL;
        hsm_options ho = { .tcti = o->tcti };
        int gen = s->generation + 1, r;
        uint32_t h;

        if ((r = key_uri_parse(s->key_uri, &u)) < 0)
                return r;
        if (u->scheme == KEY_URI_TPM2 && u->path)
                return uri_printf(ret, "tpm2:file=%s/gen-%d/key.tss2.pem", s->dir, gen);
        if (u->scheme != KEY_URI_TPM2)
                return p11_key_uri(u, gen, ret);
        if ((r = hwid_tpm_free_handle(&ho, u->handle + 1, &h)) < 0)
                return r;
        return uri_printf(ret, "tpm2:handle=0x%08x", h);
}

static int key_spki(hwid_key *k, char ret[65]) {
        return spki_sha256_hex(hwid_key_public(k), ret);
}

static int record_spki(void *userdata, EVP_PKEY *pub) {
        char spki[65];
        int r = spki_sha256_hex(pub, spki);

        return r < 0 ? r : device_write_next_key_spki(userdata, spki);
}

/* Makes the key at uri (never replacing anything there) and records its
 * public key hash: for a TPM key before the TPM keeps it (persisted, or
 * its file written), so that no crash leaves a key of ours unrecognised. */
static int make_key_at(const renew_opts *o, const device_state *s, const char *uri, hwid_key *current, bool hold,
                       hwid_key **ret) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        hsm_options ho = { .tcti = o->tcti, .before_keeping = record_spki, .userdata = (void *) s, .hold = hold };
        char spki[65];
        int r;

        say(o, "creating a new key in the device (%s)", uri);
        /* Recorded again after: PKCS#11 tokens make keys in place. */
        if ((r = hwid_key_create(uri, hwid_key_get_type(current), false, &ho, &k)) < 0 ||
            (r = key_spki(k, spki)) < 0 || (r = device_write_next_key_spki(s, spki)) < 0)
                return r;
        *ret = TAKE_PTR(k);
        return 0;
}

/* A key file in the next generation's own directory: nobody but hwid
 * writes there, so it is hwid's even if its hash was never recorded. */
static bool in_next_gen_dir(const device_state *s, const char *uri) {
        _cleanup_free_ char *prefix = NULL;

        return uri_printf(&prefix, "tpm2:file=%s/gen-%d/", s->dir, s->generation + 1) >= 0 &&
               strncmp(uri, prefix, strlen(prefix)) == 0;
}

/* The key an interrupted renewal recorded at uri: made there if missing,
 * taken if it is the one that renewal made, *ret NULL if it is not. */
static int resume_key(const renew_opts *o, const device_state *s, const char *uri, hwid_key *current, bool hold,
                      hwid_key **ret) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        hsm_options ho = { .tcti = o->tcti, .hold = hold };
        char want[65], got[65];
        bool recorded;
        int r = hwid_key_open(uri, &ho, &k);

        if (r == -HWID_E_KEY_NOT_FOUND) {
                /* Recorded again first: that forgets a stale key.spki. */
                if ((r = device_write_next_key(s, uri)) < 0)
                        return r;
                return make_key_at(o, s, uri, current, hold, ret);
        }
        if (r < 0 || (r = key_spki(k, got)) < 0)
                return r;
        recorded = device_read_next_key_spki(s, want) >= 0;
        if (recorded ? strcmp(want, got) != 0 : !in_next_gen_dir(s, uri)) {
                say(o, "%s holds a key this device did not make there: leaving it alone", uri);
                *ret = NULL;
                return 0;
        }
        say(o, "reusing the new key of an interrupted renewal (%s)", uri);
        /* Recorded again: writing key.uri forgets key.spki. */
        if ((r = device_write_next_key(s, uri)) < 0 || (r = device_write_next_key_spki(s, got)) < 0)
                return r;
        *ret = TAKE_PTR(k);
        return 0;
}

static int keep_current(const device_state *s, hwid_key **ret, char **ret_uri) {
        char *uri = strdup(s->key_uri);
        int r;

        if (!uri)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = device_write_next_key(s, uri)) < 0) {
                free(uri);
                return r;
        }
        *ret = NULL;
        *ret_uri = uri;
        return 0;
}

int renew_pick_key(const renew_opts *o, const device_state *s, hwid_key *current, bool rotate, bool hold,
                   hwid_key **ret, char **ret_uri) {
        _cleanup_free_ char *uri = NULL;
        hwid_key *k = NULL;
        int r = device_read_next_key(s, &uri);

        if (r < 0 && r != -HWID_E_NOT_FOUND)
                return r;
        /* An interrupted renewal's key comes first, rotating or not; one
         * that kept the current key is no new key to resume when rotating
         * (a renewal refused for want of one: hwid renew --est --rotate). */
        if (r == -HWID_E_NOT_FOUND ? !rotate : strcmp(uri, s->key_uri) == 0 && !rotate)
                return keep_current(s, ret, ret_uri);
        if (uri && strcmp(uri, s->key_uri) == 0)
                free(TAKE_PTR(uri));
        if (uri && (r = resume_key(o, s, uri, current, hold, &k)) < 0)
                return r;
        if (!k) {
                free(TAKE_PTR(uri));
                if ((r = fresh_key_uri(o, s, &uri)) < 0 || (r = device_write_next_key(s, uri)) < 0 ||
                    (r = make_key_at(o, s, uri, current, hold, &k)) < 0)
                        return r;
        }
        *ret = k;
        *ret_uri = TAKE_PTR(uri);
        return 0;
}

int renew_delete_known_key(const device_key_ref *ref, const char *tcti, progress_fn fn, void *userdata) {
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        hsm_options ho = { .tcti = tcti };
        char got[65];
        int r = hwid_key_open(ref->uri, &ho, &k);

        if (r == -HWID_E_KEY_NOT_FOUND)
                return 0;
        if (r < 0 || (r = key_spki(k, got)) < 0)
                return r;
        if (!ref->spki[0] || strcmp(ref->spki, got) != 0) {
                progress_say(fn, userdata, "leaving the key at %s alone: it is not the one this device made there",
                             ref->uri);
                return 0;
        }
        progress_say(fn, userdata, "removing the previous key %s", ref->uri);
        return hwid_key_delete(k);
}
