/* An admin command's connection (admin-conn.h): remote, or the CA
 * host's, which main() provides. */
#include "admin-conn.h"
#include "error.h"

static admin_local_fn local_open;

void admin_conn_set_local(admin_local_fn fn) {
        local_open = fn;
}

int admin_conn_open(const char *cmd, const remote_opts *o, const char *config, unsigned flags, admin_conn **ret) {
        if (remote_wanted(o))
                return remote_open(o, ret);
        if (!local_open)
                return hwid_fail(HWID_E_INTERNAL, "hwid %s: no connection to the CA host's store", cmd);
        return local_open(cmd, config, o, flags, ret);
}

void admin_conn_free(admin_conn *c) {
        if (c)
                c->ops->free(c);
}

int admin_conn_call(admin_conn *c, const char *method, const char *path, json_object *body, json_object **ret) {
        return c->ops->call(c, method, path, body, ret);
}

const char *const *admin_conn_servers(admin_conn *c) {
        return c->ops->servers(c);
}

int admin_conn_ca_pin(admin_conn *c, const char **ret) {
        return c->ops->ca_pin(c, ret);
}
