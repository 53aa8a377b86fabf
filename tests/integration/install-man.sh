#!/bin/bash
# install-man.sh — the man pages the build makes (docs/meson.build, pandoc)
# describe what the programs accept, and render.
# Proves:
#   - hwid(1) has a section (".SS hwid CMD") for every command `hwid --help`
#     lists, and each option that command's --help describes is in that
#     section (its long form, and its short form when it has one); the
#     options of remote administration are in REMOTE ADMINISTRATION;
#   - hwidd(8)'s OPTIONS hold every option of `hwidd --help`, and
#     hwid-certmonger-submit(8)'s every option of certmonger-submit's;
#   - hwidd.yaml(5) is CONFIG.md: every key of CONFIG.md's tables is in it;
#   - man(1) renders the four pages, and groff warns of nothing in any
#     (all its warnings, -ww, and man --warnings) at 80 columns (what man
#     formats for when it writes to no terminal) and wider; a page with a
#     table too wide is caught (the check is not vacuous);
#   - the pages name the documentation where it is installed
#     (HWID_DOCDIR: the build's datadir/doc/hwid), not /usr/share/doc/hwid
#     when that is elsewhere;
#   - the check catches an option taken out of hwid(1) (it is not vacuous).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=help-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/help-lib.sh"

MANDIR=${HWID_MANDIR:-$BUILDDIR/docs}
PAGES=(hwid.1 hwidd.8 hwidd.yaml.5 hwid-certmonger-submit.8)
for p in "${PAGES[@]}"; do
        [ -s "$MANDIR/$p" ] || fail "no man page $MANDIR/$p (is pandoc installed? meson -Dman=enabled)"
done

# plain PAGE — the page's roff source without font changes and escapes.
plain() {
        sed -E 's/\\f\[[A-Z]*\]//g; s/\\f[BIRP]//g; s/\\-/-/g; s/\\\[aq\]/'"'"'/g; s/\\&//g; s/\\://g' "$1"
}

# part FILE START — the lines after the line START, up to the next heading
# of the same or a higher level (.SS ends at .SS or .SH, .SH at .SH).
part() {
        awk -v start="$2" '
                $0 == start { on = 1; lvl = substr(start, 1, 3); next }
                on && (/^\.SH / || (lvl == ".SS" && /^\.SS /)) { exit }
                on' "$1"
}

# has_option TEXT SHORT LONG — sets MISSING to the forms of the option (the
# long one, and the short one unless "-") that TEXT does not name as a
# whole word. In-process (bash's =~, no subshell): it runs for every option
# of every command.
has_option() {
        local text=$1 s=$2 l=$3 re
        MISSING=()
        if [ "$l" != - ]; then
                re="(^|[^a-z0-9-])--$l([^a-z0-9-]|\$)"
                [[ $text =~ $re ]] || MISSING+=("--$l")
        fi
        if [ "$s" != - ] && [ "$s" != h ]; then
                re="(^|[^a-zA-Z0-9-])-$s([^a-zA-Z0-9-]|\$)"
                [[ $text =~ $re ]] || MISSING+=("-$s")
        fi
}

# own_options HELP WORD — HELP's option lines, less those that say they are
# for other commands of a shared help ("-a, --all  list: every request" is
# not an option of hwid request deny); the remote block left out.
own_options() {
        local line desc fors re='^ +(-[a-zA-Z0-9],? +)?--?[a-z0-9-]+( [A-Z][A-Za-z:._|-]*)? +(.*)$'
        local for_re='(^|; )([a-z]+): (.*)$'
        while IFS= read -r line; do
                [[ $line == "Remote, against"* ]] && break
                if [[ $line =~ $re ]]; then
                        desc=${BASH_REMATCH[3]} fors=" "
                        while [[ $desc =~ $for_re ]]; do
                                fors+="${BASH_REMATCH[2]} " desc=${BASH_REMATCH[3]}
                        done
                        [ "$fors" = " " ] || [[ $fors == *" $2 "* ]] || continue
                fi
                printf '%s\n' "$line"
        done <"$1"
}

# man_problems PLAIN-HWID.1 — what hwid(1) misses, one line per problem.
man_problems() {
        local page=$1 c s l missing section remote MISSING
        part "$page" ".SH REMOTE ADMINISTRATION" >"$T/remote"
        for c in "${CMDS[@]}"; do
                part "$page" ".SS hwid $c" >"$T/section"
                [ -s "$T/section" ] || { echo "hwid(1) has no section for hwid $c"; continue; }
                own_options "$T/help/$c" "${c##* }" >"$T/own"
                sed -n '/^Remote, against/,$p' "$T/help/$c" >"$T/remote-help"
                section=$(<"$T/section") remote=$(<"$T/remote")
                while read -r s l; do
                        [ "$l" = help ] && continue
                        has_option "$section" "$s" "$l"
                        for missing in "${MISSING[@]}"; do
                                echo "hwid(1), hwid $c: $missing is not described"
                        done
                done < <(described "$T/own")
                while read -r s l; do
                        has_option "$remote" "$s" "$l"
                        for missing in "${MISSING[@]}"; do
                                echo "hwid(1), REMOTE ADMINISTRATION: $missing (hwid $c) is not described"
                        done
                done < <(described "$T/remote-help")
        done
}

mapfile -t CMDS < <(hwid_commands)
[ ${#CMDS[@]} -ge 20 ] || fail "hwid --help lists only ${#CMDS[@]} commands"
mkdir "$T/help"
for c in "${CMDS[@]}"; do
        # shellcheck disable=SC2086  # CMD is one or two words
        "$HWID" $c --help >"$T/help/$c" || fail "hwid $c --help failed"
done
plain "$MANDIR/hwid.1" >"$T/hwid.1.txt"
PROBLEMS=$(man_problems "$T/hwid.1.txt")
[ -z "$PROBLEMS" ] || fail "$PROBLEMS"

# options_in_page PROGRAM PAGE — every option of PROGRAM --help is in PAGE's OPTIONS.
options_in_page() {
        local prog=$1 page=$2 n=0 s l name
        name=$(basename "$prog")
        "$prog" --help >"$T/$name.help"
        plain "$MANDIR/$page" >"$T/$page.txt"
        part "$T/$page.txt" ".SH OPTIONS" >"$T/$page.options"
        while read -r s l; do
                has_option "$(<"$T/$page.options")" "$s" "$l"
                [ ${#MISSING[@]} -eq 0 ] || fail "$page OPTIONS does not describe ${MISSING[*]}"
                n=$((n + 1))
        done < <(described "$T/$name.help")
        [ "$n" -ge 3 ] || fail "$name --help describes only $n options"
}
options_in_page "$HWIDD" hwidd.8
options_in_page "${CERTMONGER_SUBMIT:-$BUILDDIR/cli/certmonger-submit}" hwid-certmonger-submit.8

# hwidd.yaml(5): every key CONFIG.md's tables name ("| `key` |").
plain "$MANDIR/hwidd.yaml.5" >"$T/conf.5.txt"
keys=$(sed -nE 's/^\| `([a-z_]+)` \|.*/\1/p' "$SRCDIR/docs/CONFIG.md" | sort -u)
[ "$(wc -w <<<"$keys")" -ge 40 ] || fail "CONFIG.md's tables name only $(wc -w <<<"$keys") keys"
for k in $keys; do
        grep -qw -- "$k" "$T/conf.5.txt" || fail "hwidd.yaml(5) does not name '$k' (CONFIG.md does)"
done
for h in "Top level" "Profiles" "Revocation" "Reloading (SIGHUP)"; do
        grep -qx "\.S[HS] \"\?$h\"\?" "$T/conf.5.txt" || fail "hwidd.yaml(5) has no section '$h'"
done

# man renders each page.
for p in "${PAGES[@]}"; do
        out=$(MANWIDTH=80 man -l "$MANDIR/$p" 2>/dev/null) || fail "man -l $p failed"
        assert_contains "$out" "NAME" "man -l $p"
done

# groff_warnings PAGE COLUMNS — every warning of groff's (-ww, tbl first)
# and of man --warnings for PAGE set COLUMNS wide.
groff_warnings() {
        groff -t -man -Tutf8 -rLL=$(($2 - 2))n -rLT=$(($2 - 2))n -ww -z "$1" 2>&1
        MANWIDTH=$2 man --warnings -l "$1" 2>&1 >/dev/null
}
for p in "${PAGES[@]}"; do
        for cols in 80 100 120 200; do
                out=$(groff_warnings "$MANDIR/$p" "$cols")
                [ -z "$out" ] || fail "groff warns of $p at $cols columns: $(head -n 5 <<<"$out")"
        done
done
# Not vacuous: a table as wide as the page is caught.
sed -E '0,/^lw\(/s/^lw\(([0-9.]+)n\)/lw(60n)/' "$MANDIR/hwidd.yaml.5" >"$T/wide.5"
cmp -s "$T/wide.5" "$MANDIR/hwidd.yaml.5" && fail "no table column to widen in hwidd.yaml.5"
assert_contains "$(groff_warnings "$T/wide.5" 80)" "table wider than line width" "the check of a table too wide"

# The documentation the pages point to is where the build installs it.
DOCDIR=${HWID_DOCDIR:-/usr/share/doc/hwid}
for p in "${PAGES[@]}"; do
        plain "$MANDIR/$p" >"$T/$p.doc.txt"
        while read -r d; do
                [ "$d" = "$DOCDIR" ] || fail "$p names $d, the documentation is installed in $DOCDIR"
        done < <(grep -o '/[a-z/]*/share/doc/[a-z]*' "$T/$p.doc.txt" | sort -u)
done
grep -q "$DOCDIR/examples/hwidd.example.yaml" "$T/hwidd.8.doc.txt" || fail "hwidd(8) does not name the example"

# Not vacuous: hwid join's --wait-timeout taken out of hwid(1) is caught.
grep -q -- '--wait-timeout' "$T/hwid.1.txt" || fail "hwid(1) never names --wait-timeout"
sed -e '/--wait-timeout/d' "$T/hwid.1.txt" >"$T/cut.txt"
assert_contains "$(man_problems "$T/cut.txt")" "hwid join: --wait-timeout is not described" \
        "the check of a hwid(1) without --wait-timeout"
echo "install-man: ${#CMDS[@]} commands, hwidd and $(wc -w <<<"$keys") configuration keys checked"
