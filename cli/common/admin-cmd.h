/* The admin commands, written once (cli/common/): each parses its
 * options, builds its request to the admin API, makes it on the
 * connection its options ask for (admin-conn.h) and prints the answer.
 * Both hwid (the device's) and hwid-admin (the CA host's) run them. */
#pragma once

int cmd_token_create(int argc, char **argv);
int cmd_token_list(int argc, char **argv);
int cmd_token_revoke(int argc, char **argv);
int cmd_request_list(int argc, char **argv);
int cmd_request_approve(int argc, char **argv);
int cmd_request_deny(int argc, char **argv);
int cmd_cert_list(int argc, char **argv);
int cmd_cert_show(int argc, char **argv);
int cmd_cert_revoke(int argc, char **argv);
int cmd_audit_list(int argc, char **argv);
int cmd_ek_add(int argc, char **argv);
int cmd_ek_import(int argc, char **argv);
int cmd_ek_list(int argc, char **argv);
int cmd_ek_remove(int argc, char **argv);
int cmd_identity_list(int argc, char **argv);
int cmd_identity_release(int argc, char **argv);
