/* hwid cert list | show SERIAL | revoke SERIAL|--identity NAME [--reason R],
 * on the CA host (--config) or against a remote hwidd's admin API as an
 * operator (--dir, --cert/--key). */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "admin.h"
#include "cli.h"
#include "error.h"
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

static void print_certs(const store_cert *c, size_t n, bool all) {
        int64_t now = (int64_t) time(NULL);

        printf("%-32s  %-10s  %-20s  %-10s  %s\n", "SERIAL", "STATUS", "IDENTITY", "PROFILE", "NOT-AFTER");
        for (size_t i = 0; i < n; i++) {
                char na[32];
                const char *st = c[i].status == CERT_VALID && now >= c[i].not_after ? "expired"
                                                                                   : admin_cert_status_name(c[i].status);
                if (!all && strcmp(st, "valid") != 0)
                        continue;
                format_time(c[i].not_after, na, sizeof(na));
                printf("%-32s  %-10s  %-20s  %-10s  %s\n", c[i].serial, st, c[i].identity, c[i].profile, na);
        }
}

static int remote_certs(const cert_opts *o, store_cert **ret, size_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = NULL, *path = NULL;
        json_object *list;
        store_cert *c;
        size_t n = 0;
        int r;

        if (o->identity && !(esc = remote_escape(o->identity)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (asprintf(&path, "/v1/admin/certificates%s%s", esc ? "?identity=" : "", esc ? esc : "") < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = remote_open(&o->remote, &rm)) < 0 || (r = remote_call(rm, "GET", path, NULL, &answer)) < 0 ||
            (r = remote_list(answer, "certificates", &list)) < 0)
                return r;
        if (!(c = calloc(json_object_array_length(list) + 1, sizeof(*c))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < json_object_array_length(list); n += r >= 0)
                r = admin_json_to_cert(json_object_array_get_idx(list, n), &c[n]);
        if (r < 0) {
                store_cert_list_free(c, n);
                return r;
        }
        *ret = c;
        *ret_n = n;
        return 0;
}

static int local_certs(const cert_opts *o, store_cert **ret, size_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(o->config, &cfg, &s);

        return r < 0 ? r : store_cert_list(s, o->identity, ret, ret_n);
}

int cmd_cert_list(int argc, char **argv) {
        store_cert *c = NULL;
        size_t n = 0;
        cert_opts o;
        int r;

        if ((r = parse("cert list", argc, argv, &o, 0, 0)) != 0)
                return r;
        r = remote_wanted(&o.remote) ? remote_certs(&o, &c, &n) : local_certs(&o, &c, &n);
        if (r < 0)
                return cli_fail(r);
        print_certs(c, n, o.all);
        store_cert_list_free(c, n);
        return 0;
}

/* ---------- show ---------- */

static int remote_cert(const cert_opts *o, const char *serial, store_cert *ret) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(serial), *path = NULL;
        int r;

        if (!esc || asprintf(&path, "/v1/admin/certificates/%s", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = remote_open(&o->remote, &rm)) < 0 || (r = remote_call(rm, "GET", path, NULL, &answer)) < 0)
                return r;
        return admin_json_to_cert(answer, ret);
}

static int local_cert(const cert_opts *o, const char *serial, store_cert *ret) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(o->config, &cfg, &s);

        if (r >= 0)
                r = store_cert_get(s, serial, ret);
        return r == -HWID_E_NOT_FOUND ? hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial) : r;
}

int cmd_cert_show(int argc, char **argv) {
        _cleanup_(X509_freep) X509 *x = NULL;
        store_cert c = { 0 };
        char serial[130], nb[32], na[32];
        const unsigned char *p;
        cert_opts o;
        int r;

        if ((r = parse("cert show", argc, argv, &o, 1, 1)) != 0)
                return r;
        normalize_serial(argv[optind], serial, sizeof(serial));
        r = remote_wanted(&o.remote) ? remote_cert(&o, serial, &c) : local_cert(&o, serial, &c);
        if (r < 0)
                return cli_fail(r);
        format_time(c.not_before, nb, sizeof(nb));
        format_time(c.not_after, na, sizeof(na));
        printf("serial: %s\nidentity: %s\nsubject: %s\nprofile: %s\nstatus: %s\nnot-before: %s\n"
               "not-after: %s\nspki-sha256: %s\nrole: %s\n", c.serial, c.identity, c.subject, c.profile,
               admin_cert_status_name(c.status), nb, na, c.spki_sha256, c.role[0] ? c.role : "node");
        if (c.scope)
                printf("scope: %s\n", c.scope);
        if (store_attested(&c.attestation))
                printf("attested: TPM ek-sha256:%s\nek-cert-sha256: %s\nak-name: %s\n", c.attestation.ek_pub_sha256,
                       c.attestation.ek_cert_sha256, c.attestation.ak_name);
        else
                printf("attested: no\n");
        p = c.der;
        x = p ? d2i_X509(NULL, &p, (long) c.der_len) : NULL;
        if (x)
                PEM_write_X509(stdout, x);
        store_cert_clear(&c);
        return 0;
}

/* ---------- revoke ---------- */

/* SERIAL, or every unexpired certificate of NAME: the live one and the
 * generations renewals superseded, which relying parties still accept
 * until they expire. */
static int remote_revoke(const cert_opts *o, const char *serial, const char *reason, int64_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(o->identity ? o->identity : serial), *path = NULL;
        json_object *n;
        int r;

        if (!body || !esc || asprintf(&path, "/v1/admin/%s/%s/revoke", o->identity ? "identities" : "certificates",
                                      esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(body, "reason", reason);
        if ((r = remote_open(&o->remote, &rm)) < 0 || (r = remote_call(rm, "POST", path, body, &answer)) < 0)
                return r;
        if (!json_object_object_get_ex(answer, "revoked", &n) || !json_object_is_type(n, json_type_int))
                return hwid_fail(HWID_E_INVALID, "the server's answer does not say how many were revoked");
        *ret_n = json_object_get_int64(n);
        return 0;
}

static int local_revoke(const cert_opts *o, const char *serial, int code, const char *reason, int64_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *target = o->identity ? o->identity : serial;
        store_audit a = { .at = (int64_t) time(NULL), .actor = admin_actor(), .action = "cert.revoke",
                          .target = target, .outcome = "allow", .reason = reason };
        size_t n = 1;
        int r;

        if ((r = admin_open(o->config, &cfg, &s)) < 0)
                return r;
        r = o->identity ? store_cert_revoke_identity(s, o->identity, code, a.at, &a, &n)
                        : store_cert_revoke(s, serial, code, a.at, &a);
        if (r == -HWID_E_NOT_FOUND && !o->identity)
                r = hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial);
        if (r < 0)
                return admin_audit(s, "cert.revoke", target, r, NULL);
        *ret_n = (int64_t) n;
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
        r = remote_wanted(&o.remote) ? remote_revoke(&o, serial, reason, &n) : local_revoke(&o, serial, code, reason, &n);
        if (r < 0)
                return cli_fail(r);
        if (o.identity)
                printf("%lld certificate%s of %s revoked (%s); in the CRL from hwidd's next /crl request\n",
                       (long long) n, n == 1 ? "" : "s", o.identity, reason);
        else
                printf("certificate %s revoked (%s); it is in the CRL from hwidd's next /crl request\n", serial, reason);
        return 0;
}
