/* Split-C style one-sided communication from C: each rank puts its block of a
 * symmetric array into its right neighbour's (implicit puts, then sync and a barrier),
 * gets its left neighbour's back with a blocking get, checks both, and counts itself
 * in rank 0's counter with a remote fetch-add,
 *   getput: ranks=... words=... checked=...
 * Run it under `amrun -n N`, or alone (it starts 3 ranks). */
#include "common.h"

enum { WORDS = 4096 };

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    amrq_table_t *t = amrq_table_new();
    amrq_t *am;
    CHECK(amrq_init(t, 3, &am));
    int me = amrq_rank(am), size = amrq_size(am);
    int right = (me + 1) % size, left = (me + size - 1) % size;
    size_t mine, inbox, counter;
    CHECK(amrq_alloc_symmetric(am, WORDS * 8, 64, &mine));
    CHECK(amrq_alloc_symmetric(am, WORDS * 8, 64, &inbox));
    CHECK(amrq_alloc_symmetric(am, 8, 8, &counter));
    char *seg;
    CHECK(amrq_segment(am, (void **)&seg, NULL));
    uint64_t *block = (uint64_t *)(seg + mine), *in = (uint64_t *)(seg + inbox);
    for (int i = 0; i < WORDS; i++) block[i] = (uint64_t)me << 32 | (uint64_t)i;
    CHECK(amrq_barrier(am));
    /* My block into my right neighbour's inbox, in four implicit puts. */
    for (int k = 0; k < 4; k++)
        CHECK(amrq_put_nbi(am, right, inbox + k * WORDS * 2, block + k * WORDS / 4, WORDS * 2));
    CHECK(amrq_sync_nbi(am, NULL));
    uint64_t old;
    CHECK(amrq_fetch_add(am, 0, counter, 1, &old));
    CHECK(amrq_barrier(am));
    uint64_t *back = malloc(WORDS * 8);
    CHECK(amrq_get(am, left, mine, back, WORDS * 8));
    long bad = 0;
    for (int i = 0; i < WORDS; i++) {
        uint64_t want = (uint64_t)left << 32 | (uint64_t)i;
        bad += in[i] != want;
        bad += back[i] != want;
    }
    free(back);
    uint64_t total[2] = {(uint64_t)bad, 0};
    if (me == 0) total[1] = *(volatile uint64_t *)(seg + counter);
    CHECK(amrq_allreduce_u64(am, total, 2, AMRQ_OP_SUM));
    if (total[0] != 0 || total[1] != (uint64_t)size) {
        fprintf(stderr, "getput: %llu words wrong, %llu of %d ranks counted\n",
                (unsigned long long)total[0], (unsigned long long)total[1], size);
        return 1;
    }
    if (me == 0) printf("getput: ranks=%d words=%d checked=%d\n", size, WORDS, 2 * WORDS * size);
    CHECK(amrq_finalize(am));
    return 0;
}
