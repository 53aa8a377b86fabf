/* CMP (RFC 9483, the Lightweight CMP Profile) in hwidd: the files of the
 * third front door.  cmp.c takes the HTTP request (RFC 6712) and keeps the
 * transactions; cmp-srv.c answers each message through OpenSSL's CMP
 * server (OSSL_CMP_SRV_CTX) by calling the native enrollment, renewal,
 * polling and revocation; cmp-auth.c says who protected a message;
 * cmp-asn1.c reads what OpenSSL 3.0 has no getter for, and encodes the
 * general messages' answers.  Nothing here decides: policy is the CA's. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/cmp.h>

#include "api.h"

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

/* What a PKIMessage's header and extraCerts say, read a second time with
 * the ASN.1 module of RFC 4210 written as OpenSSL templates: OpenSSL 3.0
 * exports no getter for protectionAlg, senderKID or extraCerts. */
typedef struct cmp_view {
        int protection_nid;        /* NID_undef: unprotected */
        uint8_t kid[CMP_KID_MAX];  /* senderKID */
        size_t kid_len;
        uint8_t tid[CMP_TID_MAX];  /* transactionID */
        size_t tid_len;
        X509 *signer;              /* extraCerts[0] (RFC 9483 §3.3: the protection certificate first) */
} cmp_view;

int cmp_view_parse(const uint8_t *der, size_t len, cmp_view *ret);
void cmp_view_clear(cmp_view *v);

/* genp values (RFC 9483 §4.3): the certificates, as CaCertsValue;
 * CertReqTemplateContent for profile p.  Caller frees with ASN1_TYPE_free. */
int cmp_ca_certs_value(STACK_OF(X509) *certs, ASN1_TYPE **ret);
int cmp_template_value(const policy_profile *p, ASN1_TYPE **ret);

/* ---- cmp-auth.c ---- */

typedef enum cmp_auth_kind {
        CMP_AUTH_NONE,       /* unprotected */
        CMP_AUTH_MAC,        /* PasswordBasedMac with a bootstrap token */
        CMP_AUTH_SIGNATURE,  /* signed with a certificate this CA issued */
} cmp_auth_kind;

/* Who protected msg: the token of a valid MAC, the certificate of a
 * valid signature (its DER in *ret_cert_der, caller frees).  Protection
 * that does not verify is -HWID_E_UNAUTHENTICATED with the reason (never
 * saying whether a token id exists); an algorithm hwid does not take,
 * -HWID_E_INVALID. */
int cmp_authenticate(ca_service *ca, const OSSL_CMP_MSG *msg, const cmp_view *v, cmp_auth_kind *ret_kind,
                     char ret_token_id[7], uint8_t **ret_cert_der, size_t *ret_cert_len);

/* ---- cmp-srv.c ---- */

typedef struct cmp_txn cmp_txn;

/* One transaction: OpenSSL's server context (signing with the CA key,
 * the chain in extraCerts) and what hwid keeps between its messages. */
int cmp_txn_new(ca_service *ca, const char *label, cmp_txn **ret);
void cmp_txn_free(cmp_txn *t);
/* Answers one message of t's transaction; *ret_open: whether t expects
 * another (certConf, pollReq). */
OSSL_CMP_MSG *cmp_txn_process(cmp_txn *t, const http_request *req, const OSSL_CMP_MSG *msg, const cmp_view *v,
                              bool replayed, bool *ret_open);
/* How long t may wait for its next message (a poll waits longer). */
int64_t cmp_txn_ttl(const cmp_txn *t);

/* ---- cmp.c ---- */

/* Open transactions and the transactionIDs seen lately, per service. */
typedef struct cmp_table cmp_table;
void cmp_table_free(cmp_table *t);
