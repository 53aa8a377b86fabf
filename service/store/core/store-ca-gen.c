/* CA generations (store.h): what both stores share of them -- the
 * states' names as stored, the checks of a row before it is written, and
 * freeing. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-rows.h"

static const char *const state_names[] = {
        [CA_GEN_PREPARED] = "prepared",
        [CA_GEN_ACTIVE] = "active",
        [CA_GEN_PREVIOUS] = "previous",
        [CA_GEN_RETIRED] = "retired",
};

const char *store_ca_state_name(store_ca_state st) {
        return (size_t) st < ELEMENTSOF(state_names) ? state_names[st] : "retired";
}

store_ca_state store_ca_state_parse(const char *s) {
        for (size_t i = 0; s && i < ELEMENTSOF(state_names); i++)
                if (strcmp(s, state_names[i]) == 0)
                        return (store_ca_state) i;
        return CA_GEN_RETIRED; /* the safe reading: not served, signs nothing */
}

/* A link certificate is there exactly when it must be: for a generation
 * above 1 that has its certificate. */
static bool links_ok(const store_ca_gen *g) {
        bool want = g->generation > 1 && g->cert;

        return (g->new_with_old != NULL) == want && (g->old_with_new != NULL) == want &&
               (!want || (g->new_with_old_len > 0 && g->old_with_new_len > 0));
}

int store_ca_gen_check(const store_ca_gen *g, store_ca_state state) {
        if (!g || g->generation < 1 || g->generation > STORE_CA_GEN_MAX)
                return hwid_fail(HWID_E_INVALID, "a CA generation is numbered 1 to %d", STORE_CA_GEN_MAX);
        if (g->state != state)
                return hwid_fail(HWID_E_INVALID, "CA generation %d is to be recorded %s, not %s", g->generation,
                                 store_ca_state_name(state), store_ca_state_name(g->state));
        if (!store_str_ok(g->subject, 4096))
                return hwid_fail(HWID_E_INVALID, "CA generation %d has no subject", g->generation);
        if ((g->cert != NULL) != (g->cert_len > 0) || (state != CA_GEN_PREPARED && !g->cert))
                return hwid_fail(HWID_E_INVALID, "CA generation %d has no certificate", g->generation);
        if ((g->generation == 1) != (g->key_uri == NULL) || (g->key_uri && !store_str_ok(g->key_uri, 4096)))
                return hwid_fail(HWID_E_INVALID, "CA generation %d: only generation 1 has no key URI of its own "
                                 "(the configuration's ca.key)", g->generation);
        if (g->key_uri && strstr(g->key_uri, "pin-value="))
                return hwid_fail(HWID_E_INVALID, "CA generation %d: a key URI with a pin-value= is not stored "
                                 "(use pin-source=file:...)", g->generation);
        if (!links_ok(g))
                return hwid_fail(HWID_E_INVALID, "CA generation %d: link certificates belong to a generation above "
                                 "1 that has its certificate, both of them", g->generation);
        return 0;
}

void store_ca_gen_clear(store_ca_gen *g) {
        if (!g)
                return;
        free(g->subject);
        free(g->cert);
        free(g->chain);
        free(g->key_uri);
        free(g->new_with_old);
        free(g->old_with_new);
        *g = (store_ca_gen) { 0 };
}

void store_ca_gen_list_free(store_ca_gen *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                store_ca_gen_clear(&v[i]);
        free(v);
}
