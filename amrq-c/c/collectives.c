/* Collectives and remote atomics from C, each checked against what it must give:
 * broadcast, reduce to a root, allreduce and inclusive and exclusive scans (u64 and
 * double; sum, min, max), gather, allgather and the all-to-all exchange; then every
 * rank takes a ticket from rank 0 with compare-and-swap, sets its bit there with
 * fetch-or, and reads both back,
 *   collectives: ranks=... checked=...
 * Run it under `amrun -n N`, or alone (it starts 3 ranks). */
#include "common.h"

enum { N = 5, BLOCK = 3 };

static long checked, wrong;

static void expect(int ok, const char *what, int me) {
    checked++;
    if (!ok) {
        wrong++;
        fprintf(stderr, "rank %d: %s is wrong\n", me, what);
    }
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    amrq_table_t *t = amrq_table_new();
    amrq_t *am;
    CHECK(amrq_init(t, 3, &am));
    int me = amrq_rank(am), size = amrq_size(am);
    uint64_t r = (uint64_t)me, n = (uint64_t)size;

    /* broadcast from the last rank */
    uint64_t b[N];
    for (int i = 0; i < N; i++) b[i] = me == size - 1 ? 100 + (uint64_t)i : 0;
    CHECK(amrq_broadcast(am, size - 1, b, sizeof b));
    for (int i = 0; i < N; i++) expect(b[i] == 100 + (uint64_t)i, "broadcast", me);

    /* reduce to rank 0, allreduce: rank r gives r + i */
    uint64_t s[N], lo[N], hi[N];
    for (int i = 0; i < N; i++) s[i] = lo[i] = hi[i] = r + (uint64_t)i;
    CHECK(amrq_reduce_u64(am, 0, s, N, AMRQ_OP_SUM));
    if (me == 0)
        for (int i = 0; i < N; i++) expect(s[i] == n * (n - 1) / 2 + n * (uint64_t)i, "reduce", me);
    CHECK(amrq_allreduce_u64(am, lo, N, AMRQ_OP_MIN));
    CHECK(amrq_allreduce_u64(am, hi, N, AMRQ_OP_MAX));
    for (int i = 0; i < N; i++) {
        expect(lo[i] == (uint64_t)i, "allreduce min", me);
        expect(hi[i] == n - 1 + (uint64_t)i, "allreduce max", me);
    }
    double d = 0.5 * (double)(me + 1);
    CHECK(amrq_allreduce_f64(am, &d, 1, AMRQ_OP_SUM));
    expect(d == 0.25 * (double)(n * (n + 1)), "allreduce of doubles", me);

    /* scans: rank r gives r + 1 */
    uint64_t in = r + 1, ex = r + 1;
    CHECK(amrq_scan_u64(am, &in, 1, AMRQ_OP_SUM, 1));
    CHECK(amrq_scan_u64(am, &ex, 1, AMRQ_OP_SUM, 0));
    expect(in == (r + 1) * (r + 2) / 2, "inclusive scan", me);
    expect(ex == r * (r + 1) / 2, "exclusive scan", me);
    double m = (double)(size - me);
    CHECK(amrq_scan_f64(am, &m, 1, AMRQ_OP_MIN, 1));
    expect(m == (double)(size - me), "scan min of doubles", me);

    /* gather to rank 1 (if there is one), allgather: rank r gives BLOCK words r*10+k */
    uint64_t mine[BLOCK], *all = calloc((size_t)size * BLOCK, sizeof *all);
    uint64_t *sent = calloc((size_t)size * BLOCK, sizeof *sent);
    uint64_t *got = calloc((size_t)size * BLOCK, sizeof *got);
    if (!all || !sent || !got) return 1;
    for (int k = 0; k < BLOCK; k++) mine[k] = r * 10 + (uint64_t)k;
    int root = size > 1 ? 1 : 0;
    CHECK(amrq_gather(am, root, mine, sizeof mine, me == root ? all : NULL));
    if (me == root)
        for (int i = 0; i < size * BLOCK; i++)
            expect(all[i] == (uint64_t)(i / BLOCK) * 10 + (uint64_t)(i % BLOCK), "gather", me);
    memset(all, 0, (size_t)size * BLOCK * sizeof *all);
    CHECK(amrq_allgather(am, mine, sizeof mine, all));
    for (int i = 0; i < size * BLOCK; i++)
        expect(all[i] == (uint64_t)(i / BLOCK) * 10 + (uint64_t)(i % BLOCK), "allgather", me);

    /* exchange: block j of rank r is r*100 + j*10 + k; rank j gets it as its block r */
    for (int j = 0; j < size; j++)
        for (int k = 0; k < BLOCK; k++) sent[j * BLOCK + k] = r * 100 + (uint64_t)j * 10 + (uint64_t)k;
    CHECK(amrq_exchange(am, sent, BLOCK * sizeof(uint64_t), got));
    for (int i = 0; i < size; i++)
        for (int k = 0; k < BLOCK; k++)
            expect(got[i * BLOCK + k] == (uint64_t)i * 100 + r * 10 + (uint64_t)k, "exchange", me);

    /* atomics on two words of rank 0: a ticket taken by compare-and-swap, a bit each */
    size_t words;
    CHECK(amrq_alloc_symmetric(am, 2 * sizeof(uint64_t), 8, &words));
    CHECK(amrq_barrier(am));
    uint64_t old = 0, seen;
    for (;;) {
        CHECK(amrq_atomic(am, 0, words, AMRQ_ATOMIC_OP_LOAD, 0, 0, &seen));
        CHECK(amrq_atomic(am, 0, words, AMRQ_ATOMIC_OP_COMPARE_SWAP, seen + 1, seen, &old));
        if (old == seen) break; /* ours: seen + 1 */
    }
    expect(old < n, "ticket", me);
    CHECK(amrq_atomic(am, 0, words + 8, AMRQ_ATOMIC_OP_FETCH_OR, 1ull << me, 0, &old));
    expect((old >> me & 1) == 0, "a bit set once", me);
    CHECK(amrq_barrier(am));
    CHECK(amrq_atomic(am, 0, words, AMRQ_ATOMIC_OP_LOAD, 0, 0, &seen));
    expect(seen == n, "tickets taken", me);
    CHECK(amrq_atomic(am, 0, words + 8, AMRQ_ATOMIC_OP_LOAD, 0, 0, &seen));
    expect(seen == (n >= 64 ? ~0ull : (1ull << n) - 1), "bits set", me);
    CHECK(amrq_atomic(am, 0, words, AMRQ_ATOMIC_OP_FETCH_XOR, 0, 0, NULL));
    expect(amrq_atomic(am, 0, words, 99, 0, 0, NULL) == AMRQ_STATUS_ARGUMENT,
           "an unknown atomic refused", me);
    expect(amrq_allreduce_u64(am, &seen, 1, 7) == AMRQ_STATUS_ARGUMENT,
           "an unknown reduction refused", me);

    uint64_t totals[2] = {(uint64_t)checked, (uint64_t)wrong};
    CHECK(amrq_allreduce_u64(am, totals, 2, AMRQ_OP_SUM));
    free(all);
    free(sent);
    free(got);
    if (totals[1] != 0) {
        if (me == 0) fprintf(stderr, "collectives: %llu of %llu checks failed\n",
                             (unsigned long long)totals[1], (unsigned long long)totals[0]);
        return 1;
    }
    if (me == 0) printf("collectives: ranks=%d checked=%llu\n", size, (unsigned long long)totals[0]);
    CHECK(amrq_finalize(am));
    return 0;
}
