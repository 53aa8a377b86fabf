/* getopt-spy: an LD_PRELOAD library that records the option table a
 * program hands to getopt_long(), then lets the real getopt_long() run.
 *
 *   HWID_GETOPT_SPY=/path/file   where to append the record (required)
 *
 * The first call of a process appends:
 *   short OPTSTRING
 *   long NAME HAS_ARG VAL    (one line per entry of the table; VAL the
 *                            character it returns, or its number)
 *   end
 * so that tests/integration/cli-help.sh can compare what a command really
 * accepts with what its --help says, without reading the C sources. */
#include <dlfcn.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*getopt_long_fn)(int, char *const *, const char *, const struct option *, int *);

static bool recorded;

static void record(const char *optstring, const struct option *longopts) {
        const char *path = getenv("HWID_GETOPT_SPY");
        FILE *f;

        recorded = true;
        if (!path || !(f = fopen(path, "ae")))
                return;
        fprintf(f, "short %s\n", optstring ? optstring : "");
        for (const struct option *o = longopts; o && o->name; o++)
                if (o->flag || o->val <= ' ' || o->val > '~')
                        fprintf(f, "long %s %d %d\n", o->name, o->has_arg, o->val);
                else
                        fprintf(f, "long %s %d %c\n", o->name, o->has_arg, o->val);
        fprintf(f, "end\n");
        fclose(f);
}

int getopt_long(int argc, char *const *argv, const char *optstring, const struct option *longopts, int *longindex) {
        static getopt_long_fn real;

        if (!real)
                real = (getopt_long_fn) dlsym(RTLD_NEXT, "getopt_long");
        if (!recorded)
                record(optstring, longopts);
        return real(argc, argv, optstring, longopts, longindex);
}
