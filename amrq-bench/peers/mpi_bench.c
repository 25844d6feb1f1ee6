/* amrq-bench's Open MPI peer: the same figures amrq-bench measures, on 2 ranks.
 *
 *   rtt_ns        8-byte MPI_Send/MPI_Recv ping-pong, round trip
 *   msgs_per_s    8-byte MPI_Isend in windows of 64 (osu_mbw_mr style; a window of
 *                 1024 is 2-3x slower here), one acknowledging reply at the end
 *   bw_64k_mb_s   streaming bandwidth of 64 KiB messages (window of 64 MPI_Isend)
 *   bw_1m_mb_s    the same with 1 MiB messages
 *   barrier_ns    MPI_Barrier
 *
 * Each figure is the median of BATCHES timed batches (one warm-up first); rank 0
 * prints one line: `mpi: key=value ...`. A test name (rtt, rate, bw, barrier) runs
 * that test alone, so that amrq-bench can run amrq's same measurement just before.
 * Built and run by `amrq-bench peers`: mpicc -O2, mpirun -np 2 --bind-to core, with
 * the fastest shared-memory set-up measured here (ob1 + vader, no single-copy
 * mechanism: CMA moves 64 KiB at ~8 GB/s on this VM, plain copies at ~20 GB/s).
 * Arguments: [quick] [rtt|rate|bw|barrier]; "quick": fewer iterations. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 11
#define BURST 1024
#define WINDOW 64

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static int rank;

/* One batch of the ping-pong: seconds per round trip. */
static double pingpong(int iters, char *buf) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int i = 0; i < iters; i++) {
        if (rank == 0) {
            MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
        }
    }
    return (MPI_Wtime() - t) / iters;
}

/* One batch of streaming `count` messages of `size` bytes in windows of `window`,
 * then an acknowledgement: seconds per message. */
static double stream(int count, int size, int window, char *buf, MPI_Request *req) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t = MPI_Wtime();
    for (int sent = 0; sent < count; sent += window) {
        for (int w = 0; w < window; w++) {
            if (rank == 0)
                MPI_Isend(buf, size, MPI_BYTE, 1, 1, MPI_COMM_WORLD, &req[w]);
            else
                MPI_Irecv(buf, size, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req[w]);
        }
        MPI_Waitall(window, req, MPI_STATUSES_IGNORE);
    }
    if (rank == 0)
        MPI_Recv(buf, 8, MPI_BYTE, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
        MPI_Send(buf, 8, MPI_BYTE, 0, 2, MPI_COMM_WORLD);
    return (MPI_Wtime() - t) / count;
}

int main(int argc, char **argv) {
    int size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "mpi_bench runs on 2 ranks, not %d\n", size);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int quick = 0;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "quick") == 0)
            quick = 1;
        else if (!strcmp(argv[i], "rtt") || !strcmp(argv[i], "rate") || !strcmp(argv[i], "bw") ||
                 !strcmp(argv[i], "barrier"))
            only = argv[i];
        else {
            if (rank == 0) fprintf(stderr, "mpi_bench: unknown argument %s\n", argv[i]);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
#define RUNS(test) (!only || strcmp(only, test) == 0)
    int div = quick ? 10 : 1;
    char *buf = malloc(1 << 20);
    MPI_Request *req = malloc(BURST * sizeof *req);
    memset(buf, 1, 1 << 20);
    double rtt[BATCHES], rate[BATCHES], bw64[BATCHES], bw1m[BATCHES], bar[BATCHES];
    for (int b = -1; b < BATCHES; b++) {
        double r = RUNS("rtt") ? pingpong(50000 / div, buf) : 0;
        double m = RUNS("rate") ? stream(BURST * 20 / div, 8, WINDOW, buf, req) : 0;
        double w = RUNS("bw") ? stream(2048 / div, 64 << 10, WINDOW, buf, req) : 0;
        double v = RUNS("bw") ? stream(256 / div, 1 << 20, WINDOW / 4, buf, req) : 0;
        double x = 0;
        if (RUNS("barrier")) {
            int iters = 20000 / div;
            MPI_Barrier(MPI_COMM_WORLD);
            double t = MPI_Wtime();
            for (int i = 0; i < iters; i++) MPI_Barrier(MPI_COMM_WORLD);
            x = (MPI_Wtime() - t) / iters;
        }
        if (b >= 0) {
            rtt[b] = r * 1e9;
            rate[b] = m > 0 ? 1.0 / m : 0;
            bw64[b] = w > 0 ? (64 << 10) / w / 1e6 : 0;
            bw1m[b] = v > 0 ? (1 << 20) / v / 1e6 : 0;
            bar[b] = x * 1e9;
        }
    }
    if (rank == 0) {
        printf("mpi:");
        if (RUNS("rtt")) printf(" rtt_ns=%.1f", median(rtt, BATCHES));
        if (RUNS("rate")) printf(" msgs_per_s=%.0f", median(rate, BATCHES));
        if (RUNS("bw"))
            printf(" bw_64k_mb_s=%.1f bw_1m_mb_s=%.1f", median(bw64, BATCHES), median(bw1m, BATCHES));
        if (RUNS("barrier")) printf(" barrier_ns=%.1f", median(bar, BATCHES));
        printf("\n");
    }
    free(req);
    free(buf);
    MPI_Finalize();
    return 0;
}
