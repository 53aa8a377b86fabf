/* hwid ca rollover: a new CA key without touching a device
 * (docs/OPERATIONS.md, "Rolling the CA over").  Each step parses its
 * options, opens the configuration's store and makes one call of
 * service/ca/rollover (rollover.h), which decides and records it; hwidd
 * replicas follow within a second. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "host-cmd.h"
#include "ca-setup.h"
#include "cli.h"
#include "csr.h"
#include "device.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "rollover.h"
#include "x509-util.h"

#define PEM_MAX (256 * 1024)

typedef struct rollover_opts {
        const char *config, *key, *subject, *cert, *chain, *csr;
        hwid_key_type type;
        long days;
        int generation;
        bool force;
} rollover_opts;

/* The configuration's CA and store, as a step needs them. */
typedef struct rollover_host {
        hwidd_config *cfg;
        store *store;
        X509 *ca_cert;
        char *chain;
        rollover_ctx ctx;
} rollover_host;

static void host_clear(rollover_host *h) {
        store_free(h->store);
        config_free(h->cfg);
        X509_free(h->ca_cert);
        free(h->chain);
        *h = (rollover_host) { 0 };
}

static int host_open(const rollover_opts *o, rollover_host *h) {
        _cleanup_free_ char *pem = NULL;
        size_t len;
        int r;

        if ((r = admin_open(o->config, &h->cfg, &h->store)) < 0 ||
            (r = read_file_capped(h->cfg->ca_cert, PEM_MAX, &pem, &len)) < 0)
                return r;
        if ((r = pem_first_cert(pem, &h->ca_cert)) < 0)
                return hwid_fail(HWID_E_CONFIG, "%s holds no PEM certificate", h->cfg->ca_cert);
        if (h->cfg->ca_chain && (r = read_file_capped(h->cfg->ca_chain, PEM_MAX, &h->chain, &len)) < 0)
                return r;
        h->ctx = (rollover_ctx) { .store = h->store, .ca_cert = h->ca_cert, .ca_chain_pem = h->chain,
                                  .ca_key_uri = h->cfg->ca_key, .tcti = h->cfg->tcti, .actor = admin_actor(),
                                  .now = (int64_t) time(NULL) };
        return 0;
}

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid ca rollover prepare [--config FILE] --key URI [--subject DN] [--days N]\n"
                   "                                [--type TYPE] [--csr FILE] [--force]\n"
                   "       hwid ca rollover import [--config FILE] --cert FILE [--chain FILE]\n"
                   "       hwid ca rollover activate [--config FILE]\n"
                   "       hwid ca rollover status [--config FILE]\n"
                   "       hwid ca rollover retire [--config FILE] [--generation N] [--force]\n\n"
                   "Replaces the CA's key without touching a device (docs/OPERATIONS.md, \"Rolling the CA\n"
                   "over\"). prepare makes the new key in the HSM/TPM at URI (or uses the key there), the\n"
                   "new CA certificate and the link certificates between the two keys; hwidd serves them\n"
                   "at once (GET /ca, EST cacerts, CMP rootCaKeyUpdate) and devices adopt the new CA\n"
                   "through the link as they renew. Under an offline root (ca.chain set) it writes a\n"
                   "request for the root instead, and import takes the certificate the root signed.\n"
                   "activate makes the new CA the one that signs: every hwidd replica switches within a\n"
                   "second. status shows every generation and what to do next. retire stops serving the\n"
                   "generation the active one replaced, once its last certificate has expired. Each step\n"
                   "is recorded in the audit log as admin:<user>.\n\n"
                   CONFIG_HELP
                   "  -k, --key URI        prepare: the new CA key (pkcs11:... or tpm2:...); a PIN goes by\n"
                   "                       pin-source=file:..., never pin-value=\n"
                   "  -s, --subject DN     prepare: the new CA's subject (default: the active CA's, its CN\n"
                   "                       suffixed \" G<n>\"); it must differ from the active CA's\n"
                   "      --days N         prepare: the new CA certificate's validity (default 3650)\n"
                   "  -t, --type TYPE      prepare: the key type if the key is created (default ec-p256)\n"
                   "      --csr FILE       prepare, offline root: where the request goes (default\n"
                   "                       ca-g<n>.csr beside the configuration)\n"
                   "      --cert FILE      import: the new CA certificate the offline root signed\n"
                   "      --chain FILE     import: the root (and any CA between); default: ca.chain's\n"
                   "      --generation N   retire: the generation (default: the oldest one replaced)\n"
                   "  -f, --force          prepare: replace a prepared generation never activated;\n"
                   "                       retire: even with unexpired certificates left (relying parties\n"
                   "                       then find no CRL for them, nor can their holders renew)\n");
}

static int parse_number(const char *step, const char *opt, const char *s, long min, long max, long *ret) {
        char *end;
        long v = strtol(s, &end, 10);

        if (*end || end == s || v < min || v > max)
                return cli_usage(step, "%s must be %ld..%ld", opt, min, max);
        *ret = v;
        return 0;
}

static int parse_one(const char *step, int c, rollover_opts *o) {
        long n;
        int r = 0;

        switch (c) {
        case 'c': o->config = optarg; break;
        case 'k': o->key = optarg; break;
        case 's': o->subject = optarg; break;
        case 'C': o->cert = optarg; break;
        case 'H': o->chain = optarg; break;
        case 'R': o->csr = optarg; break;
        case 'f': o->force = true; break;
        case 'D': r = parse_number(step, "--days", optarg, 1, 36500, &o->days); break;
        case 'g':
                if ((r = parse_number(step, "--generation", optarg, 1, 1000, &n)) == 0)
                        o->generation = (int) n;
                break;
        case 't':
                if (hwid_key_type_from_string(optarg, &o->type) < 0)
                        return cli_fail(-HWID_E_KEY_TYPE);
                break;
        default: return -1;
        }
        return r;
}

static int parse(int argc, char **argv, const char *step, rollover_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "key", required_argument, NULL, 'k' },
                { "subject", required_argument, NULL, 's' }, { "days", required_argument, NULL, 'D' },
                { "type", required_argument, NULL, 't' },    { "csr", required_argument, NULL, 'R' },
                { "cert", required_argument, NULL, 'C' },    { "chain", required_argument, NULL, 'H' },
                { "generation", required_argument, NULL, 'g' }, { "force", no_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' },          {},
        };
        int c, r;

        *o = (rollover_opts) { .days = 3650, .type = HWID_KEY_TYPE_DEFAULT };
        while ((c = getopt_long(argc, argv, "c:k:s:t:fh", opts, NULL)) >= 0) {
                if (c == 'h') {
                        usage(stdout);
                        exit(0);
                }
                if ((r = parse_one(step, c, o)) > 0)
                        return r;
                if (r < 0)
                        return cli_bad_option(step, argv);
        }
        if (optind != argc)
                return cli_usage(step, "unexpected argument '%s'", argv[optind]);
        return 0;
}

static void fmt_day(int64_t t, char out[32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!t || !gmtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%d", &tm))
                snprintf(out, 32, "-");
}

/* ---- prepare ---- */

static int push_ext(STACK_OF(X509_EXTENSION) *exts, int nid, const char *value) {
        X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, NULL, nid, value);

        if (!e || !sk_X509_EXTENSION_push(exts, e)) {
                X509_EXTENSION_free(e);
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot make the request's extensions");
        }
        return 0;
}

/* Offline root: the new key's request, asking for CA:TRUE, keyCertSign
 * and cRLSign, at path. */
static int write_csr(hwid_key *k, const X509_NAME *subject, const char *path) {
        _cleanup_(sk_X509_EXTENSION_pop_freep) STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
        _cleanup_(X509_REQ_freep) X509_REQ *req = NULL;
        _cleanup_free_ char *pem = NULL;
        int r;

        if (!exts)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = push_ext(exts, NID_basic_constraints, "critical,CA:TRUE")) < 0 ||
            (r = push_ext(exts, NID_key_usage, "critical,keyCertSign,cRLSign")) < 0 ||
            (r = csr_build_ext(k, subject, exts, &req)) < 0 || (r = csr_to_pem(req, &pem)) < 0)
                return r;
        return write_file_atomic(path, pem, strlen(pem), 0644);
}

/* --csr, else ca-g<n>.csr beside the configuration. */
static int csr_path(const rollover_opts *o, const rollover_host *h, int n, char **ret) {
        _cleanup_free_ char *cfg = strdup(h->cfg->path);
        char *slash = cfg ? strrchr(cfg, '/') : NULL;

        if (o->csr)
                return (*ret = strdup(o->csr)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        if (!cfg)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (slash)
                slash[1] = '\0';
        return asprintf(ret, "%sca-g%d.csr", slash ? cfg : "", n) < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
}

static void say_prepared(const rollover_prepared *p, const char *csr) {
        char pin[72] = "", end[32];
        int64_t na = 0;

        if (csr) {
                printf("generation %d prepared; its request for the offline root is in %s\n"
                       "Have the root sign it as an intermediate CA (not with pathlen:0: a link certificate sits\n"
                       "below it), then run:\n  hwid ca rollover import --cert SIGNED.pem [--chain ROOT.pem]\n",
                       p->generation, csr);
                return;
        }
        (void) spki_sha256_pin(X509_get0_pubkey(p->cert), pin);
        (void) x509_not_after(p->cert, &na);
        fmt_day(na, end);
        printf("generation %d prepared: the new CA, valid until %s, pin %s, and its link certificates\n"
               "are served now (GET /ca, EST cacerts, CMP rootCaKeyUpdate); devices adopt it as they renew.\n"
               "Give relying parties both CA certificates, then run: hwid ca rollover activate\n",
               p->generation, end, pin);
}

/* The new key, made in its device or opened. */
static int new_key(const rollover_opts *o, const rollover_host *h, hwid_key **ret) {
        hsm_options ho;
        bool created = false;
        int r;

        cli_hsm_options(&ho, h->cfg->tcti);
        if (strncmp(o->key, "tpm2:", 5) == 0 && (r = cli_tpm_reachable("ca rollover prepare", &ho)) < 0)
                return r;
        r = ca_key_open_or_create(o->key, o->type, &ho, ret, &created);
        cli_tpm_done();
        if (r >= 0)
                printf("%s the new CA key %s\n", created ? "created" : "using the existing", hwid_key_uri(*ret));
        return r;
}

static int prepare(const rollover_opts *o, rollover_host *h) {
        _cleanup_(rollover_plan_clear) rollover_plan plan = { 0 };
        _cleanup_(rollover_prepared_clear) rollover_prepared p = { 0 };
        _cleanup_(X509_NAME_freep) X509_NAME *subject = NULL;
        _cleanup_(hwid_key_freep) hwid_key *k = NULL;
        _cleanup_free_ char *csr = NULL;
        int r;

        if (strstr(o->key, "pin-value="))
                return cli_usage("ca rollover prepare", "the key URI is stored for every hwidd replica: give its PIN "
                                 "with pin-source=file:..., not pin-value=");
        /* The request first: a prepared generation always has its request. */
        if ((r = rollover_plan_get(&h->ctx, o->force, &plan)) < 0 ||
            (r = rollover_subject(&plan, o->subject, &subject)) < 0 ||
            (plan.offline && (r = csr_path(o, h, plan.generation, &csr)) < 0) || (r = new_key(o, h, &k)) < 0 ||
            (csr && (r = write_csr(k, subject, csr)) < 0) ||
            (r = rollover_prepare(&h->ctx, &plan, k, o->key, subject, (int) o->days, o->force, &p)) < 0)
                return r;
        say_prepared(&p, csr);
        return 0;
}

/* ---- import, activate, retire, status ---- */

static int import(const rollover_opts *o, rollover_host *h) {
        _cleanup_free_ char *cert = NULL, *chain = NULL;
        size_t len;
        int n, r;

        if (!o->cert)
                return cli_usage("ca rollover import", "needs --cert FILE");
        if ((r = read_file_capped(o->cert, PEM_MAX, &cert, &len)) < 0 ||
            (o->chain && (r = read_file_capped(o->chain, PEM_MAX, &chain, &len)) < 0) ||
            (r = rollover_import(&h->ctx, cert, chain, &n)) < 0)
                return r;
        printf("generation %d has its certificate and its link certificates: hwidd serves them now.\n"
               "Give relying parties the new CA certificate too, then run: hwid ca rollover activate\n", n);
        return 0;
}

static int activate(const rollover_opts *o, rollover_host *h) {
        int n, r = rollover_activate(&h->ctx, &n);

        if (r < 0)
                return r;
        printf("generation %d is the active CA: every hwidd replica signs new certificates and their CRL with it\n"
               "within a second; the generation before keeps its CRL and is served until retired\n"
               "(hwid ca rollover status says when)\n", n);
        return 0;
}

static int retire(const rollover_opts *o, rollover_host *h) {
        rollover_retired x;
        char last[32];
        int r = rollover_retire(&h->ctx, o->generation, o->force, &x);

        if (r < 0)
                return r;
        fmt_day(x.last_expiry, last);
        if (x.unexpired)
                printf("retired generation %d, leaving %llu unexpired certificate%s (the last expiring %s) that "
                       "relying parties will no longer find a CRL for, and that hwidd no longer accepts for a "
                       "renewal\n", x.generation,
                       (unsigned long long) x.unexpired, x.unexpired == 1 ? "" : "s", last);
        else
                printf("retired generation %d: none of its certificates is left unexpired; hwidd no longer "
                       "serves it\n", x.generation);
        return 0;
}

static int status(const rollover_opts *o, rollover_host *h) {
        rollover_status st;
        char until[32], last[32];
        int r = rollover_status_get(&h->ctx, policy_longest_validity(h->cfg->policy), h->cfg->ca_expiry_warning, &st);

        if (r < 0)
                return r;
        printf("GEN  STATE     NOT AFTER   UNEXPIRED  LAST EXPIRY  SUBJECT\n");
        for (size_t i = 0; i < st.n; i++) {
                const rollover_gen_status *g = &st.gens[i];

                fmt_day(g->not_after, until);
                fmt_day(g->last_expiry, last);
                printf("%-4d %-9s %-11s %-10llu %-12s %s%s\n", g->generation, store_ca_state_name(g->state),
                       g->has_cert ? until : "-", (unsigned long long) g->unexpired, last, g->subject,
                       g->has_cert ? "" : " (waiting for the offline root's certificate)");
        }
        printf("next: %s\n", st.next);
        return 0;
}

static const struct {
        const char *name;
        int (*run)(const rollover_opts *o, rollover_host *h);
} steps[] = {
        { "prepare", prepare }, { "import", import }, { "activate", activate },
        { "status", status },   { "retire", retire },
};

/* Whether argument a (an option) takes the next one as its value. */
static bool takes_value(const char *a) {
        static const char *const with_value[] = { "-c", "-k", "-s", "-t", "--config", "--key", "--subject", "--days",
                                                  "--type", "--csr", "--cert", "--chain", "--generation" };

        for (size_t i = 0; i < ELEMENTSOF(with_value); i++)
                if (strcmp(a, with_value[i]) == 0)
                        return true;
        return false;
}

/* The step's index in argv (options may come before it: hwid ca rollover
 * --config F status), or 0. */
static int step_at(int argc, char **argv) {
        for (int i = 1; i < argc; i++) {
                if (argv[i][0] != '-')
                        return i;
                i += takes_value(argv[i]);
        }
        return 0;
}

static int run_step(size_t k, int argc, char **argv) {
        _cleanup_(host_clear) rollover_host h = { 0 };
        char step[64];
        rollover_opts o;
        int r;

        snprintf(step, sizeof(step), "ca rollover %s", steps[k].name);
        if ((r = parse(argc, argv, step, &o)) != 0)
                return r;
        if (steps[k].run == prepare && !o.key)
                return cli_usage(step, "needs --key URI");
        if ((r = host_open(&o, &h)) >= 0)
                r = steps[k].run(&o, &h);
        return r < 0 ? cli_fail(r) : r; /* r > 0: a usage error's code */
}

int cmd_ca_rollover(int argc, char **argv) {
        int at = step_at(argc, argv);

        rollover_opts o;

        /* --help (through getopt, as every command's) prints the usage of all the steps. */
        if (!at) {
                int r = parse(argc, argv, "ca rollover", &o);

                return r ? r : cli_usage("ca rollover", "needs a step: prepare, import, activate, status or retire");
        }
        for (size_t k = 0; at && k < ELEMENTSOF(steps); k++) {
                if (strcmp(argv[at], steps[k].name) != 0)
                        continue;
                /* getopt sees the options alone: the step moves to argv[0]. */
                memmove(&argv[1], &argv[0], sizeof(char *) * (size_t) at);
                return run_step(k, argc - 1, argv + 1);
        }
        return cli_usage("ca rollover", "no step '%s': prepare, import, activate, status or retire", argv[at]);
}
