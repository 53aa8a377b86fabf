/* main() of hwid and of hwid-admin: a table of commands ("key create",
 * "join"), --help listing them, --version, and the command argv names
 * run with the arguments that follow it. */
#pragma once

#include <stddef.h>
#include <stdio.h>

typedef struct cli_command {
        const char *group; /* NULL for top-level commands */
        const char *name;
        int (*run)(int argc, char **argv);
        const char *summary;
} cli_command;

typedef struct cli_program {
        const char *name;           /* "hwid" */
        const char *about;          /* the help's paragraph under its usage line */
        const char *more;           /* the help's paragraphs after the commands */
        const cli_command *commands;
        size_t n_commands;
} cli_program;

/* Runs the command argv names; returns the process exit code. */
int cli_main(const cli_program *p, int argc, char **argv);
/* The whole command line cli_main() was given (NULL-terminated). */
char **cli_argv(void);
