/* hwid agent --dir DIR: renew before expiry, forever (or --once); with
 * --config, serve workloads on Unix sockets meanwhile. */
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "cli.h"
#include "device-cmd.h"
#include "error.h"
#include "log.h"
#include "renew.h"
#include "workload.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid agent --dir DIR [--tcti TCTI] [--renew-at 0.66] [--jitter 0.05]\n"
                   "                  [--min-backoff 5s] [--max-backoff 10m] [--clock-skew 5m]\n"
                   "                  [--config FILE] [--once] [--no-reenroll] [--verbose]\n\n"
                   "Keeps the identity in DIR renewed, unattended: renews at --renew-at of the\n"
                   "certificate's lifetime plus a random --jitter (never before the server's renewal\n"
                   "window opens), over mutual TLS with the key in the TPM/HSM.  A failed renewal is\n"
                   "retried with exponential backoff between --min-backoff and --max-backoff, capped at\n"
                   "a quarter of the remaining lifetime so that a retry still comes before expiry.\n"
                   "Each renewal fails over between the servers of DIR/device.json as hwid renew does.\n"
                   "Refused for good (expired, superseded), a device with a TPM key first tries to come\n"
                   "back by TPM attestation alone, without a token, where the CA's profile allows it\n"
                   "(reenroll_by_attestation, docs/ATTESTATION.md); with backoff while the CA or the\n"
                   "TPM is away; refused, it exits 4.\n"
                   "SIGTERM or SIGINT stop it (exit 0), never in the middle of a renewal.\n"
                   "One log line per event on stderr (journald priorities under systemd).\n\n"
                   "With --config, it also serves programs on this device, over Unix sockets (HTTP,\n"
                   "JSON): GET /v1/certificate (the certificate and its chain) and\n"
                   "GET /v1/token?audience=AUD (a JWT signed by the device key, made once per audience\n"
                   "and handed out again until a part of its lifetime has passed, or the certificate\n"
                   "was renewed), to the uids and groups the file allows (SO_PEERCRED; others get 403).\n\n"
                   "  -d, --dir DIR            the identity (written by hwid join)\n"
                   "      --tcti TCTI          TPM to use (default $HWID_TCTI, else the tpm2-tss default)\n"
                   "      --renew-at F         fraction of the lifetime, in (0, 1) (default 0.66); counted\n"
                   "                           from when the certificate arrived if notBefore is earlier\n"
                   "      --jitter F           random extra fraction, 0..1 (default 0.05)\n"
                   "      --min-backoff D      first retry delay (default 5s)\n"
                   "      --max-backoff D      longest retry delay (default 10m)\n"
                   "      --config FILE        the agent's configuration (JSON): the workload sockets\n"
                   "                           (docs/DEVICE.md); read once, at start\n"
                   "      --once               exit 0 after the first successful renewal\n"
                   "      --no-reenroll        refused for good, exit 4 at once (no try by attestation)\n"
                   "      --clock-skew D       how far the clocks of this device and the CA may differ\n"
                   "                           before a certificate's dates are called wrong (default 5m)\n"
                   "  -v, --verbose            also log each step of a renewal\n"
                   "  -h, --help               show this help\n\n"
                   "Exit codes: 0 stopped (or --once done), 1 failure (DIR not enrolled, --config\n"
                   "            refused, a socket that cannot be made), 2 usage,\n"
                   "            4 revoked or expired (and not let back by attestation): bootstrap again\n"
                   "            with hwid join and a new token.\n");
}

static sigset_t stop_signals;
/* Renewals and workload signatures take turns at the TPM (agent.h). */
static pthread_mutex_t tpm_turn = PTHREAD_MUTEX_INITIALIZER;

static void on_log(void *ud, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void on_log(void *ud, int level, const char *fmt, ...) {
        char line[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        log_msg(level, "%s", line);
}

static void on_progress(void *ud, const char *message) {
        log_debug("%s", message);
}

/* SIGTERM/SIGINT stay blocked, so they only take effect here: while
 * waiting, never during a renewal (they stay pending until then). */
static bool on_wait(void *ud, int64_t seconds) {
        struct timespec ts = { .tv_sec = seconds > 0 ? (time_t) seconds : 0 };
        siginfo_t si;
        int sig = sigtimedwait(&stop_signals, &si, &ts);

        if (sig > 0)
                log_info("received %s", strsignal(sig));
        return sig > 0;
}

static int parse_fraction(const char *opt, const char *s, double *ret) {
        char *end;
        double v = strtod(s, &end);

        if (end == s || *end || !isfinite(v) || v < 0 || v >= 1)
                return cli_usage("agent", "%s must be a fraction in [0, 1), not '%s'", opt, s);
        *ret = v;
        return 0;
}

static int parse(int argc, char **argv, agent_opts *o, const char **ret_config) {
        static const struct option opts[] = {
                { "dir", required_argument, NULL, 'd' }, { "tcti", required_argument, NULL, 'T' },
                { "renew-at", required_argument, NULL, 'r' }, { "jitter", required_argument, NULL, 'j' },
                { "min-backoff", required_argument, NULL, 'm' }, { "max-backoff", required_argument, NULL, 'M' },
                { "clock-skew", required_argument, NULL, 'K' }, { "config", required_argument, NULL, 'c' },
                { "once", no_argument, NULL, '1' }, { "verbose", no_argument, NULL, 'v' },
                { "no-reenroll", no_argument, NULL, 'N' },
                { "help", no_argument, NULL, 'h' }, {},
        };
        int c, r = 0;

        while (r == 0 && (c = getopt_long(argc, argv, "d:vh", opts, NULL)) >= 0) {
                switch (c) {
                case 'd': o->dir = optarg; break;
                case 'T': o->tcti = optarg; break;
                case 'r': r = parse_fraction("--renew-at", optarg, &o->renew_at); break;
                case 'j': r = parse_fraction("--jitter", optarg, &o->jitter); break;
                case 'm': r = cli_duration("agent", "--min-backoff", optarg, 1, &o->min_backoff); break;
                case 'M': r = cli_duration("agent", "--max-backoff", optarg, 1, &o->max_backoff); break;
                case 'K': r = cli_duration("agent", "--clock-skew", optarg, 0, &o->clock_skew); break;
                case 'c': *ret_config = optarg; break;
                case '1': o->once = true; break;
                case 'N': o->no_reenroll = true; break;
                case 'v': log_set_max_level(LOG_LVL_DEBUG); break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("agent", argv);
                }
        }
        if (r != 0)
                return r;
        if (!o->dir || optind != argc)
                return cli_usage("agent", "needs --dir DIR");
        if (o->renew_at <= 0)
                return cli_usage("agent", "--renew-at must be above 0");
        if (o->renew_at + o->jitter >= 1)
                return cli_usage("agent", "--renew-at plus --jitter must stay below 1");
        if (o->min_backoff > o->max_backoff)
                return cli_usage("agent", "--min-backoff is longer than --max-backoff");
        return 0;
}

/* The workload sockets of --config, served from now until the agent stops. */
static int serve_workloads(const agent_opts *o, const char *config, workload_conf **ret_conf,
                           workload_server **ret_srv) {
        _cleanup_(workload_conf_freep) workload_conf *conf = NULL;
        workload_opts wo;
        int r;

        if (!config)
                return 0;
        if ((r = workload_conf_load(config, &conf)) < 0)
                return r;
        /* A workload that hangs up early must not end the agent. */
        signal(SIGPIPE, SIG_IGN);
        wo = (workload_opts) { .dir = o->dir, .tcti = o->tcti, .conf = conf, .tpm_turn = o->tpm_turn,
                               .log = on_log };
        if ((r = workload_server_start(&wo, ret_srv)) < 0)
                return r;
        *ret_conf = TAKE_PTR(conf);
        return 0;
}

int cmd_agent(int argc, char **argv) {
        agent_opts o = {
                .renew_at = AGENT_RENEW_AT_DEFAULT, .jitter = AGENT_JITTER_DEFAULT,
                .min_backoff = AGENT_MIN_BACKOFF_DEFAULT, .max_backoff = AGENT_MAX_BACKOFF_DEFAULT,
                .clock_skew = DEVICE_CLOCK_SKEW_DEFAULT,
                .http_timeout = 30, .tpm_turn = &tpm_turn,
                .log = on_log, .wait = on_wait, .progress = on_progress,
        };
        _cleanup_(workload_conf_freep) workload_conf *conf = NULL;
        workload_server *srv = NULL;
        const char *config = NULL;
        int r;

        log_init("hwid agent");
        if ((r = parse(argc, argv, &o, &config)) != 0)
                return r;
        /* Blocked before any thread starts, so that every thread inherits it. */
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGTERM);
        sigaddset(&stop_signals, SIGINT);
        sigprocmask(SIG_BLOCK, &stop_signals, NULL);
        if ((r = serve_workloads(&o, config, &conf, &srv)) < 0)
                return cli_fail(r);
        log_info("watching %s (renew at %.0f%% of the lifetime, +%.0f%% jitter; backoff %llds..%llds)", o.dir,
                 o.renew_at * 100, o.jitter * 100, (long long) o.min_backoff, (long long) o.max_backoff);
        r = agent_run(&o);
        workload_server_stop(srv);
        if (r < 0)
                return renew_needs_bootstrap(r) ? EXIT_BOOTSTRAP : hwid_err_exit_code(r);
        return 0;
}
