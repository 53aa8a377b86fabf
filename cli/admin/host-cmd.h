/* hwid-admin: the CA host's half of hwid (hwid hands it these commands,
 * cli/hwid.c).  The offline operations, on the CA's files, keys and store
 * themselves: ca init, ca import, ca token-key, ca backup, ca restore,
 * ca rollover, store migrate, audit verify; and the admin commands' connection to the
 * store named by hwidd's configuration (host-conn.c): the admin API in
 * process, as the host's administrator admin:<login>. */
#pragma once

#include "admin-conn.h"
#include "config.h"
#include "store.h"

int cmd_ca_init(int argc, char **argv);
int cmd_ca_import(int argc, char **argv);
int cmd_ca_token_key(int argc, char **argv);
int cmd_ca_backup(int argc, char **argv);
int cmd_ca_restore(int argc, char **argv);
int cmd_store_migrate(int argc, char **argv);
int cmd_audit_verify(int argc, char **argv);
/* argv[0] is "rollover", argv[1] the step: prepare, import, activate,
 * status, retire. */
int cmd_ca_rollover(int argc, char **argv);

/* The admin commands' connection on the CA host (admin_local_fn,
 * admin-conn.h): the configuration, its store and, with
 * ADMIN_CONN_TOKEN_KEY, ca.token_key; nothing opens the CA key. */
int host_conn_open(const char *cmd, const char *config, const remote_opts *o, unsigned flags, admin_conn **ret);

/* For the offline operations: the configuration and its store. */
int admin_open(const char *config_opt, hwidd_config **ret_cfg, store **ret_store);
/* "admin:<login name>" */
const char *admin_actor(void);
/* Audits an offline operation; returns r unchanged (for tail calls). */
int admin_audit(store *s, const char *action, const char *target, int r, const char *reason);
