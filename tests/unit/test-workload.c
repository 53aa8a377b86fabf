/* provisioning/workload-config.c: the agent's configuration file.  The
 * sockets themselves, their callers and tokens are in device-workload.sh.
 *
 * Proves: a minimal socket gets the documented defaults; every member is
 * read (user and group names looked up, numbers kept); and each malformed
 * file is refused with HWID_E_CONFIG naming the member and the problem:
 * not strict JSON, unknown members, a relative or too long path, a mode
 * that is not octal or locks its owner out, unknown users and groups, lists
 * too long, audiences missing, empty, repeated, not printable or too long,
 * claims the agent sets (iss, sub, aud, iat, exp) or that a reused token
 * would make a lie of (jti, nbf), identity_claims other than iss/sub, a
 * ttl, reuse or connection limit out of range, no allow-list, two sockets
 * on one path. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "error.h"
#include "jws.h"
#include "workload.h"

#define SOCK "\"path\": \"/run/hwid/w.sock\", \"allow_uids\": [0], \"audiences\": [\"billing\"]"

static workload_conf *parse_ok(const char *text) {
        workload_conf *c = NULL;
        int r = workload_conf_parse(text, strlen(text), "agent.json", &c);

        if (r < 0)
                fprintf(stderr, "refused: %s\n", hwid_strerror(r));
        CHECK(r == 0 && c);
        return c;
}

static void refused(const char *text, const char *why) {
        workload_conf *c = NULL;
        int r = workload_conf_parse(text, strlen(text), "agent.json", &c);

        if (r != -HWID_E_CONFIG || !strstr(hwid_strerror(r), why)) {
                fprintf(stderr, "%s\n  expected a refusal with \"%s\", got %d: %s\n", text, why, r,
                        r < 0 ? hwid_strerror(r) : "accepted");
                check_failures++;
        }
        CHECK(!c);
        workload_conf_free(c);
}

static void defaults(void) {
        workload_conf *c = parse_ok("{\"workload_sockets\": [{" SOCK "}]}\n");
        const workload_socket_conf *s;

        if (!c)
                return;
        CHECK(c->n_sockets == 1);
        s = &c->sockets[0];
        CHECK_STREQ(s->path, "/run/hwid/w.sock");
        CHECK(s->mode == 0660 && s->owner == getuid() && s->group == getgid());
        CHECK(s->n_allow_uids == 1 && s->allow_uids[0] == 0 && s->n_allow_gids == 0);
        CHECK_STREQ(s->audiences[0], "billing");
        CHECK(!s->audiences[1] && !s->claims);
        CHECK(s->identity_claims == (JWS_IDENTITY_ISS | JWS_IDENTITY_SUB));
        CHECK(s->ttl == WORKLOAD_TTL_DEFAULT && s->reuse == WORKLOAD_REUSE_DEFAULT);
        CHECK(s->max_connections == WORKLOAD_MAX_CONNECTIONS_DEFAULT);
        CHECK(s->max_connections_per_uid == WORKLOAD_MAX_CONNECTIONS_PER_UID_DEFAULT);
        workload_conf_free(c);
}

static void every_member(void) {
        workload_conf *c = parse_ok(
                "{\"workload_sockets\": [{\"path\": \"/run/a.sock\", \"mode\": \"0600\", \"owner\": \"root\", "
                "\"group\": 0, \"allow_uids\": [\"root\", 1000], \"allow_gids\": [\"root\", 100], "
                "\"audiences\": [\"a\", \"b c\"], \"claims\": {\"site\": \"x/y\", \"n\": [1]}, "
                "\"identity_claims\": [\"sub\"], \"token_ttl\": 60, \"reuse\": 1, \"max_connections\": 8, "
                "\"max_connections_per_uid\": 8}, {" SOCK "}]}");
        const workload_socket_conf *s;

        if (!c)
                return;
        CHECK(c->n_sockets == 2);
        s = &c->sockets[0];
        CHECK(s->mode == 0600 && s->owner == 0 && s->group == 0);
        CHECK(s->n_allow_uids == 2 && s->allow_uids[0] == 0 && s->allow_uids[1] == 1000);
        CHECK(s->n_allow_gids == 2 && s->allow_gids[0] == 0 && s->allow_gids[1] == 100);
        CHECK_STREQ(s->audiences[1], "b c");
        CHECK_STREQ(s->claims, "{\"site\":\"x/y\",\"n\":[1]}");
        CHECK(s->identity_claims == JWS_IDENTITY_SUB);
        CHECK(s->ttl == 60 && s->reuse == 1.0 && s->max_connections == 8 && s->max_connections_per_uid == 8);
        workload_conf_free(c);
}

#define ONE(members) "{\"workload_sockets\": [{" members "}]}"

static void refusals(void) {
        static const struct {
                const char *text, *why;
        } bad[] = {
                { "{\"workload_sockets\": [{" SOCK "},]}", "not one JSON object" },
                { "// hi\n{}", "not one JSON object" },
                { "[]", "not one JSON object" },
                { "{}", "configures nothing" },
                { "{\"sockets\": []}", "agent.json: sockets: unknown member" },
                { "{\"workload_sockets\": []}", "workload_sockets: is a list of 1 to 8 sockets" },
                { "{\"workload_sockets\": [1]}", "workload_sockets[0]: is not a JSON object" },
                { ONE(SOCK ", \"colour\": 1"), "workload_sockets[0]: unknown member 'colour'" },
                { ONE("\"path\": \"w.sock\", \"allow_uids\": [0], \"audiences\": [\"a\"]"), "path: is an absolute path" },
                { ONE("\"path\": \"/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
                      "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\""),
                  "path: is an absolute path of at most 107 bytes" },
                { ONE(SOCK ", \"mode\": 432"), "mode: is an octal file mode" },
                { ONE(SOCK ", \"mode\": \"0668\""), "mode: is an octal file mode" },
                { ONE(SOCK ", \"mode\": \"01660\""), "mode: is an octal file mode" },
                { ONE(SOCK ", \"mode\": \"0466\""), "the owner must be able to connect" },
                { ONE(SOCK ", \"owner\": \"no-such-user\""), "owner: no user 'no-such-user' on this system" },
                { ONE(SOCK ", \"owner\": -1"), "owner: -1 is no user id" },
                { ONE(SOCK ", \"group\": \"no-such-group\""), "group: no group 'no-such-group'" },
                { ONE(SOCK ", \"allow_gids\": 5"), "allow_gids: is a list of group names or numbers" },
                { ONE(SOCK ", \"allow_gids\": [true]"), "allow_gids: a group is a name or a number" },
                { ONE("\"path\": \"/w\", \"allow_uids\": [0]"), "workload_sockets[0]: needs audiences" },
                { ONE("\"path\": \"/w\", \"allow_uids\": [0], \"audiences\": []"), "audiences: is a list of 1 to 64" },
                { ONE("\"path\": \"/w\", \"allow_uids\": [0], \"audiences\": [\"a\", \"a\"]"), "lists 'a' twice" },
                { ONE("\"path\": \"/w\", \"allow_uids\": [0], \"audiences\": [7]"), "audience 1 is not a string" },
                { ONE("\"path\": \"/w\", \"allow_uids\": [0], \"audiences\": [\"\"]"), "audience 1 is not a string" },
                { ONE("\"path\": \"/w\", \"allow_uids\": [0], \"audiences\": [\"a\\nb\"]"), "printable bytes" },
                { ONE(SOCK ", \"claims\": [1]"), "claims: is a JSON object of claims" },
                { ONE(SOCK ", \"claims\": {\"iss\": \"x\"}"), "claims: may not set 'iss'" },
                { ONE(SOCK ", \"claims\": {\"sub\": \"x\"}"), "may not set 'sub'" },
                { ONE(SOCK ", \"claims\": {\"aud\": \"x\"}"), "may not set 'aud'" },
                { ONE(SOCK ", \"claims\": {\"exp\": 1}"), "may not set 'exp'" },
                { ONE(SOCK ", \"claims\": {\"iat\": 1}"), "may not set 'iat'" },
                { ONE(SOCK ", \"claims\": {\"jti\": \"1\"}"), "may not set 'jti'" },
                { ONE(SOCK ", \"claims\": {\"nbf\": 1}"), "may not set 'nbf'" },
                { ONE(SOCK ", \"identity_claims\": []"), "identity_claims: is a list of \"iss\" and/or \"sub\"" },
                { ONE(SOCK ", \"identity_claims\": [\"aud\"]"), "names \"iss\" and/or \"sub\", not 'aud'" },
                { ONE(SOCK ", \"identity_claims\": [1]"), "names \"iss\" and/or \"sub\"" },
                { ONE(SOCK ", \"token_ttl\": 5"), "token_ttl: is a whole number from 10 to 86400" },
                { ONE(SOCK ", \"token_ttl\": \"10m\""), "token_ttl: is a whole number" },
                { ONE(SOCK ", \"reuse\": 0"), "reuse: is a fraction" },
                { ONE(SOCK ", \"reuse\": 1.5"), "reuse: is a fraction" },
                { ONE(SOCK ", \"reuse\": \"0.5\""), "reuse: is a fraction" },
                { ONE(SOCK ", \"max_connections\": 0"), "max_connections: is a whole number from 1 to 1024" },
                { ONE(SOCK ", \"max_connections\": 4"), "max_connections_per_uid is above max_connections" },
                { ONE("\"path\": \"/w\", \"audiences\": [\"a\"]"), "needs allow_uids or allow_gids" },
                { ONE("\"path\": \"/w\", \"audiences\": [\"a\"], \"allow_uids\": []"), "needs allow_uids or allow_gids" },
                { ONE("\"allow_uids\": [0], \"audiences\": [\"a\"]"), "workload_sockets[0]: needs a path" },
                { "{\"workload_sockets\": [{" SOCK "}, {" SOCK "}]}", "workload_sockets[1]: two sockets at /run/hwid/w.sock" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                refused(bad[i].text, bad[i].why);
}

static void too_many(void) {
        char text[4096] = "{\"workload_sockets\": [{\"path\": \"/w\", \"audiences\": [\"a\"], \"allow_uids\": [0";

        for (int i = 1; i <= WORKLOAD_MAX_ALLOWED; i++)
                snprintf(text + strlen(text), sizeof(text) - strlen(text), ", %d", i);
        strcat(text, "]}]}");
        refused(text, "allow_uids: lists 65 users (at most 64)");
}

int main(void) {
        defaults();
        every_member();
        refusals();
        too_many();
        if (!check_failures)
                printf("test-workload: all checks passed\n");
        return check_done("test-workload");
}
