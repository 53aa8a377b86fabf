/* main() of hwid and of hwid-admin (cli-main.h). */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cli-main.h"
#include "cli.h"

static char **whole_argv;

char **cli_argv(void) {
        return whole_argv;
}

static void help(const cli_program *p, FILE *f) {
        fprintf(f, "Usage: %s COMMAND [ARGS...]\n\n%s\n\nCommands:\n", p->name, p->about);
        for (size_t i = 0; i < p->n_commands; i++) {
                const cli_command *c = &p->commands[i];
                char full[64];

                snprintf(full, sizeof(full), "%s%s%s", c->group ? c->group : "", c->group ? " " : "", c->name);
                fprintf(f, "  %-16s %s\n", full, c->summary);
        }
        fprintf(f, "\n%s", p->more);
}

static const cli_command *find(const cli_program *p, const char *group, const char *name) {
        for (size_t i = 0; i < p->n_commands; i++) {
                const cli_command *c = &p->commands[i];
                if (c->group ? (group && name && strcmp(c->group, group) == 0 && strcmp(c->name, name) == 0)
                             : (strcmp(c->name, group) == 0))
                        return c;
        }
        return NULL;
}

static int group_usage(const cli_program *p, const char *group) {
        fprintf(stderr, "%s %s: needs a subcommand:", p->name, group);
        for (size_t i = 0; i < p->n_commands; i++)
                if (p->commands[i].group && strcmp(p->commands[i].group, group) == 0)
                        fprintf(stderr, " %s", p->commands[i].name);
        fprintf(stderr, " (see %s --help)\n", p->name);
        return EXIT_USAGE;
}

static bool is_group(const cli_program *p, const char *s) {
        for (size_t i = 0; i < p->n_commands; i++)
                if (p->commands[i].group && strcmp(p->commands[i].group, s) == 0)
                        return true;
        return false;
}

int cli_main(const cli_program *p, int argc, char **argv) {
        const cli_command *c;

        whole_argv = argv;
        /* tpm2-tss prints its own warnings to stderr; hwid reports every
         * failure itself in one line, so silence it unless asked for. */
        setenv("TSS2_LOG", "all+NONE", 0);
        opterr = 0; /* every usage error is one line, printed by cli_usage() */
        if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
                help(p, argc < 2 ? stderr : stdout);
                return argc < 2 ? EXIT_USAGE : 0;
        }
        if (strcmp(argv[1], "--version") == 0) {
                printf("%s %s\n", p->name, HWID_VERSION);
                return 0;
        }
        if (is_group(p, argv[1])) {
                c = argc > 2 ? find(p, argv[1], argv[2]) : NULL;
                if (!c)
                        return group_usage(p, argv[1]);
                return c->run(argc - 2, argv + 2);
        }
        c = find(p, argv[1], NULL);
        if (!c) {
                fprintf(stderr, "%s: unknown command '%s' (see %s --help)\n", p->name, argv[1], p->name);
                return EXIT_USAGE;
        }
        return c->run(argc - 1, argv + 1);
}
