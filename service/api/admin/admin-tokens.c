/* The admin API's bootstrap tokens: create (admin; a provisioner within
 * its scope), list, revoke.  A token's secret is in the answer to its
 * creation and nowhere else: it is derived with hwidd's token key (the
 * store keeps a nonce, ca/token.h), the audit record and the log name its
 * id, and every copy hwidd made is wiped. */
#include <string.h>

#include "admin-internal.h"
#include "error.h"
#include "secret.h"
#include "token.h"

/* Tokens per request: a station asks for more in several requests. */
#define TOKEN_BATCH_MAX 1000
#define TOKEN_TTL_MAX (3650LL * 86400)
#define TOKEN_USES_MAX 1000000
#define DESCRIPTION_MAX 256

typedef struct token_ask {
        const char *profile;
        const char *pattern;
        const char *description;
        int64_t ttl, uses, count;
} token_ask;

static int read_ask(admin_call *c, token_ask *t) {
        static const char *const keys[] = { "profile", "name_pattern", "ttl", "uses", "description", "count", NULL };
        int r;

        *t = (token_ask) { .profile = "default", .ttl = 86400, .uses = 1, .count = 1 };
        if ((r = admin_body_keys(c, keys)) < 0 || (r = admin_body_str(c, "profile", 64, &t->profile)) < 0 ||
            (r = admin_body_str(c, "name_pattern", 255, &t->pattern)) < 0 ||
            (r = admin_body_str(c, "description", DESCRIPTION_MAX, &t->description)) < 0 ||
            (r = admin_body_int(c, "ttl", 1, TOKEN_TTL_MAX, &t->ttl)) < 0 ||
            (r = admin_body_int(c, "uses", 1, TOKEN_USES_MAX, &t->uses)) < 0 ||
            (r = admin_body_int(c, "count", 1, TOKEN_BATCH_MAX, &t->count)) < 0)
                return r;
        return 0;
}

/* A new token for t, derived with hwidd's token key: its row in *row
 * (its nonce, no secret), and "<id>.<secret>" in *ret_full (a secret:
 * the caller wipes it). */
static int make_token(const admin_call *c, const token_ask *t, store_token *row, char **ret_full) {
        int r = token_new(c->ca->token_key, row, ret_full);

        row->profile = (char *) t->profile;
        row->name_pattern = (char *) t->pattern;
        row->description = (char *) t->description;
        row->created_at = c->now;
        row->expires_at = c->now + t->ttl;
        row->uses_total = row->uses_left = (int) t->uses;
        return r;
}

/* A stored token: audited by id, and added to the answer with its secret;
 * *ret_secret is the JSON string holding the secret, for the caller to
 * wipe once the answer is made. */
static int answer_one(admin_call *c, const token_ask *t, const store_token *row, const char *full,
                      json_object *list, json_object **ret_secret) {
        char note[400];
        json_object *o, *tok;

        snprintf(note, sizeof(note), "profile %s, name pattern %s, %lld use%s, valid for %llds", t->profile,
                 t->pattern ? t->pattern : "(any)", (long long) t->uses, t->uses == 1 ? "" : "s", (long long) t->ttl);
        ca_audit(c->ca, c->auth.actor, "token.create", row->id, "allow", note, NULL);
        tok = json_object_new_string(full);
        if (!tok || !(o = admin_json_token(row, c->now)) || json_object_array_add(list, o) < 0) {
                json_wipe_string(tok);
                json_object_put(tok);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        json_object_object_add(o, "token", json_object_get(tok));
        *ret_secret = tok;
        return 0;
}

/* Everything that held a secret or what it was derived from, wiped and
 * freed: the n tokens made, and all the `size` rows (one may hold a
 * nonce made before its token failed). */
static void wipe_batch(store_token *rows, size_t size, char **full, json_object **secrets, size_t n) {
        for (size_t i = 0; i < n; i++) {
                secret_free(full[i]);
                json_wipe_string(secrets[i]);
                json_object_put(secrets[i]);
        }
        if (rows)
                secret_wipe(rows, size * sizeof(*rows));
        free(rows);
        free(full);
        free(secrets);
}

/* All the tokens asked for are stored in one transaction, or none: a
 * failure leaves no token whose secret nobody was given. */
int admin_token_create(admin_call *c) {
        json_object *answer = NULL, *list = NULL, **secrets = NULL;
        store_token *rows = NULL;
        char **full = NULL;
        policy_decision d;
        token_ask t;
        size_t n = 0;
        int r;

        if ((r = read_ask(c, &t)) < 0)
                return r;
        snprintf(c->target, sizeof(c->target), "%s", t.profile);
        policy_check_token_create(c->ca->cfg->policy, &c->auth.who, t.profile, t.pattern, &d);
        if ((r = ca_decision(c->ca, &c->auth, "token.create", c->target, &d)) < 0)
                return r;
        if (!(rows = calloc((size_t) t.count, sizeof(*rows))) || !(full = calloc((size_t) t.count, sizeof(*full))) ||
            !(secrets = calloc((size_t) t.count, sizeof(*secrets))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < (size_t) t.count; n += r >= 0)
                r = make_token(c, &t, &rows[n], &full[n]);
        if (r >= 0)
                r = store_token_insert(c->ca->store, rows, n);
        /* Stored: each is audited by its id, whatever happens next. */
        c->audited = r >= 0;
        if (r >= 0 && !(answer = admin_list_object("tokens", &list)))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = answer_one(c, &t, &rows[i], full[i], list, &secrets[i]);
        if (r >= 0)
                r = admin_respond(c, 201, TAKE_PTR(answer));
        json_object_put(answer);
        wipe_batch(rows, (size_t) t.count, full, secrets, n); /* n is 0 unless all three were made */
        return r;
}

int admin_token_list(admin_call *c) {
        json_object *answer, *list = NULL;
        store_token *t = NULL;
        size_t n = 0;
        int r = store_token_list(c->ca->store, &t, &n);

        if (r < 0)
                return r;
        answer = admin_list_object("tokens", &list);
        for (size_t i = 0; answer && i < n; i++)
                if (json_object_array_add(list, admin_json_token(&t[i], c->now)) < 0)
                        r = hwid_fail(HWID_E_NOMEM, NULL);
        store_token_list_free(t, n);
        if (!answer || r < 0) {
                json_object_put(answer);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        snprintf(c->note, sizeof(c->note), "%zu tokens", n);
        return admin_respond(c, 200, answer);
}

int admin_token_revoke(admin_call *c) {
        json_object *answer;
        int r;

        if ((r = admin_body_keys(c, (const char *const[]) { NULL })) < 0)
                return r;
        if ((r = store_token_revoke(c->ca->store, c->arg)) < 0)
                return r;
        answer = json_object_new_object();
        json_set_str(answer, "id", c->arg);
        json_object_object_add(answer, "revoked", json_object_new_boolean(true));
        return admin_respond(c, 200, answer);
}
