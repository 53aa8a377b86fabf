/* The storage parent of a key file's key, and making a key under it in
 * as few TPM commands as the TPM allows.
 *
 * A TPM provisioned after the TCG guidance (systemd-tpm2-setup does it,
 * so do many factory images) keeps its storage root key (SRK) at the
 * persistent handle 0x81000001.  A key made under it needs no
 * CreatePrimary -- the slowest command a TPM has, seconds on some -- when
 * it is made and each time it is loaded.  The SRK is used only if its
 * public area says it is what the guidance makes: a restricted decrypt
 * (storage) key, fixedTPM, fixedParent, sensitiveDataOrigin, userWithAuth
 * and noDA.  noDA as for hwid's own keys (tpm_key_template()): a
 * DA-protected parent would count a failed try at each start after a
 * power cut.  Otherwise the parent is the owner storage primary, made
 * from the template the tpm2 OpenSSL provider uses for 0x40000001, and
 * flushed once the key is loaded.
 *
 * Finding out costs one ReadPublic (Esys_TR_FromTPMPublic), whose answer
 * ESYS keeps: its serialized record gives the public area without a
 * second ReadPublic.  The record is checked against the SRK's name, so a
 * tpm2-tss that serializes otherwise only costs that second ReadPublic. */
#include <string.h>

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>

#include "error.h"
#include "tpm-attest.h"
#include "tpm-internal.h"

#define SRK_ATTRS                                                                                        \
        (TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | \
         TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA)
#define IESYSC_KEY_RSRC 1 /* tpm2-tss's esys_types.h */

static const TPM2B_SENSITIVE_CREATE empty_sensitive;
static const TPM2B_DATA empty_outside_info;
static const TPML_PCR_SELECTION empty_creation_pcr;

bool tpm_srk_usable(const TPMT_PUBLIC *pub) {
        return (pub->objectAttributes & SRK_ATTRS) == SRK_ATTRS &&
               !(pub->objectAttributes & TPMA_OBJECT_SIGN_ENCRYPT) &&
               (pub->type == TPM2_ALG_ECC || pub->type == TPM2_ALG_RSA);
}

/* The public area in ESYS's record of tr (handle, name, resource type,
 * TPM2B_PUBLIC), if it hashes to tr's name. */
static bool public_from_record(tpm_conn *c, ESYS_TR tr, TPMT_PUBLIC *ret) {
        _cleanup_(esys_freep) uint8_t *buf = NULL;
        _cleanup_(esys_freep) TPM2B_NAME *name = NULL;
        /* (Tss2_MU refuses to unmarshal into a TPM2B whose size is not 0.) */
        TPM2B_NAME rname = { 0 }, computed;
        TPM2B_PUBLIC pub = { 0 };
        uint32_t handle = 0, type = 0;
        size_t len = 0, off = 0;

        if (Esys_TR_Serialize(c->esys, tr, &buf, &len) != TSS2_RC_SUCCESS ||
            Esys_TR_GetName(c->esys, tr, &name) != TSS2_RC_SUCCESS ||
            Tss2_MU_UINT32_Unmarshal(buf, len, &off, &handle) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_NAME_Unmarshal(buf, len, &off, &rname) != TSS2_RC_SUCCESS ||
            Tss2_MU_UINT32_Unmarshal(buf, len, &off, &type) != TSS2_RC_SUCCESS || type != IESYSC_KEY_RSRC ||
            Tss2_MU_TPM2B_PUBLIC_Unmarshal(buf, len, &off, &pub) != TSS2_RC_SUCCESS ||
            handle != TPM_SRK_HANDLE)
                return false;
        if (tpm_public_name(&pub.publicArea, &computed) < 0) {
                hwid_error_clear();
                return false;
        }
        if (computed.size != name->size || memcmp(computed.name, name->name, name->size) != 0)
                return false;
        *ret = pub.publicArea;
        return true;
}

static int srk_public(tpm_conn *c, ESYS_TR tr, TPMT_PUBLIC *ret) {
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        TSS2_RC rc;

        if (public_from_record(c, tr, ret))
                return 0;
        rc = Esys_ReadPublic(c->esys, tr, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &pub, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "cannot read the public area of the storage key at 0x%08x", TPM_SRK_HANDLE);
        *ret = pub->publicArea;
        return 0;
}

/* ESYS's record of the SRK at 0x81000001 in ret, or ESYS_TR_NONE if there
 * is none or it is not one hwid makes keys under. */
static int srk_lookup(tpm_conn *c, bool check, tpm_tr *ret) {
        TPMT_PUBLIC pub;
        TSS2_RC rc;
        int r;

        rc = Esys_TR_FromTPMPublic(c->esys, TPM_SRK_HANDLE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &ret->tr);
        if (tpm_rc_is_fmt1(rc, TPM2_RC_HANDLE)) {
                ret->tr = ESYS_TR_NONE;
                return 0;
        }
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "cannot look up the storage key at 0x%08x", TPM_SRK_HANDLE);
        if (!check)
                return 0;
        r = srk_public(c, ret->tr, &pub);
        if (r < 0)
                return r;
        /* Not closed: ESYS hands out one record per TPM handle, and a
         * signing key there may be a hwid key (tpm2:handle=0x81000001)
         * open in this process, whose record closing would take away. */
        if (!tpm_srk_usable(&pub))
                ret->tr = ESYS_TR_NONE;
        return 0;
}

int tpm_primary_create(tpm_conn *c, tpm_tr *ret) {
        TPM2B_PUBLIC tmpl;
        ESYS_TR tr = ESYS_TR_NONE;
        TSS2_RC rc;

        tpm_primary_template(&tmpl);
        rc = Esys_CreatePrimary(c->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                &empty_sensitive, &tmpl, &empty_outside_info, &empty_creation_pcr,
                                &tr, NULL, NULL, NULL, NULL);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "cannot create the owner storage primary key");
        ret->tr = tr;
        return 0;
}

int tpm_parent_get(tpm_conn *c, tpm_parent *p) {
        int r;

        if (p->handle != TPM_KEYFILE_PARENT) {
                r = srk_lookup(c, p->handle == 0, &p->srk);
                if (r < 0)
                        return r;
                if (p->srk.tr != ESYS_TR_NONE) {
                        p->handle = TPM_SRK_HANDLE;
                        p->tr = p->srk.tr;
                        return 0;
                }
                if (p->handle == TPM_SRK_HANDLE)
                        return hwid_fail(HWID_E_KEY_NOT_FOUND, "the key's parent, the storage key at 0x%08x, "
                                         "is not in the TPM at %s", TPM_SRK_HANDLE, tpm_conn_name(c));
        }
        r = tpm_primary_create(c, &p->primary);
        if (r < 0)
                return r;
        p->handle = TPM_KEYFILE_PARENT;
        p->tr = p->primary.tr;
        return 0;
}

void tpm_parent_done(tpm_parent *p) {
        tpm_tr_flush(&p->primary);
        tpm_tr_close(&p->srk);
        p->tr = ESYS_TR_NONE;
}

/* TSS2_RCs, not hwid errors: tpm_parent_create_key() decides what a
 * refusal means. */
static TSS2_RC create_then_load(tpm_conn *c, ESYS_TR parent, const TPM2B_PUBLIC *tmpl, TPM2B_PUBLIC *ret_pub,
                                TPM2B_PRIVATE *ret_priv, tpm_tr *ret_key) {
        _cleanup_(esys_freep) TPM2B_PRIVATE *priv = NULL;
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        TSS2_RC rc;

        rc = Esys_Create(c->esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &empty_sensitive,
                         tmpl, &empty_outside_info, &empty_creation_pcr, &priv, &pub, NULL, NULL, NULL);
        if (rc == TSS2_RC_SUCCESS)
                rc = Esys_Load(c->esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, priv, pub,
                               &ret_key->tr);
        if (rc != TSS2_RC_SUCCESS)
                return rc;
        *ret_pub = *pub;
        *ret_priv = *priv;
        return TSS2_RC_SUCCESS;
}

static TSS2_RC create_loaded(tpm_conn *c, ESYS_TR parent, const TPM2B_PUBLIC *tmpl, TPM2B_PUBLIC *ret_pub,
                             TPM2B_PRIVATE *ret_priv, tpm_tr *ret_key) {
        _cleanup_(esys_freep) TPM2B_PRIVATE *priv = NULL;
        _cleanup_(esys_freep) TPM2B_PUBLIC *pub = NULL;
        TPM2B_TEMPLATE t = { 0 };
        size_t off = 0;
        TSS2_RC rc;

        rc = Tss2_MU_TPMT_PUBLIC_Marshal(&tmpl->publicArea, t.buffer, sizeof(t.buffer), &off);
        if (rc != TSS2_RC_SUCCESS)
                return rc;
        t.size = (UINT16) off;
        rc = Esys_CreateLoaded(c->esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &empty_sensitive,
                               &t, &ret_key->tr, &priv, &pub);
        /* TPM2_CreateLoaded came with the 1.38 library: older TPMs have
         * Create and Load. */
        if (rc == TPM2_RC_COMMAND_CODE)
                return create_then_load(c, parent, tmpl, ret_pub, ret_priv, ret_key);
        if (rc != TSS2_RC_SUCCESS)
                return rc;
        *ret_pub = *pub;
        *ret_priv = *priv;
        return TSS2_RC_SUCCESS;
}

int tpm_parent_create_key(tpm_conn *c, tpm_parent *p, const TPM2B_PUBLIC *tmpl, TPM2B_PUBLIC *ret_pub,
                          TPM2B_PRIVATE *ret_priv, tpm_tr *ret_key) {
        TSS2_RC rc;
        int r;

        r = tpm_parent_get(c, p);
        if (r < 0)
                return r;
        rc = create_loaded(c, p->tr, tmpl, ret_pub, ret_priv, ret_key);
        /* An SRK with an auth value, unlike the TCG template's: it is noDA,
         * so the try cost no lockout count; the primary then. */
        if (p->handle == TPM_SRK_HANDLE &&
            (tpm_rc_is_fmt1(rc, TPM2_RC_BAD_AUTH) || tpm_rc_is_fmt1(rc, TPM2_RC_AUTH_FAIL))) {
                tpm_parent_done(p);
                p->handle = TPM_KEYFILE_PARENT;
                r = tpm_parent_get(c, p);
                if (r < 0)
                        return r;
                rc = create_loaded(c, p->tr, tmpl, ret_pub, ret_priv, ret_key);
        }
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "the TPM cannot create the key");
        return 0;
}
