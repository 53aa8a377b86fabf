/* hwid token create: bootstrap tokens for devices, on the CA host. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "admin.h"
#include "buf.h"
#include "cli.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "secret.h"
#include "token.h"
#include "x509-util.h"

#define MAX_COUNT 100000

typedef struct token_opts {
        const char *config, *profile, *pattern, *description, *out, *server, *key, *dir;
        int64_t ttl;
        long uses, count;
} token_opts;

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid token create [--config FILE] [--profile P] [--ttl 24h] [--uses 1]\n"
                   "                         [--name-pattern GLOB] [--description TEXT]\n"
                   "                         [--count N --out FILE] [--server URL] [--key URI] [--dir DIR]\n\n"
                   "Creates a bootstrap token (<id>.<secret>) that lets one device submit a CSR, and\n"
                   "prints the join command to run on the device.  The secret is shown once; only its\n"
                   "hash is stored.  With --count, writes N tokens to FILE (mode 0600), one per line.\n\n"
                   "  -c, --config FILE        hwidd configuration (default $HWID_CONFIG or " DEFAULT_CONFIG ")\n"
                   "  -p, --profile P          profile the token is bound to (default: 'default')\n"
                   "      --ttl DURATION       lifetime, e.g. 30m, 24h, 7d (default 24h)\n"
                   "      --uses N             how many enrollments it allows (default 1)\n"
                   "      --name-pattern GLOB  device names it may request, e.g. 'edge-*'\n"
                   "      --description TEXT   a note kept with the token (hwid token list)\n"
                   "      --count N            create N tokens (written to --out, not printed)\n"
                   "  -o, --out FILE           with --count: the file for the tokens (mode 0600)\n"
                   "      --server URL         hwidd URL for the join command (default from listen)\n"
                   "      --key URI            device key URI for the join command\n"
                   "      --dir DIR            device directory for the join command\n");
}

static int parse(int argc, char **argv, token_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "profile", required_argument, NULL, 'p' },
                { "ttl", required_argument, NULL, 't' }, { "uses", required_argument, NULL, 'u' },
                { "name-pattern", required_argument, NULL, 'n' }, { "description", required_argument, NULL, 'd' },
                { "count", required_argument, NULL, 'N' }, { "out", required_argument, NULL, 'o' },
                { "server", required_argument, NULL, 's' }, { "key", required_argument, NULL, 'k' },
                { "dir", required_argument, NULL, 'D' }, { "help", no_argument, NULL, 'h' }, {},
        };
        char *end;
        int c;

        *o = (token_opts) { .profile = "default", .ttl = 86400, .uses = 1, .count = 0,
                            .key = "tpm2:file=/var/lib/hwid/device.tss2.pem", .dir = "/var/lib/hwid" };
        while ((c = getopt_long(argc, argv, "c:p:o:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': o->config = optarg; break;
                case 'p': o->profile = optarg; break;
                case 't':
                        if (config_parse_duration(optarg, &o->ttl) < 0 || o->ttl <= 0)
                                return cli_usage("token create", "--ttl '%s' is not a duration like 24h", optarg);
                        break;
                case 'u':
                        o->uses = strtol(optarg, &end, 10);
                        if (*end || o->uses < 1 || o->uses > 1000000)
                                return cli_usage("token create", "--uses must be 1..1000000");
                        break;
                case 'N':
                        o->count = strtol(optarg, &end, 10);
                        if (*end || o->count < 1 || o->count > MAX_COUNT)
                                return cli_usage("token create", "--count must be 1..%d", MAX_COUNT);
                        break;
                case 'n': o->pattern = optarg; break;
                case 'd': o->description = optarg; break;
                case 'o': o->out = optarg; break;
                case 's': o->server = optarg; break;
                case 'k': o->key = optarg; break;
                case 'D': o->dir = optarg; break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("token create", argv);
                }
        }
        if (optind != argc)
                return cli_usage("token create", "unexpected argument '%s'", argv[optind]);
        if (!!o->count != !!o->out)
                return cli_usage("token create", "--count and --out go together");
        return 0;
}

/* Creates one token in the store; *ret_token is "<id>.<secret>" (a secret). */
static int create_one(store *s, const token_opts *o, int64_t now, char **ret_token) {
        _cleanup_secret_ char *secret = NULL;
        store_token t = { 0 };
        char id[TOKEN_ID_LEN + 1];
        int r;

        if ((r = token_generate(id, &secret)) < 0)
                return r;
        memcpy(t.id, id, sizeof(t.id));
        if ((r = token_hash(secret, t.secret_hash)) < 0)
                return r;
        t.profile = (char *) o->profile;
        t.name_pattern = (char *) o->pattern;
        t.description = (char *) o->description;
        t.created_at = now;
        t.expires_at = now + o->ttl;
        t.uses_total = t.uses_left = (int) o->uses;
        r = store_token_insert(s, &t);
        secret_wipe(t.secret_hash, sizeof(t.secret_hash));
        if (r < 0)
                return r;
        if (asprintf(ret_token, "%s.%s", id, secret) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return admin_audit(s, "token.create", id, 0, o->profile);
}

static int ca_pin(const char *ca_path, char pin[72]) {
        _cleanup_free_ char *pem = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        size_t len;
        int r;

        if ((r = read_file_capped(ca_path, 256 * 1024, &pem, &len)) < 0)
                return r;
        b = BIO_new_mem_buf(pem, (int) len);
        x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!x)
                return hwid_fail_ossl(HWID_E_CONFIG, "%s holds no certificate", ca_path);
        return spki_sha256_pin(X509_get0_pubkey(x), pin);
}

static void print_join(const hwidd_config *cfg, const token_opts *o, const char *token, const char *pin) {
        const char *name = o->pattern && !strpbrk(o->pattern, "*?") ? o->pattern : "<device-name>";

        printf("token: %s\n(shown once: only its hash is stored; profile %s, %ld use%s, expires in %llds)\n\n",
               token, o->profile, o->uses, o->uses == 1 ? "" : "s", (long long) o->ttl);
        printf("On the device, run (the token is read from the environment, not the command line):\n"
               "  HWID_TOKEN=%s hwid join --server %s%s --ca-hash %s \\\n"
               "      --key %s --cn %s --dir %s\n",
               token, o->server ? "" : "https://", o->server ? o->server : cfg->listen, pin, o->key, name, o->dir);
}

static int write_batch(store *s, const token_opts *o, int64_t now) {
        _cleanup_buf_ buf out;
        int r;

        buf_init(&out, (size_t) o->count * 96 + 1);
        for (long i = 0; i < o->count; i++) {
                _cleanup_secret_ char *tok = NULL;
                if ((r = create_one(s, o, now, &tok)) < 0 || (r = buf_printf(&out, "%s\n", tok)) < 0) {
                        buf_wipe(&out);
                        return r;
                }
        }
        r = write_file_atomic(o->out, out.data, out.len, 0600);
        buf_wipe(&out);
        if (r < 0)
                return r;
        printf("wrote %ld tokens (profile %s) to %s\n", o->count, o->profile, o->out);
        return 0;
}

int cmd_token_create(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(store_freep) store *s = NULL;
        _cleanup_secret_ char *tok = NULL;
        int64_t now = (int64_t) time(NULL);
        token_opts o;
        char pin[72];
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        if ((r = admin_open(o.config, &cfg, &s)) < 0)
                return cli_fail(r);
        if (!policy_profile_find(cfg->policy, o.profile))
                return cli_fail(hwid_fail(HWID_E_INVALID, "no profile '%s' in %s", o.profile, cfg->path));
        if (o.count) {
                r = write_batch(s, &o, now);
                return r < 0 ? cli_fail(r) : 0;
        }
        if ((r = ca_pin(cfg->ca_cert, pin)) < 0 || (r = create_one(s, &o, now, &tok)) < 0)
                return cli_fail(r);
        print_join(cfg, &o, tok, pin);
        return 0;
}
