/* Short AM round trip between two ranks, beside the raw cache-line round trip measured
 * in the same run between the same two ranks: the C twin of `amrq-bench round-trip`
 * (its raw reference repeats RawPingPong's rotating design, line for line), with the line
 *   pingpong: rtt_ns=... raw_rtt_ns=... ratio=... batch_ratio=...
 * (medians over batches; batch_ratio: the median of each AM batch over the raw batch
 * just before it). Run it under `amrun -n 2`, or alone (it starts 2 ranks). */
#include "common.h"
#include <stdatomic.h>

/* The raw reference: a flag ping-ponged over 256 rotating pairs of 128-byte lines in
 * rank 0's segment, each side spinning tightly; no amrq code between the round trips. */
enum { LINE_PAIRS = 256 };
typedef struct {
    _Alignas(128) _Atomic uint64_t word;
    char pad[128 - sizeof(uint64_t)];
} line_t;
typedef struct {
    line_t ping[LINE_PAIRS], pong[LINE_PAIRS];
} raw_lines_t;

_Static_assert(sizeof(raw_lines_t) == 2 * LINE_PAIRS * 128, "the rotating design's layout");

/* Rank 0's side: round trips base+1 ..= base+iters; ns per round trip. */
static double raw_initiate(raw_lines_t *l, uint64_t base, uint64_t iters) {
    double t0 = now_ns();
    for (uint64_t i = base + 1; i <= base + iters; i++) {
        size_t k = (size_t)(i % LINE_PAIRS);
        atomic_store_explicit(&l->ping[k].word, i, memory_order_release);
        while (atomic_load_explicit(&l->pong[k].word, memory_order_acquire) != i) {
        }
    }
    return (now_ns() - t0) / (double)iters;
}

/* Rank 1's side of raw_initiate. */
static void raw_respond(raw_lines_t *l, uint64_t base, uint64_t iters) {
    for (uint64_t i = base + 1; i <= base + iters; i++) {
        size_t k = (size_t)(i % LINE_PAIRS);
        while (atomic_load_explicit(&l->ping[k].word, memory_order_acquire) != i) {
        }
        atomic_store_explicit(&l->pong[k].word, i, memory_order_release);
    }
}

static amrq_request_handler_t PING;
static amrq_reply_handler_t PONG;

/* Written by the handlers, which run inside amrq calls only: no volatile needed. */
typedef struct {
    uint64_t replies; /* rank 0: the last reply's value */
    uint64_t served;  /* rank 1: requests served */
} state_t;

static void ping(void *s, amrq_token_t *t, const amrq_msg_t *m) {
    ((state_t *)s)->served++;
    amrq_reply(t, PONG, m->args, 1);
}

static void pong(void *s, const amrq_msg_t *m) { ((state_t *)s)->replies = m->args[0]; }

int main(int argc, char **argv) {
    int q = quick(argc, argv);
    /* round-trip's sizes: a warm-up batch, then 5 (31) of 5000 (50000) round trips. */
    uint64_t iters = q ? 5000 : 50000;
    enum { MAX_BATCHES = 31 };
    int batches = q ? 5 : MAX_BATCHES;
    state_t st = {0, 0};
    amrq_table_t *t = amrq_table_new();
    CHECK(amrq_table_request(t, "ping", ping, &st, &PING));
    CHECK(amrq_table_reply(t, "pong", pong, &st, &PONG));
    amrq_t *am;
    CHECK(amrq_init(t, 2, &am));
    if (amrq_size(am) != 2) {
        fprintf(stderr, "pingpong: needs 2 ranks, not %d\n", amrq_size(am));
        return 1;
    }
    int me = amrq_rank(am);
    /* Zeroed (a fresh segment) and used for nothing else. */
    size_t at, len;
    void *rank0;
    CHECK(amrq_alloc_symmetric(am, sizeof(raw_lines_t), 128, &at));
    CHECK(amrq_peer_segment(am, 0, &rank0, &len));
    if (rank0 == NULL) {
        fprintf(stderr, "pingpong: the two ranks share no memory (two hosts): no raw reference\n");
        return 1;
    }
    raw_lines_t *lines = (raw_lines_t *)((char *)rank0 + at);
    CHECK(amrq_barrier(am));
    double raw[MAX_BATCHES], rtt[MAX_BATCHES], ratio[MAX_BATCHES];
    uint64_t seq = 0;
    /* As round-trip's batches (without its failing requests): the raw round trips,
     * then the AM ones at once; batch 0 warms up and is dropped. */
    for (int b = 0; b <= batches; b++) {
        uint64_t base = (uint64_t)b * iters;
        if (me == 0) {
            double r = raw_initiate(lines, base, iters);
            double t0 = now_ns();
            /* As round-trip's wait: a word of the state reaching a value. */
            for (uint64_t i = 0; i < iters; i++) {
                ++seq;
                CHECK(amrq_request(am, 1, PING, &seq, 1));
                CHECK(amrq_wait_u64(am, &st.replies, AMRQ_CMP_GE, seq));
            }
            if (b > 0) {
                raw[b - 1] = r;
                rtt[b - 1] = (now_ns() - t0) / (double)iters;
                ratio[b - 1] = rtt[b - 1] / r;
            }
        } else {
            raw_respond(lines, base, iters);
            CHECK(amrq_wait_u64(am, &st.served, AMRQ_CMP_GE, base + iters));
        }
    }
    CHECK(amrq_barrier(am));
    if (me == 0) {
        double rt = median(rtt, batches), rw = median(raw, batches);
        double br = median(ratio, batches);
        printf("AM Short request->reply (C): median %.1f ns; raw %.1f ns\n", rt, rw);
        printf("pingpong: rtt_ns=%.3f raw_rtt_ns=%.3f ratio=%.3f batch_ratio=%.3f\n", rt, rw,
               rt / rw, br);
    }
    CHECK(amrq_finalize(am));
    return 0;
}
