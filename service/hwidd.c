/* hwidd: the CA service.  hwidd --config FILE [--listen ADDR:PORT] */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "api.h"
#include "ca.h"
#include "config.h"
#include "error.h"
#include "fsutil.h"
#include "http.h"
#include "log.h"
#include "secret.h"
#include "store.h"

#define TLS_PEM_MAX (256 * 1024)
#define FD_RESERVE 2048 /* the plain listener (PLAIN_MAX_CONNECTIONS), the store, the HSM */
#define PLAIN_MAX_CONNECTIONS 1024

typedef struct hwidd_args {
        const char *config;
        const char *listen;
        bool check;
} hwidd_args;

static void usage(FILE *f) {
        fprintf(f, "Usage: hwidd --config FILE [--listen ADDR:PORT] [--check]\n\n"
                   "The hwid CA service: enrollment with bootstrap tokens, renewal over mutual TLS,\n"
                   "revocation and the CRL, with the CA key in an HSM or TPM.\n\n"
                   "  -c, --config FILE     configuration (YAML; see docs/CONFIG.md)\n"
                   "  -l, --listen ADDR:PORT  override the configured listen address\n"
                   "      --check           validate the configuration and keys, then exit\n"
                   "  -h, --help            show this help\n"
                   "      --version         show the version\n\n"
                   "Signals: SIGTERM/SIGINT finish in-flight requests and stop; SIGHUP reloads the\n"
                   "configuration: profiles, policy, ca.crl_url, ca.crl_validity, ca.ocsp_url,\n"
                   "ca.ocsp_validity and clock_skew apply at once, the rest needs a restart (a broken\n"
                   "file is refused and the old one stays).\n");
}

static int parse_args(int argc, char **argv, hwidd_args *a) {
        static const struct option opts[] = {
                { "config", required_argument, NULL, 'c' },
                { "listen", required_argument, NULL, 'l' },
                { "check", no_argument, NULL, 'C' },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:l:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': a->config = optarg; break;
                case 'l': a->listen = optarg; break;
                case 'C': a->check = true; break;
                case 'h': usage(stdout); exit(0);
                case 'V': printf("hwidd %s\n", HWID_VERSION); exit(0);
                default: return -1;
                }
        }
        if (!a->config || optind != argc)
                return -1;
        return 0;
}

/* SIGHUP: load the file again; adopt its policy only if it is valid. */
static void reload(ca_service *ca, const char *path) {
        hwidd_config *fresh = NULL;
        int r = config_load(path, &fresh);

        if (r < 0) {
                log_error("reload refused, keeping the old policy: %s", hwid_strerror(r));
                return;
        }
        if (policy_audit_only(fresh->policy))
                log_warning("AUDIT-ONLY MODE: policy denials are logged as 'would-deny' and allowed");
        config_free(ca_service_set_config(ca, fresh));
        log_notice("policy reloaded from %s: profiles, policy, attestation, ca.crl_url, ca.crl_validity, ca.ocsp_url, "
                   "ca.ocsp_validity and clock_skew apply now; listen, http_listen, limits, tcti, database, database_connections, keys and "
                   "certificates need a restart",
                   path);
}

/* The optional plain-HTTP listener: GET /crl, GET /ca and OCSP only, for
 * relying parties that fetch a CRL distribution point or ask the OCSP
 * responder without TLS (RFC 5280 and RFC 6960 practice; OpenSSL's
 * -crl_download and nginx's ssl_ocsp speak HTTP only). */
static int serve_plain(const hwidd_config *cfg, const http_options *tls_opts, api *doors, http_server **ret) {
        http_options o = *tls_opts;
        int r;

        *ret = NULL;
        if (!cfg->http_listen)
                return 0;
        o.listen = cfg->http_listen;
        o.tls_key = NULL;
        o.tls_cert_pem = NULL;
        o.client_ca_pem = NULL;
        o.on_tls_failure = NULL;
        /* Relying parties fetching a CRL: a small budget of its own. */
        if (o.max_connections > PLAIN_MAX_CONNECTIONS)
                o.max_connections = PLAIN_MAX_CONNECTIONS;
        o.workers = 4;
        if ((r = http_server_start(&o, api_handle_public, doors, ret)) < 0)
                return r;
        log_notice("serving GET /crl and GET /ca on http://%s (port %d), and OCSP at /ocsp", cfg->http_listen,
                   http_server_port(*ret));
        return 0;
}

/* Every connection is a file descriptor: the soft limit goes up to the
 * hard one (systemd's unit sets LimitNOFILE), and max_connections comes
 * down to what it allows, with room for the store, the HSM and the plain
 * listener.  At the limit itself the kernel keeps new connections in the
 * listen queue until one closes (libmicrohttpd stops accepting). */

static unsigned fit_connections(unsigned want) {
        struct rlimit rl;
        rlim_t room;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return want;
        if (rl.rlim_cur < rl.rlim_max) {
                rlim_t was = rl.rlim_cur;
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        rl.rlim_cur = was;
        }
        room = rl.rlim_cur > FD_RESERVE * 2 ? rl.rlim_cur - FD_RESERVE : rl.rlim_cur / 2;
        room -= room / 64 > 64 ? room / 64 : 64; /* the transport's slack for closing connections */
        if (rl.rlim_cur == RLIM_INFINITY || (rlim_t) want <= room)
                return want;
        log_warning("limits.max_connections %u is more than %llu open files allow (RLIMIT_NOFILE %llu): "
                    "serving %llu connections at most; raise LimitNOFILE (systemd) or ulimit -n",
                    want, (unsigned long long) room, (unsigned long long) rl.rlim_cur, (unsigned long long) room);
        return (unsigned) room;
}

/* A failed TLS handshake: one line each, at most 10 a second (a scanner
 * would fill the log), the rest counted into the next line. */
static void on_tls_failure(void *userdata, const char *peer, const char *why) {
        static _Atomic int64_t second;
        static atomic_uint in_second, dropped;
        int64_t now = (int64_t) time(NULL), was = atomic_load(&second);
        unsigned n;

        if (now != was && atomic_compare_exchange_strong(&second, &was, now))
                atomic_store(&in_second, 0);
        if (atomic_fetch_add(&in_second, 1) >= 10) {
                atomic_fetch_add(&dropped, 1);
                return;
        }
        n = atomic_exchange(&dropped, 0);
        if (n)
                log_notice("TLS handshake from %s refused: %s (and %u more not logged)", peer, why, n);
        else
                log_notice("TLS handshake from %s refused: %s", peer, why);
}

/* The CA's generations changed (a rollover): the listener's chain gets
 * the link of hwidd's certificate to the other CA, and its clients the
 * new CA's certificates, for the handshakes from now on. */
static void follow_generations(ca_service *ca, http_server *srv, int64_t *seen) {
        _cleanup_free_ char *chain = NULL;
        int r;

        if (ca_service_generations(ca) == *seen)
                return;
        *seen = ca_service_generations(ca);
        if ((r = ca_service_tls_chain(ca, &chain)) >= 0)
                r = http_server_set_certs(srv, chain, ca_service_client_ca_pem(ca));
        if (r < 0)
                log_error("cannot give the TLS listener the CA generations' certificates: %s", hwid_strerror(r));
        else
                log_notice("TLS: the certificate chain and the client CAs follow the CA generations now served");
}

static int serve(hwidd_config *cfg, const char *path, hwid_key *tls_key, const char *tls_chain, ca_service *ca,
                 sigset_t *sigs) {
        http_options o = {
                .listen = cfg->listen, .tls_key = tls_key, .tls_cert_pem = tls_chain,
                .client_ca_pem = ca_service_client_ca_pem(ca), .max_body = cfg->max_body,
                .max_header = cfg->max_header, .timeout = cfg->timeout,
                .max_connections = fit_connections(cfg->max_connections),
                .max_connections_per_ip = cfg->max_connections_per_ip,
                .handshake_cap = cfg->handshake_cap, .handshake_timeout = cfg->handshake_timeout,
                .workers = cfg->workers,
                .rate_per_ip = cfg->rate_per_ip, .rate_burst = cfg->rate_burst,
                .on_refusal = api_on_refusal, .on_tls_failure = on_tls_failure,
        };
        _cleanup_(api_freep) api *doors = NULL;
        http_server *srv = NULL, *plain = NULL;
        int64_t seen = ca_service_generations(ca);
        int r, sig;

        if ((r = api_new(ca, &doors)) < 0)
                return r;
        /* What was appended while hwidd was down (the CLI's records), signed
         * before any request: the interval of the next starts here. */
        ca_service_checkpoint(ca, (int64_t) time(NULL));
        if ((r = http_server_start(&o, api_handle, doors, &srv)) < 0)
                return r;
        if ((r = serve_plain(cfg, &o, doors, &plain)) < 0) {
                http_server_stop(srv);
                return r;
        }
        api_set_transport(doors, srv);
        log_notice("listening on https://%s (port %d)", cfg->listen, http_server_port(srv));
        for (;;) {
                /* Woken once a second for housekeeping when no signal comes. */
                sig = sigtimedwait(sigs, NULL, &(struct timespec) { .tv_sec = 1 });
                if (sig < 0) {
                        ca_service_tick(ca, (int64_t) time(NULL));
                        follow_generations(ca, srv, &seen);
                        continue;
                }
                if (sig == SIGHUP) {
                        reload(ca, path);
                        continue;
                }
                log_notice("%s: finishing in-flight requests", strsignal(sig));
                break;
        }
        http_server_stop(plain);
        http_server_stop(srv); /* its requests finish first: then nothing reads it */
        api_set_transport(doors, NULL);
        /* Nothing is appended any more: the head as it is, signed. */
        ca_service_checkpoint(ca, (int64_t) time(NULL));
        return 0;
}

static int run(const hwidd_args *a, sigset_t *sigs) {
        _cleanup_close_ int claim = -1; /* declared first: released after the store is closed */
        _cleanup_(config_freep) hwidd_config *cfg = NULL;
        _cleanup_(ca_service_freep) ca_service *ca = NULL;
        _cleanup_(hwid_key_freep) hwid_key *tls_key = NULL;
        _cleanup_free_ char *tls_pem = NULL, *tls_chain = NULL, *path = NULL; /* cfg may be replaced by a reload */
        hsm_options ho;
        size_t len;
        int r;

        if ((r = config_load(a->config, &cfg)) < 0)
                return r;
        if (!(path = strdup(cfg->path)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (a->listen) {
                free(cfg->listen);
                if (!(cfg->listen = strdup(a->listen)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (policy_audit_only(cfg->policy))
                log_warning("AUDIT-ONLY MODE: policy denials are logged as 'would-deny' and allowed");
        ho = (hsm_options) { .tcti = cfg->tcti };
        /* hwid ca restore refuses while this claim is held. */
        if ((r = store_claim(cfg->database, false, &claim)) < 0)
                return r;
        if ((r = hsm_init()) < 0 || (r = ca_service_new(cfg, &ca)) < 0 ||
            (r = hwid_key_open(cfg->tls_key, &ho, &tls_key)) < 0 ||
            (r = read_file_capped(cfg->tls_cert, TLS_PEM_MAX, &tls_pem, &len)) < 0 ||
            (r = ca_service_set_tls(ca, tls_key, tls_pem)) < 0 || (r = ca_service_tls_chain(ca, &tls_chain)) < 0)
                return r;
        if (a->check) {
                printf("configuration %s and keys are usable\n", cfg->path);
                return 0;
        }
        r = serve(cfg, path, tls_key, tls_chain, ca, sigs);
        /* From serve() on, the service owns the config: a reload frees the
         * one it replaces.  Take back whichever is current. */
        cfg = ca_service_set_config(ca, NULL);
        return r;
}

int main(int argc, char **argv) {
        hwidd_args a = { 0 };
        sigset_t sigs;
        int r;

        log_init("hwidd");
        /* hwidd holds PINs and tokens: no core dumps, not dumpable. */
        if ((r = secret_protect_process()) < 0) {
                log_error("%s", hwid_strerror(r));
                return 1;
        }
        setenv("TSS2_LOG", "all+NONE", 0);
        if (parse_args(argc, argv, &a) < 0) {
                fprintf(stderr, "hwidd: needs --config FILE (see hwidd --help)\n");
                return 2;
        }
        /* Signals are taken synchronously by the main thread; block them
         * before any worker thread exists so that none inherits them. */
        sigemptyset(&sigs);
        sigaddset(&sigs, SIGTERM);
        sigaddset(&sigs, SIGINT);
        sigaddset(&sigs, SIGHUP);
        pthread_sigmask(SIG_BLOCK, &sigs, NULL);
        signal(SIGPIPE, SIG_IGN);
        r = run(&a, &sigs);
        if (r < 0) {
                log_error("%s", hwid_strerror(r));
                return 1;
        }
        return 0;
}
