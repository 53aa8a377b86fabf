/* hwid request list | approve ID | deny ID [--reason R]: manual approval,
 * through the admin API (admin-conn.h): of a remote hwidd as an operator
 * (--dir, --cert/--key), or on the CA host of its own store (--config).
 * The approver compares the public-key fingerprint shown here with the
 * one the device printed. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "cli.h"
#include "error.h"
#include "json-write.h"
#include "remote.h"

typedef struct req_opts {
        const char *config, *reason;
        bool all;
        remote_opts remote;
} req_opts;

static int parse(const char *cmd, int argc, char **argv, req_opts *o, int nargs) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "reason", required_argument, NULL, 'r' },
                { "all", no_argument, NULL, 'a' }, { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
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
                               "       hwid request deny [--config FILE] [--reason TEXT] ID\n"
                               "       hwid request ... --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                               "Requests wait for approval under a manual profile.  Approve only after\n"
                               "checking that SPKI-SHA256 matches what the device printed.  Remotely: the\n"
                               "admin and approver roles (list: the auditor role too); an approver with a\n"
                               "scope lists, approves and denies only the requests within it.  Remotely, a\n"
                               "last column YOU-MAY says what the caller may do with each request\n"
                               "(approve,deny / approve / deny / -).\n\n"
                               CONFIG_HELP
                               "  -a, --all            list: every request, not only pending ones\n"
                               "  -r, --reason TEXT    deny: why (shown to the device)\n" REMOTE_HELP);
                        exit(0);
                default:
                        if (!remote_option(&o->remote, c, optarg))
                                return cli_bad_option(cmd, argv);
                }
        }
        if (argc - optind != nargs)
                return cli_usage(cmd, nargs ? "needs a request id" : "takes no arguments");
        return remote_check_usage(cmd, &o->remote, o->config, false);
}

/* Remotely, a last column says what the caller may do with each request,
 * as hwidd answered for its certificate (four eyes, an approver's scope);
 * on the CA host (root on the store) there is no caller to speak of. */
static const char *may_name(bool approve, bool deny) {
        return approve && deny ? "approve,deny" : approve ? "approve" : deny ? "deny" : "-";
}

/* "may_approve"/"may_deny" of an entry; "?" from a hwidd that does not say. */
static const char *remote_may(json_object *o) {
        json_object *a, *d;

        if (!json_object_object_get_ex(o, "may_approve", &a) || !json_object_object_get_ex(o, "may_deny", &d) ||
            !json_object_is_type(a, json_type_boolean) || !json_object_is_type(d, json_type_boolean))
                return "?";
        return may_name(json_object_get_boolean(a), json_object_get_boolean(d));
}

static int print_request(json_object *q, bool may) {
        const char *id, *status, *identity, *profile, *spki;
        int64_t created;
        char when[32];
        int r;

        if ((r = answer_str(q, "id", false, &id)) < 0 || (r = answer_str(q, "status", false, &status)) < 0 ||
            (r = answer_str(q, "identity", false, &identity)) < 0 ||
            (r = answer_str(q, "profile", false, &profile)) < 0 ||
            (r = answer_str(q, "spki_sha256", false, &spki)) < 0 || (r = answer_int(q, "created_at", &created)) < 0)
                return r;
        format_time(created, when, sizeof(when));
        printf("%-32s  %-8s  %-20s  %-10s  %-17s  %s%s%s\n", id, status, identity, profile, when, spki,
               may ? "  " : "", may ? remote_may(q) : "");
        return 0;
}

static int list_requests(const req_opts *o) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        json_object *list;
        bool may;
        int r;

        if ((r = admin_conn_open("request list", &o->remote, o->config, 0, &conn)) < 0 ||
            (r = admin_conn_call(conn, "GET", o->all ? "/v1/admin/requests?all=true" : "/v1/admin/requests", NULL,
                                 &answer)) < 0 ||
            (r = answer_list(answer, "requests", &list)) < 0)
                return r;
        may = conn->remote;
        printf("%-32s  %-8s  %-20s  %-10s  %-17s  %s%s\n", "ID", "STATUS", "NAME", "PROFILE", "CREATED",
               may ? "SPKI-SHA256                                                       " : "SPKI-SHA256",
               may ? "YOU-MAY" : "");
        for (size_t i = 0; r >= 0 && i < json_object_array_length(list); i++)
                r = print_request(json_object_array_get_idx(list, i), may);
        return r;
}

int cmd_request_list(int argc, char **argv) {
        req_opts o;
        int r;

        if ((r = parse("request list", argc, argv, &o, 0)) != 0)
                return r;
        r = list_requests(&o);
        return r < 0 ? cli_fail(r) : 0;
}

static int decide_call(const char *cmd, const req_opts *o, const char *id, bool approve) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(id), *path = NULL;
        int r;

        if (!body || !esc || asprintf(&path, "/v1/admin/requests/%s/%s", esc, approve ? "approve" : "deny") < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (o->reason)
                json_set_str(body, "reason", o->reason);
        if ((r = admin_conn_open(cmd, &o->remote, o->config, 0, &conn)) < 0)
                return r;
        return admin_conn_call(conn, "POST", path, body, &answer);
}

static int decide(const char *cmd, int argc, char **argv, bool approve) {
        req_opts o;
        int r;

        if ((r = parse(cmd, argc, argv, &o, 1)) != 0)
                return r;
        if (approve && o.reason)
                return cli_usage(cmd, "--reason is for deny");
        if ((r = decide_call(cmd, &o, argv[optind], approve)) < 0)
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
