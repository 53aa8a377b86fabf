/* Shared by the CA-host commands (token, request, cert): they work on the
 * store named by hwidd's configuration, on the CA host, and audit every
 * action as admin:<user>. */
#pragma once

#include "config.h"
#include "store.h"

#define DEFAULT_CONFIG "/etc/hwid/hwidd.yaml"
/* The --config line of the admin commands' help. */
#define CONFIG_HELP "  -c, --config FILE    hwidd configuration (default $HWID_CONFIG or " DEFAULT_CONFIG ")\n"

/* --config, else $HWID_CONFIG, else DEFAULT_CONFIG. */
const char *admin_config_path(const char *opt);
/* Loads the configuration and opens its store. */
int admin_open(const char *config_opt, hwidd_config **ret_cfg, store **ret_store);
/* "admin:<login name>" */
const char *admin_actor(void);
/* Audits an admin action; returns r unchanged (for tail calls). */
int admin_audit(store *s, const char *action, const char *target, int r, const char *reason);
/* "2026-11-21 21:45Z" */
void format_time(int64_t t, char *out, size_t n);
