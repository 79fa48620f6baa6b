/*
 * test_gemm_rs_args.c - mkGemmReduceScatter and mkGemmAllReduce (the
 * same validation and kernel) without a GPU: the schedule
 * arithmetic of the fused kernel (every unit exactly once, every
 * dependency on an earlier round), its control block, argument
 * validation on one rank, and the first-call shape check across real
 * processes (fork + TCP bootstrap): a rank that passes another m, n or
 * m_all is reported by name on every rank, and nothing is computed.
 */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "ranks.h"
#include "mki.h"
#include "gemm/gemm_sched.h"
#include "ops/gemm_rs.h"

/* Position i of a schedule -> (owner, unit), as the kernel's tile() does
 * on a grid of `step` clusters. */
static void unit_at(const struct mki_grs_sched *s, int P, int me, int lag, int step, int i,
                    int *d, int *u)
{
    int g = 0;
    while (g + 1 < s->nseg && s->pos0[g + 1] <= i) ++g;
    unsigned mask = s->mask[g];
    int c = __builtin_popcount(mask), off = i - s->pos0[g];
    int k = s->k0[g] + off / c;
    for (int x = mki_grs_round_slot(off, c, step, lag); x > 0; --x) mask &= mask - 1;
    int bit = __builtin_ctz(mask);
    *d = bit == P ? me : (me + bit) % P;
    *u = bit == P ? k - lag : k;
}

/* Every (owner, unit) once; an own unit k comes after the round in
 * which every peer computes its unit k for this rank (their key (k, j),
 * ours (k + lag, P)); the order of positions follows the rounds. */
static void check_sched_on(int P, const int *units, int lag, int step)
{
    for (int me = 0; me < P; me++) {
        struct mki_grs_sched s;
        mki_grs_make_sched(P, me, units, lag, &s);
        int total = 0;
        for (int d = 0; d < P; d++) total += units[d];
        CHECK(s.nseg <= MKI_GRS_MAXSEG);
        CHECK(s.pos0[s.nseg] == total);
        int seen[8][64];
        memset(seen, 0, sizeof(seen));
        int prev_round = -1;
        for (int i = 0; i < total; i++) {
            int d, u;
            unit_at(&s, P, me, lag, step, i, &d, &u);
            CHECK(d >= 0 && d < P && u >= 0 && u < units[d]);
            if (d < 0 || d >= P || u < 0 || u >= 64) continue;
            seen[d][u]++;
            int round = d == me ? u + lag : u;
            CHECK(round >= prev_round); /* positions in round order */
            prev_round = round;
        }
        for (int d = 0; d < P; d++)
            for (int u = 0; u < units[d]; u++) CHECK(seen[d][u] == 1);
    }
}

static void check_sched(int P, const int *units, int lag)
{
    static const int steps[] = {1, 2, 3, 4, 7, 8, 65, 66};
    for (size_t x = 0; x < sizeof(steps) / sizeof(steps[0]); x++)
        check_sched_on(P, units, lag, steps[x]);
}

/* Own units per cluster over a rank's whole schedule on `step` clusters:
 * the most and the fewest a cluster gets differ by at most `most`. */
static void check_balance(int P, const int *units, int lag, int step, int most)
{
    struct mki_grs_sched s;
    mki_grs_make_sched(P, 0, units, lag, &s);
    const int total = s.pos0[s.nseg];
    int own[256] = {0};
    for (int i = 0; i < total; i++) {
        int d, u;
        unit_at(&s, P, 0, lag, step, i, &d, &u);
        if (d == 0) own[i % step]++;
    }
    int lo = own[0], hi = own[0];
    for (int j = 1; j < step; j++) {
        if (own[j] < lo) lo = own[j];
        if (own[j] > hi) hi = own[j];
    }
    CHECK(hi - lo <= most);
    if (hi - lo > most)
        fprintf(stderr, "P %d step %d: own units per cluster %d..%d\n", P, step, lo, hi);
}

static void test_sched(void)
{
    int u2[2] = {32, 32};
    check_sched(2, u2, 34);
    check_sched(2, u2, 1);
    int u3[3] = {5, 0, 7}; /* a rank with no rows */
    check_sched(3, u3, 4);
    check_sched(3, u3, 20); /* a gap: the peers done before own rows are due */
    int u8[8] = {9, 9, 9, 9, 9, 9, 9, 8};
    check_sched(8, u8, 10);
    int u1[4] = {1, 0, 0, 3};
    check_sched(4, u1, 2);
    /* two ranks, 4 units each, lag 2: peer units 0, 1, then rounds of
     * (peer k, own k - 2): p0 p1 p2 o0 p3 o1, then o2 o3 (on 66
     * clusters: all in the first wave, so no rotation) */
    struct mki_grs_sched s;
    int u[2] = {4, 4};
    mki_grs_make_sched(2, 0, u, 2, &s);
    int d, k;
    unit_at(&s, 2, 0, 2, 66, 0, &d, &k);
    CHECK(d == 1 && k == 0);
    unit_at(&s, 2, 0, 2, 66, 2, &d, &k);
    CHECK(d == 1 && k == 2);
    unit_at(&s, 2, 0, 2, 66, 3, &d, &k);
    CHECK(d == 0 && k == 0);
    unit_at(&s, 2, 0, 2, 66, 4, &d, &k);
    CHECK(d == 1 && k == 3);
    unit_at(&s, 2, 0, 2, 66, 6, &d, &k);
    CHECK(d == 0 && k == 2);
    unit_at(&s, 2, 0, 2, 66, 7, &d, &k);
    CHECK(d == 0 && k == 3);
    /* the kinds in turn on every cluster: 8192^3 at 2 ranks on 66
     * clusters (1024 units per owner, lag 101), 4 and 8 ranks, other
     * grids (the counts without the rotation in the comments) */
    {
        int b2[2] = {1024, 1024}, b4[4] = {512, 512, 512, 512};
        int b8[8] = {512, 512, 512, 512, 512, 512, 512, 512};
        check_balance(2, b2, 101, 66, 2); /* 1..30 unrotated */
        check_balance(2, b2, 101, 65, 2);
        check_balance(2, b2, 101, 132, 2);
        check_balance(4, b4, 53, 66, 3);  /* 0..15 */
        check_balance(4, b4, 53, 64, 3);  /* 0..30 */
        check_balance(8, b8, 40, 66, 3);  /* 0..16 */
        check_balance(8, b8, 40, 132, 3);
    }
    /* slots, groups, bank */
    CHECK(mki_grs_slot(1, 0, 2) == 0 && mki_grs_slot(0, 1, 2) == 0);
    CHECK(mki_grs_slot(3, 1, 4) == 1 && mki_grs_slot(0, 1, 4) == 2);
    CHECK(mki_grs_group(1) == 1 && mki_grs_group(MKI_GRS_MAXFLAGS) == 1);
    CHECK(mki_grs_group(MKI_GRS_MAXFLAGS + 1) == 2);
    CHECK(mki_grs_bank_bytes(1, 1, 100, 100, 100) == 0);
    CHECK(mki_grs_bank_bytes(4, 1, 3000, 5004, 5001) == 3ull * 3000 * 5004 * 4);
    /* with slices, slabs whose slices are whole tiles wide */
    CHECK(mki_grs_slice_cols(8192) == 8192 && mki_grs_slice_cols(1001) == 1024);
    CHECK(mki_grs_bank_bytes(2, 4, 16, 8192, 8192) == 2ull * 16 * 4 * 8192 * 4);
    CHECK(mki_grs_bank_bytes(3, 2, 100, 1004, 1001) == 3ull * 100 * 2 * 1024 * 4);
    /* split-K only where the tiles fill less than half the grid */
    CHECK(mki_grs_slices(32, 132, 4096, 16) == 4);   /* m = 16, n = 8192: 64 k-blocks */
    CHECK(mki_grs_slices(16, 132, 4096, 1) == 8);
    CHECK(mki_grs_slices(66, 132, 4096, 64) == 2);
    CHECK(mki_grs_slices(67, 132, 4096, 8) == 1);
    CHECK(mki_grs_slices(1024, 132, 4096, 8) == 1);
    CHECK(mki_grs_slices(32, 132, 256, 8) == 1);    /* 4 k-blocks: nothing to split */
    CHECK(mki_grs_slices(32, 132, 512, 8) == 2);
    CHECK(mki_grs_slices(32, 132, 4096, 65) == 1);  /* the owner's sum would cost more */
    /* owners' rows: even, or whole 128-row blocks (mkGemmAllReduce) */
    CHECK(mki_grs_rows(1001, 2, 0, 0) == 501 && mki_grs_rows(1001, 2, 1, 0) == 500);
    CHECK(mki_grs_rows(16, 2, 0, 1) == 16 && mki_grs_rows(16, 2, 1, 1) == 0);
    CHECK(mki_grs_rows(300, 2, 0, 1) == 256 && mki_grs_rows(300, 2, 1, 1) == 44);
    CHECK(mki_grs_rows(1024, 3, 0, 1) == 384 && mki_grs_rows(1024, 3, 2, 1) == 256);
    for (int P = 1; P <= 8; P++)
        for (int64_t m = 0; m < 2000; m += 37) {
            int64_t sum = 0;
            for (int r = 0; r < P; r++) sum += mki_grs_rows(m, P, r, 1);
            CHECK(sum == m);
        }
    {
        const int64_t ar16[2] = {16, 0}, rs16[2] = {8, 8}, big[2] = {4096, 4096};
        CHECK(mki_grs_call_slices(ar16, 2, 8192, 4096, 132) == 4);
        CHECK(mki_grs_call_slices(rs16, 2, 8192, 4096, 132) == 2);
        CHECK(mki_grs_call_slices(big, 2, 8192, 4096, 132) == 1);
    }
    /* the outbox: MKI_GRS_RING fp32 tiles of the engine's 128 x 256 per CTA */
    CHECK(MKI_GEMM_BM == 128 && MKI_GEMM_BN == 256);
    CHECK(mki_grs_outbox_bytes(0) == 0);
    CHECK(mki_grs_outbox_bytes(132) == 132ull * MKI_GRS_RING * 128 * 256 * 4);
    CHECK(offsetof(struct mki_grs_ctl, flag) % 8 == 0);
    CHECK(sizeof(struct mki_gar_ctl) == 8ull * (MKI_MAXLOCAL - 1) * MKI_GRS_MAXFLAGS);
    CHECK(offsetof(struct mki_grs_ctl, released) % 8 == 0);
    CHECK(offsetof(struct mki_grs_ctl, peer_released) % 8 == 0);
    CHECK(offsetof(struct mki_grs_ctl, flag) == 128); /* the header: 16 words */
}

/* The fused kernel's schedule in lockstep: P ranks, each W CTAs (clusters)
 * taking positions c, c + W, ... of its schedule; a step is one unit's
 * mainloop on every CTA that is not waiting.  A peer unit's flag is raised
 * when its CTA finishes the next unit's mainloop, or leaves (the engine's
 * kDeferSignal); an own unit's epilogue waits for every source's flag of
 * that unit.  Returns -1 on a deadlock (a step in which no CTA moves),
 * else the number of CTA-steps spent waiting. */
#define SIM_MAXU 256
/* With S K-slices per tile (units[] counts tiles), work unit u of an owner
 * is slice S - 1 - u % S of tile u / S, as the kernel's tile() has it:
 * slice 0 of an own tile waits for every source's S slices and its own
 * S - 1 others (raised like a peer's: when stored, one tile late); the
 * other slices wait for nothing. */
static long simulate_s(int P, const int *tiles, const int *lag, int W, int S)
{
    struct mki_grs_sched sc[8];
    int total[8], units[8];
    for (int r = 0; r < P; r++) units[r] = tiles[r] * S;
    for (int r = 0; r < P; r++) {
        mki_grs_make_sched(P, r, units, lag[r], &sc[r]);
        total[r] = sc[r].pos0[sc[r].nseg];
    }
    static unsigned char flag[8][8][SIM_MAXU]; /* [source][owner][unit] */
    static unsigned char raise[8][8][SIM_MAXU];
    memset(flag, 0, sizeof(flag));
    int next[8][128], state[8][128], pend_d[8][128], pend_u[8][128]; /* state 0 main, 1 epi, 2 done */
    for (int r = 0; r < P; r++)
        for (int c = 0; c < W; c++) {
            next[r][c] = c;
            state[r][c] = c < total[r] ? 0 : 2;
            pend_d[r][c] = -1;
            pend_u[r][c] = 0;
        }
    long waits = 0;
    for (int step = 0;; step++) {
        int moved = 0, left = 0;
        memset(raise, 0, sizeof(raise));
        for (int r = 0; r < P; r++)
            for (int c = 0; c < W; c++) {
                if (state[r][c] == 2) continue;
                left = 1;
                int d, u;
                unit_at(&sc[r], P, r, lag[r], W, next[r][c], &d, &u);
                if (state[r][c] == 0) { /* the mainloop; then the deferred flag */
                    if (pend_d[r][c] >= 0) raise[r][pend_d[r][c]][pend_u[r][c]] = 1;
                    pend_d[r][c] = -1;
                    state[r][c] = 1;
                    moved = 1;
                    continue;
                }
                if (d == r && u % S == S - 1) { /* own slice 0: every slice of the tile */
                    int ok = 1;
                    for (int q = 0; q < P; q++)
                        for (int x = u - (S - 1); x <= u; x++)
                            ok &= (q == r && x == u) || flag[q][r][x];
                    if (!ok) { waits++; continue; }
                } else {
                    pend_d[r][c] = d;
                    pend_u[r][c] = u;
                }
                moved = 1;
                next[r][c] += W;
                state[r][c] = next[r][c] < total[r] ? 0 : 2;
                if (state[r][c] == 2 && pend_d[r][c] >= 0) { /* leaving: flush */
                    raise[r][pend_d[r][c]][pend_u[r][c]] = 1;
                    pend_d[r][c] = -1;
                }
            }
        for (int q = 0; q < P; q++)
            for (int d = 0; d < P; d++)
                for (int u = 0; u < SIM_MAXU; u++) flag[q][d][u] |= raise[q][d][u];
        if (!left) return waits;
        if (!moved) return -1;
        if (step > 100000) return -1;
    }
}

static long simulate(int P, const int *units, const int *lag, int W)
{
    return simulate_s(P, units, lag, W, 1);
}

static void test_sim(void)
{
    const int Ws[] = {1, 3, 16, 33, 66};
    const int cases[][9] = {
        {2, 64, 64}, {2, 5, 0}, {3, 40, 0, 17}, {4, 30, 30, 30, 30},
        {8, 12, 12, 12, 12, 12, 12, 12, 11}, {4, 1, 0, 0, 3},
    };
    for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const int P = cases[i][0];
        const int *units = &cases[i][1];
        for (unsigned w = 0; w < sizeof(Ws) / sizeof(Ws[0]); w++) {
            const int W = Ws[w];
            int lag[8];
            /* any lag is free of deadlock */
            for (int l = 0; l < 3; l++) {
                for (int r = 0; r < P; r++) lag[r] = l * (r + 1);
                long w0 = simulate(P, units, lag, W);
                if (w0 < 0) fprintf(stderr, "deadlock: case %u W %d lag step %d\n", i, W, l);
                CHECK(w0 >= 0);
            }
            /* the kernel's lag (gemm_rs.cu): two waves over the P slots */
            for (int r = 0; r < P; r++) lag[r] = 2 * ((W + P - 1) / P) + 2;
            long waits = simulate(P, units, lag, W);
            CHECK(waits >= 0);
            /* equal owners, several units per CTA: no own tile waits */
            int equal = 1;
            for (int r = 1; r < P; r++) equal &= units[r] == units[0];
            if (equal && units[0] * P >= 4 * W) CHECK(waits == 0);
            /* K-slices: no deadlock at any lag (tiles x S within the
             * simulator's units) */
            for (int S = 2; S <= 8; S *= 2) {
                int ok = 1;
                for (int r = 0; r < P; r++) ok &= units[r] * S <= SIM_MAXU;
                if (!ok) continue;
                for (int l = 0; l < 3; l++) {
                    for (int r = 0; r < P; r++) lag[r] = l * (r + 1);
                    long ws = simulate_s(P, units, lag, W, S);
                    if (ws < 0)
                        fprintf(stderr, "deadlock with %d slices: case %u W %d lag step %d\n", S, i,
                                W, l);
                    CHECK(ws >= 0);
                }
            }
        }
    }
}

static char buf[4096] __attribute__((aligned(64)));
#define P ((void *)buf)

static void test_one_rank(void)
{
    mkUniqueId id;
    mkComm_t comm;
    CHECK_RES(mkGetUniqueId(&id), mkSuccess);
    CHECK_RES(mkCommInitRank(&comm, 1, id, 0, NULL), mkSuccess);
    int64_t mall[1] = {64};
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 64, 64, 0, mkBfloat16, NULL, 0),
              mkErrInvalidArgument);
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 64, 64, 0, mkFloat32, comm, 0),
              mkErrUnsupported);
    CHECK_CONTAINS(mkGetLastError(comm), "mkFloat32");
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 64, 64, 0, (mkDataType_t)9, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "dtype");
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 64, 64, 2, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "transB");
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, -1, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "negative");
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 64, 60, 1, mkBfloat16, comm, 0),
              mkErrUnsupported);
    CHECK_CONTAINS(mkGetLastError(comm), "multiple of 8");
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 64, 0, 1, mkBfloat16, comm, 0),
              mkErrUnsupported);
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 64, 60, 64, 0, mkFloat16, comm, 0),
              mkErrUnsupported);
    /* n need not be a multiple of 8 with transB = 1: rejected only for
     * want of a GPU (or, on a GPU machine, because buf is host memory) */
    mkResult_t r = mkGemmReduceScatter(P, P, P, NULL, 64, 60, 64, 1, mkFloat16, comm, 0);
    CHECK(r == mkErrUnsupported || r == mkErrInvalidArgument);
    CHECK(strstr(mkGetLastError(comm), "multiple of 8") == NULL);
    CHECK_RES(mkGemmReduceScatter(NULL, P, P, NULL, 64, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "A is NULL");
    CHECK_RES(mkGemmReduceScatter(P, NULL, P, NULL, 64, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "B is NULL");
    CHECK_RES(mkGemmReduceScatter(P, P, NULL, NULL, 64, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "C is NULL");
    /* m_all must add up to m */
    mall[0] = 32;
    CHECK_RES(mkGemmReduceScatter(P, P, P, mall, 64, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "add up");
    mall[0] = -5;
    CHECK_RES(mkGemmReduceScatter(P, P, P, mall, 64, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "m_all[0]");
    mall[0] = 65;
    CHECK_RES(mkGemmReduceScatter(P, P, P, mall, 64, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    /* overflow */
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, (int64_t)1 << 40, 64, 64, 0, mkBfloat16,
                                  comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "too large");
    CHECK_RES(mkGemmReduceScatter(P, P, P, NULL, 1 << 30, 1 << 30, 1 << 20, 1, mkBfloat16,
                                  comm, 0), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "too large");
    /* nothing to compute (m = 0): A, B, C may be NULL; without a GPU the
     * call still fails for want of one, never for the pointers */
    r = mkGemmReduceScatter(NULL, NULL, NULL, NULL, 0, 64, 64, 0, mkBfloat16, comm, 0);
    CHECK(r == mkSuccess || strstr(mkGetLastError(comm), "NULL") == NULL);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
}

/* mkGemmAllReduce: the same checks, its own name in every message. */
static void test_ar_one_rank(void)
{
    mkUniqueId id;
    mkComm_t comm;
    CHECK_RES(mkGetUniqueId(&id), mkSuccess);
    CHECK_RES(mkCommInitRank(&comm, 1, id, 0, NULL), mkSuccess);
    CHECK_RES(mkGemmAllReduce(P, P, P, 64, 64, 64, 0, mkBfloat16, NULL, 0),
              mkErrInvalidArgument);
    CHECK_RES(mkGemmAllReduce(P, P, P, 64, 64, 64, 0, mkFloat32, comm, 0), mkErrUnsupported);
    CHECK_CONTAINS(mkGetLastError(comm), "mkGemmAllReduce");
    CHECK_CONTAINS(mkGetLastError(comm), "mkFloat32");
    CHECK_RES(mkGemmAllReduce(P, P, P, 64, 64, 64, 0, (mkDataType_t)9, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "dtype");
    CHECK_RES(mkGemmAllReduce(P, P, P, 64, 64, 64, -1, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "transB");
    CHECK_RES(mkGemmAllReduce(P, P, P, 64, -3, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "negative");
    CHECK_RES(mkGemmAllReduce(P, P, P, 64, 64, 12, 1, mkBfloat16, comm, 0), mkErrUnsupported);
    CHECK_CONTAINS(mkGetLastError(comm), "multiple of 8");
    const char *nulls[] = {"A is NULL", "B is NULL", "C is NULL"};
    for (int i = 0; i < 3; i++) {
        CHECK_RES(mkGemmAllReduce(i == 0 ? NULL : P, i == 1 ? NULL : P, i == 2 ? NULL : P, 64,
                                  64, 64, 0, mkBfloat16, comm, 0),
                  mkErrInvalidArgument);
        CHECK_CONTAINS(mkGetLastError(comm), nulls[i]);
        CHECK_CONTAINS(mkGetLastError(comm), "mkGemmAllReduce");
    }
    CHECK_RES(mkGemmAllReduce(P, P, P, (int64_t)1 << 40, 64, 64, 0, mkBfloat16, comm, 0),
              mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(comm), "too large");
    /* C overlapping A (host memory here: refused either way, never run) */
    mkResult_t r = mkGemmAllReduce(P, P, P, 64, 64, 64, 0, mkBfloat16, comm, 0);
    CHECK(r != mkSuccess);
    r = mkGemmAllReduce(NULL, NULL, NULL, 0, 64, 64, 0, mkBfloat16, comm, 0);
    CHECK(r == mkSuccess || strstr(mkGetLastError(comm), "NULL") == NULL);
    CHECK_RES(mkCommDestroy(comm), mkSuccess);
}

/* ---- several processes: the shape check ----------------------------- */

#define EXPECT RANK_EXPECT

/* Rank 1 passes n = 264 where the others pass 256. */
static int mismatched_n(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    int64_t n = rank == 1 ? 264 : 256;
    mkResult_t r = mkGemmReduceScatter(P, P, P, NULL, 64, n, 128, 0, mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "rank 1") != NULL);
    EXPECT(strstr(mkGetLastError(comm), "n differs") != NULL);
    /* The same call again: checked again (not cached), same verdict. */
    r = mkGemmReduceScatter(P, P, P, NULL, 64, n, 128, 0, mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    mkCommDestroy(comm);
    return 0;
}

/* Rank 2's m_all differs from the others'. */
static int mismatched_rows(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    int64_t mall[3] = {100, 0, 28};
    if (rank == 2) mall[0] = 99, mall[1] = 1;
    mkResult_t r = mkGemmReduceScatter(P, P, P, mall, 128, 64, 64, 1, mkFloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "m_all differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Rank 1 passes another slice of K: every rank must pass the same k
 * (the plan, fused or not, must be the same everywhere). */
static int mismatched_k(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkGemmReduceScatter(P, P, P, NULL, 64, 256, rank == 1 ? 64 : 128, 1,
                                       mkBfloat16, comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "k differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* mkGemmAllReduce: rank 1 passes m = 72 where the others pass 64. */
static int ar_mismatched_m(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkGemmAllReduce(P, P, P, rank == 1 ? 72 : 64, 256, 128, 1, mkBfloat16,
                                   comm, 0);
    EXPECT(r == mkErrInvalidArgument);
    EXPECT(strstr(mkGetLastError(comm), "mkGemmAllReduce") != NULL);
    EXPECT(strstr(mkGetLastError(comm), "m differs") != NULL);
    mkCommDestroy(comm);
    return 0;
}

/* Shapes agree: every rank is rejected for the same local reason (no GPU
 * here), none for the shape. */
static int matching(int rank, int nranks, mkUniqueId id)
{
    mkComm_t comm = NULL;
    EXPECT(mkCommInitRank(&comm, nranks, id, rank, NULL) == mkSuccess);
    mkResult_t r = mkGemmReduceScatter(P, P, P, NULL, 64, 256, 128, 1, mkBfloat16, comm, 0);
    EXPECT(r != mkSuccess);
    EXPECT(strstr(mkGetLastError(comm), "differs") == NULL);
    mkCommDestroy(comm);
    return 0;
}


/* The decode kernel's arithmetic (kernels/ops/gemm_dec.cu): the wgmma
 * width for m rows, K-slices only where the column blocks leave half
 * the grid empty (each slice at least 4 k-blocks), LL lines only at <= 8
 * rows with one slice, and the bank's bytes. */
static void test_decode(void)
{
    CHECK(mki_gdec_nw(1) == 16 && mki_gdec_nw(16) == 16 && mki_gdec_nw(17) == 32);
    CHECK(mki_gdec_nw(64) == 64 && mki_gdec_nw(65) == 128 && mki_gdec_nw(128) == 128);
    CHECK(mki_gdec_slices(8192, 4096, 132) == 1);  /* 128 blocks: the grid is full */
    CHECK(mki_gdec_slices(1024, 4096, 132) == 8);  /* 16 blocks x 8 = 128 units */
    CHECK(mki_gdec_slices(1024, 1024, 132) == 4);  /* 16 k-blocks: 4 per slice at most 4 */
    CHECK(mki_gdec_slices(1024, 64, 132) == 1);    /* one k-block: nothing to split */
    CHECK(mki_gdec_slices(520, 4104, 132) == 8);   /* 9 blocks, 65 k-blocks */
    CHECK(mki_gdec_slices(3000, 1000, 132) == 2);  /* 47 blocks */
    CHECK(mki_gdec_slices(8192, 4096, 33) == 1);   /* a quarter of the GPU (MPS x 4) */
    for (int64_t n = 8; n <= 1 << 16; n = n * 3 + 8)
        for (int ctas = 1; ctas <= 132; ctas += 13) {
            const int S = mki_gdec_slices(n, 4096, ctas);
            const int64_t nnb = (n + MKI_GDEC_BN - 1) / MKI_GDEC_BN;
            CHECK(S == 1 || S == 2 || S == 4 || S == 8);
            CHECK(S == 1 || (nnb * S <= ctas && 64 / S >= 4));
        }
    CHECK(mki_gdec_ll(1, 1) && mki_gdec_ll(8, 1));
    CHECK(!mki_gdec_ll(9, 1) && !mki_gdec_ll(8, 2) && !mki_gdec_ll(128, 1));
    CHECK(mki_gdec_bank_bytes(2, 1, 16, 8192) == 2ull * 16 * 8192 * 4);
    CHECK(mki_gdec_bank_bytes(8, 8, 128, 1024) == 8ull * 8 * 128 * 1024 * 4);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    alarm(120);
    setenv("MK_TIMEOUT_MS", "20000", 1);
    test_sched();
    test_decode();
    test_sim();
    /* forked ranks first: the parent must not have touched CUDA yet */
    CHECK(run_ranks(2, 2, new_id(), mismatched_n) == 0);
    CHECK(run_ranks(3, 3, new_id(), mismatched_rows) == 0);
    CHECK(run_ranks(3, 3, new_id(), mismatched_k) == 0);
    CHECK(run_ranks(2, 2, new_id(), matching) == 0);
    CHECK(run_ranks(3, 3, new_id(), ar_mismatched_m) == 0);
    test_one_rank();
    test_ar_one_rank();
    TEST_DONE();
}
