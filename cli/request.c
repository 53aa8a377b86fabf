/* hwid request list | approve ID | deny ID [--reason R]: manual approval,
 * on the CA host (--config) or against a remote hwidd's admin API as an
 * operator (--dir, --cert/--key).  The approver compares the public-key
 * fingerprint shown here with the one the device printed. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "cli.h"
#include "error.h"
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
static void print_requests(const store_request *rq, const char *const *may, size_t n) {
        printf("%-32s  %-8s  %-20s  %-10s  %-17s  %s%s\n", "ID", "STATUS", "NAME", "PROFILE", "CREATED",
               may ? "SPKI-SHA256                                                       " : "SPKI-SHA256",
               may ? "YOU-MAY" : "");
        for (size_t i = 0; i < n; i++) {
                char when[32];
                format_time(rq[i].created_at, when, sizeof(when));
                printf("%-32s  %-8s  %-20s  %-10s  %-17s  %s%s%s\n", rq[i].id,
                       admin_request_status_name(rq[i].status), rq[i].identity, rq[i].profile, when,
                       rq[i].spki_sha256, may ? "  " : "", may ? may[i] : "");
        }
}

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

static int remote_requests(const req_opts *o, store_request **ret, const char ***ret_may, size_t *ret_n) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *answer = NULL;
        _cleanup_free_ const char **may = NULL;
        json_object *list;
        store_request *rq;
        size_t n = 0;
        int r;

        if ((r = remote_open(&o->remote, &rm)) < 0 ||
            (r = remote_call(rm, "GET", o->all ? "/v1/admin/requests?all=true" : "/v1/admin/requests", NULL,
                             &answer)) < 0 ||
            (r = remote_list(answer, "requests", &list)) < 0)
                return r;
        rq = calloc(json_object_array_length(list) + 1, sizeof(*rq));
        may = calloc(json_object_array_length(list) + 1, sizeof(*may));
        if (!rq || !may) {
                free(rq);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        for (; r >= 0 && n < json_object_array_length(list); n += r >= 0) {
                r = admin_json_to_request(json_object_array_get_idx(list, n), &rq[n]);
                may[n] = remote_may(json_object_array_get_idx(list, n));
        }
        if (r < 0) {
                store_request_list_free(rq, n);
                return r;
        }
        *ret = rq;
        *ret_may = TAKE_PTR(may);
        *ret_n = n;
        return 0;
}

static int local_requests(const req_opts *o, store_request **ret, size_t *ret_n) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r = admin_open(o->config, &cfg, &s);

        return r < 0 ? r : store_request_list(s, !o->all, ret, ret_n);
}

int cmd_request_list(int argc, char **argv) {
        _cleanup_free_ const char **may = NULL;
        store_request *rq = NULL;
        size_t n = 0;
        req_opts o;
        int r;

        if ((r = parse("request list", argc, argv, &o, 0)) != 0)
                return r;
        r = remote_wanted(&o.remote) ? remote_requests(&o, &rq, &may, &n) : local_requests(&o, &rq, &n);
        if (r < 0)
                return cli_fail(r);
        print_requests(rq, may, n);
        store_request_list_free(rq, n);
        return 0;
}

static int remote_decide(const req_opts *o, const char *id, bool approve) {
        _cleanup_(remote_freep) remote *rm = NULL;
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *answer = NULL;
        _cleanup_free_ char *esc = remote_escape(id), *path = NULL;
        int r;

        if (!body || !esc || asprintf(&path, "/v1/admin/requests/%s/%s", esc, approve ? "approve" : "deny") < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (o->reason)
                json_set_str(body, "reason", o->reason);
        if ((r = remote_open(&o->remote, &rm)) < 0)
                return r;
        return remote_call(rm, "POST", path, body, &answer);
}

static int local_decide(const req_opts *o, const char *id, bool approve) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        char target[64];
        int r;

        if ((r = admin_open(o->config, &cfg, &s)) < 0)
                return r;
        r = store_request_decide(s, id, approve, o->reason, (int64_t) time(NULL));
        snprintf(target, sizeof(target), REQUEST_ID_FMT, id);
        return admin_audit(s, approve ? "request.approve" : "request.deny", target, r, o->reason);
}

static int decide(const char *cmd, int argc, char **argv, bool approve) {
        req_opts o;
        int r;

        if ((r = parse(cmd, argc, argv, &o, 1)) != 0)
                return r;
        if (approve && o.reason)
                return cli_usage(cmd, "--reason is for deny");
        r = remote_wanted(&o.remote) ? remote_decide(&o, argv[optind], approve)
                                     : local_decide(&o, argv[optind], approve);
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
