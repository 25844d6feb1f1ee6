/* Calls with answers, many in flight: every rank calls its right neighbour's `square`
 * 4000 times with 64 calls pending at once, checking each answer; forgets 10 calls of
 * `bump` and then sees, through one more, that they ran; and calls `refuse`, whose
 * failure comes back as the call's status with the target's reason. Prints
 *   calls: ranks=... checked=... forgotten_ran=... refused=...
 * Run it under `amrun -n N`, or alone (it starts 2 ranks). */
#include "common.h"

#define WINDOW 64
#define CALLS 4000

static amrq_call_handler_t SQUARE, BUMP, REFUSE;

/* The square of args[0], plus the caller's rank: the answer names its call. */
static int square(void *s, const amrq_msg_t *m, uint64_t *answer) {
    (void)s;
    if (m->nargs != 1) return 2;
    *answer = m->args[0] * m->args[0] + m->source;
    return 0;
}

/* Counts the calls it served; answers the count. */
static int bump(void *s, const amrq_msg_t *m, uint64_t *answer) {
    (void)m;
    *answer = ++*(uint64_t *)s;
    return 0;
}

static int refuse(void *s, const amrq_msg_t *m, uint64_t *answer) {
    (void)s, (void)m, (void)answer;
    return 7;
}

int main(void) {
    uint64_t bumps = 0;
    amrq_table_t *t = amrq_table_new();
    CHECK(amrq_table_call(t, "square", square, NULL, &SQUARE));
    CHECK(amrq_table_call(t, "bump", bump, &bumps, &BUMP));
    CHECK(amrq_table_call(t, "refuse", refuse, NULL, &REFUSE));
    amrq_t *am;
    CHECK(amrq_init(t, 2, &am));
    int me = amrq_rank(am), size = amrq_size(am), right = (me + 1) % size;

    amrq_pending_t *window[WINDOW] = {0};
    uint64_t checked = 0;
    for (uint64_t i = 0; i < CALLS + WINDOW; i++) {
        amrq_pending_t **slot = &window[i % WINDOW];
        if (*slot) {
            uint64_t x = i - WINDOW, answer;
            CHECK(amrq_call_wait(*slot, &answer));
            if (answer != x * x + (uint64_t)me) {
                fprintf(stderr, "calls: call %llu answered %llu\n", (unsigned long long)x,
                        (unsigned long long)answer);
                return 1;
            }
            checked++;
            *slot = NULL;
        }
        if (i < CALLS) CHECK(amrq_call(am, right, SQUARE, &i, 1, slot));
    }

    /* Forgotten calls still run: the next answer counts them. */
    for (int i = 0; i < 10; i++) {
        amrq_pending_t *p;
        CHECK(amrq_call(am, right, BUMP, NULL, 0, &p));
        CHECK(amrq_call_forget(p));
    }
    amrq_pending_t *p;
    uint64_t count;
    CHECK(amrq_call(am, right, BUMP, NULL, 0, &p));
    CHECK(amrq_call_wait(p, &count));

    /* A handler's failure is the call's status, with the target's reason. */
    int refused = 0;
    CHECK(amrq_call(am, right, REFUSE, NULL, 0, &p));
    if (amrq_call_wait(p, NULL) == AMRQ_STATUS_AM &&
        strstr(amrq_last_error(), "returned 7") && strstr(amrq_last_error(), "refuse"))
        refused = 1;

    CHECK(amrq_finalize(am));
    printf("calls: ranks=%d checked=%llu forgotten_ran=%llu refused=%d\n", size,
           (unsigned long long)checked, (unsigned long long)(count - 1), refused);
    return 0;
}
