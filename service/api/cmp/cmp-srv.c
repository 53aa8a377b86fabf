/* One CMP transaction, answered through OpenSSL's CMP server: its
 * callbacks turn each message into one call of the CA core (a CSR or CRMF
 * request, the token of the MAC or the signer's certificate, the label)
 * and map its result to the PKIStatusInfo directly.  Tokens, policy, the
 * approval queue, the store, the audit log and the counters are therefore
 * the native API's.
 *
 * OpenSSL checks the message's syntax, header, nonces and proof of
 * possession, and signs every answer with hwidd's TLS key (in the HSM or
 * TPM); protection is checked before (cmp.c, cmp-auth.c), and OpenSSL
 * gets the message without it, so that a failure gets its own
 * PKIFailureInfo and OpenSSL's own texts say what OpenSSL found.
 *
 * What a certConf may do follows from what its transaction did: only a
 * certificate newly issued in it (CA_ISSUED) can be rejected, and so
 * revoked.  A request answered with a certificate issued before
 * (CA_AGAIN: a replay, its answer lost) opens no transaction: the answer
 * says implicitConfirm, there is nothing to confirm. */
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "cmp-internal.h"
#include "error.h"
#include "issuer.h"
#include "log.h"
#include "ossl-util.h"
#include "x509-util.h"

#define CMP_CONFIRM_TTL 300       /* seconds a certificate waits for its certConf */
#define CMP_POLL_TTL (24 * 3600)  /* ... and a request for approval, between two polls */

struct cmp_txn {
        ca_service *ca;
        OSSL_CMP_SRV_CTX *srv;
        char label[65];
        /* The message being answered. */
        const http_request *req;
        const cmp_message *m;
        bool replayed;
        /* Kept between the transaction's messages: who began it, when ... */
        bool begun;
        cmp_sender who;
        int64_t began;
        /* ... what it waits for, and what it got. */
        OSSL_CMP_MSG *first;
        char request_id[33];
        int64_t retry_after;
        X509 *issued;
        bool newly_issued;        /* issued in this transaction (not a certificate given again) */
        bool given_again;         /* answered with a certificate issued before: no transaction */
        OSSL_CMP_PKISI *final;    /* the answer a poll ended with */
};

/* ---------- who sent the message ---------- */

/* The message comes from whoever began the transaction, by the same
 * means (cmp.c hands a transaction nothing else; checked again here). */
static bool same_sender(const cmp_txn *t) {
        return t->m->auth == 0 && t->who.kind != CMP_AUTH_NONE && strcmp(t->m->sender.key, t->who.key) == 0;
}

/* The signer's certificate, with its validity as the TLS layer reports a
 * client certificate's (the CA core weighs it against its clock skew). */
static ca_peer signer_peer(const cmp_txn *t) {
        X509 *x = t->m->view.signer;
        ca_peer p = { .der = t->who.cert_der, .len = t->who.cert_len };
        struct tm tm;

        if (t->who.kind != CMP_AUTH_SIGNATURE || !x)
                return (ca_peer) { 0 };
        p.expired = X509_cmp_current_time(X509_get0_notAfter(x)) < 0;
        p.not_yet_valid = X509_cmp_current_time(X509_get0_notBefore(x)) > 0;
        if (ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm))
                p.valid_from = (int64_t) timegm(&tm);
        p.verified = !p.expired && !p.not_yet_valid;
        return p;
}

/* ---------- the core's result, as a PKIStatusInfo ---------- */

static const struct {
        const char *slug;
        int bit;
} failure_of[] = {
        { "bad_token", OSSL_CMP_PKIFAILUREINFO_notAuthorized },
        { "unauthenticated", OSSL_CMP_PKIFAILUREINFO_notAuthorized },
        { "forbidden", OSSL_CMP_PKIFAILUREINFO_badCertTemplate },
        { "attestation_failed", OSSL_CMP_PKIFAILUREINFO_notAuthorized },
        { "identity_has_certificate", OSSL_CMP_PKIFAILUREINFO_duplicateCertReq },
        { "bad_csr", OSSL_CMP_PKIFAILUREINFO_badCertTemplate },
        { "bad_csr_signature", OSSL_CMP_PKIFAILUREINFO_badPOP },
        { "key_blocked", OSSL_CMP_PKIFAILUREINFO_badCertTemplate },
        { "revoked", OSSL_CMP_PKIFAILUREINFO_certRevoked },
        { "expired", OSSL_CMP_PKIFAILUREINFO_notAuthorized },
        { "superseded", OSSL_CMP_PKIFAILUREINFO_notAuthorized },
        { "not_yet_valid", OSSL_CMP_PKIFAILUREINFO_badTime },
        { "renewal_not_open", OSSL_CMP_PKIFAILUREINFO_notAuthorized },
        { "not_found", OSSL_CMP_PKIFAILUREINFO_badCertId },
        { "too_large", OSSL_CMP_PKIFAILUREINFO_badDataFormat },
        { "invalid_argument", OSSL_CMP_PKIFAILUREINFO_badDataFormat },
};

/* Refusals of the CMP front door itself, before the CA core. */
static int failure_of_error(int r) {
        switch (r) {
        case -HWID_E_UNAUTHENTICATED:
                return OSSL_CMP_PKIFAILUREINFO_badMessageCheck;
        case -HWID_E_INVALID:
                return OSSL_CMP_PKIFAILUREINFO_badAlg;
        case -HWID_E_FORBIDDEN:
                return OSSL_CMP_PKIFAILUREINFO_notAuthorized;
        default:
                return hwid_err_http_status(r) >= 500 ? OSSL_CMP_PKIFAILUREINFO_systemFailure
                                                      : OSSL_CMP_PKIFAILUREINFO_badRequest;
        }
}

static OSSL_CMP_PKISI *rejection(int bit, const char *text) {
        return OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_rejection, 1 << bit, text);
}

/* A refusal counts in hwid_request_errors_total by its slug, as the native
 * API's does: the HTTP answer that carries it is a 200. */
static OSSL_CMP_PKISI *reject_error(cmp_txn *t, int r) {
        char text[512];

        ca_service_count_refusal(t->ca, hwid_err_slug(r));
        if (hwid_err_http_status(r) >= 500)
                log_error("CMP request failed: %s", hwid_strerror(r));
        snprintf(text, sizeof(text), "%s", hwid_public_message(r));
        return rejection(failure_of_error(r), text);
}

/* The core's refusal: its PKIFailureInfo by the error's slug (rr_bit >= 0
 * for what would be a bad template), a label that is not the token's
 * profile notAuthorized, its message as the text. */
static OSSL_CMP_PKISI *refusal_of(cmp_txn *t, const ca_result *res, int rr_bit) {
        const char *slug = hwid_err_slug(res->error);
        int bit = hwid_err_http_status(res->error) >= 500 ? OSSL_CMP_PKIFAILUREINFO_systemUnavail
                                                          : OSSL_CMP_PKIFAILUREINFO_badRequest;

        for (size_t i = 0; i < sizeof(failure_of) / sizeof(failure_of[0]); i++)
                if (strcmp(slug, failure_of[i].slug) == 0)
                        bit = failure_of[i].bit;
        if (rr_bit >= 0 && bit == OSSL_CMP_PKIFAILUREINFO_badCertTemplate)
                bit = rr_bit;
        if (res->about_label)
                bit = OSSL_CMP_PKIFAILUREINFO_notAuthorized;
        ca_service_count_refusal(t->ca, slug);
        return rejection(bit, res->message[0] ? res->message : "refused");
}

static int issued_from(cmp_txn *t, const ca_result *res) {
        const unsigned char *p = res->der;

        X509_free(t->issued);
        t->issued = p ? d2i_X509(NULL, &p, (long) res->der_len) : NULL;
        return t->issued ? 0 : hwid_fail_ossl(HWID_E_INTERNAL, "the issued certificate cannot be read back");
}

static STACK_OF(X509) *pem_certs(const char *pem) {
        _cleanup_(BIO_free_allp) BIO *b = pem ? BIO_new_mem_buf(pem, -1) : NULL;
        STACK_OF(X509) *certs = sk_X509_new_null();
        X509 *x;

        while (b && certs && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                if (!sk_X509_push(certs, x))
                        X509_free(x);
        ERR_clear_error();
        return certs;
}

/* The protection certificate's chain (RFC 9483 §4.1.1: in extraCerts):
 * hwidd's TLS chain, its own certificate first, with the link to the
 * other CA during a rollover (ca_service_tls_chain()), so that a client
 * trusting either CA verifies the answers. */
static STACK_OF(X509) *protection_chain(const ca_service *ca) {
        _cleanup_free_ char *pem = NULL;

        return ca_service_tls_chain(ca, &pem) >= 0 ? pem_certs(pem) : NULL;
}

/* A certificate issued before, given again (a replay: its answer was
 * lost): the answer says implicitConfirm whether or not the request asked
 * (OpenSSL's server adds it only then), so that the client sends no
 * certConf and no transaction is kept for one. */
static int give_again(cmp_txn *t) {
        OSSL_CMP_CTX *ctx = OSSL_CMP_SRV_CTX_get0_cmp_ctx(t->srv);
        OSSL_CMP_ITAV *itav;
        ASN1_TYPE *null;

        t->given_again = true;
        if (t->m->view.implicit_confirm)
                return 0;
        /* The value is an ASN1_NULL (OpenSSL's template for this info
         * type), passed as OpenSSL's own ossl_cmp_hdr_set_implicitConfirm() does. */
        if (!(null = (ASN1_TYPE *) ASN1_NULL_new()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!(itav = OSSL_CMP_ITAV_create(OBJ_nid2obj(NID_id_it_implicitConfirm), null))) {
                ASN1_NULL_free((ASN1_NULL *) null);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (!OSSL_CMP_CTX_push0_geninfo_ITAV(ctx, itav)) {
                OSSL_CMP_ITAV_free(itav);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* The core's answer to a certificate request: newly issued, an existing
 * certificate given again, held for approval, or refused. */
static OSSL_CMP_PKISI *answer_certificate(cmp_txn *t, const ca_result *res, X509 **cert_out,
                                          STACK_OF(X509) **chain_out) {
        char text[160];
        int r;

        if (res->outcome == CA_PENDING) {
                snprintf(t->request_id, sizeof(t->request_id), "%s", res->request_id);
                t->retry_after = res->retry_after > 0 ? res->retry_after : 5;
                snprintf(text, sizeof(text), "request %.8s... is pending approval: poll again", t->request_id);
                return OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_waiting, 0, text);
        }
        if (res->outcome != CA_ISSUED && res->outcome != CA_AGAIN)
                return refusal_of(t, res, -1);
        if ((r = issued_from(t, res)) < 0 || (res->outcome == CA_AGAIN && (r = give_again(t)) < 0))
                return reject_error(t, r);
        t->newly_issued = res->outcome == CA_ISSUED;
        *cert_out = X509_dup(t->issued);
        *chain_out = pem_certs(ca_service_ca_pem(t->ca));
        return OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_accepted, 0, NULL);
}

/* ---------- ir, cr, p10cr, kur ---------- */

/* What the message asks, as one call of the core: enrollment by the
 * MAC's token (under the label) or by the signer's certificate (ir), or
 * renewal by it (cr, kur). */
static int request_call(cmp_txn *t, int type, const uint8_t *der, size_t len, ca_result *res) {
        ca_request in = { .door = CA_DOOR_CMP, .now = (int64_t) time(NULL), .csr = der, .csr_len = len };

        if (t->who.kind == CMP_AUTH_NONE)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "a certificate request must be protected: a MAC with a "
                                 "bootstrap token, or a signature with a certificate this CA issued");
        if (t->who.kind == CMP_AUTH_MAC && type == CMP_BODY_KUR)
                return hwid_fail(HWID_E_FORBIDDEN, "a key update request (kur) is signed with the certificate it "
                                 "updates, not MAC-protected");
        if (t->who.kind == CMP_AUTH_MAC) {
                in.op = CA_OP_ENROLL;
                in.token_id = t->who.token_id;
                in.label = t->label[0] ? t->label : NULL;
        } else if (type == CMP_BODY_IR) {
                in.op = CA_OP_ENROLL;
                in.by_certificate = true;
                in.peer = signer_peer(t);
                in.label = t->label[0] ? t->label : NULL;
        } else {
                in.op = CA_OP_RENEW;
                in.peer = signer_peer(t);
        }
        ca_call(t->ca, &in, res);
        return 0;
}

static int request_der(const OSSL_CRMF_MSG *crm, const X509_REQ *p10cr, uint8_t **ret, size_t *ret_len) {
        unsigned char *der = NULL;
        int len = p10cr ? i2d_X509_REQ(p10cr, &der) : i2d_OSSL_CRMF_MSG(crm, &der);

        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "cannot encode the certification request");
        *ret = der;
        *ret_len = (size_t) len;
        return 0;
}

static OSSL_CMP_PKISI *cert_request(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, int certReqId,
                                    const OSSL_CRMF_MSG *crm, const X509_REQ *p10cr, X509 **cert_out,
                                    STACK_OF(X509) **chain_out, STACK_OF(X509) **ca_pubs) {
        cmp_txn *t = OSSL_CMP_SRV_CTX_get0_custom_ctx(srv);
        _cleanup_(OPENSSL_freep) uint8_t *der = NULL;
        OSSL_CMP_PKISI *si;
        ca_result res = { 0 };
        size_t len = 0;
        int r;

        (void) certReqId;
        (void) ca_pubs;
        if (t->final) /* a poll ended: its answer */
                return OSSL_CMP_PKISI_dup(t->final);
        if (t->issued) { /* a poll found it issued */
                *cert_out = X509_dup(t->issued);
                *chain_out = pem_certs(ca_service_ca_pem(t->ca));
                return OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_accepted, 0, NULL);
        }
        if (t->replayed)
                return rejection(OSSL_CMP_PKIFAILUREINFO_transactionIdInUse, "this transactionID was used already: "
                                 "a new request needs a new transaction");
        if ((r = t->m->auth) < 0 || (r = request_der(crm, p10cr, &der, &len)) < 0)
                return reject_error(t, r);
        if (!(t->first = OSSL_CMP_MSG_dup(msg)))
                return reject_error(t, -HWID_E_NOMEM);
        r = request_call(t, OSSL_CMP_MSG_get_bodytype(msg), der, len, &res);
        si = r < 0 ? reject_error(t, r) : answer_certificate(t, &res, cert_out, chain_out);
        ca_result_clear(&res);
        return si;
}

/* ---------- rr ---------- */

/* The certificate an rr names must be one of this CA's, its issuer this
 * CA and its serial in the store: else badCertId, whoever asks and
 * however (RFC 9483 §4.2), before the signer is looked at. */
static OSSL_CMP_PKISI *cert_id_refusal(cmp_txn *t, const X509_NAME *issuer_name, const ASN1_INTEGER *serial,
                                       char **ret_hex) {
        char text[160];
        int r;

        if (!serial || !issuer_name || !ca_service_ca_name(t->ca, issuer_name))
                return rejection(OSSL_CMP_PKIFAILUREINFO_badCertId, "the certificate to revoke is not one of "
                                 "this CA's (its issuer is another)");
        if ((r = serial_to_hex(serial, ret_hex)) < 0)
                return reject_error(t, r);
        r = ca_cert_known(t->ca, *ret_hex);
        if (r == -HWID_E_NOT_FOUND) {
                snprintf(text, sizeof(text), "certificate %.64s is not one this CA issued", *ret_hex);
                return rejection(OSSL_CMP_PKIFAILUREINFO_badCertId, text);
        }
        return r < 0 ? reject_error(t, r) : NULL;
}

static OSSL_CMP_PKISI *revocation(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, const X509_NAME *issuer_name,
                                  const ASN1_INTEGER *serial) {
        cmp_txn *t = OSSL_CMP_SRV_CTX_get0_custom_ctx(srv);
        _cleanup_free_ char *hex = NULL;
        OSSL_CMP_PKISI *si;
        ca_request in = { .op = CA_OP_REVOKE_OWN, .door = CA_DOOR_CMP, .now = (int64_t) time(NULL) };
        ca_result res;

        (void) msg;
        if (t->replayed)
                return rejection(OSSL_CMP_PKIFAILUREINFO_transactionIdInUse, "this transactionID was used already");
        if ((si = cert_id_refusal(t, issuer_name, serial, &hex)))
                return si;
        if (t->m->auth < 0)
                return reject_error(t, t->m->auth);
        if (t->who.kind != CMP_AUTH_SIGNATURE)
                return rejection(OSSL_CMP_PKIFAILUREINFO_notAuthorized, "a revocation request is signed with the "
                                 "certificate it revokes");
        in.peer = signer_peer(t);
        in.arg = hex;
        si = ca_call(t->ca, &in, &res) == CA_DONE ? OSSL_CMP_STATUSINFO_new(OSSL_CMP_PKISTATUS_accepted, 0, NULL)
                                                  : refusal_of(t, &res, OSSL_CMP_PKIFAILUREINFO_notAuthorized);
        ca_result_clear(&res);
        return si;
}

/* ---------- certConf, pollReq, error ---------- */

/* The status of a PKIStatusInfo (OpenSSL 3.0 has no getter): its first
 * element, an INTEGER; -1 if unreadable. */
static long pkisi_status(const OSSL_CMP_PKISI *si) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        STACK_OF(ASN1_TYPE) *seq;
        const unsigned char *p;
        ASN1_TYPE *first;
        long status = -1;
        int len = i2d_OSSL_CMP_PKISI(si, &der);

        p = der;
        seq = len > 0 ? d2i_ASN1_SEQUENCE_ANY(NULL, &p, len) : NULL;
        first = sk_ASN1_TYPE_value(seq, 0);
        if (first && first->type == V_ASN1_INTEGER)
                status = ASN1_INTEGER_get(first->value.integer);
        sk_ASN1_TYPE_pop_free(seq, ASN1_TYPE_free);
        ERR_clear_error();
        return status;
}

/* A certConf of the transaction's sender for the certificate it got:
 * recorded when it accepts it; when it rejects it, revoked only if it was
 * newly issued in this transaction (the core checks that again). */
static int cert_conf(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, int certReqId, const ASN1_OCTET_STRING *hash,
                     const OSSL_CMP_PKISI *si) {
        cmp_txn *t = OSSL_CMP_SRV_CTX_get0_custom_ctx(srv);
        _cleanup_(ASN1_OCTET_STRING_freep) ASN1_OCTET_STRING *want = NULL;
        _cleanup_free_ char *serial = NULL;
        ca_request in = { .op = CA_OP_CONFIRM, .door = CA_DOOR_CMP, .now = (int64_t) time(NULL) };
        ca_result res;

        (void) msg;
        (void) certReqId;
        if (!t->issued || !same_sender(t))
                return 0;
        want = X509_digest_sig(t->issued, NULL, NULL);
        if (!want || !hash || ASN1_OCTET_STRING_cmp(want, hash) != 0)
                return 0; /* not the certificate this transaction issued */
        if (serial_to_hex(X509_get0_serialNumber(t->issued), &serial) < 0)
                return 0;
        /* No statusInfo is acceptance (RFC 4210 §5.3.18). */
        in.accepted = !si || pkisi_status(si) == OSSL_CMP_PKISTATUS_accepted ||
                      pkisi_status(si) == OSSL_CMP_PKISTATUS_grantedWithMods;
        if (!in.accepted && !t->newly_issued)
                return 1;
        in.arg = serial;
        in.token_id = t->who.kind == CMP_AUTH_MAC ? t->who.token_id : NULL;
        in.since = in.accepted ? 0 : t->began;
        ca_call(t->ca, &in, &res);
        ca_result_clear(&res);
        return 1;
}

static int poll_req(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, int certReqId, OSSL_CMP_MSG **ret_req,
                    int64_t *ret_check_after) {
        cmp_txn *t = OSSL_CMP_SRV_CTX_get0_custom_ctx(srv);
        ca_request in = { .op = CA_OP_POLL, .door = CA_DOOR_CMP, .now = (int64_t) time(NULL) };
        ca_result res;
        bool waiting;

        (void) msg;
        (void) certReqId;
        *ret_req = NULL;
        if (!t->request_id[0] || !t->first || !same_sender(t))
                return 0;
        in.arg = t->request_id;
        waiting = ca_call(t->ca, &in, &res) == CA_PENDING;
        if (waiting) {
                *ret_check_after = res.retry_after > 0 ? res.retry_after : t->retry_after;
        } else {
                /* Issued or refused: the first request's answer, at last. */
                if (res.outcome == CA_ISSUED || res.outcome == CA_AGAIN) {
                        if (issued_from(t, &res) < 0)
                                t->final = reject_error(t, -HWID_E_INTERNAL);
                        t->newly_issued = res.outcome == CA_ISSUED;
                } else {
                        t->final = refusal_of(t, &res, -1);
                }
                *ret_req = OSSL_CMP_MSG_dup(t->first);
        }
        ca_result_clear(&res);
        return waiting || *ret_req;
}

static void client_error(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, const OSSL_CMP_PKISI *si,
                         const ASN1_INTEGER *code, const OSSL_CMP_PKIFREETEXT *details) {
        cmp_txn *t = OSSL_CMP_SRV_CTX_get0_custom_ctx(srv);
        char text[256];

        (void) msg;
        (void) code;
        (void) details;
        OSSL_CMP_snprint_PKIStatusInfo(si, text, sizeof(text));
        log_info("CMP client %s reported an error: %s", t->req->peer_addr, text);
}

/* ---------- genm ---------- */

/* One answer: the value for type, NULL value when there is none. */
static int genp_item(cmp_txn *t, int nid, const ca_result *res, const ca_update *update,
                     STACK_OF(OSSL_CMP_ITAV) **out) {
        ASN1_TYPE *value = NULL;
        OSSL_CMP_ITAV *itav;
        int r = 0;

        if (nid == NID_id_it_caCerts) {
                /* What GET /ca serves: every CA generation and the links. */
                STACK_OF(X509) *certs = pem_certs(ca_service_ca_pem(t->ca));
                r = certs ? cmp_ca_certs_value(certs, &value) : hwid_fail(HWID_E_NOMEM, NULL);
                sk_X509_pop_free(certs, X509_free);
        } else if (nid == NID_id_it_certReqTemplate && res->outcome == CA_DONE) {
                r = cmp_template_value(&res->tmpl, &value);
        } else if (nid == NID_id_it_rootCaKeyUpdate && update->new_with_new) {
                r = cmp_root_update_value(update, &value);
        } else if (nid != NID_id_it_rootCaKeyUpdate && nid != NID_id_it_certReqTemplate) {
                return 0; /* not one RFC 9483 §4.3 lists: no answer */
        }
        /* rootCaKeyUpdate without a rollover under way: no value, no update. */
        if (r < 0 || !(itav = OSSL_CMP_ITAV_create(OBJ_nid2obj(nid), value))) {
                ASN1_TYPE_free(value);
                return r < 0 ? r : hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (!OSSL_CMP_ITAV_push0_stack_item(out, itav)) {
                OSSL_CMP_ITAV_free(itav);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* The general messages (RFC 9483 §4.3): who asks reads as for GET /ca
 * (the TLS client certificate, if any); the template is the label's
 * profile, else the MAC token's; rootCaKeyUpdate what a rollover under
 * way offers. */
static int general(OSSL_CMP_SRV_CTX *srv, const OSSL_CMP_MSG *msg, const STACK_OF(OSSL_CMP_ITAV) *in,
                   STACK_OF(OSSL_CMP_ITAV) **out) {
        cmp_txn *t = OSSL_CMP_SRV_CTX_get0_custom_ctx(srv);
        ca_request rq = { .op = CA_OP_READ, .what = CA_READ_TEMPLATE, .door = CA_DOOR_CMP, .now = (int64_t) time(NULL),
                          .peer = door_peer(t->req), .label = t->label[0] ? t->label : NULL,
                          .token_id = t->who.kind == CMP_AUTH_MAC ? t->who.token_id : NULL };
        ca_result res;

        (void) msg;
        if (ca_call(t->ca, &rq, &res) == CA_REFUSED || t->replayed || t->m->auth < 0) {
                ca_result_clear(&res);
                return 0;
        }
        *out = sk_OSSL_CMP_ITAV_new_null();
        for (int i = 0; *out && i < sk_OSSL_CMP_ITAV_num(in); i++)
                if (genp_item(t, OBJ_obj2nid(OSSL_CMP_ITAV_get0_type(sk_OSSL_CMP_ITAV_value(in, i))), &res,
                              &res.update, out) < 0)
                        break;
        ca_result_clear(&res);
        return *out != NULL;
}

/* ---------- the transaction ---------- */

/* OpenSSL's own CMP log lines: debug detail, hwid's log says what matters. */
static int quiet_log(const char *func, const char *file, int line, OSSL_CMP_severity level, const char *msg) {
        (void) func;
        (void) file;
        (void) line;
        (void) level;
        (void) msg;
        return 1;
}

/* Answers are signed with hwidd's own key (its TLS identity, in the HSM
 * or TPM, certified by this CA), its certificate and the CA chain in
 * extraCerts: RFC 9483 §3.2 wants digitalSignature in the protection
 * certificate's key usage, which a CA certificate rightly lacks. */
static int setup_signing(cmp_txn *t) {
        OSSL_CMP_CTX *ctx = OSSL_CMP_SRV_CTX_get0_cmp_ctx(t->srv);
        STACK_OF(X509) *chain = protection_chain(t->ca);
        hwid_key *key = ca_service_tls_key(t->ca);
        X509 *cert = ca_service_tls_cert(t->ca);
        hwid_key_type type;
        int ok;

        if (!key || !cert) {
                sk_X509_pop_free(chain, X509_free);
                return hwid_fail(HWID_E_NOT_READY, "CMP answers are signed with hwidd's TLS key, and it has none");
        }
        type = hwid_key_get_type(key);
        ok = chain && OSSL_CMP_CTX_set_log_cb(ctx, quiet_log) && OSSL_CMP_CTX_set1_cert(ctx, cert) &&
             OSSL_CMP_CTX_set1_pkey(ctx, hwid_key_pkey(key)) &&
             OSSL_CMP_CTX_set1_extraCertsOut(ctx, chain) &&
             OSSL_CMP_CTX_set_option(ctx, OSSL_CMP_OPT_DIGEST_ALGNID,
                                     type == HWID_KEY_EC_P384 ? NID_sha384 : NID_sha256);
        sk_X509_pop_free(chain, X509_free);
        return ok ? 0 : hwid_fail_ossl(HWID_E_CRYPTO, "cannot set up CMP response signing");
}

int cmp_txn_new(ca_service *ca, const char *label, cmp_txn **ret) {
        cmp_txn *t = calloc(1, sizeof(*t));
        int r;

        if (!t)
                return hwid_fail(HWID_E_NOMEM, NULL);
        t->ca = ca;
        snprintf(t->label, sizeof(t->label), "%s", label ? label : "");
        if (!(t->srv = OSSL_CMP_SRV_CTX_new(NULL, NULL)) ||
            !OSSL_CMP_SRV_CTX_init(t->srv, t, cert_request, revocation, general, client_error, cert_conf, poll_req) ||
            /* Protection is checked before (cmp.c): OpenSSL gets messages without it. */
            !OSSL_CMP_SRV_CTX_set_accept_unprotected(t->srv, 1) ||
            !OSSL_CMP_SRV_CTX_set_accept_raverified(t->srv, 0) ||
            !OSSL_CMP_SRV_CTX_set_grant_implicit_confirm(t->srv, 1)) {
                cmp_txn_free(t);
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot make a CMP server context");
        }
        if ((r = setup_signing(t)) < 0) {
                cmp_txn_free(t);
                return r;
        }
        *ret = t;
        return 0;
}

void cmp_txn_free(cmp_txn *t) {
        if (!t)
                return;
        OSSL_CMP_SRV_CTX_free(t->srv);
        cmp_sender_clear(&t->who);
        OSSL_CMP_MSG_free(t->first);
        X509_free(t->issued);
        OSSL_CMP_PKISI_free(t->final);
        free(t);
}

/* Whether the answer leaves the transaction open: a certificate newly
 * issued awaiting its certConf, or a request awaiting approval. */
static bool still_open(const cmp_txn *t, const OSSL_CMP_MSG *rsp) {
        OSSL_CMP_CTX *ctx = OSSL_CMP_SRV_CTX_get0_cmp_ctx(t->srv);
        int type = rsp ? OSSL_CMP_MSG_get_bodytype(rsp) : -1;

        if (type == CMP_BODY_POLLREP)
                return true;
        if (type != CMP_BODY_IP && type != CMP_BODY_CP && type != CMP_BODY_KUP)
                return false;
        if (t->request_id[0] && !t->issued && !t->final)
                return true; /* waiting */
        return t->issued && !t->given_again && OSSL_CMP_CTX_get_option(ctx, OSSL_CMP_OPT_IMPLICIT_CONFIRM) != 1;
}

OSSL_CMP_MSG *cmp_txn_process(cmp_txn *t, const http_request *req, const cmp_message *m, bool replayed,
                              bool *ret_open) {
        OSSL_CMP_MSG *rsp;

        if (!t->begun) {
                if (cmp_sender_copy(&m->sender, &t->who) < 0)
                        return NULL;
                t->began = (int64_t) time(NULL);
                t->begun = true;
        }
        t->req = req;
        t->m = m;
        t->replayed = replayed;
        ERR_clear_error();
        cmp_explain_bad_pop(m->der, m->der_len);
        rsp = OSSL_CMP_SRV_process_request(t->srv, m->plain);
        ERR_clear_error();
        *ret_open = still_open(t, rsp);
        t->req = NULL;
        t->m = NULL;
        return rsp;
}

int64_t cmp_txn_ttl(const cmp_txn *t) {
        return t->request_id[0] && !t->issued ? CMP_POLL_TTL : CMP_CONFIRM_TTL;
}
