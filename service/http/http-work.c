/* The worker threads of hwidd's HTTPS transport: request handlers block
 * (an HSM/TPM signature, a group commit), the I/O threads must not.  A
 * complete request is suspended on its I/O thread and queued here; a
 * worker runs its handler and resumes it (http.c).  One queue, first in
 * first out, so that no connection waits behind another's slow request
 * while a worker is free: a thread per connection, or connections bound
 * to threads, made throughput swing by half between runs
 * (docs/BENCHMARKS.md, bench/NOTES.md). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "http-internal.h"

struct http_work {
        pthread_mutex_t lock;
        pthread_cond_t ready;
        http_job *head, *tail;
        unsigned queued, busy;
        bool stopping;
        unsigned n;
        pthread_t threads[];
};

static void *worker_main(void *arg) {
        http_work *w = arg;

        pthread_mutex_lock(&w->lock);
        for (;;) {
                http_job *j;

                while (!w->head && !w->stopping)
                        pthread_cond_wait(&w->ready, &w->lock);
                if (!w->head)
                        break; /* stopping, and nothing left to run */
                j = w->head;
                w->head = j->next;
                if (!w->head)
                        w->tail = NULL;
                w->queued--;
                w->busy++;
                pthread_mutex_unlock(&w->lock);
                j->run(j);
                pthread_mutex_lock(&w->lock);
                w->busy--;
        }
        pthread_mutex_unlock(&w->lock);
        return NULL;
}

int http_work_new(unsigned threads, http_work **ret) {
        http_work *w;
        int r = 0;

        if (threads == 0)
                return hwid_fail(HWID_E_CONFIG, "the HTTP server needs at least one worker thread");
        w = calloc(1, sizeof(*w) + threads * sizeof(pthread_t));
        if (!w)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->ready, NULL);
        for (; w->n < threads; w->n++)
                if ((r = pthread_create(&w->threads[w->n], NULL, worker_main, w)) != 0)
                        break;
        if (r != 0) {
                http_work_free(w);
                return hwid_fail(HWID_E_INTERNAL, "cannot start the HTTP worker threads: %s", strerror(r));
        }
        *ret = w;
        return 0;
}

void http_work_submit(http_work *w, http_job *j) {
        pthread_mutex_lock(&w->lock);
        j->next = NULL;
        if (w->tail)
                w->tail->next = j;
        else
                w->head = j;
        w->tail = j;
        w->queued++;
        pthread_cond_signal(&w->ready);
        pthread_mutex_unlock(&w->lock);
}

void http_work_load(http_work *w, unsigned *ret_queued, unsigned *ret_busy) {
        pthread_mutex_lock(&w->lock);
        *ret_queued = w->queued;
        *ret_busy = w->busy;
        pthread_mutex_unlock(&w->lock);
}

/* Runs what is queued, then joins the threads. */
void http_work_free(http_work *w) {
        if (!w)
                return;
        pthread_mutex_lock(&w->lock);
        w->stopping = true;
        pthread_cond_broadcast(&w->ready);
        pthread_mutex_unlock(&w->lock);
        for (unsigned i = 0; i < w->n; i++)
                pthread_join(w->threads[i], NULL);
        pthread_cond_destroy(&w->ready);
        pthread_mutex_destroy(&w->lock);
        free(w);
}
