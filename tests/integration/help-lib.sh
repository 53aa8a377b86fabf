# shellcheck shell=bash
# help-lib.sh — reading hwid's --help: the commands it lists and the options
# each command's help describes. Sourced by cli-help.sh (the help against the
# option table), install-man.sh (the man page against the help) and
# install-completion.sh (completion against the help).

# hwid_commands — the commands `hwid --help` lists ("key create", "join", ...).
hwid_commands() {
        "$HWID" --help | sed -n '/^Commands:$/,/^$/p' | sed -n 's/^  \([a-z]\+\( [a-z]\+\)\?\)  .*/\1/p'
}

# described HELP-FILE — the option list, one "SHORT LONG" per line ("-" for
# none): lines that start (after blanks) with -x, --name or -x, --name.
described() {
        sed -nE 's/^ +(-([a-zA-Z0-9]),? +)?--([a-z0-9-]+)([ =]|$).*/=\2 \3/p; s/^ +-([a-zA-Z0-9])( +[^-].*|)$/=\1 -/p' "$1" |
                sed -E 's/^= /=- /; s/^=//'
}
