/* hwid cert list | show SERIAL | revoke SERIAL|--identity NAME [--reason R],
 * through the admin API (admin-conn.h): of a remote hwidd as an operator
 * (--dir, --cert/--key), or on the CA host of its own store (--config). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "cli.h"
#include "crl-reason.h"
#include "error.h"
#include "json-write.h"
#include "ossl-util.h"
#include "remote.h"
#include "x509-util.h"

typedef struct cert_opts {
        const char *config, *identity, *reason;
        bool all;
        remote_opts remote;
} cert_opts;

static void usage(void) {
        printf("Usage: hwid cert list [--config FILE] [--identity NAME] [--all]\n"
               "       hwid cert show [--config FILE] SERIAL\n"
               "       hwid cert revoke [--config FILE] [--reason R] SERIAL | --identity NAME\n"
               "       hwid cert ... --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
               "--identity revokes every unexpired certificate of NAME: the live one and those\n"
               "renewals superseded.  key-compromise also blocks the key: every certificate of it\n"
               "is revoked and it is never certified again.  key-compromise and privilege-withdrawn\n"
               "(\"do not return\") keep NAME from coming back without a token, by TPM attestation\n"
               "or the EK allowlist (revoke an expired last certificate by SERIAL).\n"
               "Revocation takes effect at once for\n"
               "renewal; hwidd regenerates the CRL on its next request.  Reasons: " REVOCATION_REASON_NAMES
               ".\nRemotely: list and show for the admin and auditor roles, revoke for admin.\n\n"
               CONFIG_HELP
               "  -i, --identity NAME  list: only NAME's certificates; revoke: all of NAME's\n"
               "  -a, --all            list: every status, not only valid certificates\n"
               "  -r, --reason R       revoke: the reason (default unspecified)\n" REMOTE_HELP);
}

static int parse(const char *cmd, int argc, char **argv, cert_opts *o, int min_args, int max_args) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "identity", required_argument, NULL, 'i' },
                { "reason", required_argument, NULL, 'r' }, { "all", no_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c;

        *o = (cert_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:i:r:ah", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': o->config = optarg; break;
                case 'i': o->identity = optarg; break;
                case 'r': o->reason = optarg; break;
                case 'a': o->all = true; break;
                case 'h': usage(); exit(0);
                default:
                        if (!remote_option(&o->remote, c, optarg))
                                return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind < min_args || argc - optind > max_args)
                return cli_usage(cmd, "wrong number of arguments");
        return remote_check_usage(cmd, &o->remote, o->config, false);
}

/* ---------- list ---------- */

/* A valid certificate past its notAfter is listed as expired. */
static int print_cert(json_object *c, bool all, int64_t now) {
        const char *serial, *status, *identity, *profile;
        int64_t not_after;
        char na[32];
        int r;

        if ((r = answer_str(c, "serial", false, &serial)) < 0 || (r = answer_str(c, "status", false, &status)) < 0 ||
            (r = answer_str(c, "identity", false, &identity)) < 0 ||
            (r = answer_str(c, "profile", false, &profile)) < 0 || (r = answer_int(c, "not_after", &not_after)) < 0)
                return r;
        if (strcmp(status, "valid") == 0 && now >= not_after)
                status = "expired";
        if (!all && strcmp(status, "valid") != 0)
                return 0;
        format_time(not_after, na, sizeof(na));
        printf("%-32s  %-10s  %-20s  %-10s  %s\n", serial, status, identity, profile, na);
        return 0;
}

static int list_certs(const cert_opts *o) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = NULL, *path = NULL;
        int64_t now = (int64_t) time(NULL);
        json_object *list;
        int r;

        if (o->identity && !(esc = remote_escape(o->identity)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (asprintf(&path, "/v1/admin/certificates%s%s", esc ? "?identity=" : "", esc ? esc : "") < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_conn_open("cert list", &o->remote, o->config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "GET", path, NULL, &answer)) < 0 ||
            (r = answer_list(answer, "certificates", &list)) < 0)
                return r;
        printf("%-32s  %-10s  %-20s  %-10s  %s\n", "SERIAL", "STATUS", "IDENTITY", "PROFILE", "NOT-AFTER");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(list); i++)
                r = print_cert(json_object_array_get_idx(list, i), o->all, now);
        return r;
}

int cmd_cert_list(int argc, char **argv) {
        cert_opts o;
        int r;

        if ((r = parse("cert list", argc, argv, &o, 0, 0)) != 0)
                return r;
        r = list_certs(&o);
        return r < 0 ? cli_fail(r) : 0;
}

/* ---------- show ---------- */

static int get_cert(const cert_opts *o, const char *serial, json_object **ret) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_free_ char *esc = remote_escape(serial), *path = NULL;
        int r;

        if (!esc || asprintf(&path, "/v1/admin/certificates/%s", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_conn_open("cert show", &o->remote, o->config, 0, &conn)) < 0)
                return r;
        return admin_conn_call(conn, "GET", path, NULL, ret);
}

/* What TPM attestation proved of the key, if anything. */
static int print_attestation(json_object *c) {
        const char *ek_pub, *ek_cert, *ak;
        json_object *a = NULL;
        int r;

        if (!json_object_object_get_ex(c, "attestation", &a) || !a) {
                printf("attested: no\n");
                return 0;
        }
        if ((r = answer_str(a, "ek_pub_sha256", false, &ek_pub)) < 0 ||
            (r = answer_str(a, "ek_cert_sha256", true, &ek_cert)) < 0 || (r = answer_str(a, "ak_name", true, &ak)) < 0)
                return r;
        printf("attested: TPM ek-sha256:%s\nek-cert-sha256: %s\nak-name: %s\n", ek_pub, ek_cert ? ek_cert : "",
               ak ? ak : "");
        return 0;
}

/* The certificate itself, as PEM (when the answer holds one). */
static int print_pem(json_object *c) {
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        const char *pem;
        int r;

        if ((r = answer_str(c, "pem", true, &pem)) < 0 || !pem)
                return r;
        if (!(b = BIO_new_mem_buf(pem, -1)) || !(x = PEM_read_bio_X509(b, NULL, NULL, NULL)))
                return hwid_fail_ossl(HWID_E_INVALID, "the server's \"pem\" holds no certificate");
        PEM_write_X509(stdout, x);
        return 0;
}

static int print_details(json_object *c) {
        const char *f[7];
        static const char *const keys[] = { "serial", "identity", "subject", "profile", "status", "spki_sha256",
                                            "role" };
        int64_t nb, na;
        char nbs[32], nas[32];
        json_object *scope = NULL;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(keys); i++)
                r = answer_str(c, keys[i], false, &f[i]);
        if (r < 0 || (r = answer_int(c, "not_before", &nb)) < 0 || (r = answer_int(c, "not_after", &na)) < 0)
                return r;
        format_time(nb, nbs, sizeof(nbs));
        format_time(na, nas, sizeof(nas));
        printf("serial: %s\nidentity: %s\nsubject: %s\nprofile: %s\nstatus: %s\nnot-before: %s\n"
               "not-after: %s\nspki-sha256: %s\nrole: %s\n", f[0], f[1], f[2], f[3], f[4], nbs, nas, f[5],
               f[6][0] ? f[6] : "node");
        /* As hwidd records it (cert-scope.c). */
        if (json_object_object_get_ex(c, "scope", &scope) && scope)
                printf("scope: %s\n",
                       json_object_to_json_string_ext(scope, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        return 0;
}

int cmd_cert_show(int argc, char **argv) {
        _cleanup_(json_object_putp) json_object *c = NULL;
        char serial[130];
        cert_opts o;
        int r;

        if ((r = parse("cert show", argc, argv, &o, 1, 1)) != 0)
                return r;
        normalize_serial(argv[optind], serial, sizeof(serial));
        if ((r = get_cert(&o, serial, &c)) < 0 || (r = print_details(c)) < 0 || (r = print_attestation(c)) < 0 ||
            (r = print_pem(c)) < 0)
                return cli_fail(r);
        return 0;
}

/* ---------- revoke ---------- */

/* SERIAL, or every unexpired certificate of NAME: the live one and the
 * generations renewals superseded, which relying parties still accept
 * until they expire. */
static int revoke_certs(const cert_opts *o, const char *serial, const char *reason, int64_t *ret_n) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(o->identity ? o->identity : serial), *path = NULL;
        int r;

        if (!body || !esc || asprintf(&path, "/v1/admin/%s/%s/revoke", o->identity ? "identities" : "certificates",
                                      esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(body, "reason", reason);
        if ((r = admin_conn_open("cert revoke", &o->remote, o->config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "POST", path, body, &answer)) < 0)
                return r;
        if (answer_int(answer, "revoked", ret_n) < 0)
                return hwid_fail(HWID_E_INVALID, "the server's answer does not say how many were revoked");
        return 0;
}

int cmd_cert_revoke(int argc, char **argv) {
        const char *reason;
        char serial[130] = "";
        int64_t n = 0;
        int code = 0, r;
        cert_opts o;

        if ((r = parse("cert revoke", argc, argv, &o, 0, 1)) != 0)
                return r;
        if ((argc - optind == 1) == !!o.identity)
                return cli_usage("cert revoke", "needs a SERIAL or --identity NAME (one of them)");
        if (o.reason && revocation_reason_parse(o.reason, &code) < 0)
                return cli_usage("cert revoke", "unknown reason '%s'", o.reason);
        reason = o.reason ? o.reason : "unspecified";
        if (!o.identity)
                normalize_serial(argv[optind], serial, sizeof(serial));
        if ((r = revoke_certs(&o, serial, reason, &n)) < 0)
                return cli_fail(r);
        if (o.identity)
                printf("%lld certificate%s of %s revoked (%s); in the CRL from hwidd's next /crl request\n",
                       (long long) n, n == 1 ? "" : "s", o.identity, reason);
        else
                printf("certificate %s revoked (%s); it is in the CRL from hwidd's next /crl request\n", serial, reason);
        return 0;
}
