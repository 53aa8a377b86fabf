/* hwid token create: bootstrap tokens for devices, through the admin API
 * (admin-conn.h): of a remote hwidd, or on the CA host of its own store. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-answer.h"
#include "admin-cmd.h"
#include "admin-conn.h"
#include "buf.h"
#include "cli.h"
#include "duration.h"
#include "error.h"
#include "fsutil.h"
#include "json-write.h"
#include "remote.h"

#define MAX_COUNT 100000
/* Tokens per request (the admin API's limit): more are asked for in turn. */
#define TOKEN_BATCH 1000

typedef struct token_opts {
        const char *config, *profile, *pattern, *description, *out, *device_key, *device_dir;
        int64_t ttl;
        long uses, count;
        remote_opts remote; /* remote.servers are also the join command's servers */
} token_opts;

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid token create [--config FILE] [--profile P] [--ttl 24h] [--uses 1]\n"
                   "                         [--name-pattern GLOB] [--description TEXT]\n"
                   "                         [--count N --out FILE] [--server URL]\n"
                   "                         [--device-key URI] [--device-dir DIR]\n"
                   "       hwid token create --dir DIR | --cert FILE --key URI [...]   (remote)\n\n"
                   "Creates a bootstrap token (<id>.<secret>) that lets one device submit a CSR, and\n"
                   "prints the join command to run on the device.  The secret is shown once and kept\n"
                   "nowhere: it is derived with the CA's token key (ca.token_key), which never leaves\n"
                   "the HSM/TPM.  With --count, writes N tokens to FILE (mode 0600), one per line;\n"
                   "if it fails part way, the tokens made so far are written all the same.\n"
                   "Remotely, an admin may create any token; a provisioner only for the profiles and\n"
                   "name patterns its certificate is scoped to (--name-pattern is then required).\n\n"
                   CONFIG_HELP
                   "  -p, --profile P          profile the token is bound to (default: 'default')\n"
                   "      --ttl DURATION       lifetime, e.g. 30m, 24h, 7d (default 24h)\n"
                   "      --uses N             how many enrollments it allows (default 1)\n"
                   "      --name-pattern GLOB  device names it may request, e.g. 'edge-*'\n"
                   "      --description TEXT   a note kept with the token (hwid token list)\n"
                   "      --count N            create N tokens, 1..%d (written to --out, not printed)\n"
                   "  -o, --out FILE           with --count: the file for the tokens (mode 0600)\n"
                   "      --device-key URI     device key URI for the join command\n"
                   "      --device-dir DIR     device directory for the join command\n"
                   "(--server URL is also the join command's URL, each one if repeated; by default\n"
                   " from listen.)\n"
                   REMOTE_HELP, MAX_COUNT);
}

static int parse_number(const char *opt, const char *arg, long max, long *ret) {
        char *end;
        long v = strtol(arg, &end, 10);

        if (*end || end == arg || v < 1 || v > max)
                return cli_usage("token create", "%s must be 1..%ld", opt, max);
        *ret = v;
        return 0;
}

static int parse_one(token_opts *o, int c, char **argv) {
        switch (c) {
        case 'c': o->config = optarg; return 0;
        case 'p': o->profile = optarg; return 0;
        case 't':
                if (duration_parse(optarg, &o->ttl) < 0 || o->ttl <= 0)
                        return cli_usage("token create", "--ttl '%s' is not a duration like 24h", optarg);
                return 0;
        case 'u': return parse_number("--uses", optarg, 1000000, &o->uses);
        case 'N': return parse_number("--count", optarg, MAX_COUNT, &o->count);
        case 'n': o->pattern = optarg; return 0;
        case 'd': o->description = optarg; return 0;
        case 'o': o->out = optarg; return 0;
        case 'k': o->device_key = optarg; return 0;
        case 'D': o->device_dir = optarg; return 0;
        case 'h': usage(stdout); exit(0);
        default:
                if (remote_option(&o->remote, c, optarg))
                        return 0;
                return cli_bad_option("token create", argv);
        }
}

static int parse(int argc, char **argv, token_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "profile", required_argument, NULL, 'p' },
                { "ttl", required_argument, NULL, 't' }, { "uses", required_argument, NULL, 'u' },
                { "name-pattern", required_argument, NULL, 'n' }, { "description", required_argument, NULL, 'd' },
                { "count", required_argument, NULL, 'N' }, { "out", required_argument, NULL, 'o' },
                { "device-key", required_argument, NULL, 'k' }, { "device-dir", required_argument, NULL, 'D' },
                { "help", no_argument, NULL, 'h' }, REMOTE_OPTIONS, {},
        };
        int c, r;

        *o = (token_opts) { .profile = "default", .ttl = 86400, .uses = 1, .count = 0,
                            .device_key = "tpm2:file=/var/lib/hwid/device.tss2.pem", .device_dir = "/var/lib/hwid" };
        while ((c = getopt_long(argc, argv, "c:p:o:h", opts, NULL)) >= 0)
                if ((r = parse_one(o, c, argv)) != 0)
                        return r;
        if (optind != argc)
                return cli_usage("token create", "unexpected argument '%s'", argv[optind]);
        if (!!o->count != !!o->out)
                return cli_usage("token create", "--count and --out go together");
        /* --server alone is the join command's URL, on the CA host as before. */
        return remote_check_usage("token create", &o->remote, o->config, true);
}

/* servers: the URLs devices reach hwidd at (NULL-terminated; the replicas
 * of a replicated CA, for the device to fail over between). */
static void print_join(const char *const *servers, const token_opts *o, const char *token, const char *pin) {
        const char *name = o->pattern && !strpbrk(o->pattern, "*?") ? o->pattern : "<device-name>";

        printf("token: %s\n(shown once: hwid keeps no copy of it; profile %s, %ld use%s, expires in %llds)\n\n",
               token, o->profile, o->uses, o->uses == 1 ? "" : "s", (long long) o->ttl);
        printf("On the device, run (the token is read from the environment, not the command line):\n"
               "  HWID_TOKEN=%s hwid join", token);
        for (size_t i = 0; servers[i]; i++)
                printf(" --server %s", servers[i]);
        printf(" --ca-hash %s \\\n      --key %s --cn %s --dir %s\n", pin, o->device_key, name, o->device_dir);
}

/* Writes the tokens made (one "<id>.<secret>" a line in out) to --out,
 * wiping out.  r: how their making ended.  Tokens made before a failure
 * exist in the store: they are written all the same, or no one could use
 * or revoke them knowingly, and the failure is still returned. */
static int write_tokens(const token_opts *o, buf *out, int r) {
        long got = 0;
        int w = 0;

        for (size_t i = 0; i < out->len; i++)
                got += out->data[i] == '\n';
        if (got > 0)
                w = write_file_atomic(o->out, out->data, out->len, 0600);
        buf_wipe(out);
        if (w < 0)
                return w;
        if (r >= 0)
                printf("wrote %ld tokens (profile %s) to %s\n", o->count, o->profile, o->out);
        else if (got > 0)
                fprintf(stderr, "hwid token create: wrote %ld of %ld tokens (profile %s) to %s before the "
                        "failure below; they are valid\n", got, o->count, o->profile, o->out);
        return r;
}

/* Asks for n tokens; appends each "<id>.<secret>\n" to out. */
static int ask_batch(admin_conn *conn, const token_opts *o, long n, buf *out) {
        _cleanup_(json_object_putp) json_object *body = json_object_new_object(), *answer = NULL;
        json_object *list, *tok;
        int r;

        if (!body)
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_set_str(body, "profile", o->profile);
        json_set_str(body, "name_pattern", o->pattern);
        json_set_str(body, "description", o->description);
        json_object_object_add(body, "ttl", json_object_new_int64(o->ttl));
        json_object_object_add(body, "uses", json_object_new_int64(o->uses));
        json_object_object_add(body, "count", json_object_new_int64(n));
        if ((r = admin_conn_call(conn, "POST", "/v1/admin/tokens", body, &answer)) < 0 ||
            (r = answer_list(answer, "tokens", &list)) < 0)
                return r;
        for (size_t i = 0; i < json_object_array_length(list); i++) {
                json_object *item = json_object_array_get_idx(list, i);
                if (r >= 0 && (!json_object_object_get_ex(item, "token", &tok) ||
                               !json_object_is_type(tok, json_type_string)))
                        r = hwid_fail(HWID_E_INVALID, "the server's answer holds a token without its secret");
                if (r >= 0)
                        r = buf_printf(out, "%s\n", json_object_get_string(tok));
                json_wipe_string(tok);
        }
        if (r >= 0 && json_object_array_length(list) != (size_t) n)
                r = hwid_fail(HWID_E_INVALID, "the server returned %zu tokens, not %ld", json_object_array_length(list), n);
        return r;
}

/* --count N: N tokens to --out, asked for TOKEN_BATCH at a time; those
 * made before a failure are written all the same. */
static int create_many(admin_conn *conn, const token_opts *o) {
        _cleanup_buf_ buf out;
        long left = o->count;
        int r = 0;

        buf_init(&out, (size_t) o->count * 96 + 1);
        for (long n; r >= 0 && left > 0; left -= n) {
                n = left > TOKEN_BATCH ? TOKEN_BATCH : left;
                r = ask_batch(conn, o, n, &out);
        }
        return write_tokens(o, &out, r);
}

/* One token, and the command that joins a device with it. */
static int create_one(admin_conn *conn, const token_opts *o) {
        _cleanup_buf_ buf tok;
        const char *pin;
        int r;

        buf_init(&tok, 128);
        if ((r = admin_conn_ca_pin(conn, &pin)) < 0 || (r = ask_batch(conn, o, 1, &tok)) < 0) {
                buf_wipe(&tok);
                return r;
        }
        tok.data[strcspn((char *) tok.data, "\n")] = '\0';
        print_join(admin_conn_servers(conn), o, (char *) tok.data, pin);
        buf_wipe(&tok);
        return 0;
}

int cmd_token_create(int argc, char **argv) {
        _cleanup_(admin_conn_freep) admin_conn *conn = NULL;
        token_opts o;
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        if ((r = admin_conn_open("token create", &o.remote, o.config, ADMIN_CONN_TOKEN_KEY, &conn)) >= 0)
                r = o.count ? create_many(conn, &o) : create_one(conn, &o);
        return r < 0 ? cli_fail(r) : 0;
}
