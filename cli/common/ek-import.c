/* hwid ek import: the EK allowlist from a factory line's manifest
 * (service/ca/ek-manifest.c reads it), all entries or none, through the
 * admin API (admin-conn.h): of a remote hwidd as an operator, or on the CA
 * host of its own store. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "base64.h"
#include "cli.h"
#include "error.h"
#include "fsutil.h"
#include "json-write.h"
#include "remote.h"

/* The manifest goes whole, base64, in one request: a remote hwidd's
 * limits.max_body bounds it (a larger manifest is refused with 413 and
 * adds nothing), and so does the admin API's own bound (48 MiB). */
#define MANIFEST_MAX (48u << 20)

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid ek import [--config FILE] [--profile P] MANIFEST\n"
                   "       hwid ek import --dir DIR | --cert FILE --key URI [...] [--profile P] MANIFEST\n"
                   "                                                                     (remote)\n\n"
                   "Puts the TPMs a factory line listed on the EK allowlist, all or none.  MANIFEST is\n"
                   "JSON, {\"devices\": [{\"cn\", \"profile\", \"ek_cert\" | \"ek_pub_sha256\" |\n"
                   "\"ek_cert_sha256\"}]}, or CSV with a header naming those columns, e.g.\n"
                   "  cn,profile,ek_pub_sha256\n"
                   "  edge-0001,edge,3f1c0b...\n"
                   "ek_cert is the EK certificate (PEM, or base64 of its DER); it must chain to\n"
                   "attestation.ek_roots.  See docs/ATTESTATION.md.  Remotely: the admin role; the\n"
                   "manifest goes in one request, within hwidd's limits.max_body.\n\n"
                   CONFIG_HELP
                   "  -p, --profile P      profile of the entries that name none (default: 'default')\n"
                   "  -h, --help           show this help\n" REMOTE_HELP);
}

/* {"manifest": base64 of the file, "profile"}; on the CA host, the file's
 * name for the CA's messages ("file": "FILE:3: ..."). */
static int import_body(const char *path, const char *profile, bool remote, json_object **ret) {
        _cleanup_free_ char *data = NULL, *b64 = NULL;
        json_object *body;
        size_t len;
        int r;

        if ((r = read_file_capped(path, MANIFEST_MAX, &data, &len)) < 0 ||
            (r = base64_encode((const uint8_t *) data, len, false, &b64)) < 0)
                return r;
        if (!(body = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(body, "manifest", b64);
        json_set_str(body, "profile", profile);
        if (!remote)
                json_set_str(body, "file", path);
        *ret = body;
        return 0;
}

static int import(const char *config, const remote_opts *ro, const char *path, const char *profile, int64_t *ret_n) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *body = NULL, *answer = NULL;
        int r;

        if ((r = admin_conn_open("ek import", ro, config, 0, &conn)) < 0 ||
            (r = import_body(path, profile, conn->remote, &body)) < 0 ||
            (r = admin_conn_call(conn, "POST", "/v1/admin/ek/import", body, &answer)) < 0)
                return r;
        if (answer_int(answer, "added", ret_n) < 0 || *ret_n < 0)
                return hwid_fail(HWID_E_INVALID, "the server's answer has no \"added\" count");
        return 0;
}

int cmd_ek_import(int argc, char **argv) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "profile", required_argument, NULL, 'p' },
                { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        const char *config = NULL, *profile = "default";
        remote_opts ro = { 0 };
        int64_t n = 0;
        int c, r;

        while ((c = getopt_long(argc, argv, "c:p:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': config = optarg; break;
                case 'p': profile = optarg; break;
                case 'h': usage(stdout); return 0;
                default:
                        if (!remote_option(&ro, c, optarg))
                                return cli_bad_option("ek import", argv);
                }
        }
        if (argc - optind != 1)
                return cli_usage("ek import", "needs one MANIFEST file");
        if ((r = remote_check_usage("ek import", &ro, config, false)) != 0)
                return r;
        if ((r = import(config, &ro, argv[optind], profile, &n)) < 0)
                return cli_fail(r);
        printf("%lld TPM%s added to the EK allowlist from %s\n", (long long) n, n == 1 ? "" : "s", argv[optind]);
        return 0;
}
