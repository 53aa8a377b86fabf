/* GnuTLS glue for hwidd: a server key that signs in the HSM/TPM, the
 * server certificate chain, and client certificate verification. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "error.h"
#include "http-internal.h"
#include "ossl-util.h"

#define HTTP_TLS_MAX_CHAIN 16 /* certificates served */

/* The certificates the handshakes use, as one set: replaced whole by
 * http_tls_set_certs() (a CA rollover: a new chain, new client trust
 * anchors).  Every set lives until the http_tls goes, since a session
 * may still use the one it was given (GnuTLS keeps no copy); a rollover
 * makes a few in a CA's life. */
typedef struct tls_certs {
        gnutls_pcert_st pcert[HTTP_TLS_MAX_CHAIN];
        unsigned npcert;
        X509_STORE *client_ca;  /* NULL: no mutual TLS */
        struct tls_certs *older;
} tls_certs;

struct http_tls {
        hwid_key *key;          /* borrowed */
        gnutls_privkey_t privkey;
        gnutls_pk_algorithm_t pk;
        int bits;
        hwid_key_type type;
        _Atomic(tls_certs *) certs; /* the current set */
        atomic_uint signing;    /* handshakes waiting for the HSM's signature now */
        gnutls_datum_t ticket_key; /* session tickets: made at start, never stored */
};

/* --- signing ------------------------------------------------------------ */

static bool hash_ok_for_key(const http_tls *t, gnutls_digest_algorithm_t h) {
        switch (t->type) {
        case HWID_KEY_EC_P256:
                return h == GNUTLS_DIG_SHA256;
        case HWID_KEY_EC_P384:
                return h == GNUTLS_DIG_SHA384 || h == GNUTLS_DIG_SHA256;
        default:
                return h == GNUTLS_DIG_SHA256 || h == GNUTLS_DIG_SHA384 || h == GNUTLS_DIG_SHA512;
        }
}

/* Which TLS signature schemes the key can make: ECDSA with a matching
 * SHA-2 for EC keys; PKCS#1 v1.5 and RSA-PSS (rsaEncryption keys, "RSAE")
 * with SHA-2 for RSA keys. */
static bool sign_algo_ok(const http_tls *t, gnutls_sign_algorithm_t algo) {
        gnutls_digest_algorithm_t h = gnutls_sign_get_hash_algorithm(algo);

        if (!hash_ok_for_key(t, h))
                return false;
        switch (algo) {
        case GNUTLS_SIGN_ECDSA_SHA256:
        case GNUTLS_SIGN_ECDSA_SHA384:
                return t->pk == GNUTLS_PK_ECDSA;
        case GNUTLS_SIGN_ECDSA_SECP256R1_SHA256:
                return t->type == HWID_KEY_EC_P256;
        case GNUTLS_SIGN_ECDSA_SECP384R1_SHA384:
                return t->type == HWID_KEY_EC_P384;
        case GNUTLS_SIGN_RSA_SHA256:
        case GNUTLS_SIGN_RSA_SHA384:
        case GNUTLS_SIGN_RSA_SHA512:
        case GNUTLS_SIGN_RSA_PSS_RSAE_SHA256:
        case GNUTLS_SIGN_RSA_PSS_RSAE_SHA384:
        case GNUTLS_SIGN_RSA_PSS_RSAE_SHA512:
                return t->pk == GNUTLS_PK_RSA;
        default:
                return false;
        }
}

static const char *digest_name(gnutls_digest_algorithm_t h) {
        return h == GNUTLS_DIG_SHA256 ? "SHA256"
             : h == GNUTLS_DIG_SHA384 ? "SHA384"
             : h == GNUTLS_DIG_SHA512 ? "SHA512" : NULL;
}

/* GNUTLS_SIGN_RSA_RAW hands over a PKCS#1 DigestInfo; the device wants the
 * digest and its algorithm.  Only a strict DER encoding of a SHA-2
 * DigestInfo is accepted. */
static int parse_digest_info(const gnutls_datum_t *di, const char **ret_md,
                             const uint8_t **ret_dgst, size_t *ret_len) {
        _cleanup_(X509_SIG_freep) X509_SIG *sig = NULL;
        const unsigned char *p = di->data;
        const X509_ALGOR *alg = NULL;
        const ASN1_OCTET_STRING *dgst = NULL;
        const char *md;
        int nid;

        sig = d2i_X509_SIG(NULL, &p, di->size);
        if (!sig || p != di->data + di->size)
                return -1;
        X509_SIG_get0(sig, &alg, &dgst);
        nid = OBJ_obj2nid(alg->algorithm);
        md = nid == NID_sha256 ? "SHA256" : nid == NID_sha384 ? "SHA384" : nid == NID_sha512 ? "SHA512" : NULL;
        if (!md || i2d_X509_SIG(sig, NULL) != (int) di->size)
                return -1;
        /* The digest points into di (the octet string's content is at the end). */
        *ret_len = (size_t) ASN1_STRING_length(dgst);
        *ret_dgst = di->data + di->size - *ret_len;
        *ret_md = md;
        return 0;
}

/* Signs a digest with the device key through hwid's provider. */
static int device_sign(http_tls *t, const char *md, const char *pad,
                       const uint8_t *dgst, size_t dlen, gnutls_datum_t *ret) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = NULL;
        OSSL_PARAM params[4], *p = params;
        size_t len = 0;
        uint8_t *sig;

        *p++ = OSSL_PARAM_construct_utf8_string(OSSL_SIGNATURE_PARAM_DIGEST, (char *) md, 0);
        if (pad) {
                *p++ = OSSL_PARAM_construct_utf8_string(OSSL_SIGNATURE_PARAM_PAD_MODE, (char *) pad, 0);
                if (strcmp(pad, OSSL_PKEY_RSA_PAD_MODE_PSS) == 0)
                        *p++ = OSSL_PARAM_construct_utf8_string(OSSL_SIGNATURE_PARAM_PSS_SALTLEN,
                                                                (char *) OSSL_PKEY_RSA_PSS_SALT_LEN_DIGEST, 0);
        }
        *p = OSSL_PARAM_construct_end();

        ctx = EVP_PKEY_CTX_new_from_pkey(NULL, hwid_key_pkey(t->key), HSM_PROPQ);
        if (!ctx || EVP_PKEY_sign_init_ex(ctx, params) <= 0 ||
            EVP_PKEY_sign(ctx, NULL, &len, dgst, dlen) <= 0 || len == 0)
                return GNUTLS_E_PK_SIGN_FAILED;
        sig = gnutls_malloc(len);
        if (!sig)
                return GNUTLS_E_MEMORY_ERROR;
        if (EVP_PKEY_sign(ctx, sig, &len, dgst, dlen) <= 0) {
                gnutls_free(sig);
                return GNUTLS_E_PK_SIGN_FAILED;
        }
        ret->data = sig;
        ret->size = (unsigned) len;
        return 0;
}

/* gnutls_privkey_sign_hash_func: GnuTLS hashes, the device signs.  ECDSA
 * and RSA-PSS get the bare digest; RSA PKCS#1 v1.5 arrives as
 * GNUTLS_SIGN_RSA_RAW with a DigestInfo (the TLS 1.0 MD5+SHA-1 form is
 * refused: those versions are disabled). */
static int sign_hash(gnutls_privkey_t key, gnutls_sign_algorithm_t algo, void *userdata,
                         unsigned int flags, const gnutls_datum_t *hash, gnutls_datum_t *sig) {
        http_tls *t = userdata;
        const uint8_t *dgst = hash->data;
        size_t dlen = hash->size;
        const char *md;

        ERR_clear_error();
        if (algo == GNUTLS_SIGN_RSA_RAW) {
                if (t->pk != GNUTLS_PK_RSA || (flags & GNUTLS_PRIVKEY_SIGN_FLAG_TLS1_RSA) ||
                    parse_digest_info(hash, &md, &dgst, &dlen) < 0)
                        return GNUTLS_E_PK_SIGN_FAILED;
                return device_sign(t, md, OSSL_PKEY_RSA_PAD_MODE_PKCSV15, dgst, dlen, sig);
        }
        if (!sign_algo_ok(t, algo))
                return GNUTLS_E_UNSUPPORTED_SIGNATURE_ALGORITHM;
        md = digest_name(gnutls_sign_get_hash_algorithm(algo));
        if (!md)
                return GNUTLS_E_UNSUPPORTED_SIGNATURE_ALGORITHM;
        if (t->pk == GNUTLS_PK_ECDSA)
                return device_sign(t, md, NULL, dgst, dlen, sig);
        if (gnutls_sign_get_pk_algorithm(algo) == GNUTLS_PK_RSA_PSS)
                return device_sign(t, md, OSSL_PKEY_RSA_PAD_MODE_PSS, dgst, dlen, sig);
        return device_sign(t, md, OSSL_PKEY_RSA_PAD_MODE_PKCSV15, dgst, dlen, sig);
}

/* Handshake signatures run on the I/O threads (GnuTLS has no way to wait
 * for one without blocking), so no more than there are I/O threads wait
 * for the HSM at once; counted for /metrics. */
static int tls_sign_hash(gnutls_privkey_t key, gnutls_sign_algorithm_t algo, void *userdata,
                         unsigned int flags, const gnutls_datum_t *hash, gnutls_datum_t *sig) {
        http_tls *t = userdata;
        int r;

        atomic_fetch_add_explicit(&t->signing, 1, memory_order_relaxed);
        r = sign_hash(key, algo, userdata, flags, hash, sig);
        atomic_fetch_sub_explicit(&t->signing, 1, memory_order_relaxed);
        return r;
}

unsigned http_tls_signing(http_tls *t) {
        return t ? atomic_load_explicit(&t->signing, memory_order_relaxed) : 0;
}

static int tls_key_info(gnutls_privkey_t key, unsigned int flags, void *userdata) {
        http_tls *t = userdata;

        if (flags & GNUTLS_PRIVKEY_INFO_HAVE_SIGN_ALGO)
                return sign_algo_ok(t, (gnutls_sign_algorithm_t) GNUTLS_FLAGS_TO_SIGN_ALGO(flags));
        if (flags & GNUTLS_PRIVKEY_INFO_PK_ALGO)
                return (int) t->pk;
        if (flags & GNUTLS_PRIVKEY_INFO_PK_ALGO_BITS)
                return t->bits;
        if (flags & GNUTLS_PRIVKEY_INFO_SIGN_ALGO)
                return 0; /* no preference */
        return -1;
}

static int make_privkey(http_tls *t) {
        EVP_PKEY *pub = hwid_key_public(t->key);
        int r;

        t->type = hwid_key_get_type(t->key);
        t->pk = (t->type == HWID_KEY_EC_P256 || t->type == HWID_KEY_EC_P384) ? GNUTLS_PK_ECDSA : GNUTLS_PK_RSA;
        t->bits = EVP_PKEY_get_bits(pub);
        if (t->bits <= 0)
                return hwid_fail(HWID_E_KEY_TYPE, "cannot tell the size of the TLS key");
        r = gnutls_privkey_init(&t->privkey);
        if (r >= 0)
                r = gnutls_privkey_import_ext4(t->privkey, t, NULL, tls_sign_hash, NULL, NULL, tls_key_info, 0);
        if (r < 0)
                return hwid_fail(HWID_E_CRYPTO, "cannot set up the TLS key: %s", gnutls_strerror(r));
        return 0;
}

/* --- certificates ------------------------------------------------------- */

static int check_cert_matches_key(http_tls *t, const tls_certs *c) {
        _cleanup_(X509_freep) X509 *x = NULL;
        const unsigned char *p = c->pcert[0].cert.data;

        x = d2i_X509(NULL, &p, c->pcert[0].cert.size);
        if (!x)
                return hwid_fail_ossl(HWID_E_CONFIG, "cannot parse the TLS certificate");
        if (EVP_PKEY_eq(X509_get0_pubkey(x), hwid_key_public(t->key)) != 1)
                /* The key URI is not named: it may carry a pin-value. */
                return hwid_fail(HWID_E_CONFIG, "the TLS certificate's public key is not the TLS key's");
        return 0;
}

static int load_chain(http_tls *t, tls_certs *c, const char *pem) {
        gnutls_datum_t d = { .data = (unsigned char *) pem, .size = pem ? (unsigned) strlen(pem) : 0 };
        unsigned n = HTTP_TLS_MAX_CHAIN;
        int r;

        if (d.size == 0)
                return hwid_fail(HWID_E_CONFIG, "the TLS certificate is empty");
        r = gnutls_pcert_list_import_x509_raw(c->pcert, &n, &d, GNUTLS_X509_FMT_PEM,
                                              GNUTLS_X509_CRT_LIST_FAIL_IF_UNSORTED);
        if (r == GNUTLS_E_SHORT_MEMORY_BUFFER)
                return hwid_fail(HWID_E_CONFIG, "the TLS certificate chain has more than %d certificates",
                                 HTTP_TLS_MAX_CHAIN);
        if (r < 0 || n == 0)
                return hwid_fail(HWID_E_CONFIG, "cannot read the TLS certificate chain: %s",
                                 r < 0 ? gnutls_strerror(r) : "no certificate");
        c->npcert = n;
        return check_cert_matches_key(t, c);
}

static int load_client_ca(tls_certs *c, const char *pem) {
        _cleanup_(BIO_free_allp) BIO *bio = BIO_new_mem_buf(pem, -1);
        X509 *x;
        int n = 0;

        c->client_ca = X509_STORE_new();
        if (!bio || !c->client_ca)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
                int ok = X509_STORE_add_cert(c->client_ca, x);
                X509_free(x);
                if (!ok)
                        return hwid_fail_ossl(HWID_E_CONFIG, "cannot add a client CA certificate");
                n++;
        }
        ERR_clear_error(); /* the end of the PEM stream */
        if (n == 0)
                return hwid_fail(HWID_E_CONFIG, "no certificate in the client CA bundle");
        /* Every certificate given is a trust anchor, root or not. */
        X509_STORE_set_flags(c->client_ca, X509_V_FLAG_PARTIAL_CHAIN);
        return 0;
}

static void certs_free(tls_certs *c) {
        while (c) {
                tls_certs *older = c->older;

                for (unsigned i = 0; i < c->npcert; i++)
                        gnutls_pcert_deinit(&c->pcert[i]);
                X509_STORE_free(c->client_ca);
                free(c);
                c = older;
        }
}

int http_tls_set_certs(http_tls *t, const char *cert_pem, const char *client_ca_pem) {
        tls_certs *c = calloc(1, sizeof(*c)), *cur = atomic_load(&t->certs);
        int r;

        if (!c)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = load_chain(t, c, cert_pem)) < 0 || (client_ca_pem && (r = load_client_ca(c, client_ca_pem)) < 0)) {
                certs_free(c);
                return r;
        }
        /* One setter (hwidd's main thread); handshakes read it meanwhile. */
        c->older = cur;
        atomic_store(&t->certs, c);
        return 0;
}

int http_tls_new(hwid_key *key, const char *cert_pem, const char *client_ca_pem, http_tls **ret) {
        _cleanup_(http_tls_freep) http_tls *t = NULL;
        int r;

        if (!key)
                return hwid_fail(HWID_E_CONFIG, "no TLS key given");
        t = calloc(1, sizeof(*t));
        if (!t)
                return hwid_fail(HWID_E_NOMEM, NULL);
        t->key = key;
        if ((r = make_privkey(t)) < 0 || (r = http_tls_set_certs(t, cert_pem, client_ca_pem)) < 0)
                return r;
        if (gnutls_session_ticket_key_generate(&t->ticket_key) < 0)
                return hwid_fail(HWID_E_CRYPTO, "cannot make a TLS session ticket key");
        *ret = TAKE_PTR(t);
        return 0;
}

void http_tls_free(http_tls *t) {
        if (!t)
                return;
        certs_free(atomic_load(&t->certs));
        if (t->privkey)
                gnutls_privkey_deinit(t->privkey);
        if (t->ticket_key.data) {
                gnutls_memset(t->ticket_key.data, 0, t->ticket_key.size);
                gnutls_free(t->ticket_key.data);
        }
        free(t);
}

/* --- the connection's transport and its handshake's progress --------------- */

/* Every read and write of the connection marks it as its thread's current
 * one (what libmicrohttpd logs next may be about it: http-current.c), and
 * what it moves as the client's progress (http-guard.c). */
static ssize_t conn_pull(gnutls_transport_ptr_t p, void *data, size_t len) {
        ssize_t n = recv(http_conn_fd(p), data, len, 0);
        int e = errno;

        http_conn_io(p, true, n);
        errno = e;
        return n;
}

static ssize_t conn_vec_push(gnutls_transport_ptr_t p, const giovec_t *iov, int iovcnt) {
        struct msghdr m = { .msg_iov = (struct iovec *) iov, .msg_iovlen = (size_t) iovcnt };
        ssize_t n = sendmsg(http_conn_fd(p), &m, MSG_NOSIGNAL);
        int e = errno;

        http_conn_io(p, false, n);
        errno = e;
        return n;
}

static int on_handshake_message(gnutls_session_t s, unsigned htype, unsigned when, unsigned incoming,
                                const gnutls_datum_t *msg) {
        http_conn *c = gnutls_transport_get_ptr(s);

        if (incoming && when == GNUTLS_HOOK_PRE && htype == GNUTLS_HANDSHAKE_CLIENT_HELLO)
                http_conn_tls_progress(c, true, false);
        /* The server's last message in: the client's Finished (full and
         * resumed handshakes alike). */
        if (incoming && when == GNUTLS_HOOK_POST && htype == GNUTLS_HANDSHAKE_FINISHED)
                http_conn_handshake_done(c);
        return 0;
}

/* After the ClientHello's version was agreed on, before the cipher suite. */
static int on_client_hello(gnutls_session_t s) {
        http_conn_tls_progress(gnutls_transport_get_ptr(s), true, true);
        return 0;
}

void http_tls_session_start(http_tls *t, gnutls_session_t s, http_conn *c) {
        if (!t || !s)
                return;
        /* Resumption is an optimisation: without it, a full handshake. */
        (void) gnutls_session_ticket_enable_server(s, &t->ticket_key);
        if (!c)
                return;
        gnutls_transport_set_ptr(s, c);
        gnutls_transport_set_pull_function(s, conn_pull);
        gnutls_transport_set_vec_push_function(s, conn_vec_push);
        gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_ANY, GNUTLS_HOOK_BOTH, on_handshake_message);
        gnutls_handshake_set_post_client_hello_function(s, on_client_hello);
}

const char *http_tls_refuse(gnutls_session_t s, const http_conn *c) {
        bool hello, version_ok;

        http_conn_tls_where(c, &hello, &version_ok);
        if (!hello)
                return "no TLS ClientHello came"; /* nothing to answer */
        /* libmicrohttpd sends no alert: the client would see the
         * connection closed and guess why. */
        if (!version_ok) {
                (void) gnutls_alert_send(s, GNUTLS_AL_FATAL, GNUTLS_A_PROTOCOL_VERSION);
                return "the client offers no TLS version served (TLS 1.2 and 1.3 are)";
        }
        (void) gnutls_alert_send(s, GNUTLS_AL_FATAL, GNUTLS_A_HANDSHAKE_FAILURE);
        return "the handshake failed after the ClientHello (no cipher suite, group or signature scheme in "
               "common, or a protocol error)";
}

int http_tls_retrieve(http_tls *t, gnutls_pcert_st **ret_pcert, unsigned *ret_n,
                      gnutls_privkey_t *ret_key) {
        tls_certs *c = t ? atomic_load(&t->certs) : NULL;

        if (!c || c->npcert == 0)
                return -1;
        *ret_pcert = c->pcert;
        *ret_n = c->npcert;
        *ret_key = t->privkey;
        return 0;
}

/* --- client certificates -------------------------------------------------- */

static int asn1_to_unix(const ASN1_TIME *t, int64_t *ret) {
        struct tm tm;

        if (!t || !ASN1_TIME_to_tm(t, &tm))
                return -1;
        *ret = (int64_t) timegm(&tm);
        return 0;
}

/* The window in which every certificate of a verified chain is valid. */
static int chain_window(X509_STORE_CTX *ctx, int64_t *ret_from, int64_t *ret_until) {
        STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(ctx);
        int64_t from = INT64_MIN, until = INT64_MAX, nb, na;

        for (int i = 0; i < sk_X509_num(chain); i++) {
                X509 *x = sk_X509_value(chain, i);
                if (asn1_to_unix(X509_get0_notBefore(x), &nb) < 0 || asn1_to_unix(X509_get0_notAfter(x), &na) < 0)
                        return -1;
                from = nb > from ? nb : from;
                until = na < until ? na : until;
        }
        *ret_from = from;
        *ret_until = until;
        return 0;
}

/* Signatures and purpose up to a trust anchor, times aside: the leaf must
 * be signed by the client CA itself (certificates the client sends along
 * are not used, so nothing else under the same root can stand in). */
static bool verify_untimed(X509_STORE *store, X509 *leaf, int64_t *ret_from, int64_t *ret_until) {
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();

        if (!ctx || !X509_STORE_CTX_init(ctx, store, leaf, NULL))
                return false;
        X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_CLIENT);
        X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), X509_V_FLAG_NO_CHECK_TIME);
        return X509_verify_cert(ctx) == 1 && chain_window(ctx, ret_from, ret_until) == 0;
}

static void verify_peer(http_tls *t, const gnutls_datum_t *leaf_der, http_peer *peer) {
        _cleanup_(X509_freep) X509 *leaf = NULL;
        const unsigned char *p = leaf_der->data;
        int64_t from, until, now = (int64_t) time(NULL);

        leaf = d2i_X509(NULL, &p, leaf_der->size);
        if (leaf && verify_untimed(atomic_load(&t->certs)->client_ca, leaf, &from, &until)) {
                /* OpenSSL's reading: valid while notBefore <= now <= notAfter. */
                peer->valid_from = from;
                peer->not_yet_valid = now < from;
                peer->expired = now > until;
                peer->verified = !peer->not_yet_valid && !peer->expired;
        }
        ERR_clear_error();
}

void http_tls_peer(http_tls *t, gnutls_session_t s, http_peer *ret) {
        const gnutls_datum_t *list;
        unsigned n = 0;

        *ret = (http_peer) { 0 };
        if (!t || !s || gnutls_certificate_type_get(s) != GNUTLS_CRT_X509)
                return;
        list = gnutls_certificate_get_peers(s, &n);
        if (!list || n == 0 || list[0].size == 0)
                return;
        ret->cert = list[0].data;
        ret->cert_len = list[0].size;
        if (atomic_load(&t->certs)->client_ca)
                verify_peer(t, &list[0], ret);
}

void http_tls_binding(gnutls_session_t s, uint8_t ret[HTTP_TLS_BINDING_MAX], size_t *ret_len, const char **ret_type) {
        bool tls13 = s && gnutls_protocol_get_version(s) == GNUTLS_TLS1_3;
        gnutls_channel_binding_t type = tls13 ? GNUTLS_CB_TLS_EXPORTER : GNUTLS_CB_TLS_UNIQUE;
        gnutls_datum_t cb = { 0 };

        *ret_len = 0;
        *ret_type = NULL;
        if (!s || gnutls_session_channel_binding(s, type, &cb) < 0)
                return;
        if (cb.size > 0 && cb.size <= HTTP_TLS_BINDING_MAX) {
                memcpy(ret, cb.data, cb.size);
                *ret_len = cb.size;
                *ret_type = tls13 ? "tls-exporter" : "tls-unique";
        }
        gnutls_free(cb.data);
}
