/* libpq, opened with dlopen() when a PostgreSQL store is first opened
 * (pq_load()), not linked: an hwidd or hwid on SQLite then maps neither
 * libpq nor the Kerberos, LDAP and SASL libraries it pulls in (1.6 MiB of
 * hwidd's idle RSS, docs/BENCHMARKS.md section 6).  The store-pg*.c files
 * include this instead of <libpq-fe.h>: their PQ*() calls, unchanged, go
 * through the table pq_load() fills.  Pipeline mode (PQenterPipelineMode()
 * and the rest) needs libpq 14 or later. */
#pragma once

#include <libpq-fe.h>

#define PQ_FUNCS(X)                                                                                     \
        X(PQclear) X(PQcmdTuples) X(PQconnectdbParams) X(PQconninfoFree) X(PQconninfoParse)             \
        X(PQconsumeInput) X(PQenterPipelineMode) X(PQerrorMessage) X(PQexec) X(PQexecParams)            \
        X(PQexitPipelineMode) X(PQfinish) X(PQfreemem) X(PQgetisnull) X(PQgetResult) X(PQgetvalue)      \
        X(PQntuples) X(PQpipelineSync) X(PQresultErrorField) X(PQresultErrorMessage) X(PQresultStatus)  \
        X(PQsendPrepare) X(PQsendQueryParams) X(PQsendQueryPrepared) X(PQsetNoticeProcessor) X(PQstatus) X(PQtransactionStatus) X(PQunescapeBytea)

typedef struct pq_api {
#define PQ_MEMBER(name) __typeof__(name) *name;
        PQ_FUNCS(PQ_MEMBER)
#undef PQ_MEMBER
} pq_api;

extern pq_api pq;

/* Loads libpq once (thread-safe); -HWID_E_STORE naming what is missing
 * (the libpq5 package) if it cannot. */
int pq_load(void);

/* pq-dl.c itself names the members, so it goes without these. */
#ifndef PQ_DL_NO_NAMES
#define PQclear pq.PQclear
#define PQcmdTuples pq.PQcmdTuples
#define PQconnectdbParams pq.PQconnectdbParams
#define PQconninfoFree pq.PQconninfoFree
#define PQconninfoParse pq.PQconninfoParse
#define PQconsumeInput pq.PQconsumeInput
#define PQenterPipelineMode pq.PQenterPipelineMode
#define PQerrorMessage pq.PQerrorMessage
#define PQexec pq.PQexec
#define PQexecParams pq.PQexecParams
#define PQexitPipelineMode pq.PQexitPipelineMode
#define PQfinish pq.PQfinish
#define PQfreemem pq.PQfreemem
#define PQgetisnull pq.PQgetisnull
#define PQgetResult pq.PQgetResult
#define PQgetvalue pq.PQgetvalue
#define PQntuples pq.PQntuples
#define PQpipelineSync pq.PQpipelineSync
#define PQresultErrorField pq.PQresultErrorField
#define PQresultErrorMessage pq.PQresultErrorMessage
#define PQresultStatus pq.PQresultStatus
#define PQsendPrepare pq.PQsendPrepare
#define PQsendQueryParams pq.PQsendQueryParams
#define PQsendQueryPrepared pq.PQsendQueryPrepared
#define PQsetNoticeProcessor pq.PQsetNoticeProcessor
#define PQstatus pq.PQstatus
#define PQtransactionStatus pq.PQtransactionStatus
#define PQunescapeBytea pq.PQunescapeBytea
#endif
