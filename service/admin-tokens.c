/* The admin API's bootstrap tokens: create (admin; a provisioner within
 * its scope), list, revoke.  A token's secret is in the answer to its
 * creation and nowhere else: only its hash is stored, the audit record
 * and the log name its id, and every copy hwidd made is wiped. */
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

/* One token: stored (hash only), audited by id, and added to the answer;
 * *ret_secret is the JSON string holding the secret, for the caller to
 * wipe once the answer is made. */
static int create_one(admin_call *c, const token_ask *t, json_object *list, json_object **ret_secret) {
        _cleanup_secret_ char *secret = NULL;
        char id[TOKEN_ID_LEN + 1], full[TOKEN_ID_LEN + 2 + TOKEN_SECRET_MAX], note[400];
        store_token st = { 0 };
        json_object *o, *tok;
        int r;

        if ((r = token_generate(id, &secret)) < 0 || (r = token_hash(secret, st.secret_hash)) < 0)
                return r;
        memcpy(st.id, id, sizeof(st.id));
        st.profile = (char *) t->profile;
        st.name_pattern = (char *) t->pattern;
        st.description = (char *) t->description;
        st.created_at = c->now;
        st.expires_at = c->now + t->ttl;
        st.uses_total = st.uses_left = (int) t->uses;
        r = store_token_insert(c->ca->store, &st);
        secret_wipe(st.secret_hash, sizeof(st.secret_hash));
        if (r < 0)
                return r;
        snprintf(note, sizeof(note), "profile %s, name pattern %s, %lld use%s, valid for %llds", t->profile,
                 t->pattern ? t->pattern : "(any)", (long long) t->uses, t->uses == 1 ? "" : "s", (long long) t->ttl);
        ca_audit(c->ca, c->auth.actor, "token.create", id, "allow", note, NULL);
        snprintf(full, sizeof(full), "%s.%s", id, secret);
        tok = json_object_new_string(full);
        secret_wipe(full, sizeof(full));
        if (!tok || !(o = admin_json_token(&st, c->now)) || json_object_array_add(list, o) < 0) {
                json_wipe_string(tok);
                json_object_put(tok);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        json_object_object_add(o, "token", json_object_get(tok));
        *ret_secret = tok;
        return 0;
}

static void wipe_all(json_object **secrets, size_t n) {
        for (size_t i = 0; i < n; i++) {
                json_wipe_string(secrets[i]);
                json_object_put(secrets[i]);
        }
}

int admin_token_create(admin_call *c) {
        _cleanup_free_ json_object **secrets = NULL;
        json_object *answer, *list = NULL;
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
        if (!(secrets = calloc((size_t) t.count, sizeof(*secrets))) || !(answer = admin_list_object("tokens", &list)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < (size_t) t.count; n += r >= 0)
                r = create_one(c, &t, list, &secrets[n]);
        /* Each token was audited as it was stored: a failure part way
         * leaves those records, and tokens whose secret nobody has. */
        c->audited = n > 0;
        if (r >= 0)
                r = admin_respond(c, 201, answer);
        else
                json_object_put(answer);
        wipe_all(secrets, n);
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
