/* The PKCS#11 key backend: keys generated on a token (through p11-kit),
 * found again by URI, and used for signing without ever leaving it.
 *
 * Per signature the token sees exactly C_SignInit + C_Sign on a pooled
 * session: the private-key handle is found once at open and the token is
 * logged in once (p11-module.c), so nothing else is needed -- until the
 * token is lost, when p11-session.c brings it back and the signature is
 * tried once more. */
#include <stdio.h>
#include <string.h>

#include <openssl/objects.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "backend.h"
#include "error.h"
#include "ossl-util.h"
#include "p11-internal.h"

#define OLD_MAX 64     /* objects a forced create may replace */
#define ID_LEN 16      /* random CKA_ID when the URI gives none */
#define SIG_RAW_MAX 512

static void p11_key_free(void *obj) {
        p11_key *k = obj;

        if (!k)
                return;
        if (k->tok) {
                p11_token_remove_key(k->tok, k);
                p11_token_release(k->tok);
        }
        EVP_PKEY_free(k->pub_key);
        free(k->desc);
        free(k->object);
        free(k->id);
        free(k);
}

/* What finds the key again after a recovery: the URI's object= and id=. */
static int key_keep_uri(p11_key *k, const key_uri *uri) {
        if (uri->object && !(k->object = strdup(uri->object)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (uri->id) {
                k->id = malloc(uri->id_len);
                if (!k->id)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                memcpy(k->id, uri->id, uri->id_len);
                k->id_len = uri->id_len;
        }
        return 0;
}

/* Builds the backend object; takes the caller's token reference. */
static int key_new(p11_token **t, CK_OBJECT_HANDLE priv, CK_OBJECT_HANDLE pub, CK_KEY_TYPE kt,
                   EVP_PKEY *pkey, const key_uri *uri, p11_key **ret) {
        p11_key *k = calloc(1, sizeof(*k));
        int r;

        if (!k || !(k->desc = p11_key_desc(uri))) {
                free(k);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        r = key_keep_uri(k, uri);
        if (r < 0) {
                p11_key_free(k);
                return r;
        }
        k->priv = priv;
        k->pub = pub;
        k->kt = kt;
        k->raw_len = kt == CKK_EC ? 2 * (size_t) ((EVP_PKEY_get_bits(pkey) + 7) / 8)
                                  : (size_t) EVP_PKEY_get_size(pkey);
        EVP_PKEY_up_ref(pkey);
        k->pub_key = pkey;
        k->tok = TAKE_PTR(*t);
        p11_token_add_key(k->tok, k);
        *ret = k;
        return 0;
}

static int p11_open(const key_uri *uri, const hsm_options *opts, void **ret_obj, EVP_PKEY **ret_pub) {
        _cleanup_(p11_token_releasep) p11_token *t = NULL;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        _cleanup_free_ char *desc = p11_key_desc(uri);
        CK_OBJECT_HANDLE priv = CK_INVALID_HANDLE, pub = CK_INVALID_HANDLE;
        CK_KEY_TYPE kt;
        hwid_key_type type;
        p11_key *k = NULL;
        int r;

        if (!desc)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = p11_token_acquire(uri, &t)) < 0 ||
            (r = p11_sess_get(t, &s)) < 0 ||
            (r = p11_find_private(t, s.h, uri, desc, &priv)) < 0 ||
            (r = p11_find_public(t, s.h, priv, uri, desc, &pub)) < 0 ||
            (r = p11_load_public(t, s.h, priv, pub, &kt, &pkey, &type)) < 0 ||
            (r = key_new(&t, priv, pub, kt, pkey, uri, &k)) < 0)
                return r;
        *ret_obj = k;
        *ret_pub = TAKE_PTR(pkey);
        return 0;
}

/* ---- create ---- */

static int add_unique(CK_OBJECT_HANDLE *set, CK_ULONG *n, const CK_OBJECT_HANDLE *add, CK_ULONG n_add) {
        for (CK_ULONG i = 0; i < n_add; i++) {
                bool seen = false;

                for (CK_ULONG j = 0; j < *n; j++)
                        seen = seen || set[j] == add[i];
                if (seen)
                        continue;
                if (*n >= OLD_MAX)
                        return hwid_fail(HWID_E_INVALID, "more than %d objects match the key URI", OLD_MAX);
                set[(*n)++] = add[i];
        }
        return 0;
}

/* Public keys paired (by CKA_ID) with the private keys privs[]. */
static int add_paired_publics(p11_token *t, CK_SESSION_HANDLE s, const CK_OBJECT_HANDLE *privs,
                              CK_ULONG n_privs, CK_OBJECT_HANDLE old[OLD_MAX], CK_ULONG *n_old) {
        CK_OBJECT_CLASS cls = CKO_PUBLIC_KEY;
        CK_OBJECT_HANDLE found[P11_MATCH_MAX];
        CK_ULONG n;
        int r;

        for (CK_ULONG i = 0; i < n_privs; i++) {
                _cleanup_free_ uint8_t *id = NULL;
                size_t id_len = 0;
                CK_ATTRIBUTE tmpl[2] = { { CKA_CLASS, &cls, sizeof(cls) }, { CKA_ID, NULL, 0 } };

                r = p11_attr_get(t, s, privs[i], CKA_ID, "reading CKA_ID", &id, &id_len);
                if (r < 0)
                        return r;
                if (id_len == 0)
                        continue;
                tmpl[1].pValue = id;
                tmpl[1].ulValueLen = id_len;
                if ((r = p11_find_objects(t, s, tmpl, 2, found, &n)) < 0 ||
                    (r = add_unique(old, n_old, found, n)) < 0)
                        return r;
        }
        return 0;
}

/* The key a create would replace: private keys matching the URI (refused
 * unless force), and with force also their public keys and any public
 * key matching the URI, so no orphan is left to confuse a later open. */
static int find_existing(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri, const char *desc, bool force,
                         CK_OBJECT_HANDLE old[OLD_MAX], CK_ULONG *ret_n) {
        CK_OBJECT_CLASS priv_cls = CKO_PRIVATE_KEY, pub_cls = CKO_PUBLIC_KEY;
        CK_OBJECT_HANDLE privs[P11_MATCH_MAX], pubs[P11_MATCH_MAX];
        CK_ATTRIBUTE tmpl[3];
        CK_ULONG n_privs, n_pubs, n = 0;
        int r;

        r = p11_find_objects(t, s, tmpl, p11_uri_template(uri, &priv_cls, tmpl), privs, &n_privs);
        if (r < 0)
                return r;
        if (n_privs > 0 && !force)
                return hwid_fail(HWID_E_KEY_EXISTS, "token '%s' already holds a key %s "
                                                    "(use --force to replace it)", t->label, desc);
        if (force) {
                if ((r = add_unique(old, &n, privs, n_privs)) < 0 ||
                    (r = add_paired_publics(t, s, privs, n_privs, old, &n)) < 0 ||
                    (r = p11_find_objects(t, s, tmpl, p11_uri_template(uri, &pub_cls, tmpl),
                                          pubs, &n_pubs)) < 0 ||
                    (r = add_unique(old, &n, pubs, n_pubs)) < 0)
                        return r;
        }
        *ret_n = n;
        return 0;
}

/* Storage for the two generation templates; attributes point into it. */
typedef struct gen_tmpl {
        CK_OBJECT_CLASS priv_class, pub_class;
        CK_KEY_TYPE kt;
        CK_BBOOL yes, no;
        CK_ULONG bits;
        CK_BYTE exponent[3];
        uint8_t id[ID_LEN];
        unsigned char *ec_params;
        CK_ATTRIBUTE priv[12], pub[12];
        CK_ULONG n_priv, n_pub;
} gen_tmpl;

static void gen_tmpl_done(gen_tmpl *g) {
        OPENSSL_free(g->ec_params);
}

/* The attributes both objects share: CKA_ID (the URI's, else random) and
 * CKA_LABEL (the URI's object=, if any). */
static int gen_tmpl_ids(gen_tmpl *g, const key_uri *uri) {
        const void *id = uri->id;
        size_t id_len = uri->id_len;

        if (!id) {
                if (RAND_bytes(g->id, sizeof(g->id)) != 1)
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot make a random CKA_ID");
                id = g->id;
                id_len = sizeof(g->id);
        }
        g->priv[g->n_priv++] = g->pub[g->n_pub++] = (CK_ATTRIBUTE) { CKA_ID, (void *) id, id_len };
        if (uri->object)
                g->priv[g->n_priv++] = g->pub[g->n_pub++] =
                        (CK_ATTRIBUTE) { CKA_LABEL, uri->object, strlen(uri->object) };
        return 0;
}

static int gen_tmpl_init(gen_tmpl *g, const key_uri *uri, hwid_key_type type) {
        int nid = hsm_key_type_curve_nid(type), n;

        if (nid == NID_undef && hsm_key_type_rsa_bits(type) == 0)
                return hwid_fail(HWID_E_KEY_TYPE, "unsupported key type %d", (int) type);
        *g = (gen_tmpl) { .priv_class = CKO_PRIVATE_KEY, .pub_class = CKO_PUBLIC_KEY, .yes = CK_TRUE,
                          .no = CK_FALSE, .kt = nid != NID_undef ? CKK_EC : CKK_RSA,
                          .bits = (CK_ULONG) hsm_key_type_rsa_bits(type), .exponent = { 0x01, 0x00, 0x01 } };
        CK_ATTRIBUTE priv[] = {
                { CKA_CLASS, &g->priv_class, sizeof(g->priv_class) }, { CKA_KEY_TYPE, &g->kt, sizeof(g->kt) },
                { CKA_TOKEN, &g->yes, 1 },     { CKA_PRIVATE, &g->yes, 1 }, { CKA_SENSITIVE, &g->yes, 1 },
                { CKA_EXTRACTABLE, &g->no, 1 }, { CKA_SIGN, &g->yes, 1 },    { CKA_DECRYPT, &g->no, 1 },
                /* Signing only: tokens default these to TRUE (SoftHSM does). */
                { CKA_UNWRAP, &g->no, 1 },      { CKA_DERIVE, &g->no, 1 },
        };
        CK_ATTRIBUTE pub[] = {
                { CKA_CLASS, &g->pub_class, sizeof(g->pub_class) }, { CKA_KEY_TYPE, &g->kt, sizeof(g->kt) },
                { CKA_TOKEN, &g->yes, 1 }, { CKA_VERIFY, &g->yes, 1 }, { CKA_ENCRYPT, &g->no, 1 },
                { CKA_WRAP, &g->no, 1 },   { CKA_DERIVE, &g->no, 1 },
        };
        memcpy(g->priv, priv, sizeof(priv));
        memcpy(g->pub, pub, sizeof(pub));
        g->n_priv = ELEMENTSOF(priv);
        g->n_pub = ELEMENTSOF(pub);
        if (g->kt == CKK_EC) {
                n = i2d_ASN1_OBJECT(OBJ_nid2obj(nid), &g->ec_params);
                if (n <= 0)
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the curve OID");
                g->pub[g->n_pub++] = (CK_ATTRIBUTE) { CKA_EC_PARAMS, g->ec_params, (CK_ULONG) n };
        } else {
                g->pub[g->n_pub++] = (CK_ATTRIBUTE) { CKA_MODULUS_BITS, &g->bits, sizeof(g->bits) };
                g->pub[g->n_pub++] = (CK_ATTRIBUTE) { CKA_PUBLIC_EXPONENT, g->exponent, sizeof(g->exponent) };
        }
        return gen_tmpl_ids(g, uri);
}

static int generate(p11_token *t, CK_SESSION_HANDLE s, const key_uri *uri, hwid_key_type type,
                    CK_OBJECT_HANDLE *ret_priv, CK_OBJECT_HANDLE *ret_pub) {
        _cleanup_(gen_tmpl_done) gen_tmpl g = { 0 };
        CK_MECHANISM mech = { 0 };
        CK_RV rv;
        int r;

        r = gen_tmpl_init(&g, uri, type);
        if (r < 0)
                return r;
        mech.mechanism = g.kt == CKK_EC ? CKM_EC_KEY_PAIR_GEN : CKM_RSA_PKCS_KEY_PAIR_GEN;
        rv = t->mod->C_GenerateKeyPair(s, &mech, g.pub, g.n_pub, g.priv, g.n_priv, ret_pub, ret_priv);
        if (rv != CKR_OK)
                return p11_fail(rv, t->label, "C_GenerateKeyPair");
        return 0;
}

/* Rollback: errors are ignored so that the first failure is reported. */
static void destroy_quietly(p11_token *t, CK_SESSION_HANDLE s, CK_OBJECT_HANDLE priv, CK_OBJECT_HANDLE pub) {
        t->mod->C_DestroyObject(s, priv);
        t->mod->C_DestroyObject(s, pub);
}

static int destroy_old(p11_token *t, CK_SESSION_HANDLE s, const CK_OBJECT_HANDLE *old, CK_ULONG n) {
        for (CK_ULONG i = 0; i < n; i++) {
                CK_RV rv = t->mod->C_DestroyObject(s, old[i]);

                if (rv != CKR_OK)
                        return p11_fail(rv, t->label, "removing the key being replaced");
        }
        return 0;
}

/* New pair first, old objects after: a failed generation leaves the old
 * key in place, and any failure after it removes the new pair again. */
static int p11_create(const key_uri *uri, hwid_key_type type, bool force, const hsm_options *opts,
                      void **ret_obj, EVP_PKEY **ret_pub) {
        _cleanup_(p11_token_releasep) p11_token *t = NULL;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        _cleanup_free_ char *desc = p11_key_desc(uri);
        CK_OBJECT_HANDLE old[OLD_MAX], priv = CK_INVALID_HANDLE, pub = CK_INVALID_HANDLE;
        CK_ULONG n_old = 0;
        CK_KEY_TYPE kt;
        hwid_key_type got;
        p11_key *k = NULL;
        int r;

        if (!desc)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = p11_token_acquire(uri, &t)) < 0 || (r = p11_sess_get(t, &s)) < 0 ||
            (r = find_existing(t, s.h, uri, desc, force, old, &n_old)) < 0 ||
            (r = generate(t, s.h, uri, type, &priv, &pub)) < 0)
                return r;
        r = p11_load_public(t, s.h, priv, pub, &kt, &pkey, &got);
        if (r >= 0 && got != type)
                r = hwid_fail(HWID_E_KEY_TYPE, "token '%s' generated a %s key instead of %s", t->label,
                              hwid_key_type_to_string(got), hwid_key_type_to_string(type));
        if (r >= 0)
                r = destroy_old(t, s.h, old, n_old);
        if (r >= 0)
                r = key_new(&t, priv, pub, kt, pkey, uri, &k);
        if (r < 0) {
                destroy_quietly(s.t, s.h, priv, pub);
                return r;
        }
        *ret_obj = k;
        *ret_pub = TAKE_PTR(pkey);
        return 0;
}

/* ---- sign ---- */

static const struct {
        int nid;
        size_t len;
        CK_MECHANISM_TYPE hash;
        CK_RSA_PKCS_MGF_TYPE mgf;
} digests[] = {
        { NID_sha256, 32, CKM_SHA256, CKG_MGF1_SHA256 },
        { NID_sha384, 48, CKM_SHA384, CKG_MGF1_SHA384 },
        { NID_sha512, 64, CKM_SHA512, CKG_MGF1_SHA512 },
};

/* What goes to C_Sign: the mechanism and the bytes it signs. */
typedef struct sign_req {
        CK_MECHANISM mech;
        CK_RSA_PKCS_PSS_PARAMS pss;
        unsigned char *digest_info; /* PKCS#1 v1.5 only */
        const uint8_t *in;
        size_t in_len;
} sign_req;

static void sign_req_done(sign_req *q) {
        OPENSSL_free(q->digest_info);
}

/* DER DigestInfo for PKCS#1 v1.5, built by OpenSSL (X509_SIG is that
 * structure): AlgorithmIdentifier with NULL parameters, then the digest. */
static int digest_info(sign_req *q, int md_nid, const uint8_t *digest, size_t len) {
        _cleanup_(X509_SIG_freep) X509_SIG *sig = X509_SIG_new();
        X509_ALGOR *alg;
        ASN1_OCTET_STRING *oct;
        int n;

        if (!sig)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot build DigestInfo");
        X509_SIG_getm(sig, &alg, &oct);
        if (!X509_ALGOR_set0(alg, OBJ_nid2obj(md_nid), V_ASN1_NULL, NULL) ||
            !ASN1_OCTET_STRING_set(oct, digest, (int) len) ||
            (n = i2d_X509_SIG(sig, &q->digest_info)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode DigestInfo");
        q->in = q->digest_info;
        q->in_len = (size_t) n;
        return 0;
}

static int sign_req_init(sign_req *q, const p11_key *k, hsm_sig_scheme scheme, int md_nid,
                         const uint8_t *digest, size_t len) {
        size_t i = 0;

        while (i < ELEMENTSOF(digests) && digests[i].nid != md_nid)
                i++;
        if (i == ELEMENTSOF(digests) || digests[i].len != len)
                return hwid_fail(HWID_E_INVALID, "PKCS#11 signing needs a SHA-256/384/512 digest");
        if ((scheme == HSM_SIG_ECDSA) != (k->kt == CKK_EC))
                return hwid_fail(HWID_E_INVALID, "signature scheme does not fit the key %s", k->desc);
        q->in = digest;
        q->in_len = len;
        switch (scheme) {
        case HSM_SIG_ECDSA:
                q->mech.mechanism = CKM_ECDSA;
                return 0;
        case HSM_SIG_RSA_PKCS1:
                q->mech.mechanism = CKM_RSA_PKCS;
                return digest_info(q, md_nid, digest, len);
        case HSM_SIG_RSA_PSS:
                q->pss = (CK_RSA_PKCS_PSS_PARAMS) { digests[i].hash, digests[i].mgf, len };
                q->mech = (CK_MECHANISM) { CKM_RSA_PKCS_PSS, &q->pss, sizeof(q->pss) };
                return 0;
        }
        return hwid_fail(HWID_E_INVALID, "unknown signature scheme %d", (int) scheme);
}

static CK_RV sign_once(p11_key *k, CK_SESSION_HANDLE s, sign_req *q, uint8_t *out, CK_ULONG *len) {
        CK_RV rv = k->tok->mod->C_SignInit(s, &q->mech, k->priv);

        if (rv == CKR_OK)
                rv = k->tok->mod->C_Sign(s, (CK_BYTE *) q->in, q->in_len, out, len);
        return rv;
}

/* One C_SignInit + C_Sign on a pooled session; the token's answer.  A
 * session left with an operation active is swapped, not reused; one that
 * failed because the token is lost goes back as it is (the recovery
 * closes them all). */
static CK_RV sign_attempt(p11_key *k, sign_req *q, uint8_t *out, CK_ULONG *len) {
        CK_SESSION_HANDLE s;
        CK_RV rv = p11_session_borrow(k->tok, &s);

        if (rv != CKR_OK)
                return rv;
        rv = sign_once(k, s, q, out, len);
        p11_session_put(k->tok, s, rv == CKR_BUFFER_TOO_SMALL || rv == CKR_OPERATION_ACTIVE);
        return rv;
}

static int sign_failed(p11_key *k, CK_RV rv) {
        char what[300];

        snprintf(what, sizeof(what), "signing with the key %s", k->desc);
        /* The key was there when opened: its token went away, not the key. */
        if (p11_rv_recoverable(rv))
                return hwid_fail(HWID_E_HSM, "%s: token '%s' is unavailable (%s, 0x%lx); it is reopened as soon as "
                                 "it is back", what, k->tok->label, p11_kit_strerror(rv), (unsigned long) rv);
        return p11_fail(rv, k->tok->label, what);
}

/* A signature, tried once more after a recovery when the token was lost
 * (a session or the login gone, the token removed and put back, the HSM
 * restarted); a second loss in a row fails this request. */
static int sign_raw(p11_key *k, sign_req *q, uint8_t *out, CK_ULONG *out_len) {
        CK_ULONG len = *out_len;
        CK_RV rv = CKR_OK;
        int r;

        for (int attempt = 0; attempt < 2; attempt++) {
                unsigned gen = p11_token_gen(k->tok);

                len = *out_len;
                rv = sign_attempt(k, q, out, &len);
                if (!p11_rv_recoverable(rv) || attempt > 0)
                        break;
                r = p11_recover(k->tok, gen);
                if (r < 0)
                        return r;
        }
        if (rv != CKR_OK)
                return sign_failed(k, rv);
        if (len != *out_len)
                return hwid_fail(HWID_E_HSM, "signing with the key %s: token '%s' returned %lu bytes, expected %lu",
                                 k->desc, k->tok->label, (unsigned long) len, (unsigned long) *out_len);
        return 0;
}

static int p11_sign(void *obj, hsm_sig_scheme scheme, int md_nid, const uint8_t *digest, size_t digest_len,
                    uint8_t *sig, size_t *siglen) {
        p11_key *k = obj;
        _cleanup_(sign_req_done) sign_req q = { 0 };
        uint8_t raw[SIG_RAW_MAX];
        CK_ULONG raw_len = k->raw_len;
        int r;

        if (raw_len > sizeof(raw) || raw_len % 2 != 0)
                return hwid_fail(HWID_E_INTERNAL, "unexpected signature size %lu", (unsigned long) raw_len);
        if (k->kt == CKK_RSA && *siglen < raw_len)
                return hwid_fail(HWID_E_INVALID, "signature buffer of %zu bytes is too small", *siglen);
        if ((r = sign_req_init(&q, k, scheme, md_nid, digest, digest_len)) < 0 ||
            (r = sign_raw(k, &q, raw, &raw_len)) < 0)
                return r;
        if (k->kt == CKK_EC)
                return hsm_ecdsa_raw_to_der(raw, raw_len / 2, raw + raw_len / 2, raw_len / 2, sig, siglen);
        memcpy(sig, raw, raw_len);
        *siglen = raw_len;
        return 0;
}

/* ---- custody, remove ---- */

/* Asks for the length only: a token that keeps the secret in answers
 * CKR_ATTRIBUTE_SENSITIVE (or CKR_ATTRIBUTE_TYPE_INVALID where the key
 * type has no such attribute), so the secret never enters this process;
 * any length means the token would hand it out. */
static bool secret_readable(p11_key *k, CK_SESSION_HANDLE s) {
        static const CK_ATTRIBUTE_TYPE types[] = { CKA_VALUE, CKA_PRIVATE_EXPONENT, CKA_PRIME_1 };

        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                CK_ATTRIBUTE a = { types[i], NULL, 0 };
                CK_RV rv = k->tok->mod->C_GetAttributeValue(s, k->priv, &a, 1);

                if (rv == CKR_OK && a.ulValueLen != CK_UNAVAILABLE_INFORMATION && a.ulValueLen > 0)
                        return true;
        }
        return false;
}

static int p11_custody(void *obj, hwid_custody *ret) {
        p11_key *k = obj;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        CK_BBOOL v[5] = { 0 };
        CK_ATTRIBUTE a[5] = {
                { CKA_SENSITIVE, &v[0], 1 },         { CKA_ALWAYS_SENSITIVE, &v[1], 1 },
                { CKA_EXTRACTABLE, &v[2], 1 },       { CKA_NEVER_EXTRACTABLE, &v[3], 1 },
                { CKA_LOCAL, &v[4], 1 },
        };
        hwid_custody c = { .backend = "pkcs11" };
        CK_RV rv;
        int r;

        r = p11_sess_get(k->tok, &s);
        if (r < 0)
                return r;
        /* An attribute the token lacks comes back unavailable and reads false. */
        rv = k->tok->mod->C_GetAttributeValue(s.h, k->priv, a, ELEMENTSOF(a));
        if (rv != CKR_OK && rv != CKR_ATTRIBUTE_TYPE_INVALID && rv != CKR_ATTRIBUTE_SENSITIVE)
                return p11_fail(rv, k->tok->label, "reading the key's attributes");
        c.sensitive = a[0].ulValueLen == 1 && v[0];
        c.always_sensitive = a[1].ulValueLen == 1 && v[1];
        c.extractable = a[2].ulValueLen == 1 && v[2];
        c.never_extractable = a[3].ulValueLen == 1 && v[3];
        c.local = a[4].ulValueLen == 1 && v[4];
        c.value_readable = secret_readable(k, s.h);
        snprintf(c.location, sizeof(c.location), "PKCS#11 module %s, slot 0x%lx, token '%s', key %s",
                 k->tok->module_desc, (unsigned long) k->tok->slot, k->tok->label, k->desc);
        {
                _cleanup_free_ char *file = p11_kit_module_get_filename(k->tok->mod);
                snprintf(c.module_path, sizeof(c.module_path), "%s", file ? file : "");
        }
        *ret = c;
        return 0;
}

static int p11_remove(void *obj) {
        p11_key *k = obj;
        _cleanup_(p11_sess_putp) p11_sess s = { 0 };
        char what[300];
        CK_RV rv;
        int r;

        r = p11_sess_get(k->tok, &s);
        if (r < 0)
                return r;
        snprintf(what, sizeof(what), "removing the key %s", k->desc);
        rv = k->tok->mod->C_DestroyObject(s.h, k->priv);
        if (rv != CKR_OK)
                return p11_fail(rv, k->tok->label, what);
        k->priv = CK_INVALID_HANDLE;
        rv = k->tok->mod->C_DestroyObject(s.h, k->pub);
        if (rv != CKR_OK)
                return p11_fail(rv, k->tok->label, what);
        k->pub = CK_INVALID_HANDLE;
        return 0;
}

const hsm_backend hsm_backend_pkcs11 = {
        .name = "pkcs11",
        .create = p11_create,
        .open = p11_open,
        .sign = p11_sign,
        .custody = p11_custody,
        .remove = p11_remove,
        .free = p11_key_free,
};
