/* What an enrollment or a renewal will look up in the store, read at
 * once before anything is looked at (store.h, store_reads): the token,
 * the client certificate's record, whether the CSR's key is blocked, the
 * CN's live certificate and the holders of the DNS names the certificate
 * may carry (the CSR's own, and the profiles' templates made of its CN:
 * policy_dns_candidates()) -- one
 * round trip to PostgreSQL where each lookup was one.  The CSR was parsed
 * once already, before anything else, whatever the store (ca_csr_parse():
 * what a request that then fails authentication costs, docs/HA.md).  The
 * order in which a request is checked, and every answer and error, stay
 * what they were: a read ahead moves the reads, never the decisions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/x509.h>

#include "ca-internal.h"
#include "error.h"
#include "ossl-util.h"
#include "secret.h"
#include "token.h"
#include "x509-util.h"

/* The id of the bootstrap token the request carries: proven by the door,
 * or presented (its secret is not kept). */
static bool token_id_of(const ca_request *req, char id[TOKEN_ID_LEN + 1]) {
        _cleanup_secret_ char *secret = NULL;

        if (req->token_id && strlen(req->token_id) == TOKEN_ID_LEN) {
                memcpy(id, req->token_id, TOKEN_ID_LEN + 1);
                return true;
        }
        return req->authorization && token_parse(req->authorization, req->bearer, id, &secret) >= 0;
}

static char *peer_serial(const ca_request *req) {
        const unsigned char *p = req->peer.der;
        _cleanup_(X509_freep) X509 *x = p ? d2i_X509(NULL, &p, (long) req->peer.len) : NULL;
        char *serial = NULL;

        return x && serial_to_hex(X509_get0_serialNumber(x), &serial) >= 0 ? serial : NULL;
}

typedef struct names {
        char **v;
        size_t n, alloc;
} names;

static int name_add(const char *name, size_t len, void *userdata) {
        names *ns = userdata;
        char **v;

        if (strnlen(name, len) != len)
                return 0; /* a NUL in it: left to the store to refuse */
        if (ns->n == ns->alloc) {
                if (!(v = realloc(ns->v, (ns->alloc = ns->alloc ? 2 * ns->alloc : 8) * sizeof(*v))))
                        return -HWID_E_NOMEM;
                ns->v = v;
        }
        if (!(ns->v[ns->n] = strndup(name, len)))
                return -HWID_E_NOMEM;
        ns->n++;
        return 0;
}

/* The CSR's CN, and the DNS names whose holders enrollment may ask for:
 * the CSR's own and those the profiles' templates make of the CN. */
static int csr_names(ca_service *ca, const policy_csr *f, char cn[128], names *ret) {
        const policy_attr *attr = policy_csr_cn(f);

        snprintf(cn, 128, "%.*s", attr ? (int) attr->len : 0, attr ? attr->value : "");
        return policy_dns_candidates(ca->cfg->policy, f, name_add, ret);
}

void ca_reads_fetch(ca_service *ca, const ca_request *req, const csr_info *csr, unsigned what, ca_auth *a) {
        _cleanup_free_ char *serial = NULL;
        char id[TOKEN_ID_LEN + 1], cn[128] = "";
        store_reads_keys k = { .now = req->now };
        names dns = { 0 };

        /* A store that reads nothing ahead (SQLite) answers each read when
         * it is made. */
        if (!store_reads_ahead(ca->store))
                return;
        if ((what & CA_READS_TOKEN) && token_id_of(req, id))
                k.token_id = id;
        if ((what & CA_READS_PEER) && (serial = peer_serial(req)))
                k.serial = serial;
        /* Unparseable: its error is reported where it belongs. */
        if (csr) {
                k.spki_sha256 = csr_info_facts(csr)->spki_sha256;
                if ((what & CA_READS_NAMES) && csr_names(ca, csr_info_facts(csr), cn, &dns) >= 0) {
                        k.identity = cn;
                        k.dns_names = (const char *const *) dns.v;
                        k.n_dns_names = dns.n;
                }
        }
        /* Not read ahead (out of memory): each is read when asked for. */
        if (store_reads_fetch(ca->store, &k, &a->reads) < 0)
                a->reads = NULL;
        strv_free_n(dns.v, dns.n);
        hwid_error_clear();
}
