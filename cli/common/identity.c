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
#include "admin-plain.h"
#include "cli.h"
#include "error.h"
#include "remote.h"

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
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *items;
        int r;

        if ((r = admin_get_list("identity list", ro, config, "/v1/admin/identities", "identities", &answer, &items)) < 0)
                return r;
        printf("%-20s  %-17s  %-32s  %s\n", "NAME", "BOUND", "SINCE-CERTIFICATE", "EK-SHA256 (public key)");
        return admin_print_each(items, print_binding);
}

int cmd_identity_list(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = admin_parse_plain("identity list", argc, argv, &config, &ro, 0, NULL,
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
        _cleanup_(json_object_putp) json_object *answer = NULL;
        const char *identity, *ek, *serial;
        json_object *b;
        int64_t bound_at;
        char bound[32];
        int r;

        if ((r = admin_post_on("identity release", ro, config, "/v1/admin/identities", name, "release", &answer)) < 0)
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

        if ((r = admin_parse_plain("identity release", argc, argv, &config, &ro, 1, "the NAME to release",
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
