/* The guide's first C program (docs/guide/06-c.md): rank 0 asks rank 1 for a value
 * and waits for the answer. Built by CI the way a user builds one, against an installed amrq:
 *   cc first.c $(pkg-config --cflags --libs amrq) -o first && amrun -n 2 ./first */
#include <stdio.h>
#include <stdint.h>
#include "amrq.h"

static amrq_request_handler_t PING;
static amrq_reply_handler_t PONG;

static void ping(void *s, amrq_token_t *t, const amrq_msg_t *m) {
    (void)s;
    uint64_t answer = m->args[0] + 1;
    amrq_reply(t, PONG, &answer, 1);
}

static void pong(void *s, const amrq_msg_t *m) { *(uint64_t *)s = m->args[0]; }

int main(void) {
    uint64_t got = 0;
    amrq_table_t *t = amrq_table_new();
    amrq_table_request(t, "ping", ping, NULL, &PING);
    amrq_table_reply(t, "pong", pong, &got, &PONG);
    amrq_t *am;
    if (amrq_init(t, 2, &am) != AMRQ_STATUS_OK) {
        fprintf(stderr, "%s\n", amrq_last_error());
        return 1;
    }
    if (amrq_rank(am) == 0) {
        uint64_t v = 41;
        if (amrq_request(am, 1, PING, &v, 1) != AMRQ_STATUS_OK ||
            amrq_wait_u64(am, &got, AMRQ_CMP_EQ, 42) != AMRQ_STATUS_OK) {
            fprintf(stderr, "%s\n", amrq_last_error());
            return 1;
        }
        printf("first: rank 1 answered %llu\n", (unsigned long long)got);
    }
    return amrq_finalize(am) == AMRQ_STATUS_OK ? 0 : 1;
}
