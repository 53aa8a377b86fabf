/* cpu-passes — when a thread ran, pass by pass: for bench/stores.sh, the
 * passes of a kernel thread that stalls the whole machine while a paced
 * run measures latencies (this virtual machine's DAMON monitor, kdamond,
 * samples memory every 500 ms: docs/HA.md, "Latency at half the peak").
 *
 *   cpu-passes --pid PID [--interval-us N] [--gap-us G]
 *
 * Reads /proc/PID/schedstat (the thread's time on a CPU, in ns) every N
 * µs (default 2000) and prints a line "START END CPU_MS" for each pass --
 * reads that saw that time grow, less than G µs (default 50000) apart --
 * with START the read before the first that saw it grow and END the last
 * that did, in Unix time: the pass ran within [START, END + N µs].  Runs
 * until the thread is gone or a SIGTERM or SIGINT; each line is written
 * as its pass ends. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stopping;

static void on_signal(int sig) {
        (void) sig;
        stopping = 1;
}

static double unix_now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* The thread's time on a CPU so far (ns); false once it is gone. */
static bool cpu_ns(int fd, uint64_t *ret) {
        char buf[128];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

        if (n <= 0)
                return false;
        buf[n] = '\0';
        *ret = strtoull(buf, NULL, 10);
        return true;
}

static void pass_print(double start, double end, uint64_t cpu_ns_spent) {
        printf("%.4f %.4f %.3f\n", start, end, (double) cpu_ns_spent / 1e6);
}

static void usage(FILE *f) {
        fprintf(f, "usage: cpu-passes --pid PID [--interval-us N] [--gap-us G]\n"
                   "Prints \"START END CPU_MS\" (Unix time) for each pass of thread PID on a CPU,\n"
                   "reading /proc/PID/schedstat every N microseconds (default 2000); a pass ends\n"
                   "when its CPU time has not grown for G microseconds (default 50000).\n");
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "pid", required_argument, NULL, 'p' },
                { "interval-us", required_argument, NULL, 'i' },
                { "gap-us", required_argument, NULL, 'g' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        long pid = 0, interval_us = 2000, gap_us = 50000;
        uint64_t prev, now_cpu, pass_cpu = 0;
        double prev_t, pass_start = 0, pass_end = 0;
        bool in_pass = false;
        char path[64];
        int c, fd;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
                switch (c) {
                case 'p': pid = strtol(optarg, NULL, 10); break;
                case 'i': interval_us = strtol(optarg, NULL, 10); break;
                case 'g': gap_us = strtol(optarg, NULL, 10); break;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        if (pid <= 0 || interval_us < 100 || interval_us > 1000000 || gap_us < 0 || gap_us > 10000000) {
                usage(stderr);
                return 2;
        }
        snprintf(path, sizeof(path), "/proc/%ld/schedstat", pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || !cpu_ns(fd, &prev)) {
                fprintf(stderr, "cpu-passes: cannot read %s: %s\n", path, strerror(errno));
                return 1;
        }
        signal(SIGTERM, on_signal);
        signal(SIGINT, on_signal);
        setvbuf(stdout, NULL, _IOLBF, 0);
        prev_t = unix_now();
        while (!stopping) {
                struct timespec ts = { .tv_nsec = interval_us * 1000 };
                nanosleep(&ts, NULL);
                double t = unix_now();
                if (!cpu_ns(fd, &now_cpu))
                        break;
                if (now_cpu > prev) {
                        if (!in_pass) {
                                pass_start = prev_t;
                                pass_cpu = 0;
                        }
                        in_pass = true;
                        pass_end = t;
                        pass_cpu += now_cpu - prev;
                } else if (in_pass && (t - pass_end) * 1e6 >= (double) gap_us) {
                        pass_print(pass_start, pass_end, pass_cpu);
                        in_pass = false;
                }
                prev = now_cpu;
                prev_t = t;
        }
        if (in_pass)
                pass_print(pass_start, pass_end, pass_cpu);
        close(fd);
        return 0;
}
