/* hwidd's housekeeping, run once a second off the request path (from
 * hwidd's main thread): the summary of refusals without valid
 * credentials, the audit retention, and the signed checkpoints of the
 * audit chain (store.h): of the head every audit.checkpoint_records
 * records or checkpoint_interval seconds, when hwidd starts and when it
 * stops, each noted in the chain by a record of its own; of the anchor in
 * each pruning's own transaction.
 *
 * Pruning deletes small batches, each its own short transaction, so an
 * issuance waits at most for one batch; a backlog (a first start after an
 * upgrade, a shortened retention) is worked off a little each second. */
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "audit-syslog.h"
#include "base64.h"
#include "ca-internal.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"

#define PRUNE_BATCH 1000
#define PRUNE_BUDGET_MS 200  /* per tick, then the rest is left for the next */
#define PRUNE_PERIOD 60      /* between passes once nothing is left to prune */

static int64_t mono_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- checkpoints ---- */

/* The checkpoint in hwidd's log (the journal) and, with audit.syslog, to
 * the audit records' syslog socket: a copy off the database for whoever
 * checks it against a rewritten one. */
static void checkpoint_log(ca_service *ca, const store_audit_checkpoint *cp) {
        _cleanup_free_ char *sig = NULL;
        char hash[2 * STORE_AUDIT_HASH_LEN + 1], line[1024];

        for (size_t i = 0; i < STORE_AUDIT_HASH_LEN; i++)
                snprintf(hash + 2 * i, 3, "%02x", cp->hash[i]);
        (void) base64_encode(cp->sig, cp->sig_len, false, &sig);
        snprintf(line, sizeof(line), "hwid-audit-checkpoint kind=%c id=%lld record_at=%lld hash=%s at=%lld sig=%s",
                 cp->kind, (long long) cp->id, (long long) cp->record_at, hash, (long long) cp->at, sig ? sig : "?");
        log_notice("%s", line);
        pthread_rwlock_rdlock(&ca->cfg_lock);
        if (ca->cfg)
                audit_syslog_send_line(ca->cfg->audit_syslog ? ca->cfg->audit_syslog_socket : NULL, "hwidd",
                                       ca_syslog_dropped, ca->metrics, line);
        pthread_rwlock_unlock(&ca->cfg_lock);
}

/* store_audit_sign_fn: the CA key signs the checkpoint, through hsm/'s
 * one signing path. */
static int checkpoint_sign(store_audit_checkpoint *cp, void *userdata) {
        ca_service *ca = userdata;
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint8_t msg[STORE_CHECKPOINT_MSG_LEN];
        size_t len = sizeof(cp->sig);
        int r;

        if (!md)
                return hwid_fail(HWID_E_NOMEM, NULL);
        store_audit_checkpoint_message(cp, msg);
        if ((r = hwid_key_sign_init(ca->ca_key, md, "SHA256")) < 0)
                return r;
        hwid_error_clear();
        if (EVP_DigestSign(md, cp->sig, &len, msg, sizeof(msg)) <= 0)
                return hwid_fail_signing("an audit checkpoint");
        cp->sig_len = len;
        /* A pruning's, signed in its transaction: logged here (the head's
         * once stored, by checkpoint_head()). */
        if (cp->kind == STORE_CHECKPOINT_PRUNE)
                checkpoint_log(ca, cp);
        return 0;
}

/* Signs the head as it is now and stores the checkpoint; it is the last
 * one from then on. */
static int checkpoint_store(ca_service *ca, const store_audit_link *head, int64_t now) {
        store_audit_checkpoint cp = { .kind = STORE_CHECKPOINT_HEAD, .id = head->id, .record_at = head->at,
                                      .at = now };
        int r;

        memcpy(cp.hash, head->hash, STORE_AUDIT_HASH_LEN);
        if ((r = checkpoint_sign(&cp, ca)) < 0 || (r = store_audit_checkpoint_add(ca->store, &cp)) < 0) {
                log_error("cannot make a checkpoint of the audit chain: %s", hwid_strerror(r));
                return r;
        }
        ca->checkpoint_id = head->id;
        ca->checkpoint_at = now;
        checkpoint_log(ca, &cp);
        return 0;
}

/* The newest record's id if it is a checkpoint's note, else 0. */
static int newest_note(const store_audit *a, void *userdata) {
        int64_t *note_id = userdata;

        if (strcmp(a->actor, STORE_CHECKPOINT_NOTE_ACTOR) == 0 && strcmp(a->action, STORE_CHECKPOINT_NOTE_ACTION) == 0)
                *note_id = a->id;
        return 0;
}

/* The checkpoint in the chain itself (store.h): a record naming the record
 * it signed, so that hwid audit verify misses it if it is deleted; then
 * the note signed too, so that the newest record is covered.  Another
 * replica's note at the head is signed already: nothing moved since. */
static void checkpoint_note(ca_service *ca, const store_audit_link *signed_head, int64_t now) {
        store_audit_link head;
        char target[32], reason[96], t[32];
        time_t at = (time_t) now;
        struct tm tm;

        if (!gmtime_r(&at, &tm) || !strftime(t, sizeof(t), "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(t, sizeof(t), "%lld", (long long) now);
        snprintf(target, sizeof(target), "record %lld", (long long) signed_head->id);
        snprintf(reason, sizeof(reason), "the chain's head signed with the CA key at %s", t);
        ca_audit(ca, STORE_CHECKPOINT_NOTE_ACTOR, STORE_CHECKPOINT_NOTE_ACTION, target, "allow", reason, NULL);
        if (store_audit_head(ca->store, &head) >= 0 && head.set && head.id != signed_head->id)
                (void) checkpoint_store(ca, &head, now);
}

/* A checkpoint of the head, if it moved since the last one (force: at
 * shutdown, else when due). */
static void checkpoint_head(ca_service *ca, int64_t now, bool force) {
        unsigned every_n = 1000;
        int64_t every_s = 60;
        store_audit_link head;
        int64_t note_id = 0;

        pthread_rwlock_rdlock(&ca->cfg_lock);
        if (ca->cfg) {
                every_n = ca->cfg->audit_checkpoint_records;
                every_s = ca->cfg->audit_checkpoint_interval;
        }
        pthread_rwlock_unlock(&ca->cfg_lock);
        if (store_audit_head(ca->store, &head) < 0)
                return;
        if (!head.set) {
                /* Nothing to sign yet: the interval starts now, so that the
                 * first records wait for it like any others. */
                ca->checkpoint_at = now;
                return;
        }
        if (head.id == ca->checkpoint_id)
                return;
        if (!force && now < ca->checkpoint_at + every_s && head.id - ca->checkpoint_id < (int64_t) every_n)
                return;
        if (store_audit_foreach(ca->store, 1, newest_note, &note_id) < 0)
                return;
        if (note_id == head.id) {
                ca->checkpoint_id = head.id;
                return;
        }
        if (checkpoint_store(ca, &head, now) >= 0)
                checkpoint_note(ca, &head, now);
}

/* ---- attestation challenges past a bound ---- */

void ca_challenge_note(ca_service *ca, const char *requester, int r, size_t replaced, int64_t now) {
        bool refused = r == -HWID_E_RATE_LIMITED;

        if (r >= 0)
                metrics_challenge_count(ca->metrics, CHALLENGE_ISSUED, 1);
        metrics_challenge_count(ca->metrics, CHALLENGE_REPLACED, replaced);
        if (refused)
                metrics_challenge_count(ca->metrics, CHALLENGE_REFUSED, 1);
        if (!replaced && !refused)
                return;
        pthread_mutex_lock(&ca->chal_lock);
        ca->chal_replaced += replaced;
        ca->chal_refused += refused;
        snprintf(ca->chal_last, sizeof(ca->chal_last), "%s", requester);
        if (!ca->chal_since)
                ca->chal_since = now;
        pthread_mutex_unlock(&ca->chal_lock);
}

/* One audit record a minute (and at shutdown) for what the bounds did. */
static void challenges_flush(ca_service *ca, int64_t now, bool force) {
        char reason[256] = "";

        pthread_mutex_lock(&ca->chal_lock);
        if (ca->chal_since && (force || now >= ca->chal_since + 60)) {
                snprintf(reason, sizeof(reason), "in %llds: %lu attestation challenge(s) replaced by a newer one of "
                         "the same requester (over attestation.max_pending_per_requester), %lu refused "
                         "(attestation.max_pending); the last by %s", (long long) (now - ca->chal_since),
                         ca->chal_replaced, ca->chal_refused, ca->chal_last);
                ca->chal_replaced = ca->chal_refused = 0;
                ca->chal_since = 0;
        }
        pthread_mutex_unlock(&ca->chal_lock);
        if (reason[0])
                ca_audit(ca, "hwidd", "attest.bounds", NULL, "deny", reason, NULL);
}

/* ---- retention ---- */

/* One pass: batches until none is left or the budget is spent.  Returns
 * whether records older than the retention may remain. */
static bool prune_pass(ca_service *ca, int64_t before, size_t *ret_n) {
        int64_t until = mono_ms() + PRUNE_BUDGET_MS;
        size_t n = 0, total = 0;
        int r;

        do {
                r = store_audit_prune(ca->store, before, PRUNE_BATCH, checkpoint_sign, ca, &n);
                if (r < 0) {
                        log_error("cannot prune the audit log: %s", hwid_strerror(r));
                        break;
                }
                total += n;
        } while (n == PRUNE_BATCH && mono_ms() < until);
        *ret_n = total;
        return r >= 0 && n == PRUNE_BATCH;
}

static void prune_audit(ca_service *ca, int64_t now) {
        int64_t retention, before;
        bool more;
        size_t n;

        if (now < ca->prune_at)
                return;
        pthread_rwlock_rdlock(&ca->cfg_lock); /* a reload may change the retention */
        retention = ca->cfg ? ca->cfg->audit_retention : 0;
        pthread_rwlock_unlock(&ca->cfg_lock);
        if (retention <= 0)
                return;
        before = now - retention;
        more = prune_pass(ca, before, &n);
        if (n > 0)
                log_info("audit retention: removed %zu record%s older than %lld days%s", n, n == 1 ? "" : "s",
                         (long long) (retention / 86400), more ? " (more to go)" : "");
        ca->prune_at = more ? now : now + PRUNE_PERIOD;
}

/* ---- linking (PostgreSQL) ---- */

/* Chains what issuances queued (store_audit_chain_pending()), before anything
 * reads the head.  A failure is logged when it starts and when it ends,
 * not every second: the database being away is told by /readyz. */
static void link_audit(ca_service *ca) {
        size_t n = 0;
        int r = store_audit_chain_pending(ca->store, &n);

        if (r < 0 && !ca->link_failing)
                log_error("cannot chain the audit records issuances queued (will try again every second): %s",
                          hwid_strerror(r));
        else if (r >= 0 && ca->link_failing)
                log_info("audit chain: linking the queued records again (%zu now)", n);
        ca->link_failing = r < 0;
}

void ca_service_tick(ca_service *ca, int64_t now) {
        ca_gens_tick(ca, now);
        ca_refusals_flush(ca, now, false);
        challenges_flush(ca, now, false);
        link_audit(ca);
        prune_audit(ca, now);
        checkpoint_head(ca, now, false);
}

void ca_service_checkpoint(ca_service *ca, int64_t now) {
        /* The last summaries first, then every record linked: the
         * checkpoint covers them. */
        ca_refusals_flush(ca, now, true);
        challenges_flush(ca, now, true);
        link_audit(ca);
        checkpoint_head(ca, now, true);
}
