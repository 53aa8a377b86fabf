/* The Prometheus text exposition (format 0.0.4) that /metrics is written
 * in: a metric's HELP and TYPE lines; a gauge with its value; one
 * histogram's series (histogram.h), labels "k=\"v\",..." without braces,
 * or "".  Used by the CA's series (service/ca/metrics.c) and the
 * transport's (service/api/health.c). */
#pragma once

#include "buf.h"
#include "histogram.h"

int prom_header(buf *out, const char *name, const char *type, const char *help);
int prom_gauge(buf *out, const char *name, const char *help, double v);
int prom_histogram(buf *out, const char *name, const char *labels, const histogram_snapshot *h,
                   const histogram_bounds *b);
