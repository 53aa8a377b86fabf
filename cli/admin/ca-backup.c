/* hwid ca backup: a consistent copy of the CA's store while hwidd runs.
 * hwid ca restore: puts a backup in place of the store (hwidd stopped),
 * keeping the database it replaces aside.
 *
 * A backup is checked before it is named: SQLite's integrity check and
 * the audit chain verified in the copy.  A restore checks the same again,
 * on the copy it will put in place, before it touches the live database. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "error.h"
#include "fsutil.h"
#include "host-cmd.h"

typedef struct backup_args {
        const char *config;
        const char *path; /* --out or --from */
} backup_args;

static int parse(const char *cmd, const char *file_opt, int argc, char **argv, backup_args *a) {
        const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { file_opt, required_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': a->config = optarg; break;
                case 'f': a->path = optarg; break;
                case 'h': return 1;
                default: return cli_bad_option(cmd, argv);
                }
        }
        if (optind != argc)
                return cli_usage(cmd, "takes no arguments");
        if (!a->path || !a->path[0])
                return cli_usage(cmd, "needs --%s FILE", file_opt);
        return 0;
}

/* Opens the copy at path as a store and checks it: pages and audit chain. */
static int check_copy(const char *path, store_stats *ret_stats, store_audit_report *ret_rep) {
        _cleanup_(store_freep) store *s = NULL;
        store_audit_report rep;
        int r;

        if ((r = store_open(path, &s)) < 0 || (r = store_integrity_check(s)) < 0 ||
            (r = store_audit_verify(s, NULL, 0, &rep)) < 0 || (r = store_stats_get(s, (int64_t) time(NULL), ret_stats)) < 0)
                return r;
        if (rep.problem != AUDIT_OK)
                return hwid_fail(HWID_E_TAMPERED, "the audit log in %s does not verify: %s", path, rep.detail);
        *ret_rep = rep;
        return 0;
}

/* Gives the finished copy its name, never over an existing file. */
static int publish(const char *tmp, const char *path) {
        if (link(tmp, path) < 0) {
                int e = errno;

                (void) unlink(tmp);
                return hwid_fail(e == EEXIST ? HWID_E_EXISTS : HWID_E_IO, "cannot create %s: %s", path, strerror(e));
        }
        (void) unlink(tmp);
        return fsync_parent_dir(path);
}

static int backup(const backup_args *a) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        _cleanup_free_ char *tmp = NULL;
        store_audit_report rep;
        store_stats st;
        int r;

        if (access(a->path, F_OK) == 0)
                return hwid_fail(HWID_E_EXISTS, "%s already exists: name a new file", a->path);
        if (asprintf(&tmp, "%s.partial", a->path) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = admin_open(a->config, &cfg, &s)) < 0 || (r = store_backup(s, tmp)) < 0)
                return r;
        r = check_copy(tmp, &st, &rep);
        if (r >= 0)
                r = publish(tmp, a->path);
        else
                (void) unlink(tmp);
        admin_audit(s, "ca.backup", a->path, r, NULL);
        if (r < 0)
                return r;
        printf("backup of %s written to %s: %llu live certificate%s, %zu audit records verified\n", cfg->database,
               a->path, (unsigned long long) st.live_certificates, st.live_certificates == 1 ? "" : "s",
               rep.n_records);
        return 0;
}

int cmd_ca_backup(int argc, char **argv) {
        backup_args a = { 0 };
        int r = parse("ca backup", "out", argc, argv, &a);

        if (r == 1) {
                printf("Usage: hwid ca backup [--config FILE] --out FILE\n\n"
                       "Copies the CA's SQLite store to a new FILE, consistently, while hwidd keeps\n"
                       "serving (SQLite's online backup: one snapshot), then checks the copy (SQLite's\n"
                       "integrity check, and its audit chain as hwid audit verify does) before giving it\n"
                       "its name.  FILE holds every CSR and the audit trail: it is created owner-only.\n"
                       "For PostgreSQL, use pg_dump or PITR instead (docs/OPERATIONS.md).\n\n"
                       "  -c, --config FILE  hwidd's configuration (default $HWID_CONFIG, else %s)\n"
                       "      --out FILE     the backup to write (must not exist)\n", DEFAULT_CONFIG);
                return 0;
        }
        if (r != 0)
                return r;
        r = backup(&a);
        return r < 0 ? cli_fail(r) : 0;
}

/* ---- restore ---- */

/* The live database (and its WAL, if a crash left one) is renamed aside,
 * the checked copy takes its place. */
static int swap_in(const char *db, const char *tmp, char **ret_aside) {
        _cleanup_free_ char *aside = NULL, *wal = NULL, *aside_wal = NULL, *shm = NULL;
        char stamp[32];
        time_t now = time(NULL);
        struct tm tm;

        strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", gmtime_r(&now, &tm));
        if (asprintf(&aside, "%s.before-restore-%s", db, stamp) < 0 || asprintf(&wal, "%s-wal", db) < 0 ||
            asprintf(&aside_wal, "%s-wal", aside) < 0 || asprintf(&shm, "%s-shm", db) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (access(db, F_OK) == 0 && rename(db, aside) < 0)
                return hwid_fail(HWID_E_IO, "cannot move %s aside: %s", db, strerror(errno));
        if (access(wal, F_OK) == 0 && rename(wal, aside_wal) < 0)
                return hwid_fail(HWID_E_IO, "cannot move %s aside: %s", wal, strerror(errno));
        (void) unlink(shm);
        if (rename(tmp, db) < 0)
                return hwid_fail(HWID_E_IO, "cannot put the restored database at %s: %s (the old one is %s)", db,
                                 strerror(errno), aside);
        *ret_aside = access(aside, F_OK) == 0 ? TAKE_PTR(aside) : NULL;
        return fsync_parent_dir(db);
}

static int restore(const backup_args *a) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        _cleanup_free_ char *tmp = NULL, *aside = NULL;
        _cleanup_close_ int claim = -1;
        store_audit_report rep;
        store_stats st;
        int r;

        if ((r = config_load(admin_config_path(a->config), &cfg)) < 0)
                return r;
        /* A database server is no file to put a copy in place of. */
        if (strstr(cfg->database, "://"))
                return hwid_fail(HWID_E_CONFIG, "the store is a PostgreSQL database: restore it with pg_restore or "
                                 "point-in-time recovery (docs/HA.md); hwid store migrate copies a SQLite backup "
                                 "into an empty one");
        if ((r = store_claim(cfg->database, true, &claim)) < 0)
                return r;
        if (asprintf(&tmp, "%s.restoring", cfg->database) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        (void) unlink(tmp); /* left by a restore that was interrupted */
        if ((r = copy_file(a->path, tmp, 0600)) < 0)
                return r;
        r = check_copy(tmp, &st, &rep);
        if (r >= 0)
                r = swap_in(cfg->database, tmp, &aside);
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        if ((r = store_open(cfg->database, &s)) < 0)
                return r;
        admin_audit(s, "ca.restore", a->path, 0, aside ? aside : NULL);
        printf("restored %s from %s: %llu live certificate%s, %zu audit records verified%s%s\n", cfg->database,
               a->path, (unsigned long long) st.live_certificates, st.live_certificates == 1 ? "" : "s",
               rep.n_records, aside ? "; the database it replaced is kept as " : "", aside ? aside : "");
        return 0;
}

int cmd_ca_restore(int argc, char **argv) {
        backup_args a = { 0 };
        int r = parse("ca restore", "from", argc, argv, &a);

        if (r == 1) {
                printf("Usage: hwid ca restore [--config FILE] --from FILE\n\n"
                       "Puts a backup made by hwid ca backup in place of the store hwidd's configuration\n"
                       "names.  hwidd must be stopped: while it runs on the store this refuses.  The\n"
                       "backup is checked first (SQLite's integrity check and its audit chain), on a\n"
                       "copy; the database it replaces is renamed to DATABASE.before-restore-TIME,\n"
                       "never deleted.  Then start hwidd again.\n\n"
                       "  -c, --config FILE  hwidd's configuration (default $HWID_CONFIG, else %s)\n"
                       "      --from FILE    the backup to restore\n", DEFAULT_CONFIG);
                return 0;
        }
        if (r != 0)
                return r;
        r = restore(&a);
        return r < 0 ? cli_fail(r) : 0;
}
