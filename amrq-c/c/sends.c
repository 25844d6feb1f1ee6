/* The header's inline amrq_request and amrq_reply beside the library's calls they fall
 * back to: every rank sends its right neighbour requests of 0 to 8 args (6 or fewer are
 * written inline, 7 and 8 by the library), in bursts longer than the ring (the inline
 * send finds it full and the library waits for room), and each is answered by a reply
 * of as many args; both sides check every message's sender, args and order. Then the
 * calls a correct program never makes: a second reply, a handler id never set, a reply
 * handler's id cast to a request handler's, a rank that does not exist, args missing,
 * nine args. Prints
 *   sends: ranks=... checked=... refused=...
 * Run it under `amrun -n N`, or alone (it starts 2 ranks). */
#include "common.h"

static amrq_request_handler_t ASK;
static amrq_reply_handler_t ANSWER;

typedef struct {
    uint64_t asked;     /* requests received, in order */
    uint64_t answered;  /* replies received, in order */
    uint64_t bad;       /* messages whose args were not as sent */
    uint64_t refused;   /* second replies refused */
    size_t left, right; /* where requests and replies come from */
} state_t;

/* The args of message `i`: `n = i % 9` words, word k = i * 16 + k. */
static size_t args_of(uint64_t i, uint64_t *a) {
    size_t n = (size_t)(i % 9);
    for (size_t k = 0; k < n; k++) a[k] = i * 16 + k;
    return n;
}

/* Message `i` from rank `from`: its sender, its args, no payload. */
static int same(uint64_t i, size_t from, const amrq_msg_t *m) {
    uint64_t want[8];
    size_t n = args_of(i, want);
    return m->source == from && m->len == 0 && m->nargs == n &&
           (n == 0 || memcmp(m->args, want, n * sizeof *want) == 0);
}

static void ask(void *s, amrq_token_t *t, const amrq_msg_t *m) {
    state_t *st = s;
    uint64_t i = st->asked++;
    if (!same(i, st->left, m)) st->bad++;
    uint64_t a[8];
    size_t n = args_of(i, a);
    CHECK(amrq_reply(t, ANSWER, a, n));
    /* At most one reply per request: the second is refused, inline or not. */
    if (amrq_reply(t, ANSWER, a, n) == AMRQ_STATUS_ARGUMENT) st->refused++;
}

static void answer(void *s, const amrq_msg_t *m) {
    state_t *st = s;
    if (!same(st->answered++, st->right, m)) st->bad++;
}

/* Polls until `*count` exceeds `at_least`; a message lost (say, one a wrong header
 * made the receiver drop) ends the program after 60 s instead of hanging. */
static void poll_until(amrq_t *am, const uint64_t *count, uint64_t at_least) {
    double give_up = now_ns() + 60e9;
    while (*(const volatile uint64_t *)count <= at_least) {
        CHECK(amrq_poll(am, NULL));
        if (now_ns() > give_up) {
            fprintf(stderr, "sends: %llu messages after 60 s, more than %llu expected\n",
                    (unsigned long long)*count, (unsigned long long)at_least);
            exit(1);
        }
    }
}

int main(void) {
    state_t st = {0, 0, 0, 0, 0, 0};
    amrq_table_t *t = amrq_table_new();
    CHECK(amrq_table_request(t, "ask", ask, &st, &ASK));
    CHECK(amrq_table_reply(t, "answer", answer, &st, &ANSWER));
    amrq_t *am;
    CHECK(amrq_init(t, 2, &am));
    int me = amrq_rank(am), size = amrq_size(am), right = (me + 1) % size;
    st.left = (size_t)((me + size - 1) % size);
    st.right = (size_t)right;
    CHECK(amrq_barrier(am));

    /* Bursts of 3000 requests without polling between them: past any ring's room. */
    const uint64_t n = 3 * 3000;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t a[8];
        size_t k = args_of(i, a);
        CHECK(amrq_request(am, right, ASK, a, k));
        if (i % 3000 == 2999) poll_until(am, &st.answered, i);
    }
    poll_until(am, &st.asked, n - 1);
    poll_until(am, &st.answered, n - 1);

    /* What a correct program never sends is refused, inline or not, and nothing is sent. */
    uint64_t one = 1, refused = 0;
    amrq_request_handler_t unset = {0}, as_reply = {ANSWER.id}, past = {ASK.id + 1};
    uint64_t nine[9] = {0};
    refused += amrq_request(am, right, unset, &one, 1) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_request(am, right, as_reply, &one, 1) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_request(am, right, past, &one, 1) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_request(am, right, ASK, nine, 9) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_request(am, size, ASK, &one, 1) == AMRQ_STATUS_AM; /* no such rank */
    refused += amrq_request(am, -1, ASK, &one, 1) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_request(am, right, ASK, NULL, 2) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_request(NULL, right, ASK, &one, 1) == AMRQ_STATUS_ARGUMENT;
    refused += amrq_reply(NULL, ANSWER, &one, 1) == AMRQ_STATUS_ARGUMENT;
    CHECK(amrq_barrier(am));
    CHECK(amrq_poll(am, NULL));
    if (st.asked != n || st.answered != n || st.bad != 0 || st.refused != n || refused != 9) {
        fprintf(stderr,
                "sends: rank %d: asked %llu answered %llu of %llu, %llu bad, %llu second replies "
                "refused, %llu of 9 bad calls refused\n",
                me, (unsigned long long)st.asked, (unsigned long long)st.answered,
                (unsigned long long)n, (unsigned long long)st.bad,
                (unsigned long long)st.refused, (unsigned long long)refused);
        return 1;
    }
    uint64_t checked[1] = {st.asked + st.answered}, bad_calls[1] = {refused + st.refused};
    CHECK(amrq_allreduce_u64(am, checked, 1, AMRQ_OP_SUM));
    CHECK(amrq_allreduce_u64(am, bad_calls, 1, AMRQ_OP_SUM));
    if (me == 0)
        printf("sends: ranks=%d checked=%llu refused=%llu\n", size,
               (unsigned long long)checked[0], (unsigned long long)bad_calls[0]);
    CHECK(amrq_finalize(am));
    return 0;
}
