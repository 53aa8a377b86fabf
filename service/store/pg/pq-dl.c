/* pq-dl.h: libpq's functions, found at run time. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#define PQ_DL_NO_NAMES
#include "pq-dl.h"

#define PQ_SONAME "libpq.so.5"

pq_api pq;

static pthread_once_t pq_once = PTHREAD_ONCE_INIT;
static char pq_error[256]; /* what went wrong, "" once loaded */

/* ISO C has no conversion from dlsym()'s object pointer to a function
 * pointer; POSIX guarantees the representation, so copy it. */
static int pq_sym(void *lib, const char *name, void *ret_fn, size_t size) {
        void *sym = dlsym(lib, name);

        if (!sym || size != sizeof(sym))
                return -1;
        memcpy(ret_fn, &sym, size);
        return 0;
}

static void pq_open(void) {
        void *lib = dlopen(PQ_SONAME, RTLD_NOW | RTLD_LOCAL);

        if (!lib) {
                snprintf(pq_error, sizeof(pq_error), "cannot load %s (install the libpq5 package): %s", PQ_SONAME,
                         dlerror());
                return;
        }
#define PQ_LOAD(name)                                                                                  \
        if (pq_sym(lib, #name, &pq.name, sizeof(pq.name)) < 0) {                                        \
                snprintf(pq_error, sizeof(pq_error), "%s has no %s: libpq too old", PQ_SONAME, #name); \
                return;                                                                                \
        }
        PQ_FUNCS(PQ_LOAD)
#undef PQ_LOAD
        /* The library stays loaded for the life of the process. */
}

int pq_load(void) {
        pthread_once(&pq_once, pq_open);
        if (pq_error[0])
                return hwid_fail(HWID_E_STORE, "%s", pq_error);
        return 0;
}
