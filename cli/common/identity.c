/* hwid identity list | release NAME: the identities bound to the TPM that
 * attested them (docs/ATTESTATION.md, "A name is bound to its TPM"),
 * through the admin API (/v1/admin/identities, admin-conn.h): of a remote
 * hwidd as an operator (--dir, --cert/--key), or on the CA host of its own
 * store (--config). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "cli.h"
#include "error.h"
#include "remote.h"

static int parse(const char *cmd, int argc, char **argv, const char **config, remote_opts *ro, int nargs,
                 const char *help) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c;

        *ro = (remote_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': *config = optarg; break;
                case 'h': printf("%s\n" CONFIG_HELP "  -h, --help           show this help\n" REMOTE_HELP, help);
                        exit(0);
                default:
                        if (!remote_option(ro, c, optarg))
                                return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs the NAME to release" : "takes no arguments");
        return remote_check_usage(cmd, ro, *config, false);
}

/* ---------- list ---------- */

static int print_binding(json_object *b) {
        const char *identity, *serial, *ek;
        int64_t bound_at;
        char bound[32];
        int r;

        if ((r = answer_str(b, "identity", false, &identity)) < 0 || (r = answer_str(b, "serial", false, &serial)) < 0 ||
            (r = answer_str(b, "ek_pub_sha256", false, &ek)) < 0 || (r = answer_int(b, "bound_at", &bound_at)) < 0)
                return r;
        format_time(bound_at, bound, sizeof(bound));
        printf("%-20s  %-17s  %-32s  %s\n", identity, bound, serial, ek);
        return 0;
}

static int list(const char *config, const remote_opts *ro) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *bindings;
        int r;

        if ((r = admin_conn_open("identity list", ro, config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "GET", "/v1/admin/identities", NULL, &answer)) < 0 ||
            (r = answer_list(answer, "identities", &bindings)) < 0)
                return r;
        printf("%-20s  %-17s  %-32s  %s\n", "NAME", "BOUND", "SINCE-CERTIFICATE", "EK-SHA256 (public key)");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(bindings); i++)
                r = print_binding(json_object_array_get_idx(bindings, i));
        return r;
}

int cmd_identity_list(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = parse("identity list", argc, argv, &config, &ro, 0,
                       "Usage: hwid identity list [--config FILE]\n"
                       "       hwid identity list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                       "Lists the identities bound to the TPM that attested them: each is enrolled again\n"
                       "only with that TPM's attestation, until hwid identity release.  Remotely: the\n"
                       "admin and auditor roles.\n")) != 0)
                return r;
        r = list(config, &ro);
        return r < 0 ? cli_fail(r) : 0;
}

/* ---------- release ---------- */

static int release(const char *config, const remote_opts *ro, const char *name) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(name), *path = NULL;
        const char *identity, *ek, *serial;
        json_object *b;
        int64_t bound_at;
        char bound[32];
        int r;

        if (!esc || asprintf(&path, "/v1/admin/identities/%s/release", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_conn_open("identity release", ro, config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "POST", path, NULL, &answer)) < 0)
                return r;
        if (!json_object_object_get_ex(answer, "released", &b) || !b)
                return hwid_fail(HWID_E_INVALID, "the server's answer has no \"released\" binding");
        if ((r = answer_str(b, "identity", false, &identity)) < 0 || (r = answer_str(b, "ek_pub_sha256", false, &ek)) < 0 ||
            (r = answer_str(b, "serial", false, &serial)) < 0 || (r = answer_int(b, "bound_at", &bound_at)) < 0)
                return r;
        format_time(bound_at, bound, sizeof(bound));
        printf("%s released from the TPM with EK sha256:%s (bound since certificate %s, %s): another TPM may "
               "enroll it now\n", identity, ek, serial, bound);
        return 0;
}

int cmd_identity_release(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = parse("identity release", argc, argv, &config, &ro, 1,
                       "Usage: hwid identity release [--config FILE] NAME\n"
                       "       hwid identity release --dir DIR | --cert FILE --key URI [...] NAME   (remote)\n\n"
                       "Sets NAME free of the TPM that attested it, for a replaced TPM or board: another\n"
                       "TPM (or a token without attestation) may then enroll NAME, and the next\n"
                       "certificate of NAME recording a TPM attestation binds it again.  Its certificates\n"
                       "are left alone (hwid cert revoke).  Audited.  Remotely: the admin role.\n")) != 0)
                return r;
        r = release(config, &ro, argv[optind]);
        return r < 0 ? cli_fail(r) : 0;
}
