/* hwid request list | approve ID | deny ID [--reason R]: manual approval
 * on the CA host.  The admin compares the public-key fingerprint shown
 * here with the one the device printed. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "cli.h"
#include "error.h"

static const char *status_name(store_request_status s) {
        static const char *names[] = { "pending", "approved", "denied", "issued" };
        return names[s];
}

typedef struct req_opts {
        const char *config, *reason;
        bool all;
} req_opts;

static int parse(const char *cmd, int argc, char **argv, req_opts *o, int nargs) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "reason", required_argument, NULL, 'r' },
                { "all", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        *o = (req_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:r:ah", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': o->config = optarg; break;
                case 'r': o->reason = optarg; break;
                case 'a': o->all = true; break;
                case 'h':
                        printf("Usage: hwid request list [--config FILE] [--all]\n"
                               "       hwid request approve [--config FILE] ID\n"
                               "       hwid request deny [--config FILE] [--reason TEXT] ID\n\n"
                               "Requests wait for approval under a manual profile.  Approve only after\n"
                               "checking that SPKI-SHA256 matches what the device printed.\n");
                        exit(0);
                default: return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs a request id" : "takes no arguments");
        return 0;
}

int cmd_request_list(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        store_request *rq = NULL;
        size_t n = 0;
        req_opts o;
        int r;

        if ((r = parse("request list", argc, argv, &o, 0)) != 0)
                return r;
        if ((r = admin_open(o.config, &cfg, &s)) < 0 || (r = store_request_list(s, !o.all, &rq, &n)) < 0)
                return cli_fail(r);
        printf("%-32s  %-8s  %-20s  %-10s  %-17s  %s\n", "ID", "STATUS", "NAME", "PROFILE", "CREATED", "SPKI-SHA256");
        for (size_t i = 0; i < n; i++) {
                char when[32];
                format_time(rq[i].created_at, when, sizeof(when));
                printf("%-32s  %-8s  %-20s  %-10s  %-17s  %s\n", rq[i].id, status_name(rq[i].status),
                       rq[i].identity, rq[i].profile, when, rq[i].spki_sha256);
        }
        store_request_list_free(rq, n);
        return 0;
}

static int decide(const char *cmd, int argc, char **argv, bool approve) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        char target[64];
        req_opts o;
        int r;

        if ((r = parse(cmd, argc, argv, &o, 1)) != 0)
                return r;
        if (approve && o.reason)
                return cli_usage(cmd, "--reason is for deny");
        if ((r = admin_open(o.config, &cfg, &s)) < 0)
                return cli_fail(r);
        r = store_request_decide(s, argv[optind], approve, o.reason, (int64_t) time(NULL));
        snprintf(target, sizeof(target), "request " REQUEST_ID_FMT, argv[optind]);
        r = admin_audit(s, approve ? "request.approve" : "request.deny", target, r, o.reason);
        if (r < 0)
                return cli_fail(r);
        printf("request %s %s%s\n", argv[optind], approve ? "approved" : "denied",
               approve ? ": the device receives its certificate on its next poll" : "");
        return 0;
}

int cmd_request_approve(int argc, char **argv) {
        return decide("request approve", argc, argv, true);
}

int cmd_request_deny(int argc, char **argv) {
        return decide("request deny", argc, argv, false);
}
