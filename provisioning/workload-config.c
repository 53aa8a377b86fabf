/* The agent's configuration file (see workload.h): strict JSON, every
 * member known, every value checked, errors naming the member. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "error.h"
#include "fsutil.h"
#include "jws.h"
#include "workload-internal.h"
#include "workload.h"

#define CLAIMS_MAX (8 * 1024)
#define TTL_MAX (24 * 3600)

typedef struct cfg {
        const char *name;   /* the file, for messages */
        char path[96];      /* the member being read, e.g. workload_sockets[0].mode */
} cfg;

static int cfg_fail(const cfg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int cfg_fail(const cfg *c, const char *fmt, ...) {
        char why[400];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        return hwid_fail(HWID_E_CONFIG, "%s: %s: %s", c->name, c->path, why);
}

/* Names the member m of the socket at index i (or the socket itself). */
static void cfg_at(cfg *c, size_t i, const char *m) {
        snprintf(c->path, sizeof(c->path), "workload_sockets[%zu]%s%s", i, m ? "." : "", m ? m : "");
}

static void socket_conf_clear(workload_socket_conf *s) {
        free(s->path);
        free(s->allow_uids);
        free(s->allow_gids);
        for (char **a = s->audiences; a && *a; a++)
                free(*a);
        free(s->audiences);
        free(s->claims);
}

void workload_conf_free(workload_conf *c) {
        if (!c)
                return;
        for (size_t i = 0; i < c->n_sockets; i++)
                socket_conf_clear(&c->sockets[i]);
        free(c->sockets);
        free(c);
}

/* A user or group: a name looked up now, or a number. */
static int lookup_id(const cfg *c, json_object *v, bool group, unsigned *ret) {
        const char *name;
        struct passwd pw, *pwp = NULL;
        struct group gr, *grp = NULL;
        char buf[4096];

        if (json_object_is_type(v, json_type_int)) {
                int64_t n = json_object_get_int64(v);
                if (n < 0 || n >= (int64_t) UINT32_MAX)
                        return cfg_fail(c, "%lld is no %s id", (long long) n, group ? "group" : "user");
                *ret = (unsigned) n;
                return 0;
        }
        if (!json_object_is_type(v, json_type_string) || !*(name = json_object_get_string(v)))
                return cfg_fail(c, "a %s is a name or a number", group ? "group" : "user");
        if (group ? getgrnam_r(name, &gr, buf, sizeof(buf), &grp) != 0 || !grp
                  : getpwnam_r(name, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp)
                return cfg_fail(c, "no %s '%.64s' on this system", group ? "group" : "user", name);
        *ret = group ? (unsigned) grp->gr_gid : (unsigned) pwp->pw_uid;
        return 0;
}

static int get_ids(const cfg *c, json_object *v, bool group, unsigned **ret, size_t *ret_n) {
        size_t n;
        unsigned *ids;
        int r;

        if (!json_object_is_type(v, json_type_array))
                return cfg_fail(c, "is a list of %s names or numbers", group ? "group" : "user");
        n = json_object_array_length(v);
        if (n > WORKLOAD_MAX_ALLOWED)
                return cfg_fail(c, "lists %zu %ss (at most %d)", n, group ? "group" : "user", WORKLOAD_MAX_ALLOWED);
        if (!(ids = calloc(n ? n : 1, sizeof(*ids))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < n; i++)
                if ((r = lookup_id(c, json_object_array_get_idx(v, i), group, &ids[i])) < 0) {
                        free(ids);
                        return r;
                }
        *ret = ids;
        *ret_n = n;
        return 0;
}

static bool printable(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        return false;
        return true;
}

static int get_audiences(const cfg *c, json_object *v, char ***ret) {
        size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
        char **a;

        if (n < 1 || n > WORKLOAD_MAX_AUDIENCES)
                return cfg_fail(c, "is a list of 1 to %d audiences", WORKLOAD_MAX_AUDIENCES);
        if (!(a = calloc(n + 1, sizeof(*a))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = a; /* freed with the socket's configuration, also on failure */
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_array_get_idx(v, i);
                const char *s = json_object_is_type(e, json_type_string) ? json_object_get_string(e) : NULL;
                if (!s || !*s || strlen(s) > WORKLOAD_AUDIENCE_MAX || !printable(s))
                        return cfg_fail(c, "audience %zu is not a string of 1 to %d printable bytes", i + 1,
                                        WORKLOAD_AUDIENCE_MAX);
                for (size_t j = 0; j < i; j++)
                        if (strcmp(a[j], s) == 0)
                                return cfg_fail(c, "lists '%.64s' twice", s);
                if (!(a[i] = strdup(s)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

/* The operator's claims: an object that sets none of the claims the
 * agent sets (or that a reused token would make a lie of: jti, nbf). */
static int get_claims(const cfg *c, json_object *v, char **ret) {
        static const char *const reserved[] = { "iss", "sub", "aud", "iat", "exp", "nbf", "jti" };
        const char *text;

        if (!json_object_is_type(v, json_type_object))
                return cfg_fail(c, "is a JSON object of claims");
        for (size_t i = 0; i < ELEMENTSOF(reserved); i++)
                if (json_object_object_get_ex(v, reserved[i], NULL))
                        return cfg_fail(c, "may not set '%s' (the agent sets iss/sub, aud, iat and exp; jti and "
                                        "nbf would be wrong on a token that is handed out again)", reserved[i]);
        text = json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (strlen(text) > CLAIMS_MAX)
                return cfg_fail(c, "holds %zu bytes of claims (at most %d)", strlen(text), CLAIMS_MAX);
        return (*ret = strdup(text)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

static int get_identity_claims(const cfg *c, json_object *v, unsigned *ret) {
        size_t n = json_object_is_type(v, json_type_array) ? json_object_array_length(v) : 0;
        unsigned f = 0;

        for (size_t i = 0; i < n; i++) {
                const char *s = json_object_get_string(json_object_array_get_idx(v, i));
                unsigned bit = s && strcmp(s, "iss") == 0 ? JWS_IDENTITY_ISS
                               : s && strcmp(s, "sub") == 0 ? JWS_IDENTITY_SUB : 0;
                if (!bit || !json_object_is_type(json_object_array_get_idx(v, i), json_type_string))
                        return cfg_fail(c, "names \"iss\" and/or \"sub\", not '%.32s'", s ? s : "?");
                f |= bit;
        }
        if (!f)
                return cfg_fail(c, "is a list of \"iss\" and/or \"sub\"");
        *ret = f;
        return 0;
}

static int get_uint(const cfg *c, json_object *v, int64_t min, int64_t max, int64_t *ret) {
        int64_t n;

        if (!json_object_is_type(v, json_type_int) || (n = json_object_get_int64(v)) < min || n > max)
                return cfg_fail(c, "is a whole number from %lld to %lld", (long long) min, (long long) max);
        *ret = n;
        return 0;
}

/* ---------- one member each ---------- */

static int m_path(const cfg *c, json_object *v, workload_socket_conf *s) {
        const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;

        if (!p || p[0] != '/' || strlen(p) >= sizeof(((struct sockaddr_un *) NULL)->sun_path) || !printable(p))
                return cfg_fail(c, "is an absolute path of at most %zu bytes",
                                sizeof(((struct sockaddr_un *) NULL)->sun_path) - 1);
        return (s->path = strdup(p)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

static int m_mode(const cfg *c, json_object *v, workload_socket_conf *s) {
        const char *p = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
        char *end = NULL;
        unsigned long m = p && *p ? strtoul(p, &end, 8) : 0;

        if (!p || !*p || *end || strspn(p, "01234567") != strlen(p) || m > 0777 || !(m & 0200))
                return cfg_fail(c, "is an octal file mode like \"0660\" (the owner must be able to connect)");
        s->mode = (mode_t) m;
        return 0;
}

static int m_owner(const cfg *c, json_object *v, workload_socket_conf *s) {
        return lookup_id(c, v, false, &s->owner);
}

static int m_group(const cfg *c, json_object *v, workload_socket_conf *s) {
        return lookup_id(c, v, true, &s->group);
}

static int m_allow_uids(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_ids(c, v, false, &s->allow_uids, &s->n_allow_uids);
}

static int m_allow_gids(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_ids(c, v, true, &s->allow_gids, &s->n_allow_gids);
}

static int m_audiences(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_audiences(c, v, &s->audiences);
}

static int m_claims(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_claims(c, v, &s->claims);
}

static int m_identity_claims(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_identity_claims(c, v, &s->identity_claims);
}

static int m_ttl(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_uint(c, v, 10, TTL_MAX, &s->ttl);
}

static int m_reuse(const cfg *c, json_object *v, workload_socket_conf *s) {
        double d;

        if ((!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) ||
            !((d = json_object_get_double(v)) > 0 && d <= 1))
                return cfg_fail(c, "is a fraction of a token's lifetime in (0, 1]");
        s->reuse = d;
        return 0;
}

static int get_connections(const cfg *c, json_object *v, unsigned *ret) {
        int64_t n;
        int r = get_uint(c, v, 1, 1024, &n);

        if (r >= 0)
                *ret = (unsigned) n;
        return r;
}

static int m_max_connections(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_connections(c, v, &s->max_connections);
}

static int m_max_connections_per_uid(const cfg *c, json_object *v, workload_socket_conf *s) {
        return get_connections(c, v, &s->max_connections_per_uid);
}

typedef int (*member_fn)(const cfg *c, json_object *v, workload_socket_conf *s);

static const struct {
        const char *key;
        member_fn fn;
} members[] = {
        { "path", m_path },
        { "mode", m_mode },
        { "owner", m_owner },
        { "group", m_group },
        { "allow_uids", m_allow_uids },
        { "allow_gids", m_allow_gids },
        { "audiences", m_audiences },
        { "claims", m_claims },
        { "identity_claims", m_identity_claims },
        { "token_ttl", m_ttl },
        { "reuse", m_reuse },
        { "max_connections", m_max_connections },
        { "max_connections_per_uid", m_max_connections_per_uid },
};

/* ---------- a socket, the file ---------- */

static int socket_member(cfg *c, size_t i, const char *key, json_object *v, workload_socket_conf *s) {
        for (size_t m = 0; m < ELEMENTSOF(members); m++)
                if (strcmp(key, members[m].key) == 0) {
                        cfg_at(c, i, key);
                        return members[m].fn(c, v, s);
                }
        cfg_at(c, i, NULL);
        return cfg_fail(c, "unknown member '%.64s'", key);
}

static int socket_check(cfg *c, size_t i, const workload_socket_conf *s) {
        cfg_at(c, i, NULL);
        if (!s->path)
                return cfg_fail(c, "needs a path");
        if (!s->audiences)
                return cfg_fail(c, "needs audiences (the audiences tokens may be made for)");
        if (s->n_allow_uids + s->n_allow_gids == 0)
                return cfg_fail(c, "needs allow_uids or allow_gids (who may use the socket)");
        if (s->max_connections_per_uid > s->max_connections)
                return cfg_fail(c, "max_connections_per_uid is above max_connections");
        return 0;
}

static int parse_socket(cfg *c, size_t i, json_object *o, workload_socket_conf *s) {
        int r;

        *s = (workload_socket_conf) {
                .mode = 0660, .owner = getuid(), .group = getgid(),
                .identity_claims = JWS_IDENTITY_ISS | JWS_IDENTITY_SUB, .ttl = WORKLOAD_TTL_DEFAULT,
                .reuse = WORKLOAD_REUSE_DEFAULT, .max_connections = WORKLOAD_MAX_CONNECTIONS_DEFAULT,
                .max_connections_per_uid = WORKLOAD_MAX_CONNECTIONS_PER_UID_DEFAULT,
        };
        cfg_at(c, i, NULL);
        if (!json_object_is_type(o, json_type_object))
                return cfg_fail(c, "is not a JSON object");
        json_object_object_foreach(o, key, v) {
                if ((r = socket_member(c, i, key, v, s)) < 0)
                        return r;
        }
        return socket_check(c, i, s);
}

static int parse_sockets(cfg *c, json_object *a, workload_conf *conf) {
        size_t n = json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
        int r;

        snprintf(c->path, sizeof(c->path), "workload_sockets");
        if (n < 1 || n > WORKLOAD_MAX_SOCKETS)
                return cfg_fail(c, "is a list of 1 to %d sockets", WORKLOAD_MAX_SOCKETS);
        if (!(conf->sockets = calloc(n, sizeof(*conf->sockets))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < n; i++) {
                conf->n_sockets = i + 1; /* what to free */
                if ((r = parse_socket(c, i, json_object_array_get_idx(a, i), &conf->sockets[i])) < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(conf->sockets[j].path, conf->sockets[i].path) == 0)
                                return cfg_fail(c, "two sockets at %s", conf->sockets[i].path);
        }
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put)

int workload_conf_parse(const char *text, size_t len, const char *name, workload_conf **ret) {
        _cleanup_(workload_conf_freep) workload_conf *conf = calloc(1, sizeof(*conf));
        _cleanup_(json_object_putp) json_object *o = NULL;
        cfg c = { .name = name };
        int r;

        if (!conf)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (jws_json_object(text, len, true, "the configuration", &o) < 0)
                return hwid_fail(HWID_E_CONFIG, "%s: not one JSON object (strict JSON: no comments, no trailing "
                                 "commas)", name);
        json_object_object_foreach(o, key, v) {
                snprintf(c.path, sizeof(c.path), "%.64s", key);
                if (strcmp(key, "workload_sockets") != 0)
                        return cfg_fail(&c, "unknown member");
                if ((r = parse_sockets(&c, v, conf)) < 0)
                        return r;
        }
        if (conf->n_sockets == 0)
                return hwid_fail(HWID_E_CONFIG, "%s: configures nothing (no workload_sockets)", name);
        *ret = TAKE_PTR(conf);
        return 0;
}

int workload_conf_load(const char *path, workload_conf **ret) {
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r;

        if ((r = read_file_capped(path, WORKLOAD_CONFIG_MAX, &text, &len)) < 0)
                return hwid_fail(HWID_E_CONFIG, "cannot read the agent configuration: %s", hwid_strerror(r));
        return workload_conf_parse(text, len, path, ret);
}

/* Who may use a socket, by what its configuration allows. */

static bool has_id(const unsigned *v, size_t n, unsigned id) {
        for (size_t i = 0; i < n; i++)
                if (v[i] == id)
                        return true;
        return false;
}

bool wl_peer_allowed(const workload_socket_conf *c, const wl_peer *p) {
        if (has_id(c->allow_uids, c->n_allow_uids, p->uid) || has_id(c->allow_gids, c->n_allow_gids, p->gid))
                return true;
        for (size_t i = 0; i < p->n_groups; i++)
                if (has_id(c->allow_gids, c->n_allow_gids, p->groups[i]))
                        return true;
        return false;
}
