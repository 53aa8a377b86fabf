/* attest-client: a second client of hwidd's attestation protocol, written
 * from docs/ATTESTATION.md, for tests/integration/attest-enroll.sh.  It
 * speaks HTTP to a real hwidd and uses a real TPM (swtpm), and can lie the
 * way an attacker would: another TPM's EK certificate, an AK of its own
 * making, a CSR for another key, an answer sent twice, a Certify made for
 * another challenge.  Each HTTP answer is printed as one line:
 *
 *   STEP: STATUS [SLUG: MESSAGE]      STEP: attest, csr, again
 *
 *   attest-client --server URL --ca FILE --key URI --cn NAME [--tcti TCTI]
 *       [--ek ALG] [--ek-from DIR] [--ak-public FILE] [--csr-key URI]
 *       [--guess] [--again] [--old-certify] [--csr-server URL] [--out FILE]
 *       [--cert FILE --cert-key URI [--cert-tcti TCTI]]
 *
 * With --cert, a renewal: mutual TLS with that certificate and its key
 * (in its own TPM), POST /v1/renew instead of POST /csr.
 *
 * The bootstrap token, if any, comes from $HWID_TOKEN.  Exit 0 when every
 * request was made (whatever hwidd answered), 1 when the client could not
 * make one. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>
#include <openssl/rand.h>

#include "base64.h"
#include "client.h"
#include "csr.h"
#include "error.h"
#include "fsutil.h"
#include "hsm.h"
#include "ossl-util.h"
#include "tpm-attest.h"

typedef struct opts {
        const char *server, *csr_server, *ca, *key, *cn, *tcti, *ek_from, *ak_public, *csr_key, *out;
        const char *cert, *cert_key, *cert_tcti;
        tpm_ek_alg ek;
        bool guess, again, old_certify;
} opts;

typedef struct challenge {
        char id[33];
        uint8_t *credential, *secret, *nonce;
        size_t credential_len, secret_len, nonce_len;
} challenge;

static void challenge_clear(challenge *c) {
        free(c->credential);
        free(c->secret);
        free(c->nonce);
        *c = (challenge) { 0 };
}

static int die(const char *what, int r) {
        fprintf(stderr, "attest-client: %s: %s\n", what, hwid_strerror(r));
        return 1;
}

static int read_bin(const char *path, uint8_t **ret, size_t *ret_len) {
        char *data = NULL;
        int r = read_file_capped(path, 65536, &data, ret_len);

        if (r >= 0)
                *ret = (uint8_t *) data;
        return r;
}

static void add_b64(json_object *o, const char *key, const uint8_t *p, size_t n) {
        char *s = NULL;

        if (base64_encode(p, n, false, &s) == 0)
                json_object_object_add(o, key, json_object_new_string(s));
        free(s);
}

static const char *text(json_object *o) {
        return json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* STEP: STATUS [SLUG: MESSAGE] */
static void report(const char *step, const client_response *resp) {
        json_object *o = json_tokener_parse(resp->body.data ? (const char *) resp->body.data : ""), *e, *m;

        if (resp->status < 300 || !o || !json_object_object_get_ex(o, "error", &e) ||
            !json_object_object_get_ex(o, "message", &m))
                printf("%s: %ld\n", step, resp->status);
        else
                printf("%s: %ld %s: %s\n", step, resp->status, json_object_get_string(e), json_object_get_string(m));
        fflush(stdout);
        json_object_put(o);
}

/* {"ek_cert", "ek_public", "ak_public"}, with what --ek-from and
 * --ak-public swap in. */
static int attest_body(const opts *o, const tpm_attest *a, char **ret) {
        _cleanup_free_ uint8_t *ek_cert = NULL, *ek_pub = NULL, *ak_pub = NULL;
        _cleanup_free_ char *p1 = NULL, *p2 = NULL;
        json_object *j = json_object_new_object();
        const uint8_t *p;
        size_t n;
        int r = 0;

        if (o->ek_from) {
                if (asprintf(&p1, "%s/ek.der", o->ek_from) < 0 || asprintf(&p2, "%s/ek.pub", o->ek_from) < 0)
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                if (r >= 0 && (r = read_bin(p1, &ek_cert, &n)) >= 0)
                        add_b64(j, "ek_cert", ek_cert, n);
                if (r >= 0 && (r = read_bin(p2, &ek_pub, &n)) >= 0)
                        add_b64(j, "ek_public", ek_pub, n);
        } else {
                p = tpm_attest_ek_cert(a, &n);
                add_b64(j, "ek_cert", p, n);
                p = tpm_attest_ek_public(a, &n);
                add_b64(j, "ek_public", p, n);
        }
        if (r >= 0 && o->ak_public) {
                if ((r = read_bin(o->ak_public, &ak_pub, &n)) >= 0)
                        add_b64(j, "ak_public", ak_pub, n);
        } else if (r >= 0) {
                p = tpm_attest_ak_public(a, &n);
                add_b64(j, "ak_public", p, n);
        }
        if (r >= 0 && !(*ret = strdup(text(j))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        json_object_put(j);
        return r;
}

static int get_b64(json_object *o, const char *key, uint8_t **ret, size_t *ret_len) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v))
                return hwid_fail(HWID_E_INVALID, "the challenge lacks %s", key);
        return base64_decode(json_object_get_string(v), (size_t) json_object_get_string_len(v), false, ret, ret_len);
}

/* POST /v1/attest; *ret_ok false when hwidd refused (reported). */
static int ask_challenge(const opts *o, client_session *cs, const char *auth, const tpm_attest *a, challenge *c,
                         bool *ret_ok) {
        _cleanup_free_ char *body = NULL;
        client_response resp;
        json_object *j = NULL, *id;
        int r = attest_body(o, a, &body);

        if (r >= 0)
                r = client_session_request(cs, "POST", "/v1/attest", auth, (const uint8_t *) body, strlen(body),
                                           "application/json", &resp);
        if (r < 0)
                return r;
        report("attest", &resp);
        *ret_ok = resp.status == 201;
        if (*ret_ok) {
                j = json_tokener_parse((const char *) resp.body.data);
                if (!j || !json_object_object_get_ex(j, "id", &id))
                        r = hwid_fail(HWID_E_INVALID, "a 201 without a challenge id");
                else
                        snprintf(c->id, sizeof(c->id), "%s", json_object_get_string(id));
                if (r >= 0 && (r = get_b64(j, "credential", &c->credential, &c->credential_len)) >= 0 &&
                    (r = get_b64(j, "secret", &c->secret, &c->secret_len)) >= 0)
                        r = get_b64(j, "nonce", &c->nonce, &c->nonce_len);
                json_object_put(j);
        }
        client_response_clear(&resp);
        return r;
}

/* The TPM's answer; with --guess, when the TPM cannot activate (the
 * credential was made for another TPM's EK), what such a device can only
 * guess: a random secret, and no Certify (the AK's public area instead). */
static int answer(const opts *o, tpm_attest *a, hwid_key *key, const challenge *c, tpm_attest_answer **ret) {
        tpm_attest_challenge tc = { c->credential, c->credential_len, c->secret, c->secret_len, c->nonce,
                                    c->nonce_len };
        tpm_attest_answer *ans = NULL;
        const uint8_t *ak;
        size_t n;
        int r = tpm_attest_respond(a, key, &tc, ret);

        if (r >= 0 || !o->guess)
                return r;
        printf("tpm: %s\n", hwid_strerror(r));
        ak = tpm_attest_ak_public(a, &n);
        if (!(ans = calloc(1, sizeof(*ans))) || !(ans->activated = malloc(32)) || !(ans->certify_info = malloc(1)) ||
            !(ans->signature = malloc(1)) || !(ans->key_public = malloc(n))) {
                tpm_attest_answer_free(ans);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        RAND_bytes(ans->activated, 32);
        ans->activated_len = 32;
        ans->certify_info[0] = ans->signature[0] = 0;
        ans->certify_info_len = ans->signature_len = 1;
        memcpy(ans->key_public, ak, n);
        ans->key_public_len = n;
        *ret = ans;
        return 0;
}

/* {"csr", "attestation": {...}} with the answer (its Certify perhaps
 * taken from another answer: old). */
static char *csr_body(const char *csr, const challenge *c, const tpm_attest_answer *ans,
                      const tpm_attest_answer *old) {
        json_object *j = json_object_new_object(), *at = json_object_new_object();
        const tpm_attest_answer *cert = old ? old : ans;
        char *s;

        json_object_object_add(at, "id", json_object_new_string(c->id));
        add_b64(at, "activated", ans->activated, ans->activated_len);
        add_b64(at, "certify_info", cert->certify_info, cert->certify_info_len);
        add_b64(at, "signature", cert->signature, cert->signature_len);
        add_b64(at, "key_public", cert->key_public, cert->key_public_len);
        json_object_object_add(j, "csr", json_object_new_string(csr));
        json_object_object_add(j, "attestation", at);
        s = strdup(text(j));
        json_object_put(j);
        return s;
}

static int make_csr(const opts *o, hwid_key *key, char **ret) {
        _cleanup_(hwid_key_freep) hwid_key *other = NULL;
        _cleanup_(X509_NAME_freep) X509_NAME *name = X509_NAME_new();
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        hsm_options ho = { .tcti = o->tcti };
        int r = 0;

        if (o->csr_key)
                r = hwid_key_open(o->csr_key, &ho, &other);
        if (r >= 0 && !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, (const unsigned char *) o->cn, -1, -1, 0))
                r = hwid_fail(HWID_E_INVALID, "bad CN");
        if (r >= 0)
                r = csr_build(other ? other : key, name, NULL, &req);
        if (r >= 0)
                r = csr_to_pem(req, ret);
        return r;
}

static int post_csr(const opts *o, const char *step, client_session *cs, const char *auth, const char *body) {
        client_response resp;
        int r = client_session_request(cs, "POST", o->cert ? "/v1/renew" : "/csr", auth, (const uint8_t *) body,
                                       strlen(body), "application/json", &resp);

        if (r < 0)
                return r;
        report(step, &resp);
        if (resp.status == 201 && o->out)
                r = write_file_atomic(o->out, (const char *) resp.body.data, resp.body.len, 0644);
        client_response_clear(&resp);
        return r;
}

/* With --old-certify: a first challenge answered but not sent; its
 * Certify goes with the second challenge's activation. */
static int first_answer(const opts *o, client_session *cs, const char *auth, tpm_attest *a, hwid_key *key,
                        tpm_attest_answer **ret) {
        challenge c = { 0 };
        bool ok = false;
        int r = ask_challenge(o, cs, auth, a, &c, &ok);

        if (r >= 0 && ok)
                r = answer(o, a, key, &c, ret);
        challenge_clear(&c);
        return r >= 0 && !ok ? hwid_fail(HWID_E_INVALID, "the first challenge was refused") : r;
}

static int run(const opts *o, client_session *cs, client_session *csr_cs, const char *auth) {
        hsm_options ho = { .tcti = o->tcti };
        _cleanup_(hwid_key_freep) hwid_key *key = NULL;
        _cleanup_(tpm_attest_freep) tpm_attest *a = NULL;
        _cleanup_(tpm_attest_answer_freep) tpm_attest_answer *ans = NULL, *old = NULL;
        _cleanup_free_ char *csr = NULL, *body = NULL;
        challenge c = { 0 };
        bool ok = false;
        int r;

        if ((r = hwid_key_open(o->key, &ho, &key)) < 0 || (r = tpm_attest_begin(&ho, o->ek, &a)) < 0)
                return die("tpm", r);
        if (o->old_certify && (r = first_answer(o, cs, auth, a, key, &old)) < 0)
                return die("first challenge", r);
        if ((r = ask_challenge(o, cs, auth, a, &c, &ok)) < 0 || !ok) {
                challenge_clear(&c);
                return r < 0 ? die("attest", r) : 0;
        }
        if ((r = answer(o, a, key, &c, &ans)) >= 0 && (r = make_csr(o, key, &csr)) >= 0 &&
            !(body = csr_body(csr, &c, ans, old)))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        challenge_clear(&c);
        if (r < 0)
                return die("answer", r);
        if ((r = post_csr(o, "csr", csr_cs, auth, body)) >= 0 && o->again)
                r = post_csr(o, "again", csr_cs, auth, body);
        return r < 0 ? die("csr", r) : 0;
}

static int parse(int argc, char **argv, opts *o) {
        static const struct option longopts[] = {
                { "server", required_argument, NULL, 's' }, { "csr-server", required_argument, NULL, 'S' },
                { "ca", required_argument, NULL, 'a' }, { "key", required_argument, NULL, 'k' },
                { "cn", required_argument, NULL, 'n' }, { "tcti", required_argument, NULL, 't' },
                { "ek", required_argument, NULL, 'e' }, { "ek-from", required_argument, NULL, 'f' },
                { "ak-public", required_argument, NULL, 'p' }, { "csr-key", required_argument, NULL, 'c' },
                { "out", required_argument, NULL, 'o' }, { "guess", no_argument, NULL, 'g' },
                { "again", no_argument, NULL, 'A' }, { "old-certify", no_argument, NULL, 'O' },
                { "cert", required_argument, NULL, 'C' }, { "cert-key", required_argument, NULL, 'K' },
                { "cert-tcti", required_argument, NULL, 'T' }, {},
        };
        int ch;

        while ((ch = getopt_long(argc, argv, "", longopts, NULL)) >= 0) {
                switch (ch) {
                case 's': o->server = optarg; break;
                case 'S': o->csr_server = optarg; break;
                case 'a': o->ca = optarg; break;
                case 'k': o->key = optarg; break;
                case 'n': o->cn = optarg; break;
                case 't': o->tcti = optarg; break;
                case 'e':
                        if (tpm_ek_alg_from_string(optarg, &o->ek) < 0)
                                return 2;
                        break;
                case 'f': o->ek_from = optarg; break;
                case 'p': o->ak_public = optarg; break;
                case 'c': o->csr_key = optarg; break;
                case 'o': o->out = optarg; break;
                case 'g': o->guess = true; break;
                case 'A': o->again = true; break;
                case 'O': o->old_certify = true; break;
                case 'C': o->cert = optarg; break;
                case 'K': o->cert_key = optarg; break;
                case 'T': o->cert_tcti = optarg; break;
                default: return 2;
                }
        }
        return o->server && o->ca && o->key && o->cn && !o->cert == !o->cert_key && optind == argc ? 0 : 2;
}

int main(int argc, char **argv) {
        _cleanup_(client_session_freep) client_session *cs = NULL, *cs2 = NULL;
        _cleanup_(hwid_key_freep) hwid_key *tls_key = NULL;
        _cleanup_free_ char *ca = NULL, *auth = NULL, *cert = NULL;
        const char *token = getenv("HWID_TOKEN");
        opts o = { 0 };
        client_opts co = { .timeout = 30 };
        size_t len;
        int r;

        setenv("TSS2_LOG", "all+NONE", 0);
        if (parse(argc, argv, &o) != 0) {
                fprintf(stderr, "usage: attest-client --server URL --ca FILE --key URI --cn NAME [options]\n");
                return 2;
        }
        if ((r = hsm_init()) < 0 || (r = read_file_capped(o.ca, 1 << 20, &ca, &len)) < 0)
                return die("setup", r);
        if (token && *token && asprintf(&auth, "Bearer %s", token) < 0)
                return die("setup", hwid_fail(HWID_E_NOMEM, NULL));
        co.ca_pem = ca;
        if (o.cert) {
                hsm_options ho = { .tcti = o.cert_tcti };
                if ((r = read_file_capped(o.cert, 1 << 20, &cert, &len)) < 0 ||
                    (r = hwid_key_open(o.cert_key, &ho, &tls_key)) < 0)
                        return die("setup", r);
                co.cert_pem = cert;
                co.key = tls_key;
        }
        co.server = o.server;
        r = client_session_new(&co, &cs);
        co.server = o.csr_server;
        if (r >= 0 && o.csr_server)
                r = client_session_new(&co, &cs2);
        if (r < 0)
                return die("setup", r);
        return run(&o, cs, cs2 ? cs2 : cs, auth);
}
