/* Split-C style one-sided communication from C: each rank puts its block of a
 * symmetric array into its right neighbour's (implicit puts, then sync and a barrier),
 * gets its left neighbour's back with a blocking get and again with a handle, sends it
 * once more as a Long request, checks all of them, counts itself in rank 0's counter
 * with a remote fetch-add, and checks a broadcast,
 *   getput: ranks=... words=... checked=...
 * Run it under `amrun -n N`, or alone (it starts 3 ranks). */
#include "common.h"

enum { WORDS = 4096 };

static amrq_request_handler_t LONG;

/* A Long request's payload: already in place in this rank's segment. */
typedef struct {
    volatile int arrived;
    uint64_t first, last;
    size_t len;
} landed_t;

static void landed(void *s, amrq_token_t *t, const amrq_msg_t *m) {
    (void)t;
    landed_t *l = s;
    const uint64_t *w = m->payload;
    l->len = m->len;
    l->first = w[0];
    l->last = w[m->len / 8 - 1];
    l->arrived = 1;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    landed_t l = {0, 0, 0, 0};
    amrq_table_t *t = amrq_table_new();
    CHECK(amrq_table_request(t, "landed", landed, &l, &LONG));
    amrq_t *am;
    CHECK(amrq_init(t, 3, &am));
    int me = amrq_rank(am), size = amrq_size(am);
    int right = (me + 1) % size, left = (me + size - 1) % size;
    size_t mine, inbox, counter, drop;
    CHECK(amrq_alloc_symmetric(am, WORDS * 8, 64, &mine));
    CHECK(amrq_alloc_symmetric(am, WORDS * 8, 64, &inbox));
    CHECK(amrq_alloc_symmetric(am, WORDS * 8, 64, &drop));
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
    /* Again with a handle, testing it while it runs. */
    amrq_handle_t *h;
    memset(back, 0, WORDS * 8);
    CHECK(amrq_get_nb(am, left, mine, back, WORDS * 8, &h));
    int done = 0;
    while (!done) CHECK(amrq_test(h, &done));
    CHECK(amrq_wait(h));
    for (int i = 0; i < WORDS; i++) bad += back[i] != ((uint64_t)left << 32 | (uint64_t)i);
    free(back);
    /* My block as a Long request into my right neighbour's drop area. */
    CHECK(amrq_request_long(am, right, LONG, NULL, 0, block, WORDS * 8, drop));
    while (!l.arrived) CHECK(amrq_poll(am, NULL));
    bad += l.len != WORDS * 8 || l.first != (uint64_t)left << 32 ||
           l.last != ((uint64_t)left << 32 | (uint64_t)(WORDS - 1));
    char word[16] = "";
    if (me == 0) strcpy(word, "from rank 0");
    CHECK(amrq_broadcast(am, 0, word, sizeof word));
    bad += strcmp(word, "from rank 0") != 0;
    uint64_t total[2] = {(uint64_t)bad, 0};
    if (me == 0) total[1] = *(volatile uint64_t *)(seg + counter);
    CHECK(amrq_allreduce_u64(am, total, 2, AMRQ_OP_SUM));
    if (total[0] != 0 || total[1] != (uint64_t)size) {
        fprintf(stderr, "getput: %llu words wrong, %llu of %d ranks counted\n",
                (unsigned long long)total[0], (unsigned long long)total[1], size);
        return 1;
    }
    if (me == 0) printf("getput: ranks=%d words=%d checked=%d\n", size, WORDS, 3 * WORDS * size);
    CHECK(amrq_finalize(am));
    return 0;
}
