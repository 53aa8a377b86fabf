/* hwid identity list | release NAME: the identities bound to the TPM that
 * attested them (docs/ATTESTATION.md, "A name is bound to its TPM"), on
 * the CA host (--config) or remotely as an operator (--dir, --cert/--key)
 * through the admin API (/v1/admin/identities). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
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

static int local_list(const char *config, store_binding **ret, size_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(config, &cfg, &s);

        return r < 0 ? r : store_binding_list(s, ret, ret_n);
}

static int remote_list_bindings(const remote_opts *ro, store_binding **ret, size_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *list;
        store_binding *v;
        size_t n = 0;
        int r;

        if ((r = remote_open(ro, &rm)) < 0 || (r = remote_call(rm, "GET", "/v1/admin/identities", NULL, &answer)) < 0 ||
            (r = remote_list(answer, "identities", &list)) < 0)
                return r;
        if (!(v = calloc(json_object_array_length(list) + 1, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; r >= 0 && n < json_object_array_length(list); n += r >= 0)
                r = admin_json_to_binding(json_object_array_get_idx(list, n), &v[n]);
        if (r < 0) {
                store_binding_list_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

int cmd_identity_list(int argc, char **argv) {
        const char *config = NULL;
        store_binding *v = NULL;
        remote_opts ro;
        size_t n = 0;
        int r;

        if ((r = parse("identity list", argc, argv, &config, &ro, 0,
                       "Usage: hwid identity list [--config FILE]\n"
                       "       hwid identity list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                       "Lists the identities bound to the TPM that attested them: each is enrolled again\n"
                       "only with that TPM's attestation, until hwid identity release.  Remotely: the\n"
                       "admin and auditor roles.\n")) != 0)
                return r;
        r = remote_wanted(&ro) ? remote_list_bindings(&ro, &v, &n) : local_list(config, &v, &n);
        if (r < 0)
                return cli_fail(r);
        printf("%-20s  %-17s  %-32s  %s\n", "NAME", "BOUND", "SINCE-CERTIFICATE", "EK-SHA256 (public key)");
        for (size_t i = 0; i < n; i++) {
                char bound[32];
                format_time(v[i].bound_at, bound, sizeof(bound));
                printf("%-20s  %-17s  %-32s  %s\n", v[i].identity, bound, v[i].serial, v[i].ek_pub_sha256);
        }
        store_binding_list_free(v, n);
        return 0;
}

/* ---------- release ---------- */

static int local_release(const char *config, const char *name, store_binding *ret) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        char reason[200];
        store_audit a = { .actor = admin_actor(), .action = "identity.release", .outcome = "allow", .target = name,
                          .reason = reason };
        int r;

        if ((r = admin_open(config, &cfg, &s)) < 0)
                return r;
        if ((r = store_binding_get(s, name, ret)) >= 0) {
                admin_release_reason(ret, reason, sizeof(reason));
                a.at = (int64_t) time(NULL);
                r = store_binding_release(s, ret, &a, a.at);
        }
        return r < 0 ? admin_audit(s, "identity.release", name, r, NULL) : 0;
}

static int remote_release(const remote_opts *ro, const char *name, store_binding *ret) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(name), *path = NULL;
        json_object *released;
        int r;

        if (!esc || asprintf(&path, "/v1/admin/identities/%s/release", esc) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = remote_open(ro, &rm)) < 0 || (r = remote_call(rm, "POST", path, NULL, &answer)) < 0)
                return r;
        if (!json_object_object_get_ex(answer, "released", &released))
                return hwid_fail(HWID_E_INVALID, "the server's answer has no \"released\" binding");
        return admin_json_to_binding(released, ret);
}

int cmd_identity_release(int argc, char **argv) {
        _cleanup_(store_binding_clear) store_binding b = { 0 };
        const char *config = NULL, *name;
        remote_opts ro;
        char bound[32];
        int r;

        if ((r = parse("identity release", argc, argv, &config, &ro, 1,
                       "Usage: hwid identity release [--config FILE] NAME\n"
                       "       hwid identity release --dir DIR | --cert FILE --key URI [...] NAME   (remote)\n\n"
                       "Sets NAME free of the TPM that attested it, for a replaced TPM or board: another\n"
                       "TPM (or a token without attestation) may then enroll NAME, and the next\n"
                       "certificate of NAME recording a TPM attestation binds it again.  Its certificates\n"
                       "are left alone (hwid cert revoke).  Audited.  Remotely: the admin role.\n")) != 0)
                return r;
        name = argv[optind];
        r = remote_wanted(&ro) ? remote_release(&ro, name, &b) : local_release(config, name, &b);
        if (r < 0)
                return cli_fail(r);
        format_time(b.bound_at, bound, sizeof(bound));
        printf("%s released from the TPM with EK sha256:%s (bound since certificate %s, %s): another TPM may "
               "enroll it now\n", b.identity, b.ek_pub_sha256, b.serial, bound);
        return 0;
}
