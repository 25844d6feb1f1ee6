/* Remote Queues from C: each rank sends frames to its right neighbour's two named
 * queues, "urgent" and "bulk" (a payload each), retrying while a queue is full and
 * taking its own frames meanwhile; it takes them with One-poll over both queues, the
 * urgent ones first when both have frames, and checks every word. Then each sends
 * PEEKED more to its neighbour's bulk queue, which reads each in place (read_queue: the
 * same frame at every call, the queue refused to dequeue meanwhile) and deletes it,
 *   queues: ranks=... frames=... checked=...
 * Run it under `amrun -n N`, or alone (it starts 2 ranks). */
#include "common.h"

enum { FRAMES = 2000, WORDS = 4, PEEKED = 3 };

typedef struct {
    amrq_t *am;
    amrq_poll_set_t *set;
    int urgent, bulk, left;
    long got, bad;
} rank_t;

/* Takes one frame if there is one: 1 if it did. */
static int take(rank_t *r) {
    uint64_t args[8], payload[WORDS];
    amrq_dequeued_t d;
    int which;
    CHECK(amrq_one_poll(r->am, r->set, args, 8, payload, sizeof payload, &d, &which));
    if (which < 0) return 0;
    /* args: the sender and the frame's number; the payload: four words made of both. */
    uint64_t k = args[1];
    r->bad += d.source != (uint32_t)r->left || args[0] != (uint64_t)r->left || d.nargs != 2 ||
              d.len != sizeof payload || (which == r->urgent) != (k % 4 == 0);
    for (int i = 0; i < WORDS; i++) r->bad += payload[i] != k * 10 + (uint64_t)i;
    r->got++;
    return 1;
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    rank_t r = {0};
    amrq_table_t *t = amrq_table_new();
    CHECK(amrq_table_queue(t, "urgent", 16, 1, &r.urgent));
    CHECK(amrq_table_queue(t, "bulk", 64, 1, &r.bulk));
    CHECK(amrq_init(t, 2, &r.am));
    int me = amrq_rank(r.am), size = amrq_size(r.am), right = (me + 1) % size;
    r.left = (me + size - 1) % size;
    int both[2] = {r.urgent, r.bulk};
    CHECK(amrq_poll_set_new(r.am, both, 2, &r.set));
    CHECK(amrq_barrier(r.am));
    for (uint64_t k = 0; k < FRAMES; k++) {
        uint64_t args[2] = {(uint64_t)me, k}, payload[WORDS];
        for (int i = 0; i < WORDS; i++) payload[i] = k * 10 + (uint64_t)i;
        int q = k % 4 == 0 ? r.urgent : r.bulk, accepted = 0;
        for (;;) {
            CHECK(amrq_enqueue(r.am, right, q, args, 2, payload, sizeof payload, &accepted));
            if (accepted) break;
            take(&r); /* full: make room for our left neighbour meanwhile */
        }
    }
    while (r.got < FRAMES) take(&r);
    CHECK(amrq_barrier(r.am));
    for (uint64_t k = 0; k < PEEKED; k++) {
        uint64_t args[2] = {(uint64_t)me, FRAMES + k}, payload[WORDS] = {k, k, k, k};
        int accepted = 0;
        CHECK(amrq_enqueue(r.am, right, r.bulk, args, 2, payload, sizeof payload, &accepted));
        r.bad += !accepted; /* 64 slots, empty: room for all */
    }
    for (uint64_t k = 0; k < PEEKED; k++) {
        amrq_frame_t f, again;
        int got = 0, removed = 0;
        while (!got) CHECK(amrq_read_queue(r.am, r.bulk, &f, &got));
        CHECK(amrq_read_queue(r.am, r.bulk, &again, &got));
        const uint64_t *w = f.payload;
        r.bad += f.source != (uint32_t)r.left || f.nargs != 2 || f.args[1] != FRAMES + k ||
                 f.len != sizeof(uint64_t) * WORDS || w[0] != k || w[WORDS - 1] != k ||
                 again.args != f.args || again.payload != f.payload;
        uint64_t spare[8], room[WORDS];
        amrq_dequeued_t d;
        r.bad += amrq_dequeue(r.am, r.bulk, spare, 8, room, sizeof room, &d, &got) != AMRQ_STATUS_RQ;
        CHECK(amrq_delete_queue(r.am, r.bulk, &removed));
        r.bad += !removed;
        r.got++;
    }
    CHECK(amrq_barrier(r.am));
    uint64_t totals[2] = {(uint64_t)r.got, (uint64_t)r.bad};
    CHECK(amrq_allreduce_u64(r.am, totals, 2, AMRQ_OP_SUM));
    if (totals[1] != 0 || totals[0] != (uint64_t)(FRAMES + PEEKED) * (uint64_t)size) {
        fprintf(stderr, "queues: %llu frames, %llu wrong\n", (unsigned long long)totals[0],
                (unsigned long long)totals[1]);
        return 1;
    }
    if (me == 0) printf("queues: ranks=%d frames=%d checked=%llu\n", size, FRAMES + PEEKED,
                        (unsigned long long)totals[0]);
    amrq_poll_set_free(r.set);
    CHECK(amrq_finalize(r.am));
    return 0;
}
