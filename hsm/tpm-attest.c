/* The device side of TPM attestation (see tpm-attest.h): reads the EK
 * certificate, creates the AK, answers the CA's challenge with
 * ActivateCredential and a Certify of the device key.
 *
 * Lean on commands, because a real TPM spends 10 ms to seconds on each:
 *   - the EK is not touched before the challenge: its public area follows
 *     from its certificate and the TCG template, and the TPM proves it
 *     holds that key by activating the credential;
 *   - the AK is a primary key of the endorsement hierarchy (the TCG IAK
 *     pattern): no storage key to create or load, no EK policy sessions as
 *     an AK under the EK would need (tpm2_createak's way), and the same
 *     template gives the same AK each time;
 *   - between the two steps the AK waits as a saved context in our memory,
 *     so that nothing stays loaded in the TPM while the CA answers.
 * swtpm has no resource manager: every transient object and session is
 * flushed on every path (tpm_tr guards, declared after the lock). */
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>

#include <openssl/x509.h>
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_sys.h>

#include "tpm-attest.h"
#include "backend.h"
#include "error.h"
#include "ossl-util.h"
#include "secret.h"
#include "tpm-internal.h"

/* The most NV_Read may return at once on many TPMs (TPM_PT_NV_BUFFER_MAX
 * is 1024 on swtpm, 768 or more on discrete TPMs); a smaller one is asked
 * for when a TPM refuses. */
#define NV_CHUNK 1024

struct tpm_attest {
        tpm_conn *conn;
        tpm_ek_alg alg;
        uint8_t *ek_cert;
        size_t ek_cert_len;
        TPMT_PUBLIC ek_pub; /* from the certificate and the template */
        TPM2B_NAME ek_name;
        uint8_t ek_wire[TPM_PUBLIC_MAX];
        size_t ek_wire_len;
        uint8_t ak_wire[TPM_PUBLIC_MAX];
        size_t ak_wire_len;
        TPMS_CONTEXT *ak_saved;
        tpm_held ak_held;    /* hsm_options.hold: the AK still loaded */
};

static const TPM2B_SENSITIVE_CREATE empty_sensitive;
static const TPM2B_DATA empty_outside_info;
static const TPML_PCR_SELECTION empty_creation_pcr;

/* ESYS's record of TPM handle h, or ESYS_TR_NONE if nothing is there. */
static int tr_lookup(tpm_conn *c, uint32_t h, ESYS_TR *ret) {
        ESYS_TR tr = ESYS_TR_NONE;
        TSS2_RC rc;

        rc = Esys_TR_FromTPMPublic(c->esys, h, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &tr);
        if (rc == TSS2_RC_SUCCESS || tpm_rc_is_fmt1(rc, TPM2_RC_HANDLE)) {
                *ret = rc == TSS2_RC_SUCCESS ? tr : ESYS_TR_NONE;
                return 0;
        }
        return tpm_fail(c, rc, "cannot look up TPM handle 0x%08x", h);
}

/* TPM_PT_NV_BUFFER_MAX, asked only when a TPM refused our chunk size. */
static int nv_buffer_max(tpm_conn *c, uint16_t *ret) {
        _cleanup_(esys_freep) TPMS_CAPABILITY_DATA *cap = NULL;
        TSS2_RC rc;

        rc = Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                TPM2_PT_NV_BUFFER_MAX, 1, NULL, &cap);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "cannot read the TPM's NV buffer size");
        if (cap->data.tpmProperties.count != 1 ||
            cap->data.tpmProperties.tpmProperty[0].property != TPM2_PT_NV_BUFFER_MAX ||
            cap->data.tpmProperties.tpmProperty[0].value == 0)
                return hwid_fail(HWID_E_TPM, "the TPM does not say how much NV_Read returns");
        *ret = (uint16_t) MIN(cap->data.tpmProperties.tpmProperty[0].value, NV_CHUNK);
        return 0;
}

/* The NV index is read through the connection's SAPI context, by its TPM
 * handle: ESYS would need a handle object for it, and making one reads
 * the index's public area, which the read needs anyway -- one command
 * less.  Neither command needs an HMAC session. */
static int sys_of(tpm_conn *c, TSS2_SYS_CONTEXT **ret) {
        TSS2_RC rc = Esys_GetSysContext(c->esys, ret);

        return rc == TSS2_RC_SUCCESS ? 0 : tpm_fail(c, rc, "cannot reach the TPM's command layer");
}

/* The index's public area; *ret_present false if there is no such index. */
static int nv_public(tpm_conn *c, uint32_t idx, TPMS_NV_PUBLIC *ret, bool *ret_present) {
        TPM2B_NV_PUBLIC pub = { 0 };
        TPM2B_NAME name = { 0 };
        TSS2_SYS_CONTEXT *sys;
        TSS2_RC rc;
        int r = sys_of(c, &sys);

        if (r < 0)
                return r;
        rc = Tss2_Sys_NV_ReadPublic(sys, idx, NULL, &pub, &name, NULL);
        if (tpm_rc_is_fmt1(rc, TPM2_RC_HANDLE)) {
                *ret_present = false;
                return 0;
        }
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "cannot read the attributes of NV index 0x%08x", idx);
        *ret = pub.nvPublic;
        *ret_present = true;
        return 0;
}

static TSS2_RC nv_read_chunk(TSS2_SYS_CONTEXT *sys, uint32_t auth, uint32_t idx, uint16_t n, uint16_t off,
                             TPM2B_MAX_NV_BUFFER *ret) {
        TSS2L_SYS_AUTH_COMMAND cmd = { .count = 1, .auths = { { .sessionHandle = TPM2_RH_PW } } };
        TSS2L_SYS_AUTH_RESPONSE rsp = { 0 };

        *ret = (TPM2B_MAX_NV_BUFFER) { 0 };
        return Tss2_Sys_NV_Read(sys, auth, idx, &cmd, n, off, ret, &rsp);
}

/* Reads size bytes of NV index idx into buf, in chunks the TPM accepts,
 * with the authorization of auth (the index itself, or the owner). */
static int nv_read(tpm_conn *c, uint32_t auth, uint32_t idx, uint16_t size, uint8_t *buf) {
        uint16_t chunk = NV_CHUNK, off = 0;
        TSS2_SYS_CONTEXT *sys;
        bool asked = false;
        int r = sys_of(c, &sys);

        while (r >= 0 && off < size) {
                TPM2B_MAX_NV_BUFFER data;
                uint16_t n = MIN(chunk, size - off);
                TSS2_RC rc = nv_read_chunk(sys, auth, idx, n, off, &data);

                /* Asked once: a refusal at the TPM's own size is reported. */
                if (!asked && (tpm_rc_is_fmt1(rc, TPM2_RC_VALUE) || tpm_rc_is_fmt1(rc, TPM2_RC_SIZE))) {
                        asked = true;
                        r = nv_buffer_max(c, &chunk);
                        continue;
                }
                if (rc != TSS2_RC_SUCCESS)
                        return tpm_fail(c, rc, "cannot read the EK certificate at NV index 0x%08x", idx);
                if (data.size != n)
                        return hwid_fail(HWID_E_TPM, "the TPM returned %u bytes of NV index 0x%08x, not %u",
                                         data.size, idx, n);
                memcpy(buf + off, data.buffer, n);
                off += n;
        }
        return r;
}

/* The whole NV index, read with the authorization its attributes allow. */
static int nv_read_index(tpm_conn *c, uint32_t idx, const TPMS_NV_PUBLIC *pub, uint8_t **ret, size_t *ret_len) {
        _cleanup_free_ uint8_t *buf = NULL;
        uint16_t size = pub->dataSize;
        TPMA_NV attrs = pub->attributes;
        int r;

        if (size == 0 || size > TPM_EK_CERT_MAX)
                return hwid_fail(HWID_E_ATTESTATION, "NV index 0x%08x holds %u bytes, not an EK certificate "
                                 "(at most %d)", idx, size, TPM_EK_CERT_MAX);
        if (!(attrs & (TPMA_NV_AUTHREAD | TPMA_NV_OWNERREAD)))
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate at NV index 0x%08x is not readable "
                                 "with the index's or the owner's authorization", idx);
        buf = malloc(size);
        if (!buf)
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = nv_read(c, attrs & TPMA_NV_AUTHREAD ? idx : TPM2_RH_OWNER, idx, size, buf);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(buf);
        *ret_len = size;
        return 0;
}

/* The certificate at the front of an NV index (some TPMs pad the index),
 * its key turned into the EK public area the TCG template gives. */
static int ek_from_cert(tpm_attest *a, const uint8_t *data, size_t len) {
        const unsigned char *p = data;
        _cleanup_(X509_freep) X509 *x = d2i_X509(NULL, &p, (long) len);
        EVP_PKEY *key = x ? X509_get0_pubkey(x) : NULL;
        uint32_t idx = tpm_ek_cert_index(a->alg);
        int r;

        if (!x || !key)
                return hwid_fail_ossl(HWID_E_ATTESTATION, "NV index 0x%08x does not hold an X.509 certificate", idx);
        r = tpm_ek_public_from_key(a->alg, key, &a->ek_pub);
        if (r >= 0)
                r = tpm_public_name(&a->ek_pub, &a->ek_name);
        if (r >= 0)
                r = tpm_public_marshal(&a->ek_pub, a->ek_wire, &a->ek_wire_len);
        if (r < 0)
                return r;
        a->ek_cert = malloc((size_t) (p - data));
        if (!a->ek_cert)
                return hwid_fail(HWID_E_NOMEM, NULL);
        a->ek_cert_len = (size_t) (p - data);
        memcpy(a->ek_cert, data, a->ek_cert_len);
        return 0;
}

/* The EK certificate of type a->alg, or with TPM_EK_AUTO of the first type
 * this TPM has one of. */
static int ek_cert_read(tpm_attest *a, tpm_ek_alg want) {
        static const tpm_ek_alg order[] = { TPM_EK_ECC_P256, TPM_EK_RSA_2048, TPM_EK_ECC_P384 };

        for (size_t i = 0; i < ELEMENTSOF(order); i++) {
                _cleanup_free_ uint8_t *data = NULL;
                uint32_t idx = tpm_ek_cert_index(order[i]);
                TPMS_NV_PUBLIC pub;
                bool present;
                size_t len;
                int r;

                if (want != TPM_EK_AUTO && want != order[i])
                        continue;
                r = nv_public(a->conn, idx, &pub, &present);
                if (r < 0)
                        return r;
                if (!present)
                        continue;
                a->alg = order[i];
                r = nv_read_index(a->conn, idx, &pub, &data, &len);
                return r < 0 ? r : ek_from_cert(a, data, len);
        }
        if (want == TPM_EK_AUTO)
                return hwid_fail(HWID_E_ATTESTATION, "the TPM at %s has no EK certificate in NV "
                                 "(0x01c0000a, 0x01c00002 or 0x01c00016)", tpm_conn_name(a->conn));
        return hwid_fail(HWID_E_ATTESTATION, "the TPM at %s has no %s EK certificate at NV index 0x%08x",
                         tpm_conn_name(a->conn), tpm_ek_alg_to_string(want), tpm_ek_cert_index(want));
}

/* A restricted ECDSA P-256/SHA-256 signing key: it signs only what the TPM
 * itself produced (attestations) or digests the TPM computed of data that
 * does not look like one.  No adminWithPolicy: ActivateCredential then
 * takes its ADMIN role with the (empty) password. */
static void ak_template(TPM2B_PUBLIC *ret) {
        static const char label[] = "hwid AK";

        *ret = (TPM2B_PUBLIC) {
                .publicArea = {
                        .type = TPM2_ALG_ECC,
                        .nameAlg = TPM2_ALG_SHA256,
                        .objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT |
                                            TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH |
                                            TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT,
                        .parameters.eccDetail = {
                                .symmetric.algorithm = TPM2_ALG_NULL,
                                .scheme = { .scheme = TPM2_ALG_ECDSA, .details.ecdsa.hashAlg = TPM2_ALG_SHA256 },
                                .curveID = TPM2_ECC_NIST_P256,
                                .kdf.scheme = TPM2_ALG_NULL,
                        },
                },
        };
        /* Only a derivation input: hwid's AK, not another tool's with the
         * same template. */
        ret->publicArea.unique.ecc.x.size = sizeof(label) - 1;
        memcpy(ret->publicArea.unique.ecc.x.buffer, label, sizeof(label) - 1);
}

/* CreatePrimary, ContextSave, FlushContext; held: CreatePrimary alone
 * (flushed by the answer, or by tpm_attest_free()). */
static int ak_create(tpm_attest *a, bool hold) {
        _cleanup_(tpm_tr_flush) tpm_tr ak = TPM_TR(a->conn);
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        TPM2B_PUBLIC tmpl;
        TSS2_RC rc;
        int r;

        ak_template(&tmpl);
        rc = Esys_CreatePrimary(a->conn->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                ESYS_TR_NONE, &empty_sensitive, &tmpl, &empty_outside_info,
                                &empty_creation_pcr, &ak.tr, &pub, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(a->conn, rc, "the TPM cannot create the attestation key");
        r = tpm_public_marshal(&pub->publicArea, a->ak_wire, &a->ak_wire_len);
        if (r < 0)
                return r;
        if (hold) {
                tpm_held_keep(a->conn, &a->ak_held, &ak);
                return 0;
        }
        rc = Esys_ContextSave(a->conn->esys, ak.tr, &a->ak_saved);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(a->conn, rc, "cannot save the attestation key's context");
        return 0;
}

static int attest_connect(tpm_attest *a, const hsm_options *opts) {
        const char *tcti = opts && opts->tcti ? opts->tcti : getenv("HWID_TCTI");

        return tpm_conn_get(tcti && *tcti ? tcti : NULL, &a->conn);
}

static int begin_locked(tpm_attest *a, tpm_ek_alg alg, bool hold) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        int r = tpm_conn_lock(a->conn, &locked);

        if (r >= 0)
                r = ek_cert_read(a, alg);
        if (r >= 0)
                r = ak_create(a, hold);
        return r;
}

int tpm_attest_begin(const hsm_options *opts, tpm_ek_alg alg, tpm_attest **ret) {
        _cleanup_(tpm_attest_freep) tpm_attest *a = calloc(1, sizeof(*a));
        int r;

        if (!a)
                return hwid_fail(HWID_E_NOMEM, NULL);
        a->ak_held = (tpm_held) TPM_HELD;
        if ((unsigned) alg >= _TPM_EK_ALG_MAX)
                return hwid_fail(HWID_E_INVALID, "unknown EK type %d", (int) alg);
        r = attest_connect(a, opts);
        if (r >= 0) /* a flush lost on the way fails it too: the TPM went away */
                r = tpm_conn_left_report(a->conn, begin_locked(a, alg, opts && opts->hold));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

tpm_ek_alg tpm_attest_ek_alg(const tpm_attest *a) {
        return a->alg;
}

const uint8_t *tpm_attest_ek_cert(const tpm_attest *a, size_t *ret_len) {
        *ret_len = a->ek_cert_len;
        return a->ek_cert;
}

const uint8_t *tpm_attest_ek_public(const tpm_attest *a, size_t *ret_len) {
        *ret_len = a->ek_wire_len;
        return a->ek_wire;
}

const uint8_t *tpm_attest_ak_public(const tpm_attest *a, size_t *ret_len) {
        *ret_len = a->ak_wire_len;
        return a->ak_wire;
}

/* ---- Step 2: the answer ---- */

typedef struct respond_ctx {
        tpm_attest *a;
        TPM2B_ID_OBJECT credential;
        TPM2B_ENCRYPTED_SECRET secret;
        TPM2B_DATA nonce;
        tpm_attest_answer *ans;
} respond_ctx;

static int challenge_parse(const tpm_attest_challenge *c, respond_ctx *x) {
        size_t off = 0;

        if (!c->credential ||
            Tss2_MU_TPM2B_ID_OBJECT_Unmarshal(c->credential, c->credential_len, &off, &x->credential) !=
                    TSS2_RC_SUCCESS || off != c->credential_len)
                return hwid_fail(HWID_E_INVALID, "the challenge's credential is not a TPM2B_ID_OBJECT");
        off = 0;
        if (!c->secret ||
            Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal(c->secret, c->secret_len, &off, &x->secret) !=
                    TSS2_RC_SUCCESS || off != c->secret_len)
                return hwid_fail(HWID_E_INVALID, "the challenge's secret is not a TPM2B_ENCRYPTED_SECRET");
        if (!c->nonce || c->nonce_len == 0 || c->nonce_len > TPM_NONCE_MAX)
                return hwid_fail(HWID_E_INVALID, "the challenge's nonce has %zu bytes (1 to %d)",
                                 c->nonce_len, TPM_NONCE_MAX);
        x->nonce.size = (UINT16) c->nonce_len;
        memcpy(x->nonce.buffer, c->nonce, c->nonce_len);
        return 0;
}

/* CreatePrimary of the EK from its template; it must be the certified key. */
static int ek_create(tpm_attest *a, tpm_tr *ret) {
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        TPM2B_PUBLIC tmpl = { 0 };
        TPM2B_NAME name;
        TSS2_RC rc;
        int r;

        r = tpm_ek_template(a->alg, &tmpl.publicArea);
        if (r < 0)
                return r;
        rc = Esys_CreatePrimary(a->conn->esys, ESYS_TR_RH_ENDORSEMENT, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                                ESYS_TR_NONE, &empty_sensitive, &tmpl, &empty_outside_info,
                                &empty_creation_pcr, &ret->tr, &pub, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(a->conn, rc, "the TPM cannot create its %s EK", tpm_ek_alg_to_string(a->alg));
        r = tpm_public_name(&pub->publicArea, &name);
        if (r < 0)
                return r;
        if (name.size != a->ek_name.size || memcmp(name.name, a->ek_name.name, name.size) != 0)
                return hwid_fail(HWID_E_ATTESTATION, "the %s EK this TPM makes from the TCG template is not "
                                 "the key of its EK certificate", tpm_ek_alg_to_string(a->alg));
        return 0;
}

/* The certified EK: at its persistent handle if the key there is the
 * certified one (one ReadPublic), else created from the template. */
static int ek_load(tpm_attest *a, tpm_tr *persistent, tpm_tr *created, ESYS_TR *ret) {
        _cleanup_(esys_freep) TPM2B_NAME *name = NULL;
        TSS2_RC rc;
        int r;

        r = tr_lookup(a->conn, tpm_ek_handle(a->alg), &persistent->tr);
        if (r < 0)
                return r;
        if (persistent->tr != ESYS_TR_NONE) {
                rc = Esys_TR_GetName(a->conn->esys, persistent->tr, &name);
                if (rc != TSS2_RC_SUCCESS)
                        return tpm_fail(a->conn, rc, "cannot read the name of the persistent EK");
                if (name->size == a->ek_name.size && memcmp(name->name, a->ek_name.name, name->size) == 0) {
                        *ret = persistent->tr;
                        return 0;
                }
                tpm_tr_close(persistent); /* another key: not the certified EK */
        }
        r = ek_create(a, created);
        if (r < 0)
                return r;
        *ret = created->tr;
        return 0;
}

/* The authorization of the EK's USER role: the low-range templates allow
 * only their policy, PolicySecret(TPM_RH_ENDORSEMENT); the high-range ones
 * also the (empty) password.  The session goes with the command it
 * authorises (continueSession clear). */
static int ek_session(tpm_attest *a, tpm_tr *session, ESYS_TR *ret) {
        static const TPMT_SYM_DEF no_symmetric = { .algorithm = TPM2_ALG_NULL };
        TSS2_RC rc;

        if (a->ek_pub.objectAttributes & TPMA_OBJECT_USERWITHAUTH) {
                *ret = ESYS_TR_PASSWORD;
                return 0;
        }
        rc = Esys_StartAuthSession(a->conn->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                   ESYS_TR_NONE, NULL, TPM2_SE_POLICY, &no_symmetric, a->ek_pub.nameAlg,
                                   &session->tr);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(a->conn, rc, "cannot start a policy session for the EK");
        rc = Esys_TRSess_SetAttributes(a->conn->esys, session->tr, 0, TPMA_SESSION_CONTINUESESSION);
        if (rc == TSS2_RC_SUCCESS)
                rc = Esys_PolicySecret(a->conn->esys, ESYS_TR_RH_ENDORSEMENT, session->tr, ESYS_TR_PASSWORD,
                                       ESYS_TR_NONE, ESYS_TR_NONE, NULL, NULL, NULL, 0, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(a->conn, rc, "cannot satisfy the EK's policy (endorsement hierarchy "
                                "authorization)");
        *ret = session->tr;
        return 0;
}

/* What a credential made for another EK, or bound to another AK's name,
 * looks like: the seed does not decrypt or the HMAC does not match.
 * libtpms before 0.9.7 (swtpm on Debian 12) answers a seed that does not
 * decrypt with TPM_RC_FAILURE, without going into failure mode. */
static bool rc_wrong_credential(TSS2_RC rc) {
        return rc == TPM2_RC_FAILURE ||
               tpm_rc_is_fmt1(rc, TPM2_RC_INTEGRITY) || tpm_rc_is_fmt1(rc, TPM2_RC_VALUE) ||
               tpm_rc_is_fmt1(rc, TPM2_RC_SIZE) || tpm_rc_is_fmt1(rc, TPM2_RC_ECC_POINT) ||
               tpm_rc_is_fmt1(rc, TPM2_RC_NO_RESULT);
}

/* ActivateCredential: the AK in the ADMIN role (password), the EK in the
 * USER role (its policy). */
static int activate(respond_ctx *x, ESYS_TR ak) {
        tpm_attest *a = x->a;
        _cleanup_(tpm_tr_close) tpm_tr persistent = TPM_TR(a->conn);
        _cleanup_(tpm_tr_flush) tpm_tr created = TPM_TR(a->conn), session = TPM_TR(a->conn);
        _cleanup_(esys_freep) TPM2B_DIGEST *cred = NULL;
        ESYS_TR ek = ESYS_TR_NONE, auth = ESYS_TR_NONE;
        TSS2_RC rc;
        int r;

        r = ek_load(a, &persistent, &created, &ek);
        if (r >= 0)
                r = ek_session(a, &session, &auth);
        if (r < 0)
                return r;
        rc = Esys_ActivateCredential(a->conn->esys, ak, ek, ESYS_TR_PASSWORD, auth, ESYS_TR_NONE,
                                     &x->credential, &x->secret, &cred);
        if (rc == TSS2_RC_SUCCESS)
                session.tr = ESYS_TR_NONE; /* flushed with the command */
        if (rc_wrong_credential(rc))
                return hwid_fail(HWID_E_ATTESTATION, "the TPM cannot activate the credential: it was made "
                                 "for another EK or another AK (%s)", Tss2_RC_Decode(rc));
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(a->conn, rc, "the TPM cannot activate the credential");
        x->ans->activated = malloc(cred->size ? cred->size : 1);
        if (!x->ans->activated) {
                secret_wipe(cred->buffer, cred->size);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        memcpy(x->ans->activated, cred->buffer, cred->size);
        x->ans->activated_len = cred->size;
        secret_wipe(cred->buffer, cred->size);
        return 0;
}

static int dup_bytes(const void *p, size_t n, uint8_t **ret, size_t *ret_len) {
        uint8_t *d = malloc(n ? n : 1);

        if (!d)
                return hwid_fail(HWID_E_NOMEM, NULL);
        memcpy(d, p, n);
        *ret = d;
        *ret_len = n;
        return 0;
}

/* TPM2_Certify of key by the AK over the nonce, in the AK's own scheme. */
static int certify(respond_ctx *x, ESYS_TR key, const char *desc, ESYS_TR ak) {
        static const TPMT_SIG_SCHEME key_scheme = { .scheme = TPM2_ALG_NULL };
        _cleanup_(esys_freep) TPM2B_ATTEST *info = NULL;
        _cleanup_(esys_freep) TPMT_SIGNATURE *sig = NULL;
        uint8_t buf[sizeof(TPMT_SIGNATURE)];
        size_t off = 0;
        TSS2_RC rc;
        int r;

        rc = Esys_Certify(x->a->conn->esys, key, ak, ESYS_TR_PASSWORD, ESYS_TR_PASSWORD, ESYS_TR_NONE,
                          &x->nonce, &key_scheme, &info, &sig);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(x->a->conn, rc, "the TPM cannot certify %s with the attestation key", desc);
        if (Tss2_MU_TPMT_SIGNATURE_Marshal(sig, buf, sizeof(buf), &off) != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_TPM, "cannot encode the TPM's certify signature");
        r = dup_bytes(info->attestationData, info->size, &x->ans->certify_info, &x->ans->certify_info_len);
        if (r >= 0)
                r = dup_bytes(buf, off, &x->ans->signature, &x->ans->signature_len);
        return r;
}

/* Runs with the device key loaded and the connection locked. */
static int respond_loaded(tpm_conn *c, ESYS_TR key, const TPMT_PUBLIC *pub, const char *desc, void *userdata) {
        respond_ctx *x = userdata;
        tpm_attest *a = x->a;
        _cleanup_(tpm_tr_flush) tpm_tr ak = TPM_TR(c);
        uint8_t wire[TPM_PUBLIC_MAX];
        size_t len;
        TSS2_RC rc;
        int r;

        if (c != a->conn)
                return hwid_fail(HWID_E_INVALID, "%s is in the TPM at %s, not in the TPM being attested (%s)",
                                 desc, tpm_conn_name(c), tpm_conn_name(a->conn));
        /* The answer is the AK's last use: a held one is flushed with it. */
        if (tpm_held_live(c, &a->ak_held)) {
                ak.tr = a->ak_held.tr;
                a->ak_held.tr = ESYS_TR_NONE;
        } else if (!a->ak_saved) {
                return hwid_fail(HWID_E_TPM, "the attestation key is gone (the TPM connection was lost)");
        } else if ((rc = Esys_ContextLoad(c->esys, a->ak_saved, &ak.tr)) != TSS2_RC_SUCCESS) {
                return tpm_fail(c, rc, "cannot restore the attestation key (was the TPM restarted?)");
        }
        r = activate(x, ak.tr);
        if (r >= 0)
                r = certify(x, key, desc, ak.tr);
        if (r >= 0)
                r = tpm_public_marshal(pub, wire, &len);
        if (r >= 0)
                r = dup_bytes(wire, len, &x->ans->key_public, &x->ans->key_public_len);
        return r;
}

int tpm_attest_respond(tpm_attest *a, hwid_key *key, const tpm_attest_challenge *c,
                       tpm_attest_answer **ret) {
        _cleanup_(tpm_attest_answer_freep) tpm_attest_answer *ans = calloc(1, sizeof(*ans));
        respond_ctx x = { .a = a };
        void *obj = hsm_key_backend_obj(key, &hsm_backend_tpm2);
        int r;

        if (!ans)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!obj)
                return hwid_fail(HWID_E_KEY_TYPE, "%s is not a TPM key: only a TPM key can be attested",
                                 hwid_key_uri(key));
        r = challenge_parse(c, &x);
        if (r < 0)
                return r;
        x.ans = ans;
        r = tpm_conn_left_report(a->conn, tpm_key_with_loaded(obj, respond_loaded, &x));
        if (r < 0)
                return r;
        *ret = TAKE_PTR(ans);
        return 0;
}

void tpm_attest_free(tpm_attest *a) {
        if (!a)
                return;
        Esys_Free(a->ak_saved);
        if (a->conn && a->ak_held.tr != ESYS_TR_NONE) {
                pthread_mutex_lock(&a->conn->lock);
                tpm_held_flush(a->conn, &a->ak_held);
                pthread_mutex_unlock(&a->conn->lock);
        }
        if (a->conn)
                tpm_conn_unref(a->conn);
        free(a->ek_cert);
        free(a);
}

void tpm_attest_answer_free(tpm_attest_answer *ans) {
        if (!ans)
                return;
        if (ans->activated)
                secret_wipe(ans->activated, ans->activated_len);
        free(ans->activated);
        free(ans->certify_info);
        free(ans->signature);
        free(ans->key_public);
        free(ans);
}
