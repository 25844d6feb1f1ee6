/* Every rank streams Short AMs to its right neighbour; every message is counted, and
 * the counts are checked with an all-reduce (the ring of examples/ring.rs), and it prints
 *   ring: ranks=... total_msgs_per_s=... min_rank_msgs_per_s=...
 * Run it under `amrun -n N`, or alone (it starts 2 ranks). */
#include "common.h"

static amrq_request_handler_t COUNT;

static void count(void *s, amrq_token_t *t, const amrq_msg_t *m) {
    (void)t;
    *(volatile uint64_t *)s += m->args[0];
}

int main(int argc, char **argv) {
    uint64_t n = quick(argc, argv) ? 100000 : 2000000;
    volatile uint64_t got = 0;
    amrq_table_t *t = amrq_table_new();
    CHECK(amrq_table_request(t, "count", count, (void *)&got, &COUNT));
    amrq_t *am;
    CHECK(amrq_init(t, 2, &am));
    int me = amrq_rank(am), size = amrq_size(am), right = (me + 1) % size;
    CHECK(amrq_barrier(am));
    double t0 = now_ns();
    uint64_t one = 1;
    for (uint64_t i = 0; i < n; i++) {
        CHECK(amrq_request(am, right, COUNT, &one, 1));
        if (i % 64 == 0) CHECK(amrq_poll(am, NULL));
    }
    while (got != n) CHECK(amrq_poll(am, NULL));
    double rate = (double)n / ((now_ns() - t0) / 1e9);
    CHECK(amrq_barrier(am));
    uint64_t total[1] = {got};
    CHECK(amrq_allreduce_u64(am, total, 1, AMRQ_OP_SUM));
    double slowest[1] = {rate}, sum[1] = {rate};
    CHECK(amrq_allreduce_f64(am, slowest, 1, AMRQ_OP_MIN));
    CHECK(amrq_allreduce_f64(am, sum, 1, AMRQ_OP_SUM));
    if (total[0] != n * (uint64_t)size) {
        fprintf(stderr, "ring: %llu messages counted, %llu sent\n", (unsigned long long)total[0],
                (unsigned long long)(n * (uint64_t)size));
        return 1;
    }
    if (me == 0)
        printf("ring: ranks=%d total_msgs_per_s=%.0f min_rank_msgs_per_s=%.0f\n", size, sum[0],
               slowest[0]);
    CHECK(amrq_finalize(am));
    return 0;
}
