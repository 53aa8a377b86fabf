/* The admin API's identities bound to the TPM that attested them (list,
 * release: docs/ATTESTATION.md, "A name is bound to its TPM"): what
 * `hwid identity` does on the CA host.  Releasing one is for admin alone
 * (a replaced TPM or board); an auditor may list them. */
#include <string.h>

#include "admin-internal.h"
#include "error.h"

static const char *const no_keys[] = { NULL };

int admin_identity_list(admin_call *c) {
        json_object *answer, *list = NULL;
        store_binding *v = NULL;
        size_t n = 0;
        int r;

        if ((r = admin_body_keys(c, no_keys)) < 0 || (r = store_binding_list(c->ca->store, &v, &n)) < 0)
                return r;
        answer = admin_list_object("identities", &list);
        for (size_t i = 0; answer && i < n; i++)
                if (json_object_array_add(list, admin_json_binding(&v[i])) < 0)
                        r = -1;
        store_binding_list_free(v, n);
        if (!answer || r < 0) {
                json_object_put(answer);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        snprintf(c->note, sizeof(c->note), "%zu bound", n);
        return admin_respond(c, 200, answer);
}

/* POST /v1/admin/identities/NAME/release: its binding goes, audited in
 * the same transaction with the TPM it was bound to; 404 if NAME is bound
 * to none. */
int admin_identity_release(admin_call *c) {
        _cleanup_(store_binding_clear) store_binding b = { 0 };
        char reason[200];
        store_audit a = { .at = c->now, .actor = c->auth.actor, .action = "identity.release", .outcome = "allow",
                          .target = c->arg, .reason = reason };
        json_object *answer;
        int r;

        if ((r = admin_body_keys(c, no_keys)) < 0 || (r = store_binding_get(c->ca->store, c->arg, &b)) < 0)
                return r;
        admin_release_reason(&b, reason, sizeof(reason));
        if ((r = store_binding_release(c->ca->store, &b, &a, c->now)) < 0)
                return r;
        c->audited = true;
        if (!(answer = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(answer, "released", admin_json_binding(&b));
        return admin_respond(c, 200, answer);
}
