/* A request's CSR, parsed once, whatever the store (what a failed parse
 * said is kept for where the request is refused for it: a credential's
 * refusal comes first, as always); and what EST adds on it:
 * proof-of-possession linking (RFC 7030 §3.5). */
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/x509.h>

#include "base64.h"
#include "ca-internal.h"
#include "error.h"
#include "ossl-util.h"

void ca_csr_parse(const ca_request *req, ca_csr *ret) {
        *ret = (ca_csr) { 0 };
        ret->r = csr_info_parse(req->csr, req->csr_len, &ret->csr);
        if (ret->r < 0) {
                snprintf(ret->why, sizeof(ret->why), "%s", hwid_strerror(ret->r));
                hwid_error_clear();
        }
}

void ca_csr_clear(ca_csr *c) {
        csr_info_free(c->csr);
        *c = (ca_csr) { 0 };
}

int ca_csr_get(const ca_csr *c, const csr_info **ret) {
        if (!c->csr)
                return hwid_fail((hwid_err) -(c->r < 0 ? c->r : -HWID_E_CSR_INVALID), "%s", c->why);
        *ret = c->csr;
        return 0;
}

/* The CN the request is for; policy has already insisted on exactly one. */
const char *ca_request_cn(const csr_info *csr, char *out, size_t n) {
        const policy_attr *cn = policy_csr_cn(csr_info_facts(csr));

        snprintf(out, n, "%.*s", cn ? (int) cn->len : 0, cn ? cn->value : "");
        return out;
}

/* The challengePassword of a request, as text; NULL if it has none. */
static const ASN1_STRING *challenge_password(const X509_REQ *x) {
        int i = X509_REQ_get_attr_by_NID(x, NID_pkcs9_challengePassword, -1);
        ASN1_TYPE *t = i >= 0 ? X509_ATTRIBUTE_get0_type(X509_REQ_get_attr(x, i), 0) : NULL;

        if (!t || (t->type != V_ASN1_PRINTABLESTRING && t->type != V_ASN1_UTF8STRING &&
                   t->type != V_ASN1_IA5STRING && t->type != V_ASN1_T61STRING && t->type != V_ASN1_BMPSTRING &&
                   t->type != V_ASN1_UNIVERSALSTRING))
                return NULL;
        return t->value.asn1_string;
}

/* The PKCS#10 request: the one parsed, or (it did not parse: its
 * signature, say) its structure alone, into *own. */
static int pkcs10_of(const ca_request *req, const ca_csr *csr, X509_REQ **own, const X509_REQ **ret) {
        const unsigned char *d = req->csr;

        if (csr->csr && (*ret = csr_info_pkcs10(csr->csr)))
                return 0;
        if (!(*own = d2i_X509_REQ(NULL, &d, (long) req->csr_len)))
                return hwid_fail_ossl(HWID_E_CSR_INVALID, "the body is not a PKCS#10 request");
        *ret = *own;
        return 0;
}

/* With the profile's est.pop_linking, the CSR's challengePassword must be
 * the base64 of this connection's channel binding: the CSR was made for
 * this TLS session, not relayed from another one. */
int ca_pop_check(const ca_request *req, const ca_csr *csr, const policy_profile *p) {
        _cleanup_(X509_REQ_freep) X509_REQ *own = NULL;
        _cleanup_free_ char *want = NULL;
        uint8_t binding[CA_BINDING_MAX];
        const char *binding_type = NULL;
        const ASN1_STRING *got;
        const X509_REQ *x;
        size_t binding_len = 0;
        int r;

        if (!p || !p->est_pop_linking)
                return 0;
        if (req->binding)
                req->binding(req->binding_userdata, binding, &binding_len, &binding_type);
        if (binding_len == 0)
                return hwid_fail(HWID_E_FORBIDDEN, "profile %s requires proof-of-possession linking (RFC 7030 §3.5) "
                                 "and this connection has no TLS channel binding", p->name);
        if ((r = pkcs10_of(req, csr, &own, &x)) < 0 || (r = base64_encode(binding, binding_len, false, &want)) < 0)
                return r;
        if (!(got = challenge_password(x)))
                return hwid_fail(HWID_E_FORBIDDEN, "profile %s requires proof-of-possession linking: the CSR's "
                                 "challengePassword must be the base64 of this connection's %s channel binding",
                                 p->name, binding_type);
        if ((size_t) ASN1_STRING_length(got) != strlen(want) ||
            CRYPTO_memcmp(ASN1_STRING_get0_data(got), want, strlen(want)) != 0)
                return hwid_fail(HWID_E_FORBIDDEN, "the CSR's challengePassword is not this TLS connection's %s "
                                 "channel binding (RFC 7030 §3.5): make the CSR on the connection that sends it",
                                 binding_type);
        return 0;
}
