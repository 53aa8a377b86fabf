/* Inside CMP's room (cmp.h): cmp.c takes the HTTP request (RFC 6712)
 * and keeps the transactions; cmp-srv.c answers each message through
 * OpenSSL's CMP server (OSSL_CMP_SRV_CTX) with one call of the CA core
 * per request, its result mapped to a PKIStatusInfo; cmp-auth.c says who
 * protected a message; cmp-asn1.c reads what OpenSSL 3.0 has no getter
 * for, and encodes the general messages' answers.  Nothing here decides:
 * that is the CA core's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/cmp.h>

#include "ca.h"
#include "cmp.h"
#include "door.h"
#include "http.h"

/* PKIBody choices (RFC 4210 §5.1.2): OpenSSL 3.0 keeps its names private. */
enum {
        CMP_BODY_IR = 0,
        CMP_BODY_IP = 1,
        CMP_BODY_CR = 2,
        CMP_BODY_CP = 3,
        CMP_BODY_P10CR = 4,
        CMP_BODY_KUR = 7,
        CMP_BODY_KUP = 8,
        CMP_BODY_RR = 11,
        CMP_BODY_GENM = 21,
        CMP_BODY_ERROR = 23,
        CMP_BODY_CERTCONF = 24,
        CMP_BODY_POLLREQ = 25,
        CMP_BODY_POLLREP = 26,
};

#define CMP_TID_MAX 64    /* transactionID bytes we keep (RFC 9483: 128 bits) */
#define CMP_KID_MAX 64

/* ---- cmp-asn1.c ---- */

/* The PasswordBasedMac parameters of protectionAlg (RFC 4210 §5.1.3.1:
 * PBMParameter), as sent: checked before anything is computed with them. */
typedef struct cmp_pbm {
        bool malformed;            /* not a PBMParameter */
        int owf_nid;               /* the one-way function */
        int mac_nid;               /* the MAC algorithm */
        int64_t iterations;        /* -1: beyond int64 or negative */
        size_t salt_len;
} cmp_pbm;

/* What a PKIMessage's header and extraCerts say, read a second time with
 * the ASN.1 module of RFC 4210 written as OpenSSL templates: OpenSSL 3.0
 * exports no getter for protectionAlg, senderKID or extraCerts. */
typedef struct cmp_view {
        int protection_nid;        /* NID_undef: unprotected */
        cmp_pbm pbm;               /* protection_nid NID_id_PasswordBasedMAC */
        uint8_t kid[CMP_KID_MAX];  /* senderKID */
        size_t kid_len;
        uint8_t tid[CMP_TID_MAX];  /* transactionID */
        size_t tid_len;
        bool implicit_confirm;     /* generalInfo asks for it */
        X509 *signer;              /* extraCerts[0] (RFC 9483 §3.3: the protection certificate first) */
} cmp_view;

int cmp_view_parse(const uint8_t *der, size_t len, cmp_view *ret);
void cmp_view_clear(cmp_view *v);
/* The message der (DER, as cmp_view_parse() took it) without its
 * protection: what OpenSSL's server gets once hwid has checked it. */
int cmp_unprotected(const uint8_t *der, size_t len, OSSL_CMP_MSG **ret);
/* OpenSSL's server refuses a proof of possession that does not verify
 * itself (badPOP), before any callback, and the text of its answer is
 * the reason of the first error in OpenSSL's error queue: "EVP lib", from
 * the signature check.  Called with the queue empty, before the server:
 * when the one request of the ir, cr or kur der carries a proof that does
 * not verify, or the p10cr's CSR its signature (checked as OpenSSL's
 * server checks them), the first error is one of hwid's, whose reason
 * says so. */
void cmp_explain_bad_pop(const uint8_t *der, size_t len);

/* genp values (RFC 9483 §4.3): the certificates, as CaCertsValue;
 * CertReqTemplateContent for profile p.  Caller frees with ASN1_TYPE_free. */
int cmp_ca_certs_value(STACK_OF(X509) *certs, ASN1_TYPE **ret);
/* RootCaKeyUpdateContent of a rollover (u->new_with_new set). */
int cmp_root_update_value(const ca_update *u, ASN1_TYPE **ret);
int cmp_template_value(const ca_template *p, ASN1_TYPE **ret);

/* ---- cmp-auth.c ---- */

typedef enum cmp_auth_kind {
        CMP_AUTH_NONE,       /* unprotected */
        CMP_AUTH_MAC,        /* PasswordBasedMac with a bootstrap token */
        CMP_AUTH_SIGNATURE,  /* signed with a certificate this CA issued */
} cmp_auth_kind;

#define CMP_SENDER_MAX 80

/* Who protected a message. */
typedef struct cmp_sender {
        cmp_auth_kind kind;
        char token_id[7];          /* CMP_AUTH_MAC */
        uint8_t *cert_der;         /* CMP_AUTH_SIGNATURE: the signer's certificate */
        size_t cert_len;
        /* Whose transactions these are: "token:<id>", "cert:<SHA-256 of
         * the certificate>"; "" unprotected. */
        char key[CMP_SENDER_MAX];
} cmp_sender;

void cmp_sender_clear(cmp_sender *s);
int cmp_sender_copy(const cmp_sender *from, cmp_sender *to);

/* Who protected msg: the token of a valid MAC, the certificate of a valid
 * signature.  Protection that does not verify is -HWID_E_UNAUTHENTICATED
 * with the reason (never saying whether a token id exists); an algorithm
 * or PasswordBasedMac parameters hwid does not take, -HWID_E_INVALID.
 * Both refused before any MAC is computed with what the client chose. */
int cmp_authenticate(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v, cmp_sender *ret);

/* One message as cmp.c decoded and authenticated it. */
typedef struct cmp_message {
        const uint8_t *der;        /* as received (the request's body) */
        size_t der_len;
        OSSL_CMP_MSG *msg;         /* der, decoded */
        OSSL_CMP_MSG *plain;       /* for OpenSSL's server: msg without its protection, checked here */
        cmp_view view;
        cmp_sender sender;
        int auth;                  /* cmp_authenticate(): 0, or why its protection is refused */
} cmp_message;

/* ---- cmp-srv.c ---- */

typedef struct cmp_txn cmp_txn;

/* One transaction: OpenSSL's server context (signing with hwidd's TLS
 * key, the chain in extraCerts) and what hwid keeps between its messages. */
int cmp_txn_new(ca_service *ca, const char *label, cmp_txn **ret);
void cmp_txn_free(cmp_txn *t);
/* Answers one message of t's transaction; *ret_open: whether t expects
 * another (certConf, pollReq).  replayed: its transactionID was used
 * already. */
OSSL_CMP_MSG *cmp_txn_process(cmp_txn *t, const http_request *req, const cmp_message *m, bool replayed,
                              bool *ret_open);
/* How long t may wait for its next message (a poll waits longer). */
int64_t cmp_txn_ttl(const cmp_txn *t);

