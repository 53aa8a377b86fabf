/* The TPM connections of this process: one ESYS context per TCTI string,
 * shared by every key through a reference count, all its calls serialised
 * by a mutex.  A TPM without a resource manager (swtpm, /dev/tpm0, the
 * mssim simulator) serves one client at a time, so a second connection
 * from the same process would block or fail.  ESYS never recovers from a
 * transport failure (every later call fails with BAD_SEQUENCE), so a
 * broken connection is rebuilt before its next use. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

#include "error.h"
#include "tpm-internal.h"

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static tpm_conn *conns;

const char *tpm_conn_name(const tpm_conn *c) {
        return c->tcti ? c->tcti : "the tpm2-tss default TCTI";
}

/* A transport failure, whichever layer reports it; ESYS's BAD_SEQUENCE is
 * what every call answers once an earlier one lost the connection. */
static bool rc_unreachable(TSS2_RC rc) {
        return (rc & TSS2_RC_LAYER_MASK) == TSS2_TCTI_RC_LAYER ||
               (rc & ~TSS2_RC_LAYER_MASK) == TSS2_BASE_RC_IO_ERROR || rc == TSS2_ESYS_RC_BAD_SEQUENCE;
}

/* A TPM format-one response code, whichever handle or parameter it names. */
bool tpm_rc_is_fmt1(TSS2_RC rc, TSS2_RC code) {
        return (rc & TSS2_RC_LAYER_MASK) == TSS2_TPM_RC_LAYER && (rc & TPM2_RC_FMT1) &&
               (rc & (TPM2_RC_FMT1 | 0x3f)) == code;
}

/* TPM answers whose decoded text ("out of memory for object contexts")
 * neither names the TPM nor says what to do about it. */
static const struct {
        TSS2_RC rc;
        const char *text;
} tpm_rc_texts[] = {
        { TPM2_RC_OBJECT_MEMORY, "TPM object memory full (0x902): objects were left loaded in a TPM without "
                                 "a resource manager (use /dev/tpmrm0, or flush them: tpm2_flushcontext -t)" },
        { TPM2_RC_SESSION_MEMORY, "TPM session memory full (0x903): sessions were left open in a TPM without "
                                  "a resource manager (use /dev/tpmrm0, or flush them: tpm2_flushcontext -s)" },
        { TPM2_RC_MEMORY, "TPM out of memory (0x904)" },
        { TPM2_RC_LOCKOUT, "TPM in dictionary-attack lockout (0x921): it refuses keys without noDA until "
                           "its recovery time has passed or the lockout is reset (tpm2_dictionarylockout -c)" },
        { TPM2_RC_NV_RATE, "TPM rate-limits its NV memory (0x920): try again later" },
};

static const char *tpm_rc_text(TSS2_RC rc) {
        for (size_t i = 0; i < ELEMENTSOF(tpm_rc_texts); i++)
                if (tpm_rc_texts[i].rc == rc)
                        return tpm_rc_texts[i].text;
        return Tss2_RC_Decode(rc);
}

int tpm_fail(tpm_conn *c, TSS2_RC rc, const char *fmt, ...) {
        char what[512];
        va_list ap;

        /* After a TPM error ESYS is ready for the next command; after any
         * other (transport, malformed response) it stays stuck for good. */
        tpm_conn_check(c, rc);
        va_start(ap, fmt);
        vsnprintf(what, sizeof(what), fmt, ap);
        va_end(ap);
        /* It answered before: it went away (a restart, a power cut, a
         * connection lost), and the next operation connects again. */
        if (rc_unreachable(rc))
                return hwid_fail(HWID_E_TPM_UNREACHABLE, "%s: the TPM at %s went away (%s)", what,
                                 tpm_conn_name(c), Tss2_RC_Decode(rc));
        return hwid_fail(HWID_E_TPM, "%s: %s", what, tpm_rc_text(rc));
}

void tpm_conn_check(tpm_conn *c, TSS2_RC rc) {
        /* After a TPM error ESYS is ready for the next command; after any
         * other (transport, malformed response) it stays stuck for good. */
        if (rc != TSS2_RC_SUCCESS && (rc & TSS2_RC_LAYER_MASK) != TSS2_TPM_RC_LAYER)
                c->broken = true;
}

/* ---- objects the TPM may still hold ---- */

void tpm_conn_left(tpm_conn *c, uint32_t handle) {
        for (size_t i = 0; i < c->n_left; i++)
                if (c->left[i] == handle)
                        return;
        if (c->n_left < ELEMENTSOF(c->left))
                c->left[c->n_left++] = handle;
}

int tpm_conn_left_report(tpm_conn *c, int r) {
        char handles[ELEMENTSOF(c->left) * 12] = "", prev[512];
        size_t n;

        pthread_mutex_lock(&c->lock);
        n = c->n_left;
        for (size_t i = 0; i < n; i++)
                snprintf(handles + strlen(handles), sizeof(handles) - strlen(handles), "%s0x%08x",
                         i ? " " : "", c->left[i]);
        c->n_left = 0;
        pthread_mutex_unlock(&c->lock);
        if (n == 0)
                return r;
        snprintf(prev, sizeof(prev), "%s", r < 0 ? hwid_strerror(r) : "");
        return hwid_fail(r < 0 ? (hwid_err) -r : HWID_E_TPM_UNREACHABLE,
                         "%s%sthe TPM at %s went away before hwid flushed %s: it may still hold %s unless it "
                         "restarted since (without a resource manager it keeps %s until flushed: "
                         "tpm2_flushcontext %s)", prev, r < 0 ? "; " : "", tpm_conn_name(c), handles,
                         n == 1 ? "that object" : "those objects", n == 1 ? "it" : "them",
                         n == 1 ? handles : "HANDLE");
}

/* again: a connection that went away, connected anew. */
static int conn_connect(tpm_conn *c, bool again) {
        TSS2_RC rc;

        rc = Tss2_TctiLdr_Initialize(c->tcti, &c->tcti_ctx);
        if (rc == TSS2_RC_SUCCESS) {
                rc = Esys_Initialize(&c->esys, c->tcti_ctx, NULL);
                if (rc != TSS2_RC_SUCCESS)
                        Tss2_TctiLdr_Finalize(&c->tcti_ctx);
        }
        if (rc != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_TPM_UNREACHABLE, again ? "the TPM at %s went away and cannot be reached "
                                 "again: %s" : "cannot reach the TPM at %s: %s", tpm_conn_name(c), Tss2_RC_Decode(rc));
        return 0;
}

static void conn_close(tpm_conn *c) {
        Esys_Finalize(&c->esys);
        Tss2_TctiLdr_Finalize(&c->tcti_ctx);
        pthread_mutex_destroy(&c->lock);
        free(c->tcti);
        free(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(tpm_conn *, conn_close)

static int conn_new(const char *tcti, tpm_conn **ret) {
        _cleanup_(conn_closep) tpm_conn *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&c->lock, NULL);
        if (tcti && !(c->tcti = strdup(tcti)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = conn_connect(c, false);
        if (r < 0)
                return r;
        c->refs = 1;
        *ret = TAKE_PTR(c);
        return 0;
}

int tpm_conn_get(const char *tcti, tpm_conn **ret) {
        tpm_conn *c;
        int r = 0;

        pthread_mutex_lock(&conns_lock);
        for (c = conns; c; c = c->next)
                if (c->tcti ? tcti && strcmp(c->tcti, tcti) == 0 : !tcti)
                        break;
        if (c)
                c->refs++;
        else if ((r = conn_new(tcti, &c)) >= 0) {
                c->next = conns;
                conns = c;
        }
        pthread_mutex_unlock(&conns_lock);
        if (r >= 0)
                *ret = c;
        return r;
}

void tpm_conn_unref(tpm_conn *c) {
        tpm_conn **p;

        pthread_mutex_lock(&conns_lock);
        if (--c->refs > 0) {
                pthread_mutex_unlock(&conns_lock);
                return;
        }
        for (p = &conns; *p != c; p = &(*p)->next)
                ;
        *p = c->next;
        pthread_mutex_unlock(&conns_lock);
        conn_close(c);
}

/* ESYS records (ESYS_TRs) die with the old context: bumping gen tells
 * their holders to look their objects up again. */
int tpm_conn_lock(tpm_conn *c, tpm_conn **ret_locked) {
        int r;

        pthread_mutex_lock(&c->lock);
        if (c->broken) {
                Esys_Finalize(&c->esys);
                Tss2_TctiLdr_Finalize(&c->tcti_ctx);
                /* Every ESYS_TR died with the old context, whether or not
                 * a new one can be had. */
                c->gen++;
                r = conn_connect(c, true);
                if (r < 0) {
                        pthread_mutex_unlock(&c->lock);
                        return r;
                }
                c->broken = false;
        }
        *ret_locked = c;
        return 0;
}

void tpm_conn_unlockp(tpm_conn **c) {
        if (*c)
                pthread_mutex_unlock(&(*c)->lock);
}

/* A flush that cannot be done (the connection is gone) or was lost with
 * it: the TPM handle is recorded, the ESYS record dies with the context. */
void tpm_tr_flush(tpm_tr *t) {
        TPM2_HANDLE h = 0;
        TSS2_RC rc = TSS2_RC_SUCCESS;

        if (t->tr == ESYS_TR_NONE)
                return;
        if (!t->conn->broken)
                tpm_conn_check(t->conn, rc = Esys_FlushContext(t->conn->esys, t->tr));
        if (t->conn->broken && Esys_TR_GetTpmHandle(t->conn->esys, t->tr, &h) == TSS2_RC_SUCCESS)
                tpm_conn_left(t->conn, h);
        t->tr = ESYS_TR_NONE;
}

void tpm_held_keep(tpm_conn *c, tpm_held *h, tpm_tr *t) {
        h->handle = 0;
        (void) Esys_TR_GetTpmHandle(c->esys, t->tr, &h->handle); /* ESYS's own record: no command */
        h->tr = tpm_tr_take(t);
        h->gen = c->gen;
}

bool tpm_held_live(tpm_conn *c, tpm_held *h) {
        if (h->tr != ESYS_TR_NONE && h->gen != c->gen) {
                if (h->handle)
                        tpm_conn_left(c, h->handle);
                h->tr = ESYS_TR_NONE;
        }
        return h->tr != ESYS_TR_NONE;
}

void tpm_held_flush(tpm_conn *c, tpm_held *h) {
        tpm_tr t = { .conn = c, .tr = ESYS_TR_NONE };

        if (tpm_held_live(c, h))
                t.tr = h->tr;
        tpm_tr_flush(&t);
        h->tr = ESYS_TR_NONE;
}

void tpm_tr_close(tpm_tr *t) {
        if (t->tr != ESYS_TR_NONE)
                (void) Esys_TR_Close(t->conn->esys, &t->tr);
        t->tr = ESYS_TR_NONE;
}
