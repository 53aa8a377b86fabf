/* hwid cert list | show SERIAL | revoke SERIAL|--identity NAME [--reason R] */
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

typedef struct cert_opts {
        const char *config, *identity, *reason;
        bool all;
} cert_opts;

static const struct {
        const char *name;
        int code; /* RFC 5280 CRLReason */
} reasons[] = {
        { "unspecified", 0 }, { "key-compromise", 1 }, { "ca-compromise", 2 }, { "affiliation-changed", 3 },
        { "superseded", 4 }, { "cessation-of-operation", 5 }, { "privilege-withdrawn", 9 },
};

static void usage(void) {
        printf("Usage: hwid cert list [--config FILE] [--identity NAME] [--all]\n"
               "       hwid cert show [--config FILE] SERIAL\n"
               "       hwid cert revoke [--config FILE] [--reason R] SERIAL | --identity NAME\n\n"
               "--identity revokes every unexpired certificate of NAME: the live one and those\n"
               "renewals superseded.  key-compromise also blocks the key: every certificate of it\n"
               "is revoked and it is never certified again.  Revocation takes effect at once for\n"
               "renewal; hwidd regenerates the CRL on its next request.  Reasons: unspecified,\n"
               "key-compromise, ca-compromise, affiliation-changed, superseded,\n"
               "cessation-of-operation, privilege-withdrawn.\n");
}

static int parse(const char *cmd, int argc, char **argv, cert_opts *o, int min_args, int max_args) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "identity", required_argument, NULL, 'i' },
                { "reason", required_argument, NULL, 'r' }, { "all", no_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' }, {},
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
                default: return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind < min_args || argc - optind > max_args)
                return cli_usage(cmd, "wrong number of arguments");
        return 0;
}

static const char *status_name(store_cert_status s) {
        static const char *names[] = { "valid", "revoked", "superseded" };
        return names[s];
}

int cmd_cert_list(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int64_t now = (int64_t) time(NULL);
        store_cert *c = NULL;
        size_t n = 0;
        cert_opts o;
        int r;

        if ((r = parse("cert list", argc, argv, &o, 0, 0)) != 0)
                return r;
        if ((r = admin_open(o.config, &cfg, &s)) < 0 || (r = store_cert_list(s, o.identity, &c, &n)) < 0)
                return cli_fail(r);
        printf("%-32s  %-10s  %-20s  %-10s  %s\n", "SERIAL", "STATUS", "IDENTITY", "PROFILE", "NOT-AFTER");
        for (size_t i = 0; i < n; i++) {
                char na[32];
                const char *st = c[i].status == CERT_VALID && now >= c[i].not_after ? "expired"
                                                                                   : status_name(c[i].status);
                if (!o.all && strcmp(st, "valid") != 0)
                        continue;
                format_time(c[i].not_after, na, sizeof(na));
                printf("%-32s  %-10s  %-20s  %-10s  %s\n", c[i].serial, st, c[i].identity, c[i].profile, na);
        }
        store_cert_list_free(c, n);
        return 0;
}

/* Accepts "0a:1b:..", "0x0A1B..", any case; stores use upper-case hex. */
static void normalize_serial(const char *in, char *out, size_t n) {
        size_t j = 0;

        if (strncasecmp(in, "0x", 2) == 0)
                in += 2;
        for (; *in && j + 1 < n; in++)
                if (*in != ':')
                        out[j++] = (char) toupper((unsigned char) *in);
        out[j] = '\0';
}

int cmd_cert_show(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        store_cert c = { 0 };
        char serial[130], nb[32], na[32];
        const unsigned char *p;
        cert_opts o;
        int r;

        if ((r = parse("cert show", argc, argv, &o, 1, 1)) != 0)
                return r;
        normalize_serial(argv[optind], serial, sizeof(serial));
        if ((r = admin_open(o.config, &cfg, &s)) < 0 || (r = store_cert_get(s, serial, &c)) < 0)
                return cli_fail(r == -HWID_E_NOT_FOUND ? hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial) : r);
        format_time(c.not_before, nb, sizeof(nb));
        format_time(c.not_after, na, sizeof(na));
        printf("serial: %s\nidentity: %s\nsubject: %s\nprofile: %s\nstatus: %s\nnot-before: %s\n"
               "not-after: %s\nspki-sha256: %s\n", c.serial, c.identity, c.subject, c.profile,
               status_name(c.status), nb, na, c.spki_sha256);
        p = c.der;
        x = d2i_X509(NULL, &p, (long) c.der_len);
        if (x)
                PEM_write_X509(stdout, x);
        store_cert_clear(&c);
        return 0;
}

static int reason_code(const char *name, int *ret) {
        for (size_t i = 0; i < ELEMENTSOF(reasons); i++)
                if (strcmp(name, reasons[i].name) == 0) {
                        *ret = reasons[i].code;
                        return 0;
                }
        return -1;
}

static int revoke_serial(store *s, const char *arg, int code, const char *reason) {
        char serial[130];
        store_audit a = { .at = (int64_t) time(NULL), .actor = admin_actor(), .action = "cert.revoke",
                          .target = serial, .outcome = "allow", .reason = reason };
        int r;

        normalize_serial(arg, serial, sizeof(serial));
        r = store_cert_revoke(s, serial, code, a.at, &a);
        if (r == -HWID_E_NOT_FOUND)
                r = hwid_fail(HWID_E_NOT_FOUND, "no certificate %s", serial);
        if (r < 0)
                return admin_audit(s, "cert.revoke", serial, r, NULL);
        printf("certificate %s revoked (%s); it is in the CRL from hwidd's next /crl request\n", serial, reason);
        return 0;
}

/* Every unexpired certificate of the identity: the live one and the
 * generations renewals superseded, which relying parties still accept
 * until they expire. */
static int revoke_identity(store *s, const char *identity, int code, const char *reason) {
        store_audit a = { .at = (int64_t) time(NULL), .actor = admin_actor(), .action = "cert.revoke",
                          .target = identity, .outcome = "allow", .reason = reason };
        size_t n = 0;
        int r = store_cert_revoke_identity(s, identity, code, a.at, &a, &n);

        if (r < 0)
                return admin_audit(s, "cert.revoke", identity, r, NULL);
        printf("%zu certificate%s of %s revoked (%s); in the CRL from hwidd's next /crl request\n", n,
               n == 1 ? "" : "s", identity, reason);
        return 0;
}

int cmd_cert_revoke(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        const char *reason;
        int code = 0, r;
        cert_opts o;

        if ((r = parse("cert revoke", argc, argv, &o, 0, 1)) != 0)
                return r;
        if ((argc - optind == 1) == !!o.identity)
                return cli_usage("cert revoke", "needs a SERIAL or --identity NAME (one of them)");
        if (o.reason && reason_code(o.reason, &code) < 0)
                return cli_usage("cert revoke", "unknown reason '%s'", o.reason);
        reason = o.reason ? o.reason : "unspecified";
        if ((r = admin_open(o.config, &cfg, &s)) < 0)
                return cli_fail(r);
        r = o.identity ? revoke_identity(s, o.identity, code, reason) : revoke_serial(s, argv[optind], code, reason);
        return r < 0 ? cli_fail(r) : 0;
}
