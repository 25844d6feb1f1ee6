/* What the C examples share: the error check, the clock, the median. */
#ifndef AMRQ_EXAMPLES_COMMON_H
#define AMRQ_EXAMPLES_COMMON_H

#include "amrq.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Exits with amrq's message when a call fails. */
#define CHECK(call)                                                              \
    do {                                                                         \
        amrq_status st_ = (call);                                                \
        if (st_ != AMRQ_STATUS_OK) {                                             \
            fprintf(stderr, "%s failed (%d): %s\n", #call, (int)st_,             \
                    amrq_last_error());                                          \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

static inline double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Whether argv holds "--quick". */
static inline int quick(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0) return 1;
    return 0;
}

#endif
