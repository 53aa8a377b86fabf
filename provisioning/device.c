#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include "client.h"
#include "device.h"
#include "error.h"
#include "fsutil.h"
#include "json-read.h"
#include "ossl-util.h"
#include "x509-util.h"

#define FILE_MAX (256 * 1024)

void device_state_clear(device_state *s) {
        free(s->dir);
        free(s->server);
        for (char **p = s->servers; p && *p; p++)
                free(*p);
        free(s->servers);
        free(s->identity);
        free(s->ca_pem);
        free(s->cert_pem);
        free(s->key_uri);
        *s = (device_state) { 0 };
}

int pem_first_cert(const char *pem, X509 **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(pem, -1);
        X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;

        if (!x) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "no PEM certificate found");
        }
        *ret = x;
        return 0;
}

static char *dir_file(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *dir_file(const char *dir, const char *fmt, ...) {
        _cleanup_free_ char *name = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&name, fmt, ap);
        va_end(ap);
        return n < 0 ? NULL : path_join(dir, name);
}

static int read_in(const char *dir, const char *name, char **ret) {
        _cleanup_free_ char *p = path_join(dir, name);
        size_t len;

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return read_file_capped(p, FILE_MAX, ret, &len);
}

static int write_in(const char *dir, const char *name, const char *text, mode_t mode) {
        _cleanup_free_ char *p = path_join(dir, name);

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return write_file_atomic(p, text, strlen(text), mode);
}

static int unlink_in(const char *dir, const char *name) {
        _cleanup_free_ char *p = path_join(dir, name);

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (unlink(p) < 0 && errno != ENOENT)
                return hwid_fail(HWID_E_IO, "cannot remove %s: %s", p, strerror(errno));
        return 0;
}

/* Replaces (or creates) the symlink DIR/name -> target in one rename. */
static int symlink_atomic(const char *dir, const char *name, const char *target) {
        _cleanup_free_ char *link = path_join(dir, name), *tmp = NULL;

        if (!link || asprintf(&tmp, "%s.tmp.%ld", link, (long) getpid()) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        unlink(tmp);
        if (symlink(target, tmp) < 0 || rename(tmp, link) < 0) {
                int e = errno;
                unlink(tmp);
                return hwid_fail(HWID_E_IO, "cannot point %s at %s: %s", link, target, strerror(e));
        }
        return fsync_parent_dir(link);
}

static int cert_times(const char *pem, int64_t *nb, int64_t *na) {
        _cleanup_(X509_freep) X509 *x = NULL;
        struct tm tm;
        int r;

        if ((r = pem_first_cert(pem, &x)) < 0)
                return r;
        if (!ASN1_TIME_to_tm(X509_get0_notBefore(x), &tm))
                return hwid_fail(HWID_E_INVALID, "certificate has an unreadable notBefore");
        *nb = (int64_t) timegm(&tm);
        if (!ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm))
                return hwid_fail(HWID_E_INVALID, "certificate has an unreadable notAfter");
        *na = (int64_t) timegm(&tm);
        return 0;
}

/* s->servers: list (a JSON array) in its order, or s->server alone for
 * a device.json written before there were lists. */
static int read_servers(device_state *s, json_object *list) {
        size_t n = list ? json_object_array_length(list) : 0;

        if (n > CLIENT_MAX_SERVERS)
                return hwid_fail(HWID_E_INVALID, "device.json lists more than %d servers", CLIENT_MAX_SERVERS);
        if (!(s->servers = calloc(n + 2, sizeof(char *))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (n == 0)
                return (s->servers[0] = strdup(s->server)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < n; i++) {
                json_object *v = json_object_array_get_idx(list, i);
                const char *u = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;

                if (!u || strncmp(u, "https://", 8) != 0)
                        return hwid_fail(HWID_E_INVALID, "device.json: servers[%zu] is not an https:// URL", i);
                if (!(s->servers[i] = strdup(u)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        }
        return 0;
}

void device_server_order(const device_state *s, const char *ret[DEVICE_ORDER_MAX]) {
        size_t k = 0;

        ret[k++] = s->server;
        for (size_t i = 0; s->servers && s->servers[i] && k < DEVICE_ORDER_MAX - 1; i++)
                if (strcmp(s->servers[i], s->server) != 0)
                        ret[k++] = s->servers[i];
        ret[k] = NULL;
}

/* DIR/NAME's text as a JSON object. */
static int read_json(const char *dir, const char *name, const char *text, json_object **ret) {
        char what[512];

        snprintf(what, sizeof(what), "%s/%s", dir, name);
        return json_read(text, strlen(text), 8, 0, what, ret);
}

static int load_device_json(const char *dir, device_state *s) {
        _cleanup_free_ char *text = NULL;
        json_object *o, *v, *list = NULL;
        int r = 0;

        if ((r = read_in(dir, "device.json", &text)) < 0 || (r = read_json(dir, "device.json", text, &o)) < 0)
                return r;
        if (o && json_object_object_get_ex(o, "server", &v))
                s->server = strdup(json_object_get_string(v));
        if (o && json_object_object_get_ex(o, "identity", &v))
                s->identity = strdup(json_object_get_string(v));
        if (o && json_object_object_get_ex(o, "servers", &list) && !json_object_is_type(list, json_type_array))
                r = hwid_fail(HWID_E_INVALID, "%s/device.json: servers is not a list", dir);
        if (r >= 0 && (!s->server || !s->identity))
                r = hwid_fail(HWID_E_INVALID, "%s/device.json is damaged (server, identity)", dir);
        if (r >= 0)
                r = read_servers(s, list);
        json_object_put(o);
        return r;
}

static int write_device_json(const char *dir, const char *const *servers, const char *server,
                             const char *identity) {
        json_object *o = json_object_new_object(), *list = json_object_new_array();
        int r;

        for (size_t i = 0; servers[i]; i++)
                json_object_array_add(list, json_object_new_string(servers[i]));
        json_object_object_add(o, "server", json_object_new_string(server));
        json_object_object_add(o, "servers", list);
        json_object_object_add(o, "identity", json_object_new_string(identity));
        r = write_in(dir, "device.json", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY), 0644);
        json_object_put(o);
        return r;
}

int device_set_server(const device_state *s, const char *server) {
        if (strcmp(server, s->server) == 0)
                return 0;
        return write_device_json(s->dir, (const char *const *) s->servers, server, s->identity);
}

static int current_generation(const char *dir, int *ret) {
        _cleanup_free_ char *link = path_join(dir, "current");
        char target[64];
        ssize_t n;

        if (!link)
                return hwid_fail(HWID_E_NOMEM, NULL);
        n = readlink(link, target, sizeof(target) - 1);
        if (n < 0)
                return hwid_fail(errno == ENOENT ? HWID_E_NOT_FOUND : HWID_E_IO, "%s holds no enrolled identity", dir);
        target[n] = '\0';
        if (sscanf(target, "gen-%d", ret) != 1 || *ret < 1)
                return hwid_fail(HWID_E_INVALID, "%s points at '%s', not a generation", link, target);
        return 0;
}

int device_load(const char *dir, device_state *ret) {
        _cleanup_free_ char *gen = NULL;
        device_state s = { 0 };
        int r;

        /* Absolute, so that key URIs made from it stay valid elsewhere. */
        if (!(s.dir = realpath(dir, NULL)))
                return hwid_fail(errno == ENOENT ? HWID_E_NOT_FOUND : HWID_E_IO, "%s holds no enrolled identity", dir);
        if ((r = current_generation(dir, &s.generation)) < 0 || (r = load_device_json(dir, &s)) < 0 ||
            (r = read_in(dir, "ca.pem", &s.ca_pem)) < 0 ||
            !(gen = dir_file(dir, "gen-%d", s.generation)) ||
            (r = read_in(gen, "cert.pem", &s.cert_pem)) < 0 || (r = read_in(gen, "key.uri", &s.key_uri)) < 0 ||
            (r = cert_times(s.cert_pem, &s.not_before, &s.not_after)) < 0) {
                device_state_clear(&s);
                return r < 0 ? r : hwid_fail(HWID_E_NOMEM, NULL);
        }
        s.key_uri[strcspn(s.key_uri, "\n")] = '\0';
        *ret = s;
        return 0;
}

/* A certificate the CA just issued is current: whatever refusal marked
 * DIR before (a clock that was wrong, a revocation since undone) no
 * longer holds, and hwid join must not start over. */
static int switch_to(const char *dir, const char *gen_name) {
        int r = symlink_atomic(dir, "current", gen_name);

        return r < 0 ? r : unlink_in(dir, "needs-bootstrap");
}

/* gen-N/cert.pem and gen-N/key.uri, synced, then `current` swapped. */
static int write_generation(const char *dir, int gen, const char *cert_pem, const char *key_uri) {
        _cleanup_free_ char *gdir = dir_file(dir, "gen-%d", gen), *name = NULL, *uri_line = NULL;
        int r;

        if (!gdir || asprintf(&name, "gen-%d", gen) < 0 || asprintf(&uri_line, "%s\n", key_uri) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (mkdir(gdir, 0700) < 0 && errno != EEXIST)
                return hwid_fail(HWID_E_IO, "cannot create %s: %s", gdir, strerror(errno));
        if ((r = write_in(gdir, "cert.pem", cert_pem, 0644)) < 0 || (r = write_in(gdir, "key.uri", uri_line, 0600)) < 0 ||
            (r = fsync_parent_dir(gdir)) < 0)
                return r;
        return switch_to(dir, name);
}

/* Writes (and syncs) room bytes to a scratch file in dir, then removes it. */
static int try_write(const char *dir, size_t room) {
        static const char zeros[4096];
        _cleanup_free_ char *p = dir_file(dir, ".hwid-room.%ld", (long) getpid());
        int fd, e = 0;

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return hwid_fail(HWID_E_IO, "cannot write to %s: %s", dir, strerror(errno));
        for (size_t done = 0; !e && done < room; done += sizeof(zeros))
                if (write(fd, zeros, sizeof(zeros)) != (ssize_t) sizeof(zeros))
                        e = errno ? errno : ENOSPC;
        if (!e && fsync(fd) < 0)
                e = errno;
        close(fd);
        unlink(p);
        if (e)
                return hwid_fail(HWID_E_IO, "no room in %s for the identity (%zu KiB): %s", dir, room / 1024,
                                 strerror(e));
        return 0;
}

int device_check_writable(const char *dir) {
        int r = mkdir_parents(dir, 0700);

        return r < 0 ? r : try_write(dir, DEVICE_ROOM);
}

int device_write_initial(const char *dir, const char *const *servers, const char *server, const char *identity,
                         const char *ca_pem, const char *cert_pem, const char *key_uri) {
        int r = mkdir_parents(dir, 0700);

        if (r >= 0)
                r = write_in(dir, "ca.pem", ca_pem, 0644);
        if (r >= 0)
                r = write_device_json(dir, servers, server, identity);
        if (r < 0 || (r = write_generation(dir, 1, cert_pem, key_uri)) < 0 ||
            (r = symlink_atomic(dir, "cert.pem", "current/cert.pem")) < 0 ||
            (r = symlink_atomic(dir, "key.uri", "current/key.uri")) < 0)
                return r;
        return device_clear_pending(dir);
}

int device_write_ca(const device_state *s, const char *ca_pem) {
        return write_in(s->dir, "ca.pem", ca_pem, 0644);
}

int device_read_generation(const device_state *s, int gen, char **ret_cert_pem, char **ret_key_uri) {
        _cleanup_free_ char *gdir = dir_file(s->dir, "gen-%d", gen), *cert = NULL, *uri = NULL;
        int r;

        if (!gdir)
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* cert.pem is written before key.uri: both there, both complete. */
        if ((r = read_in(gdir, "cert.pem", &cert)) < 0 || (r = read_in(gdir, "key.uri", &uri)) < 0)
                return r;
        uri[strcspn(uri, "\n")] = '\0';
        *ret_cert_pem = TAKE_PTR(cert);
        *ret_key_uri = TAKE_PTR(uri);
        return 0;
}

int device_write_next_key(const device_state *s, const char *key_uri) {
        _cleanup_free_ char *gdir = dir_file(s->dir, "gen-%d", s->generation + 1), *line = NULL;
        int r;

        if (!gdir || asprintf(&line, "%s\n", key_uri) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (mkdir(gdir, 0700) < 0 && errno != EEXIST)
                return hwid_fail(HWID_E_IO, "cannot create %s: %s", gdir, strerror(errno));
        if ((r = unlink_in(gdir, "cert.pem")) < 0 || (r = unlink_in(gdir, "key.spki")) < 0 ||
            (r = write_in(gdir, "key.uri", line, 0600)) < 0)
                return r;
        return fsync_parent_dir(gdir);
}

int device_write_next_key_spki(const device_state *s, const char *spki_hex) {
        _cleanup_free_ char *gdir = dir_file(s->dir, "gen-%d", s->generation + 1), *line = NULL;

        if (!gdir || asprintf(&line, "%s\n", spki_hex) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return write_in(gdir, "key.spki", line, 0600);
}

int device_read_next_key_spki(const device_state *s, char ret[65]) {
        _cleanup_free_ char *gdir = dir_file(s->dir, "gen-%d", s->generation + 1), *spki = NULL;
        int r;

        if (!gdir)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = read_in(gdir, "key.spki", &spki)) < 0)
                return r;
        if (strspn(spki, "0123456789abcdef") != 64)
                return hwid_fail(HWID_E_INVALID, "%s/key.spki is damaged", gdir);
        snprintf(ret, 65, "%.64s", spki);
        return 0;
}

int device_read_next_key(const device_state *s, char **ret_uri) {
        _cleanup_free_ char *gdir = dir_file(s->dir, "gen-%d", s->generation + 1);
        char *uri = NULL;
        int r;

        if (!gdir)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = read_in(gdir, "key.uri", &uri)) < 0)
                return r;
        uri[strcspn(uri, "\n")] = '\0';
        *ret_uri = uri;
        return 0;
}

int device_switch(const device_state *s, int gen) {
        _cleanup_free_ char *name = NULL;

        if (asprintf(&name, "gen-%d", gen) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return switch_to(s->dir, name);
}

int device_write_next(const device_state *s, const char *cert_pem, const char *key_uri, int *ret_generation) {
        int r = write_generation(s->dir, s->generation + 1, cert_pem, key_uri);

        if (r < 0)
                return r;
        *ret_generation = s->generation + 1;
        return 0;
}

/* Calls fn for every gen-N directory (other than the current one when
 * stale_only). */
static int foreach_gen(const device_state *s, bool stale_only, int (*fn)(const char *gdir, void *ud), void *ud) {
        DIR *d = opendir(s->dir);
        struct dirent *de;
        int r = 0, gen;

        if (!d)
                return hwid_fail(HWID_E_IO, "cannot list %s: %s", s->dir, strerror(errno));
        while (r >= 0 && (de = readdir(d))) {
                char rest;
                /* The next generation is not stale: it holds the key of a
                 * renewal in the making, which a retry must reuse. */
                if (sscanf(de->d_name, "gen-%d%c", &gen, &rest) != 1 ||
                    (stale_only && (gen == s->generation || gen == s->generation + 1)))
                        continue;
                _cleanup_free_ char *gdir = path_join(s->dir, de->d_name);
                r = gdir ? fn(gdir, ud) : hwid_fail(HWID_E_NOMEM, NULL);
        }
        closedir(d);
        return r;
}

static int foreach_stale(const device_state *s, int (*fn)(const char *gdir, void *ud), void *ud) {
        return foreach_gen(s, true, fn, ud);
}

typedef struct key_list {
        const char *current; /* left out, when set */
        device_key_ref *v;
        size_t n;
} key_list;

/* The SHA-256 of the public key a generation's key must have: its
 * certificate's, else the one recorded when it was made; "" if neither. */
static void gen_key_spki(const char *gdir, char ret[65]) {
        _cleanup_free_ char *cert = NULL, *spki = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;

        ret[0] = '\0';
        if (read_in(gdir, "cert.pem", &cert) >= 0 && pem_first_cert(cert, &x) >= 0 &&
            spki_der_sha256_hex(X509_get_X509_PUBKEY(x), ret) >= 0)
                return;
        ret[0] = '\0';
        if (read_in(gdir, "key.spki", &spki) >= 0 && strspn(spki, "0123456789abcdef") == 64)
                snprintf(ret, 65, "%.64s", spki);
}

static int collect_key(const char *gdir, void *ud) {
        key_list *l = ud;
        _cleanup_free_ char *uri = NULL;
        device_key_ref *nv;

        if (read_in(gdir, "key.uri", &uri) < 0)
                return 0; /* a generation that never got its key: nothing to delete */
        uri[strcspn(uri, "\n")] = '\0';
        if (l->current && strcmp(uri, l->current) == 0)
                return 0;
        for (size_t i = 0; i < l->n; i++)
                if (strcmp(uri, l->v[i].uri) == 0) {
                        if (!l->v[i].spki[0])
                                gen_key_spki(gdir, l->v[i].spki);
                        return 0;
                }
        nv = realloc(l->v, (l->n + 2) * sizeof(*nv));
        if (!nv)
                return hwid_fail(HWID_E_NOMEM, NULL);
        l->v = nv;
        l->v[l->n] = (device_key_ref) { .uri = TAKE_PTR(uri) };
        gen_key_spki(gdir, l->v[l->n].spki);
        l->v[++l->n] = (device_key_ref) { 0 };
        return 0;
}

static int collect_keys(const device_state *s, bool stale_only, device_key_ref **ret) {
        key_list l = { .current = stale_only ? s->key_uri : NULL };
        int r = foreach_gen(s, stale_only, collect_key, &l);

        if (r < 0) {
                device_key_refs_free(l.v);
                return r;
        }
        if (!l.v && !(l.v = calloc(1, sizeof(*l.v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = l.v;
        return 0;
}

void device_key_refs_free(device_key_ref *v) {
        for (device_key_ref *p = v; p && p->uri; p++)
                free(p->uri);
        free(v);
}

int device_stale_keys(const device_state *s, device_key_ref **ret) {
        return collect_keys(s, true, ret);
}

int device_all_keys(const device_state *s, device_key_ref **ret) {
        return collect_keys(s, false, ret);
}

static int remove_gen_dir(const char *gdir, void *ud) {
        DIR *d = opendir(gdir);
        struct dirent *de;

        if (!d)
                return 0;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
                        unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        if (rmdir(gdir) < 0 && errno != ENOENT)
                return hwid_fail(HWID_E_IO, "cannot remove %s: %s", gdir, strerror(errno));
        return 0;
}

int device_remove_stale(const device_state *s) {
        int r = foreach_stale(s, remove_gen_dir, NULL);

        return r < 0 ? r : fsync_parent_dir(s->dir);
}

int device_write_pending(const char *dir, const char *server, const char *identity, const char *request_id,
                         const char *ca_pem, const char *key_uri) {
        json_object *o = json_object_new_object();
        int r;

        json_object_object_add(o, "server", json_object_new_string(server));
        json_object_object_add(o, "identity", json_object_new_string(identity));
        json_object_object_add(o, "request_id", json_object_new_string(request_id));
        json_object_object_add(o, "ca_pem", json_object_new_string(ca_pem));
        json_object_object_add(o, "key_uri", json_object_new_string(key_uri));
        r = mkdir_parents(dir, 0700);
        if (r >= 0)
                r = write_in(dir, "pending.json", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY), 0600);
        json_object_put(o);
        return r;
}

static int json_str(json_object *o, const char *key, char **ret) {
        json_object *v;

        if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
                return hwid_fail(HWID_E_INVALID, "pending.json lacks '%s'", key);
        *ret = strdup(json_object_get_string(v));
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

int device_read_pending(const char *dir, char **ret_server, char **ret_identity, char **ret_request_id,
                        char **ret_ca_pem, char **ret_key_uri) {
        _cleanup_free_ char *text = NULL;
        json_object *o;
        int r;

        if ((r = read_in(dir, "pending.json", &text)) < 0 || (r = read_json(dir, "pending.json", text, &o)) < 0)
                return r;
        r = json_str(o, "server", ret_server);
        if (r >= 0)
                r = json_str(o, "identity", ret_identity);
        if (r >= 0)
                r = json_str(o, "request_id", ret_request_id);
        if (r >= 0)
                r = json_str(o, "ca_pem", ret_ca_pem);
        if (r >= 0)
                r = json_str(o, "key_uri", ret_key_uri);
        json_object_put(o);
        return r;
}

int device_clear_pending(const char *dir) {
        _cleanup_free_ char *p = path_join(dir, "pending.json");

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (unlink(p) < 0 && errno != ENOENT)
                return hwid_fail(HWID_E_IO, "cannot remove %s: %s", p, strerror(errno));
        return 0;
}

int device_mark_bootstrap(const char *dir, const char *reason) {
        _cleanup_free_ char *line = NULL;

        if (asprintf(&line, "%s\n", reason) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return write_in(dir, "needs-bootstrap", line, 0644);
}

bool device_needs_bootstrap(const char *dir) {
        _cleanup_free_ char *p = path_join(dir, "needs-bootstrap");

        return p && access(p, F_OK) == 0;
}

int device_forget(const device_state *s) {
        static const char *const links[] = { "current", "cert.pem", "key.uri", "device.json" };
        int r = 0;

        /* Without `current`, DIR holds no identity: a crash from here on
         * leaves only debris that a new enrollment overwrites. */
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(links); i++)
                r = unlink_in(s->dir, links[i]);
        if (r >= 0)
                r = foreach_gen(s, false, remove_gen_dir, NULL);
        if (r >= 0)
                r = unlink_in(s->dir, "needs-bootstrap");
        if (r >= 0) {
                _cleanup_free_ char *any = path_join(s->dir, "current");
                r = any ? fsync_parent_dir(any) : hwid_fail(HWID_E_NOMEM, NULL);
        }
        return r;
}

void device_fmt_utc(int64_t t, char out[32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&tt, &tm));
}
