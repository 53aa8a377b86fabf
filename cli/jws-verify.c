/* hwid jws verify: checks a JWS made with a device identity. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "base64.h"
#include "cli.h"
#include "device-cmd.h"
#include "duration.h"
#include "error.h"
#include "fsutil.h"
#include "jws.h"
#include "ossl-util.h"
#include "x509-util.h"

#define LEEWAY_DEFAULT 60

static void usage(FILE *f) {
        fprintf(f, "Usage: hwid jws verify --ca CA.pem [--crl FILE] [--token FILE|-] [--leeway 60s]\n"
                   "                       [--payload-out FILE]\n\n"
                   "Checks a compact JWS (RFC 7515) signed with a device identity: alg ES256, ES384 or\n"
                   "RS256 and the one the signer's key makes (never 'none'); the certificate in x5c[0]\n"
                   "chains to the CA (the first certificate of CA.pem, the only anchor), is valid now\n"
                   "and, with --crl, not revoked; x5t#S256 (and x5t), when present, are its thumbprints;\n"
                   "the signature verifies; a JSON-object payload is a JWT whose exp, nbf and iat hold\n"
                   "(with --leeway) and whose iss, when present, is the signer.  Prints a JSON object:\n"
                   "alg, the signer (identity, subject, serial, issuer, validity, spki_sha256) and the\n"
                   "claims, or the payload (as text when it is printable, and base64url).\n\n"
                   "  -c, --ca FILE          the CA that issues the identities (PEM), e.g. DIR/ca.pem\n"
                   "      --crl FILE         its CRL (DER or PEM, as GET /crl serves it)\n"
                   "  -t, --token FILE       the token (default '-': standard input)\n"
                   "      --leeway DURATION  clock skew allowed on exp, nbf and iat (default 60s)\n"
                   "      --payload-out FILE write the payload's bytes to FILE\n\n"
                   "Exit codes: 0 valid, 1 refused or failure (the reason on stderr), 2 usage.\n");
}

typedef struct verify_args {
        const char *ca, *crl, *token, *payload_out;
        int64_t leeway;
} verify_args;

static int parse(int argc, char **argv, verify_args *a) {
        static const struct option opts[] = {
                { "ca", required_argument, NULL, 'c' }, { "crl", required_argument, NULL, 'r' },
                { "token", required_argument, NULL, 't' }, { "leeway", required_argument, NULL, 'l' },
                { "payload-out", required_argument, NULL, 'o' }, { "help", no_argument, NULL, 'h' }, {},
        };
        int c;

        while ((c = getopt_long(argc, argv, "c:t:h", opts, NULL)) >= 0) {
                switch (c) {
                case 'c': a->ca = optarg; break;
                case 'r': a->crl = optarg; break;
                case 't': a->token = optarg; break;
                case 'l':
                        if (duration_parse(optarg, &a->leeway) < 0 || a->leeway > 3600)
                                return cli_usage("jws verify", "--leeway must be a duration of at most 1h, not '%s'",
                                                 optarg);
                        break;
                case 'o': a->payload_out = optarg; break;
                case 'h': usage(stdout); exit(0);
                default: return cli_bad_option("jws verify", argv);
                }
        }
        if (!a->ca || optind != argc)
                return cli_usage("jws verify", "needs --ca CA.pem");
        return 0;
}

static int64_t unix_time(const ASN1_TIME *t) {
        struct tm tm;

        return ASN1_TIME_to_tm(t, &tm) ? (int64_t) timegm(&tm) : 0;
}

static int signer_json(X509 *x, const char *identity, json_object **ret) {
        _cleanup_free_ char *subject = NULL, *issuer_dn = NULL, *serial = NULL;
        json_object *o;
        char spki[65];
        int r;

        if ((r = name_to_string(X509_get_subject_name(x), &subject)) < 0 ||
            (r = name_to_string(X509_get_issuer_name(x), &issuer_dn)) < 0 ||
            (r = serial_to_hex(X509_get0_serialNumber(x), &serial)) < 0 ||
            (r = spki_sha256_hex(X509_get0_pubkey(x), spki)) < 0)
                return r;
        if (!(o = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(o, "identity", json_object_new_string(identity));
        json_object_object_add(o, "subject", json_object_new_string(subject));
        json_object_object_add(o, "serial", json_object_new_string(serial));
        json_object_object_add(o, "issuer", json_object_new_string(issuer_dn));
        json_object_object_add(o, "not_before", json_object_new_int64(unix_time(X509_get0_notBefore(x))));
        json_object_object_add(o, "not_after", json_object_new_int64(unix_time(X509_get0_notAfter(x))));
        json_object_object_add(o, "spki_sha256", json_object_new_string(spki));
        *ret = o;
        return 0;
}

static bool printable(const uint8_t *p, size_t n) {
        for (size_t i = 0; i < n; i++)
                if ((p[i] < 0x20 && !strchr("\t\r\n", p[i])) || p[i] > 0x7e)
                        return false;
        return true;
}

static int add_payload(json_object *out, const jws_verified *v) {
        _cleanup_free_ char *b64 = NULL;
        json_object *claims;
        int r;

        if (v->jwt && jws_json_object((const char *) v->payload, v->payload_len, true, "the payload", &claims) >= 0) {
                json_object_object_add(out, "claims", claims);
                return 0;
        }
        if (printable(v->payload, v->payload_len))
                json_object_object_add(out, "payload", json_object_new_string_len((const char *) v->payload,
                                                                                   (int) v->payload_len));
        if ((r = base64_encode(v->payload, v->payload_len, true, &b64)) < 0)
                return r;
        json_object_object_add(out, "payload_base64url", json_object_new_string(b64));
        return 0;
}

static int print_result(const jws_verified *v) {
        json_object *out = json_object_new_object(), *signer = NULL;
        int r = out ? signer_json(v->signer, v->identity, &signer) : hwid_fail(HWID_E_NOMEM, NULL);

        if (r >= 0) {
                json_object_object_add(out, "alg", json_object_new_string(jws_alg_name(v->alg)));
                json_object_object_add(out, "signer", signer);
                r = add_payload(out, v);
        }
        if (r >= 0)
                r = cli_write_output(NULL, json_object_to_json_string_ext(out, JSON_C_TO_STRING_PRETTY |
                                                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        if (r >= 0)
                r = cli_write_output(NULL, "\n");
        json_object_put(out);
        return r;
}

static int read_token(const char *path, char **ret, size_t *ret_len) {
        size_t len;
        int r = read_file_capped(strcmp(path, "-") == 0 ? "/dev/stdin" : path, JWS_MAX + 2, ret, &len);

        if (r < 0)
                return r;
        while (len > 0 && strchr(" \t\r\n", (*ret)[len - 1]))
                (*ret)[--len] = '\0'; /* the newline of a file or of echo */
        *ret_len = len;
        return 0;
}

int cmd_jws_verify(int argc, char **argv) {
        _cleanup_(X509_freep) X509 *ca = NULL;
        _cleanup_(X509_CRL_freep) X509_CRL *crl = NULL;
        _cleanup_free_ char *token = NULL;
        verify_args a = { .token = "-", .leeway = LEEWAY_DEFAULT };
        jws_verified v = { 0 };
        size_t len;
        int r;

        if ((r = parse(argc, argv, &a)) != 0)
                return r;
        if ((r = jws_load_trust(a.ca, a.crl, &ca, &crl)) < 0 || (r = read_token(a.token, &token, &len)) < 0)
                return cli_fail(r);
        r = jws_verify(token, len, &(jws_trust) { .ca = ca, .crl = crl, .now = (int64_t) time(NULL), .leeway = a.leeway },
                       &v);
        if (r >= 0 && a.payload_out)
                r = write_file_atomic(a.payload_out, v.payload, v.payload_len, 0644);
        if (r >= 0)
                r = print_result(&v);
        jws_verified_clear(&v);
        return r < 0 ? cli_fail(r) : 0;
}
