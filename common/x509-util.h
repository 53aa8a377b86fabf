/* Small X.509 helpers shared by the CSR builder, the issuer and the CLI. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <openssl/x509.h>
#include <openssl/x509v3.h>

/* Longest DN / SAN list hwid accepts on its command lines. */
#define DN_MAX 1024
#define SAN_LIST_MAX 4096

/* Parses "/CN=edge-0001/O=acme" (OpenSSL's one-line form; "\/" escapes a
 * slash) into a name.  Attribute names are checked by OpenSSL; values are
 * UTF-8 and may not be empty or hold control characters. */
int dn_parse(const char *s, X509_NAME **ret);

/* Parses "dns:a.example,ip:10.0.0.1,uri:spiffe://x/y,email:a@b" into
 * subjectAltName general names. */
int san_parse(const char *s, GENERAL_NAMES **ret);

/* "sha256:<hex>" of the DER SubjectPublicKeyInfo: the CA pin form. */
int spki_sha256_pin(EVP_PKEY *pkey, char ret[72]);
/* Lower-case hex SHA-256 of the DER SubjectPublicKeyInfo. */
int spki_sha256_hex(EVP_PKEY *pkey, char ret[65]);
/* The same, of a SubjectPublicKeyInfo as it stands (a CSR's or a
 * certificate's): no round trip through the key, which OpenSSL 3.0's
 * encoders make cost a few hundred microseconds. */
int spki_der_sha256_hex(const X509_PUBKEY *spki, char ret[65]);

/* The public key as PEM (SubjectPublicKeyInfo); caller frees. */
int pubkey_to_pem(EVP_PKEY *pkey, char **ret);

/* DER as PEM text with the given label ("CERTIFICATE"); caller frees. */
int der_to_pem(const uint8_t *der, size_t len, const char *label, char **ret);
/* A certificate as PEM text; caller frees. */
int cert_to_pem(X509 *x, char **ret);
/* The same from its DER encoding (as stored). */
int cert_der_to_pem(const uint8_t *der, size_t len, char **ret);

/* One-line RFC 2253 rendering of a name; caller frees. */
int name_to_string(const X509_NAME *name, char **ret);

/* The dNSName entries of x's subjectAltName, as written (a string may be
 * shorter than its ASN.1 length if it holds a NUL); none: *ret_n 0. Free
 * with strv_free_n(). */
int x509_dns_names(const X509 *x, char ***ret, size_t *ret_n);
/* The same of a list of names (a certificate's before it is signed). */
int general_names_dns(const GENERAL_NAMES *gens, char ***ret, size_t *ret_n);
/* The same of a certificate in DER. */
int der_dns_names(const void *der, size_t len, char ***ret, size_t *ret_n);
void strv_free_n(char **v, size_t n);
/* A serial as an operator may type it ("0a:1b:..", "0x0A1B..", any case)
 * the way the store keeps serials: upper-case hex without separators,
 * into out (n bytes, cut if longer; always NUL-terminated).  Nothing is
 * checked: a string that is no serial finds no certificate. */
void normalize_serial(const char *in, char *out, size_t n);
/* Upper-case hex of a certificate's serial; caller frees. */
int serial_to_hex(const ASN1_INTEGER *serial, char **ret);
/* x's notAfter as Unix seconds. */
int x509_not_after(const X509 *x, int64_t *ret);

/* An intermediate CA's certificate, as a root signed it: for the public
 * key pub (key_name in the message), a CA's (CA:TRUE, keyCertSign), and
 * chaining to one of chain's self-signed certificates, the roots it may
 * reach (ca import, ca rollover import). */
int x509_check_intermediate(X509 *cert, EVP_PKEY *pub, const char *key_name, STACK_OF(X509) *chain);
