/* A copy of every audit record, once committed, as one structured line to
 * syslog (journald, rsyslog: whatever listens on the socket), for an
 * external collector that keeps what the database cannot be trusted to. */
#pragma once

#include <stddef.h>

#include "config.h"
#include "metrics.h"
#include "store.h"

/* When cfg asks for it (audit.syslog), makes the store send each record
 * it commits to cfg->audit_syslog_socket as program `ident`; records that
 * cannot be delivered are counted in m (may be NULL).  0 when off. */
int audit_syslog_attach(store *s, const hwidd_config *cfg, const char *ident, metrics *m);

/* When cfg asks for audit.syslog: one more line to that socket (an audit
 * checkpoint's, docs/OPERATIONS.md), as program `ident`, never waiting. */
void audit_syslog_send_line(const hwidd_config *cfg, const char *ident, metrics *m, const char *line);

/* The line for a record (without the syslog header): key=value pairs,
 * values quoted and escaped (see docs/OPERATIONS.md).  Returns the length
 * written to out (cut to size, never mid-escape). */
size_t audit_syslog_format(const store_audit *a, char *out, size_t size);
