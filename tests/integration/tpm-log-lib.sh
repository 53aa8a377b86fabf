# shellcheck shell=bash
# tpm-log-lib.sh — the commands a TPM ran, read from swtpm's command log
# (swtpm_init --log: `--log file=...,level=20` records every command and
# answer). Sourced after tests/lib.sh by tpm-cost.sh and device-workload.sh.

# tpm_name CODE — a TPM command's name (TPM 2.0 part 2, TPM_CC).
tpm_name() {
        case $1 in
        00000131) echo CreatePrimary ;; 00000147) echo ActivateCredential ;; 00000148) echo Certify ;;
        0000014E) echo NV_Read ;; 00000151) echo PolicySecret ;; 00000153) echo Create ;; 00000155) echo HMAC ;;
        00000157) echo Load ;; 0000015D) echo Sign ;; 00000161) echo ContextLoad ;;
        00000162) echo ContextSave ;; 00000165) echo FlushContext ;; 00000169) echo NV_ReadPublic ;;
        00000173) echo ReadPublic ;; 00000176) echo StartAuthSession ;; 0000017A) echo GetCapability ;;
        00000191) echo CreateLoaded ;;
        *) echo "0x$1" ;;
        esac
}

# log_of TPM — the command log of TPM I of $SWTPM_DIR.
log_of() { echo "$SWTPM_DIR/tpm$1/swtpm.log"; }

# log_lines TPM — how many lines TPM's log holds now (a mark for commands_since).
log_lines() { wc -l <"$(log_of "$1")"; }

# commands_since [--retries] TPM LINE — the commands in TPM's log after
# LINE, one a line.  A fresh swtpm refuses the first use of an algorithm
# with TPM_RC_RETRY (tpm2-tss sends it again): those are left out, or with
# --retries shown as RETRY.
commands_since() {
        local retries=0
        [ "$1" = --retries ] && { retries=1; shift; }
        tail -n +$(($2 + 1)) "$(log_of "$1")" |
                awk -v retries=$retries '/SWTPM_IO_Read/ { getline; code = $7 $8 $9 $10 }
                     /SWTPM_IO_Write/ { getline; if ($7 $8 $9 $10 != "00000922") print code; else if (retries) print "RETRY" }' |
                while read -r c; do if [ "$c" = RETRY ]; then echo RETRY; else tpm_name "$c"; fi; done
}
