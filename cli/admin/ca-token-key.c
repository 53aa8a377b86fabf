/* hwid ca token-key: the CA's token key (ca.token_key), the HMAC key in
 * the HSM/TPM that bootstrap tokens are derived with, for a CA made
 * before hwid ca init made one (or to put it elsewhere). */
#include <getopt.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ca-setup.h"
#include "cli.h"
#include "error.h"
#include "host-cmd.h"
#include "secret.h"
#include "token.h"

typedef struct token_key_opts {
        const char *config, *key;
        bool force;
} token_key_opts;

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid ca token-key [--config FILE] [--key URI] [--force]\n\n"
                   "Makes the CA's token key, the HMAC-SHA256 key inside the HSM/TPM that bootstrap\n"
                   "tokens are derived with (ca.token_key, docs/CONFIG.md), or uses the one already\n"
                   "there, and shows its custody as the device reports it.  By default it is the\n"
                   "configuration's ca.token_key, else next to the CA key: in the CA key's PKCS#11\n"
                   "token labelled '<CA key's label>-tokens', or for a TPM CA key the key file\n"
                   "tokens.tss2.pem beside the configuration.  Prints the line to add under ca: in\n"
                   "the configuration; then restart hwidd.  Tokens made before keep working until\n"
                   "they expire.\n\n"
                   CONFIG_HELP
                   "  -k, --key URI        the token key's URI instead (pkcs11:... or tpm2:...)\n"
                   "  -f, --force          replace a key already at that URI: every token derived with\n"
                   "                       it stops working\n");
}

static int parse(int argc, char **argv, token_key_opts *o) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' }, { "key", required_argument, NULL, 'k' },
                { "force", no_argument, NULL, 'f' },        { "help", no_argument, NULL, 'h' },
                {},
        };
        int c;

        *o = (token_key_opts) { 0 };
        while ((c = getopt_long(argc, argv, "c:k:fh", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': o->config = optarg; break;
                case 'k': o->key = optarg; break;
                case 'f': o->force = true; break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("ca token-key", argv);
                }
        }
        if (optind != argc)
                return cli_usage("ca token-key", "unexpected argument '%s'", argv[optind]);
        return 0;
}

/* --key, else the configuration's, else next to the CA key. */
static int key_uri(const token_key_opts *o, const hwidd_config *cfg, char **ret) {
        _cleanup_free_ char *abs = NULL;

        if (o->key || cfg->token_key)
                return (*ret = strdup(o->key ? o->key : cfg->token_key)) ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        if (!(abs = realpath(cfg->path, NULL)))
                return hwid_fail(HWID_E_IO, "cannot resolve %s", cfg->path);
        return ca_token_key_uri(cfg->ca_key, dirname(abs), ret);
}

int cmd_ca_token_key(int argc, char **argv) {
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(hwid_mac_key_freep) hwid_mac_key *k = NULL;
        _cleanup_secret_ char *uri = NULL; /* may hold a pin-value */
        token_key_opts o;
        hwid_custody c;
        hsm_options ho;
        bool created = true;
        int r;

        if ((r = parse(argc, argv, &o)) != 0)
                return r;
        if ((r = config_load(admin_config_path(o.config), &cfg)) < 0 || (r = key_uri(&o, cfg, &uri)) < 0)
                return cli_fail(r);
        cli_hsm_options(&ho, cfg->tcti);
        if (strncmp(uri, "tpm2:", 5) == 0 && (r = cli_tpm_reachable("ca token-key", &ho)) < 0)
                return cli_fail(r);
        r = o.force ? hwid_mac_key_create(uri, true, &ho, &k) : ca_mac_key_open_or_create(uri, &ho, &k, &created);
        cli_tpm_done();
        if (r < 0 || (r = token_key_check(k, &c)) < 0)
                return cli_fail(r);
        printf("%s the token key %s\n", created ? "created" : "using", hwid_mac_key_uri(k));
        cli_print_custody(&c);
        if (cfg->token_key && strcmp(cfg->token_key, uri) == 0) {
                printf("%s names it (ca.token_key)%s\n", cfg->path,
                       created ? "; restart hwidd: tokens derived with the old key no longer work" : "");
                return 0;
        }
        printf("\nAdd this line under ca: in %s, then restart hwidd (every replica: each one's HSM\n"
               "must hold this key, as it holds the CA key):\n  token_key: \"%s\"\n", cfg->path,
               hwid_mac_key_uri(k));
        return 0;
}
