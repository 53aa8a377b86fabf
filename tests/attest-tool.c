/* attest-tool: runs the TPM attestation exchange end to end for
 * tests/integration/attest-crypto.sh: the device side (hsm/tpm-attest.h)
 * against a real TPM (swtpm), the CA side (service/attest/attest-verify.h) in
 * software, in one process; options swap in what an attacker would send.
 *
 *   attest-tool exchange --key URI --roots PATH... [options]
 *   attest-tool ek-export --out DIR [--ek ALG]    EK cert and public of a TPM
 *   attest-tool ek-verify --roots PATH... FILE    the CA's EK chain check only
 *   attest-tool dup-key --out FILE                a duplicable signing key file
 *
 * A refusal prints "attest-tool: STAGE: reason" (STAGE: begin, challenge,
 * respond, verify) and exits 1. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "attest-verify.h"
#include "error.h"
#include "fsutil.h"
#include "hsm.h"
#include "ossl-util.h"
#include "tpm-attest.h"
#include "tpm-internal.h"

#define MAX_ROOTS 8

typedef struct opts {
        const char *key, *tcti, *ek_from, *ak_public, *csr_key, *count_log, *out;
        const char *roots[MAX_ROOTS];
        size_t n_roots;
        tpm_ek_alg ek;
        bool other_nonce, replay, check_transient, warm, late, malformed_first, wrong_secret;
} opts;

static int die(const char *stage, int r) {
        fprintf(stderr, "attest-tool: %s: %s\n", stage, hwid_strerror(r));
        return 1;
}

static void hex_print(const char *label, const uint8_t *p, size_t n) {
        printf("%s: ", label);
        for (size_t i = 0; i < n; i++)
                printf("%02x", p[i]);
        printf("\n");
}

/* Invariant 5, checked in-process: swtpm serves one connection at a time
 * and ours is open, so tpm2_getcap could not get in. */
static int check_transient(const opts *o, const char *when) {
        static const uint32_t ranges[] = { TPM2_TRANSIENT_FIRST, TPM2_LOADED_SESSION_FIRST,
                                           TPM2_ACTIVE_SESSION_FIRST };
        tpm_conn *c = NULL, *locked = NULL;
        int r, left = 0;

        if (!o->check_transient)
                return 0;
        r = tpm_conn_get(o->tcti ? o->tcti : getenv("HWID_TCTI"), &c);
        if (r >= 0)
                r = tpm_conn_lock(c, &locked);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(ranges); i++) {
                TPMS_CAPABILITY_DATA *cap = NULL;
                TSS2_RC rc = Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                                TPM2_CAP_HANDLES, ranges[i], 64, NULL, &cap);

                if (rc != TSS2_RC_SUCCESS)
                        r = tpm_fail(c, rc, "GetCapability");
                else
                        for (uint32_t j = 0; j < cap->data.handles.count; j++)
                                if ((cap->data.handles.handle[j] >> 24) == (ranges[i] >> 24)) {
                                        fprintf(stderr, "attest-tool: handle 0x%08x left %s\n",
                                                cap->data.handles.handle[j], when);
                                        left++;
                                }
                Esys_Free(cap);
        }
        tpm_conn_unlockp(&locked);
        if (c)
                tpm_conn_unref(c);
        if (r < 0)
                return die(when, r);
        if (left)
                return 1;
        printf("no-transient: %s\n", when);
        return 0;
}

static long file_lines(const char *path) {
        FILE *f = fopen(path, "r");
        long n = 0;
        int ch;

        if (!f)
                return -1;
        while ((ch = getc(f)) != EOF)
                n += ch == '\n';
        fclose(f);
        return n;
}

static int read_bin(const char *path, size_t max, uint8_t **ret, size_t *ret_len) {
        char *data = NULL;
        int r = read_file_capped(path, max, &data, ret_len);

        if (r >= 0)
                *ret = (uint8_t *) data;
        return r;
}

/* The CSR's key: the device key's public part, or another key's. */
static int csr_key(const opts *o, hwid_key *key, EVP_PKEY **ret) {
        hsm_options ho = { .tcti = o->tcti };
        hwid_key *other = NULL;
        int r;

        if (!o->csr_key) {
                *ret = EVP_PKEY_dup(hwid_key_public(key));
                return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        r = hwid_key_open(o->csr_key, &ho, &other);
        if (r < 0)
                return r;
        *ret = EVP_PKEY_dup(hwid_key_public(other));
        hwid_key_free(other);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* A signature before the exchange, as a join signs its CSR: the key file's
 * key is then a saved context, and the Certify needs no CreatePrimary. */
static int warm_key(hwid_key *key) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        uint8_t sig[512];
        size_t len = sizeof(sig);
        int r;

        if (!ctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = hwid_key_sign_init(key, ctx, NULL);
        if (r < 0)
                return r;
        if (EVP_DigestSign(ctx, sig, &len, (const uint8_t *) "warm", 4) <= 0)
                return hwid_fail_signing("the warm-up signature");
        return 0;
}

/* The verifier borrows its roots and table: the caller frees all three. */
static int make_verifier(const opts *o, attest_roots **roots, attest_fresh **fresh, attest_verifier **ret) {
        int r;

        r = attest_roots_load(o->roots, o->n_roots, roots);
        if (r >= 0)
                r = attest_fresh_new_memory(16, fresh);
        if (r >= 0)
                r = attest_verifier_new(*roots, *fresh, 60, ret);
        return r;
}

typedef struct swap {
        uint8_t *ek_cert, *ek_pub, *ak_pub;
        size_t ek_cert_len, ek_pub_len, ak_pub_len;
} swap;

static void swap_free(swap *s) {
        free(s->ek_cert);
        free(s->ek_pub);
        free(s->ak_pub);
}

/* The request the device sends, with what --ek-from / --ak-public swap in. */
static int make_request(const opts *o, tpm_attest *a, swap *s, attest_request *req) {
        _cleanup_free_ char *p1 = NULL, *p2 = NULL;
        int r;

        req->ek_cert = tpm_attest_ek_cert(a, &req->ek_cert_len);
        req->ek_public = tpm_attest_ek_public(a, &req->ek_public_len);
        req->ak_public = tpm_attest_ak_public(a, &req->ak_public_len);
        if (o->ek_from) {
                if (asprintf(&p1, "%s/ek.der", o->ek_from) < 0 || asprintf(&p2, "%s/ek.pub", o->ek_from) < 0)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                r = read_bin(p1, 65536, &s->ek_cert, &s->ek_cert_len);
                if (r >= 0)
                        r = read_bin(p2, 65536, &s->ek_pub, &s->ek_pub_len);
                if (r < 0)
                        return r;
                *req = (attest_request) { s->ek_cert, s->ek_cert_len, s->ek_pub, s->ek_pub_len,
                                          req->ak_public, req->ak_public_len };
        }
        if (o->ak_public) {
                r = read_bin(o->ak_public, 65536, &s->ak_pub, &s->ak_pub_len);
                if (r < 0)
                        return r;
                req->ak_public = s->ak_pub;
                req->ak_public_len = s->ak_pub_len;
        }
        return 0;
}

static attest_evidence evidence_of(const attest_challenge *c, const tpm_attest_answer *ans) {
        return (attest_evidence) {
                .id = c->id,
                .activated = ans->activated, .activated_len = ans->activated_len,
                .certify_info = ans->certify_info, .certify_info_len = ans->certify_info_len,
                .signature = ans->signature, .signature_len = ans->signature_len,
                .key_public = ans->key_public, .key_public_len = ans->key_public_len,
        };
}

/* CA: verify (and with --replay, verify the same answer again). */
static int ca_verify(const opts *o, attest_verifier *v, hwid_key *key, const attest_challenge *c,
                     const tpm_attest_answer *ans) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        attest_evidence ev = evidence_of(c, ans);
        uint64_t now = o->late ? c->expires : (uint64_t) time(NULL);
        attest_fact fact;
        int r;

        r = csr_key(o, key, &pkey);
        if (r >= 0 && o->malformed_first) {
                /* Malformed evidence is refused as such and leaves the
                 * challenge for the real answer. */
                attest_evidence bad = ev;

                bad.key_public_len--;
                r = attest_evidence_verify(v, &bad, pkey, now, &fact);
                if (r != -HWID_E_INVALID) {
                        fprintf(stderr, "attest-tool: malformed evidence: got %d, not invalid_argument\n", r);
                        return 1;
                }
                printf("malformed refused: %s\n", hwid_strerror(r));
                r = 0;
        }
        if (r >= 0)
                r = attest_evidence_verify(v, &ev, pkey, now, &fact);
        if (r < 0)
                return die("verify", r);
        hex_print("ek-sha256", fact.ek_cert_sha256, sizeof(fact.ek_cert_sha256));
        hex_print("ak-name", fact.ak_name.name, fact.ak_name.size);
        printf("verified\n");
        if (!o->replay)
                return 0;
        r = attest_evidence_verify(v, &ev, pkey, now, &fact);
        if (r >= 0) {
                fprintf(stderr, "attest-tool: replay: accepted a second time\n");
                return 1;
        }
        printf("replay refused: %s\n", hwid_strerror(r));
        return 0;
}

/* Device answers the challenge (over another nonce with --other-nonce). */
static int device_respond(const opts *o, tpm_attest *a, hwid_key *key, const attest_challenge *c,
                          tpm_attest_answer **ret) {
        uint8_t other[ATTEST_NONCE_LEN];
        tpm_attest_challenge tc = {
                .credential = c->credential, .credential_len = c->credential_len,
                .secret = c->seed, .secret_len = c->seed_len,
                .nonce = c->nonce, .nonce_len = sizeof(c->nonce),
        };

        if (o->other_nonce) {
                memcpy(other, c->nonce, sizeof(other));
                other[0] ^= 0xff;
                tc.nonce = other;
        }
        return tpm_attest_respond(a, key, &tc, ret);
}

static int cmd_exchange(const opts *o) {
        hsm_options ho = { .tcti = o->tcti };
        _cleanup_(hwid_key_freep) hwid_key *key = NULL;
        _cleanup_(tpm_attest_freep) tpm_attest *a = NULL;
        _cleanup_(tpm_attest_answer_freep) tpm_attest_answer *ans = NULL;
        _cleanup_(attest_verifier_freep) attest_verifier *v = NULL;
        _cleanup_(attest_roots_freep) attest_roots *roots = NULL;
        _cleanup_(attest_fresh_freep) attest_fresh *fresh = NULL;
        _cleanup_(swap_free) swap s = { 0 };
        attest_request req = { 0 };
        attest_challenge c;
        long l0 = 0;
        int r;

        if (!o->key || o->n_roots == 0)
                return fprintf(stderr, "attest-tool: exchange needs --key and --roots\n"), 2;
        r = hwid_key_open(o->key, &ho, &key);
        if (r >= 0 && o->warm)
                r = warm_key(key);
        if (r >= 0)
                r = make_verifier(o, &roots, &fresh, &v);
        if (r < 0)
                return die("setup", r);
        if (o->count_log)
                l0 = file_lines(o->count_log);
        r = tpm_attest_begin(&ho, o->ek, &a);
        if (r < 0)
                return die("begin", r);
        printf("ek: %s\n", tpm_ek_alg_to_string(tpm_attest_ek_alg(a)));
        if (check_transient(o, "after begin"))
                return 1;
        r = make_request(o, a, &s, &req);
        if (r >= 0)
                r = attest_challenge_new(v, &req, (uint64_t) time(NULL), &c);
        if (r < 0)
                return die("challenge", r);
        r = device_respond(o, a, key, &c, &ans);
        if (o->count_log)
                printf("tpm-log-lines: %ld %ld\n", l0, file_lines(o->count_log));
        if (check_transient(o, r < 0 ? "after a failed respond" : "after respond"))
                return 1;
        if (r < 0)
                return die("respond", r);
        if (o->wrong_secret) /* what a device that cannot activate must guess */
                ans->activated[0] ^= 1;
        return ca_verify(o, v, key, &c, ans);
}

static int write_bytes(const char *dir, const char *name, const uint8_t *p, size_t n) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return write_file_atomic(path, p, n, 0644);
}

static int cmd_ek_export(const opts *o) {
        hsm_options ho = { .tcti = o->tcti };
        _cleanup_(tpm_attest_freep) tpm_attest *a = NULL;
        const uint8_t *p;
        size_t n;
        int r;

        if (!o->out)
                return fprintf(stderr, "attest-tool: ek-export needs --out DIR\n"), 2;
        r = tpm_attest_begin(&ho, o->ek, &a);
        if (r >= 0) {
                p = tpm_attest_ek_cert(a, &n);
                r = write_bytes(o->out, "ek.der", p, n);
        }
        if (r >= 0) {
                p = tpm_attest_ek_public(a, &n);
                r = write_bytes(o->out, "ek.pub", p, n);
        }
        if (r >= 0) {
                p = tpm_attest_ak_public(a, &n);
                r = write_bytes(o->out, "ak.pub", p, n);
        }
        if (r < 0)
                return die("ek-export", r);
        printf("ek: %s\n", tpm_ek_alg_to_string(tpm_attest_ek_alg(a)));
        return 0;
}

/* The certificate of a PEM or DER file, as DER. */
static int cert_der(const char *path, uint8_t **ret, size_t *ret_len) {
        _cleanup_(X509_freep) X509 *x = NULL;
        _cleanup_(BIO_free_allp) BIO *bio = NULL;
        unsigned char *der = NULL;
        uint8_t *data = NULL;
        size_t len;
        int r, n;

        r = read_bin(path, 65536, &data, &len);
        if (r < 0)
                return r;
        bio = BIO_new_mem_buf(data, (int) len);
        x = bio ? PEM_read_bio_X509(bio, NULL, NULL, NULL) : NULL;
        if (!x) { /* DER already */
                *ret = OPENSSL_memdup(data, len);
                *ret_len = len;
                free(data);
                return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        free(data);
        n = i2d_X509(x, &der);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode %s", path);
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}

static int cmd_ek_verify(const opts *o, const char *file) {
        _cleanup_(attest_roots_freep) attest_roots *roots = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        uint8_t *der = NULL;
        size_t len;
        int r;

        r = attest_roots_load(o->roots, o->n_roots, &roots);
        if (r >= 0)
                r = cert_der(file, &der, &len);
        if (r >= 0)
                r = attest_ek_cert_verify(roots, der, len, &x);
        OPENSSL_free(der);
        if (r < 0)
                return die("ek-verify", r);
        printf("chains\n");
        return 0;
}

/* A signing key without fixedTPM and fixedParent (duplicable: its owner
 * could export it with TPM2_Duplicate), as a hwid key file under the usual
 * parent: everything else about it is like a `hwid key create` key. */
static int make_dup_key(tpm_conn *c, const char *path) {
        static const TPM2B_SENSITIVE_CREATE no_auth;
        static const TPM2B_DATA no_data;
        static const TPML_PCR_SELECTION no_pcr;
        _cleanup_(tpm_tr_flush) tpm_tr primary = TPM_TR(c);
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        _cleanup_(esys_freep) TPM2B_PRIVATE *priv = NULL;
        _cleanup_free_ char *pem = NULL;
        TPM2B_PUBLIC tmpl;
        size_t len;
        TSS2_RC rc;
        int r;

        tpm_primary_template(&tmpl);
        rc = Esys_CreatePrimary(c->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &no_auth, &tmpl, &no_data, &no_pcr, &primary.tr, NULL, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "CreatePrimary");
        r = tpm_key_template(HWID_KEY_EC_P256, &tmpl);
        if (r < 0)
                return r;
        tmpl.publicArea.objectAttributes &= ~(TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT);
        rc = Esys_Create(c->esys, primary.tr, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &no_auth, &tmpl,
                         &no_data, &no_pcr, &priv, &pub, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "Create");
        r = tpm_keyfile_encode(pub, priv, TPM_KEYFILE_PARENT, &pem, &len);
        return r < 0 ? r : write_file_atomic(path, pem, len, 0600);
}

static int cmd_dup_key(const opts *o) {
        tpm_conn *c = NULL, *locked = NULL;
        int r;

        if (!o->out)
                return fprintf(stderr, "attest-tool: dup-key needs --out FILE\n"), 2;
        r = tpm_conn_get(o->tcti ? o->tcti : getenv("HWID_TCTI"), &c);
        if (r >= 0)
                r = tpm_conn_lock(c, &locked);
        if (r >= 0)
                r = make_dup_key(c, o->out);
        tpm_conn_unlockp(&locked);
        if (c)
                tpm_conn_unref(c);
        return r < 0 ? die("dup-key", r) : 0;
}

static int parse_opts(int argc, char **argv, opts *o) {
        static const struct option longopts[] = {
                { "key", required_argument, NULL, 'k' },
                { "roots", required_argument, NULL, 'R' },
                { "tcti", required_argument, NULL, 'T' },
                { "ek", required_argument, NULL, 'e' },
                { "ek-from", required_argument, NULL, 'E' },
                { "ak-public", required_argument, NULL, 'A' },
                { "csr-key", required_argument, NULL, 'C' },
                { "count-log", required_argument, NULL, 'L' },
                { "out", required_argument, NULL, 'o' },
                { "other-nonce", no_argument, NULL, 'n' },
                { "replay", no_argument, NULL, 'r' },
                { "check-transient", no_argument, NULL, 't' },
                { "warm", no_argument, NULL, 'w' },
                { "late", no_argument, NULL, 'l' },
                { "malformed-first", no_argument, NULL, 'm' },
                { "wrong-secret", no_argument, NULL, 's' },
                {},
        };
        int ch;

        while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1)
                switch (ch) {
                case 'k': o->key = optarg; break;
                case 'R':
                        if (o->n_roots == MAX_ROOTS)
                                return -1;
                        o->roots[o->n_roots++] = optarg;
                        break;
                case 'T': o->tcti = optarg; break;
                case 'e':
                        if (tpm_ek_alg_from_string(optarg, &o->ek) < 0)
                                return -1;
                        break;
                case 'E': o->ek_from = optarg; break;
                case 'A': o->ak_public = optarg; break;
                case 'C': o->csr_key = optarg; break;
                case 'L': o->count_log = optarg; break;
                case 'o': o->out = optarg; break;
                case 'n': o->other_nonce = true; break;
                case 'r': o->replay = true; break;
                case 't': o->check_transient = true; break;
                case 'w': o->warm = true; break;
                case 'l': o->late = true; break;
                case 'm': o->malformed_first = true; break;
                case 's': o->wrong_secret = true; break;
                default: return -1;
                }
        return 0;
}

int main(int argc, char **argv) {
        opts o = { 0 };
        const char *cmd = argc > 1 ? argv[1] : "";
        int r;

        if (parse_opts(argc - 1, argv + 1, &o) < 0) {
                fprintf(stderr, "attest-tool: bad options\n");
                return 2;
        }
        setenv("TSS2_LOG", "all+NONE", 0); /* tpm2-tss logs to stderr otherwise */
        r = hsm_init();
        if (r < 0)
                return die("init", r);
        if (strcmp(cmd, "exchange") == 0)
                return cmd_exchange(&o);
        if (strcmp(cmd, "ek-export") == 0)
                return cmd_ek_export(&o);
        if (strcmp(cmd, "ek-verify") == 0 && optind + 1 == argc - 1)
                return cmd_ek_verify(&o, argv[optind + 1]);
        if (strcmp(cmd, "dup-key") == 0)
                return cmd_dup_key(&o);
        fprintf(stderr, "usage: attest-tool exchange|ek-export|ek-verify|dup-key [options]\n");
        return 2;
}
