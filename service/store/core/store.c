/* The parts of store.h that do not depend on the database behind it:
 * token state and freeing what the store hands out. */
#include <stdlib.h>

#include "store.h"

store_token_state store_token_state_at(const store_token *t, int64_t now) {
        if (t->revoked)
                return TOKEN_REVOKED;
        if (now >= t->expires_at)
                return TOKEN_EXPIRED;
        if (t->uses_left <= 0)
                return TOKEN_USED_UP;
        return TOKEN_ACTIVE;
}

void store_token_clear(store_token *t) {
        if (!t)
                return;
        free(t->profile);
        free(t->name_pattern);
        free(t->description);
        *t = (store_token) { 0 };
}

void store_request_clear(store_request *r) {
        if (!r)
                return;
        free(r->identity);
        free(r->profile);
        free(r->csr_der);
        free(r->reason);
        free(r->serial);
        *r = (store_request) { 0 };
}

void store_cert_clear(store_cert *c) {
        if (!c)
                return;
        free(c->serial);
        free(c->identity);
        free(c->subject);
        free(c->profile);
        free(c->der);
        free(c->request_id);
        free(c->scope);
        *c = (store_cert) { 0 };
}

void store_token_list_free(store_token *t, size_t n) {
        for (size_t i = 0; t && i < n; i++)
                store_token_clear(&t[i]);
        free(t);
}

void store_request_list_free(store_request *r, size_t n) {
        for (size_t i = 0; r && i < n; i++)
                store_request_clear(&r[i]);
        free(r);
}

void store_cert_list_free(store_cert *c, size_t n) {
        for (size_t i = 0; c && i < n; i++)
                store_cert_clear(&c[i]);
        free(c);
}

void store_challenge_clear(store_challenge *c) {
        if (!c)
                return;
        free(c->ak_public);
        free(c->ek_cert);
        *c = (store_challenge) { 0 };
}

void store_ek_clear(store_ek *e) {
        if (!e)
                return;
        free(e->identity);
        free(e->profile);
        *e = (store_ek) { 0 };
}

void store_ek_list_free(store_ek *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                store_ek_clear(&v[i]);
        free(v);
}
