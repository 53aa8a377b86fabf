#!/bin/bash
# install-completion.sh — bash completion for hwid (contrib/hwid.bash-completion)
# under the real bash-completion library, as an interactive bash runs it.
# Proves:
#   - `hwid <TAB>` offers every first word of the commands of hwid --help,
#     `hwid ca <TAB>` the ca commands, and no more;
#   - `hwid CMD --<TAB>` offers every long option CMD's --help describes,
#     for every command;
#   - fixed values: --type, --reason, --ek; a key URI's schemes after --key;
#     directories after --dir; files for a TPM key file after tpm2:file=.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=help-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/help-lib.sh"

BC=/usr/share/bash-completion/bash_completion
[ -f "$BC" ] || fail "bash-completion is not installed ($BC)"
COMPLETION=$SRCDIR/contrib/hwid.bash-completion

# The completion runs in a bash of its own with `hwid` on its PATH: one
# request per line in, one line of sorted candidates per request out.
mkdir "$T/bin" "$T/dirs" "$T/dirs/identity"
ln -s "$HWID" "$T/bin/hwid"
: >"$T/dirs/device.tss2.pem"
cat >"$T/complete.sh" <<'EOF'
source "$1"
source "$2"
compopt() { :; }   # only works under readline; the options it sets are not tested
while IFS= read -r line; do
        read -ra COMP_WORDS <<<"$line"
        [[ $line == *" " ]] && COMP_WORDS+=("")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) COMP_LINE=$line COMP_POINT=${#line} COMPREPLY=()
        _hwid
        printf '%s\n' "${COMPREPLY[@]}" | sort -u | tr '\n' ' '
        echo
done
EOF

mapfile -t CMDS < <(hwid_commands)
[ ${#CMDS[@]} -ge 20 ] || fail "hwid --help lists only ${#CMDS[@]} commands"
{
        echo "hwid "
        echo "hwid ca "
        for c in "${CMDS[@]}"; do echo "hwid $c --"; done
        echo "hwid key create --type "
        echo "hwid cert revoke --reason "
        echo "hwid join --ek "
        echo "hwid join --key "
        echo "hwid join --dir "
        echo "hwid join --key tpm2:file=dev"
} >"$T/requests"
(cd "$T/dirs" && PATH=$T/bin:$PATH bash "$T/complete.sh" "$BC" "$COMPLETION" <"$T/requests" >"$T/answers") ||
        fail "the completion failed: $(tail -n 5 "$T/answers")"
mapfile -t A <"$T/answers"
[ ${#A[@]} -eq $((${#CMDS[@]} + 8)) ] || fail "${#A[@]} answers to $((${#CMDS[@]} + 8)) requests"

# hwid <TAB>: the first words, exactly.
want=$(printf '%s\n' "${CMDS[@]}" --help --version | cut -d' ' -f1 | sort -u | tr '\n' ' ')
assert_eq "${A[0]}" "$want" "hwid <TAB>"
assert_eq "${A[1]}" "backup hash import init restore rollover " "hwid ca <TAB>"

# hwid CMD --<TAB>: every long option of its help.
i=2
for c in "${CMDS[@]}"; do
        # shellcheck disable=SC2086  # CMD is one or two words
        "$HWID" $c --help >"$T/help.out"
        while read -r _ l; do
                [ "$l" = - ] && continue
                [[ " ${A[i]} " == *" --$l "* ]] || fail "hwid $c --<TAB> does not offer --$l: ${A[i]}"
        done < <(described "$T/help.out")
        i=$((i + 1))
done

assert_eq "${A[i]}" "ec-p256 ec-p384 rsa-2048 rsa-3072 " "--type <TAB>"
assert_contains "${A[i + 1]}" "key-compromise" "--reason <TAB>"
assert_contains "${A[i + 1]}" "cessation-of-operation" "--reason <TAB>"
assert_eq "${A[i + 2]}" "auto ecc-p256 ecc-p384 rsa-2048 " "--ek <TAB>"
assert_eq "${A[i + 3]}" "pkcs11:token= tpm2:file= tpm2:handle=0x81 " "--key <TAB>"
assert_eq "${A[i + 4]}" "identity " "--dir <TAB> (directories only)"
assert_eq "${A[i + 5]}" "tpm2:file=device.tss2.pem " "--key tpm2:file=<TAB>"
echo "install-completion: ${#CMDS[@]} commands' options and the values checked"
