/* hwid ek add | list | remove: the EK allowlist, through the admin API
 * (admin-conn.h): of a remote hwidd as an operator (--dir, --cert/--key),
 * or on the CA host of its own store (--config).  The CA checks each
 * entry (service/ca/ek-entry.h).  Import is in ek-import.c. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "admin-plain.h"
#include "base64.h"
#include "cli.h"
#include "error.h"
#include "fsutil.h"
#include "json-write.h"
#include "remote.h"
#include "tpm-attest.h"

/* ---------- add ---------- */

static void add_usage(FILE *f) {
        fprintf(f, "Usage: hwid ek add [--config FILE] --cn NAME (--ek-cert FILE | --ek-sha256 HEX)\n"
                   "                   [--profile P]\n"
                   "       hwid ek add --dir DIR | --cert FILE --key URI [...] --cn NAME ...   (remote)\n\n"
                   "Puts one TPM on the EK allowlist: a device whose TPM holds that EK enrolls with\n"
                   "hwid join --attest and no bootstrap token, under NAME only (its CN must be NAME)\n"
                   "and profile P.  The EK certificate must chain to attestation.ek_roots.\n"
                   "Remotely: the admin role.\n\n"
                   CONFIG_HELP
                   "      --cn NAME            the one name this TPM may enroll\n"
                   "      --ek-cert FILE       its EK certificate, PEM or DER (tpm2_nvread 0x01c00002 ...)\n"
                   "      --ek-sha256 HEX      its EK public key instead: sha256 of its SubjectPublicKeyInfo\n"
                   "                           (what hwid ca hash prints for the EK certificate)\n"
                   "  -p, --profile P          the profile it enrolls under (default: 'default')\n"
                   "  -h, --help               show this help\n" REMOTE_HELP);
}

typedef struct add_opts {
        const char *config, *cn, *ek_cert, *ek_sha256, *profile;
        remote_opts ro;
} add_opts;

static int add_parse(int argc, char **argv, add_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "cn", required_argument, NULL, 'n' },
                { "ek-cert", required_argument, NULL, 'e' }, { "ek-sha256", required_argument, NULL, 's' },
                { "profile", required_argument, NULL, 'p' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c;

        *o = (add_opts) { .profile = "default" };
        while ((c = getopt_long(argc, argv, "c:p:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': o->config = optarg; break;
                case 'n': o->cn = optarg; break;
                case 'e': o->ek_cert = optarg; break;
                case 's': o->ek_sha256 = optarg; break;
                case 'p': o->profile = optarg; break;
                case 'h': add_usage(stdout); exit(0);
                default:
                        if (!remote_option(&o->ro, c, optarg))
                                return cli_bad_option("ek add", argv);
                }
        }
        if (!o->cn || !o->ek_cert == !o->ek_sha256 || optind != argc)
                return cli_usage("ek add", "needs --cn and one of --ek-cert or --ek-sha256");
        return remote_check_usage("ek add", &o->ro, o->config, false);
}

/* {"cn", "profile", "ek_cert" (the file's bytes, base64) | "ek_pub_sha256"};
 * on the CA host, the file's name for the CA's messages ("file"). */
static int add_body(const add_opts *o, bool remote, json_object **ret) {
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        json_object *body;
        size_t len;
        int r;

        if (o->ek_cert && ((r = read_file_capped(o->ek_cert, TPM_EK_CERT_MAX * 2, &data, &len)) < 0 ||
                           (r = base64_encode((const uint8_t *) data, len, false, &b64)) < 0))
                return r;
        if (!(body = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(body, "cn", o->cn);
        json_set_str(body, "profile", o->profile);
        if (b64)
                json_set_str(body, "ek_cert", b64);
        else
                json_set_str(body, "ek_pub_sha256", o->ek_sha256);
        if (b64 && !remote)
                json_set_str(body, "file", o->ek_cert);
        *ret = body;
        return 0;
}

static int add(const add_opts *o) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *body = NULL, *e = NULL;
        const char *identity, *profile, *pub, *cert;
        int r;

        if ((r = admin_conn_open("ek add", &o->ro, o->config, 0, &conn)) < 0 ||
            (r = add_body(o, conn->remote, &body)) < 0 || (r = admin_conn_call(conn, "POST", "/v1/admin/ek", body, &e)) < 0)
                return r;
        if ((r = answer_str(e, "identity", false, &identity)) < 0 || (r = answer_str(e, "profile", false, &profile)) < 0 ||
            (r = answer_str(e, "ek_pub_sha256", true, &pub)) < 0 || (r = answer_str(e, "ek_cert_sha256", true, &cert)) < 0)
                return r;
        printf("EK sha256:%s may enroll %s (profile %s) without a token: hwid join --attest --cn %s\n",
               pub ? pub : cert ? cert : "", identity, profile, identity);
        return 0;
}

int cmd_ek_add(int argc, char **argv) {
        add_opts o;
        int r;

        if ((r = add_parse(argc, argv, &o)) != 0)
                return r;
        r = add(&o);
        return r < 0 ? cli_fail(r) : 0;
}

/* ---------- list, remove ---------- */

static int print_entry(json_object *e) {
        const char *identity, *profile, *pub, *cert;
        int64_t added_at;
        char added[32];
        int r;

        if ((r = answer_str(e, "identity", false, &identity)) < 0 || (r = answer_str(e, "profile", false, &profile)) < 0 ||
            (r = answer_str(e, "ek_pub_sha256", true, &pub)) < 0 || (r = answer_str(e, "ek_cert_sha256", true, &cert)) < 0 ||
            (r = answer_int(e, "added_at", &added_at)) < 0)
                return r;
        format_time(added_at, added, sizeof(added));
        printf("%-20s  %-12s  %-17s  %-64s  %s\n", identity, profile, added, pub ? pub : "-", cert ? cert : "-");
        return 0;
}

static int list(const char *config, const remote_opts *ro) {
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *items;
        int r;

        if ((r = admin_get_list("ek list", ro, config, "/v1/admin/ek", "entries", &answer, &items)) < 0)
                return r;
        printf("%-20s  %-12s  %-17s  %-64s  %s\n", "NAME", "PROFILE", "ADDED", "EK-SHA256 (public key)",
               "EK-CERT-SHA256");
        return admin_print_each(items, print_entry);
}

int cmd_ek_list(int argc, char **argv) {
        const char *config = NULL;
        remote_opts ro;
        int r;

        if ((r = admin_parse_plain("ek list", argc, argv, &config, &ro, 0, NULL,
                            "Usage: hwid ek list [--config FILE]\n"
                            "       hwid ek list --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                            "Lists the EK allowlist: the TPMs that may enroll without a token, their names and\n"
                            "profiles.  Remotely: the admin and auditor roles.\n")) != 0)
                return r;
        r = list(config, &ro);
        return r < 0 ? cli_fail(r) : 0;
}

static int remove_entry(const char *config, const remote_opts *ro, const char *key) {
        return admin_post_on("ek remove", ro, config, "/v1/admin/ek", key, "remove", NULL);
}

int cmd_ek_remove(int argc, char **argv) {
        const char *config = NULL, *key;
        remote_opts ro;
        int r;

        if ((r = admin_parse_plain("ek remove", argc, argv, &config, &ro, 1, "a NAME or an EK hash",
                            "Usage: hwid ek remove [--config FILE] NAME|HEX\n"
                            "       hwid ek remove --dir DIR | --cert FILE --key URI [...] NAME|HEX   (remote)\n\n"
                            "Takes a TPM off the EK allowlist, by its name or the SHA-256 of its EK public key or\n"
                            "certificate: it can no longer enroll without a token.  Certificates it has are left\n"
                            "alone (hwid cert revoke).  Remotely: the admin role.\n")) != 0)
                return r;
        key = argv[optind];
        if (strncmp(key, "sha256:", 7) == 0)
                key += 7;
        if ((r = remove_entry(config, &ro, key)) < 0)
                return cli_fail(r);
        printf("%s removed from the EK allowlist\n", key);
        return 0;
}
