/* hwid factory: a station that enrolls many devices at once.
 *
 * The devices file names one device per line:
 *
 *   NAME TCTI KEY-URI [DIR]      # comment
 *
 * NAME is the identity requested (the CN); TCTI reaches that device's TPM
 * ('-': $HWID_TCTI or the tpm2-tss default); DIR defaults to OUT_DIR/NAME.
 * The tokens file holds one bootstrap token per line (hwid token create
 * --count N --out FILE); tokens are handed out in order, one to each
 * device that needs one (a device already enrolled, or with a pending
 * request to resume, takes none).  Tokens are secrets: never printed, and
 * wiped from memory as soon as they are used.
 *
 * N worker threads each run join_run() for one device at a time, with that
 * device's TCTI; hsm/ keeps one TPM connection per TCTI with its own lock,
 * so devices on different TPMs proceed in parallel.  A pending request is
 * not waited for (run the station again after approval to collect it). */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "join.h"

#define FACTORY_MAX_DEVICES 100000
#define FACTORY_MAX_PARALLEL 256

typedef struct factory_device {
        char *name;
        char *tcti;     /* NULL: the default */
        char *key_uri;
        char *dir;
        unsigned line;  /* in the devices file */
} factory_device;

typedef enum factory_outcome {
        FACTORY_ENROLLED,
        FACTORY_ALREADY,
        FACTORY_PENDING,
        FACTORY_FAILED,
} factory_outcome;

typedef struct factory_result {
        factory_outcome outcome;
        double seconds;
        char *reason;   /* the failure's detail, or NULL */
} factory_result;

typedef struct factory_report {
        size_t n;
        factory_device *devices;  /* in file order */
        factory_result *results;  /* same order */
        size_t counts[FACTORY_FAILED + 1];
        double seconds;
} factory_report;

/* Called under a lock after each device: done is the number finished so
 * far (1..n), i the device's index in the report. */
typedef void (*factory_done_fn)(void *userdata, const factory_report *rep, size_t i, size_t done);

typedef struct factory_opts {
        const char *server;
        const char *const *servers; /* replicas, NULL-terminated (join_opts), or NULL */
        const char *ca_hash;
        const char *tokens_file;
        const char *devices_file;
        const char *out_dir;      /* base of the default DIRs */
        unsigned parallel;        /* worker threads, 1..FACTORY_MAX_PARALLEL */
        hwid_key_type type;       /* for keys created */
        /* TPM attestation (hwid join --attest) for every device; tokens_file
         * may then be NULL, and devices without a token enroll as TPMs on
         * the CA's EK allowlist.  ek: tpm_ek_alg. */
        bool attest;
        int ek;
        long http_timeout;
        factory_done_fn done;     /* may be NULL */
        progress_fn progress;     /* join's steps, may be NULL; userdata is the factory_device */
        void *userdata;           /* for done */
} factory_opts;

/* Reads both files, checks them (names, duplicate names and DIRs, enough
 * tokens) and enrolls every device.  Per-device failures are in the
 * report, not the return value: a negative return means nothing ran (bad
 * files) or the station itself failed. */
int factory_run(const factory_opts *o, factory_report **ret);

/* Parses and checks the devices file (names, duplicates); exposed for tests. */
int factory_read_devices(const char *path, const char *out_dir, factory_device **ret, size_t *ret_n);

const char *factory_outcome_name(factory_outcome o);
void factory_report_free(factory_report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(factory_report *, factory_report_free)
