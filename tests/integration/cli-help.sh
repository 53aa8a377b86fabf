#!/bin/bash
# cli-help.sh — every hwid command's --help describes every option the
# command accepts, and no option it does not.
# The option table is the one the command really hands to getopt_long(),
# recorded at run time by tests/getopt-spy.so (LD_PRELOAD), not read from
# the sources. The commands are the ones `hwid --help` lists.
# Proves, for each command:
#   - `hwid CMD --help` exits 0 and prints its usage on stdout;
#   - each long option of its table (but --help) is described in the
#     help's option list (a line "  -x, --name ..." or "      --name ...");
#     a mention in the synopsis or the prose is not enough;
#   - each short option of its option string (but -h) is described, paired
#     with the long option that returns the same letter;
#   - each option the option list describes is in the table.
#   - the same for certmonger's CA helper (libexec's certmonger-submit);
#   - the check catches a help line taken out (it is not vacuous).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=help-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/help-lib.sh"

: "${HWID_GETOPT_SPY_LIB:?the getopt spy library (tests/getopt-spy.so) is not set}"
[ -f "$HWID_GETOPT_SPY_LIB" ] || fail "no getopt spy at $HWID_GETOPT_SPY_LIB"

# help_of CMD — the help text in $T/help.out, the table in $T/spy.
help_of() {
        local cmd=$1 rc=0
        : >"$T/spy"
        # shellcheck disable=SC2086  # CMD is one or two words
        HWID_GETOPT_SPY=$T/spy LD_PRELOAD=$HWID_GETOPT_SPY_LIB "$HWID" $cmd --help >"$T/help.out" 2>"$T/help.err" ||
                rc=$?
        assert_eq "$rc" 0 "exit code of hwid $cmd --help ($(head -n 3 "$T/help.err"))"
        grep -qE "^(Usage:)? +hwid $cmd( |$)" "$T/help.out" ||
                fail "hwid $cmd --help prints no usage: $(head -n 3 "$T/help.out")"
}

# problems_of CMD — what is wrong with CMD's help, one line per problem.
problems_of() {
        local cmd=$1 kind name has val short letter s l
        described "$T/help.out" >"$T/desc"
        short=$(sed -n 's/^short //p' "$T/spy" | tr -d ':')
        while read -r kind name has val; do
                [ "$kind" = long ] && [ "$name" != help ] || continue
                grep -qE "^[^ ]+ $name\$" "$T/desc" || { echo "omits --$name"; continue; }
                s=$(awk -v n="$name" '$2 == n { print $1 }' "$T/desc")
                if [[ $short == *"$val"* ]] && [ "${#val}" = 1 ]; then
                        [ "$s" = "$val" ] || echo "describes --$name without its short form -$val"
                elif [ "$s" != - ]; then
                        echo "describes --$name as -$s, which the command does not take for it"
                fi
        done <"$T/spy"
        for ((i = 0; i < ${#short}; i++)); do
                letter=${short:i:1}
                [ "$letter" = h ] || grep -q "^$letter " "$T/desc" || echo "omits -$letter"
        done
        while read -r s l; do
                [ "$l" = - ] || [ "$l" = help ] || grep -q "^long $l " "$T/spy" ||
                        echo "describes --$l, which it does not accept"
                [ "$s" = - ] || [ "$s" = h ] || [[ $short == *"$s"* ]] || echo "describes -$s, which it does not accept"
        done <"$T/desc"
}

CHECKED=0
PROBLEMS=()
mapfile -t CMDS < <(hwid_commands)
[ ${#CMDS[@]} -ge 20 ] || fail "hwid --help lists only ${#CMDS[@]} commands: ${CMDS[*]}"
for c in "${CMDS[@]}"; do
        help_of "$c"
        while read -r p; do
                PROBLEMS+=("hwid $c --help: $p")
        done < <(problems_of "$c")
        CHECKED=$((CHECKED + 1))
done
# certmonger's CA helper, a program of its own.
SUBMIT=${CERTMONGER_SUBMIT:-$BUILDDIR/cli/certmonger-submit}
: >"$T/spy"
HWID_GETOPT_SPY=$T/spy LD_PRELOAD=$HWID_GETOPT_SPY_LIB "$SUBMIT" --help >"$T/help.out" 2>"$T/help.err" ||
        fail "certmonger-submit --help failed: $(cat "$T/help.err")"
grep -qE "^Usage: certmonger-submit " "$T/help.out" || fail "certmonger-submit --help prints no usage"
while read -r p; do
        PROBLEMS+=("certmonger-submit --help: $p")
done < <(problems_of certmonger-submit)
[ ${#PROBLEMS[@]} -eq 0 ] || fail "$(printf '%s\n' "${PROBLEMS[@]}")"

# Not vacuous: hwid join's help without its --tcti line is caught.
help_of join
grep -qE '^ +--tcti ' "$T/help.out" || fail "hwid join --help has no --tcti line"
grep -vE '^ +--tcti ' "$T/help.out" >"$T/help.cut" && mv "$T/help.cut" "$T/help.out"
assert_contains "$(problems_of join)" "omits --tcti" "the check of a help without --tcti"
echo "cli-help: $CHECKED commands and certmonger-submit checked"
