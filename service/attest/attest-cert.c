/* The hardware identity an attested certificate carries: a
 * subjectAltName otherName permanentIdentifier (RFC 4043).
 *
 * Why permanentIdentifier and not hardwareModuleName (RFC 4108): a
 * hardwareModuleName is a hwType OID and a hwSerialNum, and what a TPM
 * offers as a serial is its EK certificate's serial number, unique only
 * per EK CA, with no registered OID naming that CA.  The EK key itself is
 * the TPM's identity: it never changes (the TPM can be re-certified, its
 * EK cannot be replaced), it is unique, anyone holding the EK certificate
 * can compute its hash, and it is what the EK allowlist and the store key
 * the TPM by.  So the identifierValue is "sha256:<hex>" of the EK's
 * SubjectPublicKeyInfo (what `hwid ca hash` prints for the EK
 * certificate), and the assigner is absent: RFC 4043 reads that as
 * assigned by the certificate's issuer, which is who checked it.  OpenSSL
 * names the form ("Permanent Identifier") when it prints a certificate. */
#include <stdio.h>
#include <string.h>

#include <openssl/asn1t.h>
#include <openssl/objects.h>

#include "attest-record.h"
#include "error.h"
#include "ossl-util.h"

typedef struct permanent_id {
        ASN1_UTF8STRING *identifier_value;
        ASN1_OBJECT *assigner;
} PERMANENT_ID;

ASN1_SEQUENCE(PERMANENT_ID) = {
        ASN1_OPT(PERMANENT_ID, identifier_value, ASN1_UTF8STRING),
        ASN1_OPT(PERMANENT_ID, assigner, ASN1_OBJECT),
} static_ASN1_SEQUENCE_END(PERMANENT_ID)

IMPLEMENT_STATIC_ASN1_ALLOC_FUNCTIONS(PERMANENT_ID)

static int i2d_PERMANENT_ID(const PERMANENT_ID *a, unsigned char **out) {
        return ASN1_item_i2d((const ASN1_VALUE *) a, out, ASN1_ITEM_rptr(PERMANENT_ID));
}
DEFINE_TRIVIAL_CLEANUP_FUNC(PERMANENT_ID *, PERMANENT_ID_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_TYPE *, ASN1_TYPE_free)

/* The otherName value: PermanentIdentifier, DER, as an ASN1_TYPE SEQUENCE. */
static int permanent_id_value(const char *value, ASN1_TYPE **ret) {
        _cleanup_(PERMANENT_ID_freep) PERMANENT_ID *id = PERMANENT_ID_new();
        _cleanup_(ASN1_TYPE_freep) ASN1_TYPE *t = ASN1_TYPE_new();
        ASN1_STRING *seq = NULL;
        unsigned char *der = NULL;
        int n;

        if (!id || !t || !(id->identifier_value = ASN1_UTF8STRING_new()) ||
            !ASN1_STRING_set(id->identifier_value, value, (int) strlen(value)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        n = i2d_PERMANENT_ID(id, &der);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the permanentIdentifier");
        seq = ASN1_STRING_new();
        if (!seq || !ASN1_STRING_set(seq, der, n)) {
                OPENSSL_free(der);
                ASN1_STRING_free(seq);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        OPENSSL_free(der);
        ASN1_TYPE_set(t, V_ASN1_SEQUENCE, seq);
        *ret = TAKE_PTR(t);
        return 0;
}

int attest_san_append(GENERAL_NAMES *sans, const char *ek_pub_sha256) {
        _cleanup_(ASN1_TYPE_freep) ASN1_TYPE *value = NULL;
        GENERAL_NAME *gn = NULL;
        ASN1_OBJECT *oid = NULL;
        char text[80];
        int r;

        if (!ek_pub_sha256 || strlen(ek_pub_sha256) != 64)
                return hwid_fail(HWID_E_INTERNAL, "no EK public key hash to name the hardware by");
        snprintf(text, sizeof(text), "sha256:%s", ek_pub_sha256);
        if ((r = permanent_id_value(text, &value)) < 0)
                return r;
        gn = GENERAL_NAME_new();
        oid = OBJ_nid2obj(NID_id_on_permanentIdentifier);
        if (!gn || !oid || !GENERAL_NAME_set0_othername(gn, oid, value)) {
                GENERAL_NAME_free(gn);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        value = NULL; /* gn has it */
        if (!sk_GENERAL_NAME_push(sans, gn)) {
                GENERAL_NAME_free(gn);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}
