/* A copy of every audit record, once committed, as one structured line to
 * syslog (journald, rsyslog: whatever listens on the socket), for an
 * external collector that keeps what the database cannot be trusted to. */
#pragma once

#include <stddef.h>

#include "store.h"

/* Makes the store send each record it commits to the syslog datagram
 * socket at socket_path (audit.syslog_socket) as program `ident`; each
 * record that cannot be delivered calls on_dropped(userdata), if set.
 * socket_path NULL (audit.syslog off): nothing, 0. */
int audit_syslog_attach(store *s, const char *socket_path, const char *ident, void (*on_dropped)(void *userdata),
                        void *userdata);

/* One more line to the socket at socket_path (an audit checkpoint's,
 * docs/OPERATIONS.md), as program `ident`, never waiting; on_dropped as
 * above.  socket_path NULL: nothing. */
void audit_syslog_send_line(const char *socket_path, const char *ident, void (*on_dropped)(void *userdata),
                            void *userdata, const char *line);

/* The line for a record (without the syslog header): key=value pairs,
 * values quoted and escaped (see docs/OPERATIONS.md).  Returns the length
 * written to out (cut to size, never mid-escape). */
size_t audit_syslog_format(const store_audit *a, char *out, size_t size);
