/* Persistent handles in use, as the TPM itself lists them: where a new
 * persistent key may go without touching anyone else's object; and
 * whether the TPM answers at all. */
#include <stdlib.h>
#include <string.h>

#include <tss2/tss2_esys.h>

#include "error.h"
#include "hsm.h"
#include "tpm-internal.h"
#include "uri.h"

/* Whether handle is in the TPM's list (sorted ascending, as the TPM
 * returns it). */
static bool listed(const TPML_HANDLE *l, uint32_t handle) {
        for (uint32_t i = 0; i < l->count; i++)
                if (l->handle[i] == handle)
                        return true;
        return false;
}

/* The first free owner handle from `from` up, skipping the EK range. */
static uint32_t first_free(const TPML_HANDLE *used, uint32_t from) {
        for (uint32_t h = from; h <= TPM_PERSISTENT_LAST; h++) {
                if (h >= TPM_EK_FIRST && h <= TPM_EK_LAST) {
                        h = TPM_EK_LAST;
                        continue;
                }
                if (!listed(used, h))
                        return h;
        }
        return 0;
}

/* TPM2_GetCapability(handles, persistent), page after page. */
static int list_persistent(tpm_conn *c, TPML_HANDLE *ret) {
        uint32_t next = TPM_PERSISTENT_FIRST; /* (the tss2 macro shifts a signed int) */
        TPMI_YES_NO more = TPM2_YES;

        ret->count = 0;
        while (more == TPM2_YES) {
                _cleanup_(esys_freep) TPMS_CAPABILITY_DATA *cap = NULL;
                TSS2_RC rc = Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_HANDLES,
                                                next, TPM2_MAX_CAP_HANDLES, &more, &cap);
                const TPML_HANDLE *h;

                if (rc != TSS2_RC_SUCCESS)
                        return tpm_fail(c, rc, "cannot list the TPM's persistent handles");
                h = &cap->data.handles;
                for (uint32_t i = 0; i < h->count && ret->count < TPM2_MAX_CAP_HANDLES; i++)
                        ret->handle[ret->count++] = h->handle[i];
                if (h->count == 0 || ret->count >= TPM2_MAX_CAP_HANDLES)
                        break;
                next = h->handle[h->count - 1] + 1;
        }
        return 0;
}

static int pick_free(tpm_conn *c, uint32_t from, uint32_t *ret) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        TPML_HANDLE used;
        uint32_t h;
        int r;

        if ((r = tpm_conn_lock(c, &locked)) < 0 || (r = list_persistent(c, &used)) < 0)
                return r;
        /* From `from` up, then from the start of the owner's range. */
        if (!(h = first_free(&used, from)) && !(h = first_free(&used, TPM_PERSISTENT_FIRST)))
                return hwid_fail(HWID_E_TPM, "the TPM at %s has no free persistent handle in 0x%08x-0x%08x",
                                 tpm_conn_name(c), TPM_PERSISTENT_FIRST, TPM_PERSISTENT_LAST);
        *ret = h;
        return 0;
}

int hwid_tpm_free_handle(const hsm_options *opts, uint32_t from, uint32_t *ret) {
        const char *tcti = opts && opts->tcti ? opts->tcti : getenv("HWID_TCTI");
        tpm_conn *c = NULL;
        int r;

        if (from < TPM_PERSISTENT_FIRST || from > TPM_PERSISTENT_LAST)
                from = TPM_PERSISTENT_FIRST;
        if ((r = tpm_conn_get(tcti && *tcti ? tcti : NULL, &c)) < 0)
                return r;
        r = pick_free(c, from, ret);
        tpm_conn_unref(c);
        return r;
}

static int ask_manufacturer(tpm_conn *c) {
        _cleanup_unlock_ tpm_conn *locked = NULL;
        _cleanup_(esys_freep) TPMS_CAPABILITY_DATA *cap = NULL;
        TSS2_RC rc;
        int r;

        if ((r = tpm_conn_lock(c, &locked)) < 0)
                return r;
        rc = Esys_GetCapability(c->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES,
                                TPM2_PT_MANUFACTURER, 1, NULL, &cap);
        if (rc != TSS2_RC_SUCCESS)
                return tpm_fail(c, rc, "the TPM at %s does not answer", tpm_conn_name(c));
        return 0;
}

int hwid_tpm_ping(const hsm_options *opts) {
        const char *tcti = opts && opts->tcti ? opts->tcti : getenv("HWID_TCTI");
        tpm_conn *c = NULL;
        int r;

        if ((r = tpm_conn_get(tcti && *tcti ? tcti : NULL, &c)) < 0)
                return r;
        r = ask_manufacturer(c);
        tpm_conn_unref(c);
        return r;
}
