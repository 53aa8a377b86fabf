/* hwid ca rollover: the CA host's steps of a CA rollover (ca-rollover.c). */
#pragma once

/* argv[0] is "rollover", argv[1] the step: prepare, import, activate,
 * status, retire. */
int cmd_ca_rollover(int argc, char **argv);
