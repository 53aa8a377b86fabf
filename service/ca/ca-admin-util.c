/* What the admin operations share (ca-admin-internal.h): the target of
 * their audit record, and a request's state as an error.  Below them. */
#include <string.h>

#include "ca-admin-internal.h"
#include "error.h"

void admin_set_target(admin_call *c, const char *s) {
        snprintf(c->target, sizeof(c->target), "%s", s ? s : "");
        for (char *p = c->target; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = '?';
}

int admin_state_error(int r) {
        char why[512];

        if (r != -HWID_E_CONFLICT)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        return hwid_fail(HWID_E_WRONG_STATE, "%s", why);
}
