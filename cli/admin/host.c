/* What the CA host's offline operations share (host-cmd.h): the
 * configuration and its store, and their audit records, as admin:<login>. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "audit-syslog.h"
#include "cli.h"
#include "error.h"
#include "host-cmd.h"

int admin_open(const char *config_opt, hwidd_config **ret_cfg, store **ret_store) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        int r;

        if ((r = config_load(admin_config_path(config_opt), &cfg)) < 0)
                return r;
        if ((r = store_open(cfg->database, &s)) < 0 ||
            (r = audit_syslog_attach(s, cfg->audit_syslog ? cfg->audit_syslog_socket : NULL, "hwid", NULL, NULL)) < 0)
                return r;
        *ret_store = TAKE_PTR(s);
        *ret_cfg = TAKE_PTR(cfg);
        return 0;
}

const char *admin_actor(void) {
        static char actor[80];
        struct passwd *pw = getpwuid(getuid());

        snprintf(actor, sizeof(actor), "admin:%s", pw ? pw->pw_name : "unknown");
        return actor;
}

int admin_audit(store *s, const char *action, const char *target, int r, const char *reason) {
        char detail[512];
        store_audit a = {
                .at = (int64_t) time(NULL), .actor = admin_actor(), .action = action, .target = target,
                .outcome = r < 0 ? "error" : "allow", .reason = detail,
        };

        /* Keep the caller's failure detail: auditing must not overwrite it. */
        snprintf(detail, sizeof(detail), "%s", r < 0 ? hwid_strerror(r) : reason ? reason : "");
        if (!detail[0])
                a.reason = NULL;
        store_audit_append(s, &a);
        if (r < 0)
                hwid_fail((hwid_err) -r, "%s", detail);
        return r;
}
