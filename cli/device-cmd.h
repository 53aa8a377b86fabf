/* The device's commands of hwid (one file each in cli/): keys, CSRs,
 * joining, renewing, the agent, the factory station, JWS, the CA pin. */
#pragma once

int cmd_key_create(int argc, char **argv);
int cmd_key_show(int argc, char **argv);
int cmd_csr(int argc, char **argv);
int cmd_ca_hash(int argc, char **argv);
int cmd_join(int argc, char **argv);
int cmd_renew(int argc, char **argv);
int cmd_agent(int argc, char **argv);
int cmd_factory(int argc, char **argv);
int cmd_jws_sign(int argc, char **argv);
int cmd_jws_verify(int argc, char **argv);
