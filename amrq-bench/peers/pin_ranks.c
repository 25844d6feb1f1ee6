/* amrq-bench's pinning of GASNet-EX's smp-conduit ranks, loaded with LD_PRELOAD.
 *
 * GASNet's fork launcher (smp-conduit/gasnet_core.c, gasnetc_fork_children) makes
 * rank 0 the process that was started and forks ranks 1 … N-1 in that order; it does
 * not pin them, and GASNet-EX offers no option to (gasnett_set_affinity is a tool for
 * its own tests). amrq's launcher pins rank k to the k-th core the job may use. This
 * library does the same for GASNet: at load it pins the process to the first core of
 * AMRQ_PIN_CORES (a comma-separated list of cpu numbers), and a pthread_atfork
 * handler pins the child of the k-th fork to the (k+1)-th core. Only the first N-1
 * forks of the first process count (N = GASNET_PSHM_NODES), and a child never
 * re-pins its own children, so a fork the program makes later changes nothing.
 *
 * Every pinned process says so on stderr, `amrq-pin: rank R pid P core C`, which
 * amrq-bench reads back to check that each rank was pinned where it should be.
 * Built by amrq-bench: cc -O2 -shared -fPIC -o pin_ranks.so pin_ranks.c -lpthread */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CORES 1024

static int cores[MAX_CORES];
static int ncores;
static int nodes;    /* GASNET_PSHM_NODES */
static int forks;    /* forks made so far by the first process */
static int is_child; /* this process is a forked rank: its forks are not ranks */

static void pin(int rank) {
    if (ncores == 0) return;
    int core = cores[rank % ncores];
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    if (sched_setaffinity(0, sizeof set, &set) == 0)
        fprintf(stderr, "amrq-pin: rank %d pid %d core %d\n", rank, (int)getpid(), core);
    else
        fprintf(stderr, "amrq-pin: rank %d pid %d cannot pin to core %d\n", rank, (int)getpid(), core);
}

static void before_fork(void) {
    if (!is_child) forks++;
}

static void in_child(void) {
    if (is_child || forks >= nodes) return;
    is_child = 1;
    pin(forks);
}

__attribute__((constructor)) static void start(void) {
    const char *list = getenv("AMRQ_PIN_CORES");
    const char *n = getenv("GASNET_PSHM_NODES");
    if (!list || !n) return;
    nodes = atoi(n);
    for (const char *p = list; *p && ncores < MAX_CORES;) {
        cores[ncores++] = atoi(p);
        p = strchr(p, ',');
        if (!p) break;
        p++;
    }
    /* Only the program itself: a shell or tool that runs it would otherwise pin. */
    unsetenv("LD_PRELOAD");
    pthread_atfork(before_fork, NULL, in_child);
    pin(0);
}
