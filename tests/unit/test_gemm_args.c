/* CPU unit test of the GEMM engine's argument validation and tile schedule.
 * Host headers only; links kernels/gemm/gemm_host.c and nothing of CUDA.
 *   cc -std=c99 -I kernels/gemm tests/unit/test_gemm_args.c kernels/gemm/gemm_host.c
 * Exit status: 0 when every check passed. */
#include "gemm.h"
#include "gemm_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        ++checks;                                                         \
        if (!(cond)) {                                                    \
            ++failures;                                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                   \
            printf(__VA_ARGS__);                                          \
            printf("\n");                                                 \
        }                                                                 \
    } while (0)

/* Fake device addresses: validation never dereferences them. */
#define PA ((const void *)(uintptr_t)0x10000000)
#define PB ((const void *)(uintptr_t)0x30000000)
#define PC ((const void *)(uintptr_t)0x50000000)
#define PD ((void *)(uintptr_t)0x70000000)

static const mki_gemm_device h100 = {9, 0, 132};

static mki_gemm_args base(int64_t m, int64_t n, int64_t k)
{
    mki_gemm_args a;
    memset(&a, 0, sizeof(a));
    a.m = m; a.n = n; a.k = k;
    a.a = PA; a.b = PB; a.d = PD;
    a.in_type = MKI_DT_BF16; a.out_type = MKI_DT_BF16;
    a.trans_b = 1; a.alpha = 1.0f;
    return a;
}

/* Expects `code`, and for errors a non-empty message containing `word`. */
static void expect(const mki_gemm_args *a, const mki_gemm_device *d, int code, const char *word,
                   const char *what)
{
    char msg[256];
    mki_gemm_plan plan;
    memset(&plan, 0x5a, sizeof(plan));
    int r = mki_gemm_validate(a, d, &plan, msg, sizeof(msg));
    CHECK(r == code, "%s: got %d want %d (%s)", what, r, code, msg);
    if (code != MKI_GEMM_OK) {
        CHECK(msg[0] != '\0', "%s: empty message", what);
        CHECK(!word || strstr(msg, word), "%s: message '%s' lacks '%s'", what, msg, word);
        /* the plan must be left alone on error */
        CHECK(((unsigned char *)&plan)[0] == 0x5a, "%s: plan written on error", what);
    }
}

static void test_validation(void)
{
    mki_gemm_args a;
    mki_gemm_plan p;
    char msg[256];

    a = base(8192, 8192, 8192);
    expect(&a, &h100, MKI_GEMM_OK, NULL, "plain");
    expect(NULL, &h100, MKI_GEMM_ERR_INVALID, "NULL", "null args");
    expect(&a, NULL, MKI_GEMM_ERR_INVALID, "NULL", "null device");

    a = base(64, 64, 100);
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "multiple of 8", "K % 8");
    a = base(64, 64, 0);
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "multiple of 8", "K = 0");
    a = base(-1, 64, 64);
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "negative", "negative M");
    a = base(64, 64, 64);
    a.k = 1LL << 32;
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "2^31", "huge K");

    a = base(0, 64, 64);
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.noop == 1,
          "M = 0 is a no-op");

    a = base(64, 64, 64); a.a = NULL;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "A is NULL", "null A");
    a = base(64, 64, 64); a.d = NULL;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "D is NULL", "null D");
    a = base(64, 64, 64); a.beta = 1.0f;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "C is NULL", "beta without C");
    a = base(64, 64, 64); a.beta = 1.0f; a.c = PC;
    expect(&a, &h100, MKI_GEMM_OK, NULL, "beta with C");
    a = base(64, 64, 64); a.beta = 1.0f; a.c = PD;
    expect(&a, &h100, MKI_GEMM_OK, NULL, "C == D");
    a = base(64, 64, 64); a.beta = 1.0f; a.c = PD; a.ldc = 72;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "ldc == ldd", "C == D, other ld");
    a = base(64, 64, 64); a.beta = 1.0f; a.c = (const char *)PD + 64;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "overlaps", "C partly on D");

    a = base(64, 64, 64); a.a = (const char *)PA + 8;
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "16-byte", "A misaligned");
    a = base(64, 64, 64); a.d = (char *)PD + 1;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "aligned", "D odd address");
    a = base(64, 64, 64); a.d = (char *)PA;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "overlaps A", "D on A");

    a = base(64, 64, 64); a.lda = 32;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "lda", "lda < K");
    a = base(64, 64, 64); a.lda = 68;
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "lda", "lda % 8");
    a = base(64, 127, 64); a.trans_b = 0;
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "ldb", "B row-major, N = 127, ldb default");
    a = base(64, 127, 64); a.trans_b = 0; a.ldb = 128;
    expect(&a, &h100, MKI_GEMM_OK, NULL, "B row-major, N = 127, ldb padded");
    a = base(64, 127, 64); a.trans_b = 0; a.ldb = 64;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "ldb", "ldb < N");

    a = base(64, 64, 64); a.in_type = MKI_DT_F32;
    expect(&a, &h100, MKI_GEMM_ERR_UNSUPPORTED, "fp32", "fp32 inputs");
    a = base(64, 64, 64); a.in_type = (mki_dtype_t)7;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "dtype", "bad in_type");
    a = base(64, 64, 64); a.out_type = (mki_dtype_t)9;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "dtype", "bad out_type");

    {
        mki_gemm_device ampere = {8, 0, 108};
        a = base(64, 64, 64);
        expect(&a, &ampere, MKI_GEMM_ERR_UNSUPPORTED, "sm_90a", "sm_80");
    }
    a = base(64, 64, 64); a.num_ctas = 133;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "co-resident", "too many CTAs");
    a = base(64, 64, 64); a.num_ctas = -1;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "num_ctas", "negative CTAs");

    /* Plans: defaults, tails, grid sizing, epilogue choice. */
    a = base(8191, 127, 4104);
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK, "tail plan: %s", msg);
    CHECK(p.num_m_blk == 64 && p.num_n_blk == 1 && p.num_k_blk == 65 && p.num_tiles == 64,
          "tail blocks %d %d %d", p.num_m_blk, p.num_n_blk, p.num_k_blk);
    CHECK(p.grid == 64, "grid capped by tiles: %d", p.grid);
    CHECK(p.lda == 4104 && p.ldb == 4104 && p.ldd == 127, "default lds");
    CHECK(p.epi_direct == 1, "N = 127 bf16 rows are not 16-byte strides: direct epilogue");
    a = base(8192, 8192, 8192); a.num_ctas = 116;
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.grid == 116 &&
              p.num_tiles == 2048 && p.epi_direct == 0 && p.group_m == MKI_GEMM_GROUP_M,
          "116-CTA plan");
    a = base(8192, 8192, 8192);
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.cluster_m == 2 &&
              p.num_units == 1024 && p.grid == 132,
          "pairs: cluster %d units %d grid %d", p.cluster_m, p.num_units, p.grid);
    a = base(8192, 8192, 8192); a.num_ctas = 7;
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.cluster_m == 1 &&
              p.num_units == 2048 && p.grid == 7,
          "odd grid: no pairs");
    a = base(8192, 8192, 8192); a.cluster_m = 1;
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.cluster_m == 1,
          "forced single CTAs");
    a = base(8192, 8192, 8192); a.cluster_m = 2; a.num_ctas = 7;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "even", "pairs on 7 CTAs");
    a = base(8192, 8192, 8192); a.cluster_m = 3;
    expect(&a, &h100, MKI_GEMM_ERR_INVALID, "cluster_m", "cluster 3");
    a = base(300, 1000, 64); /* 3 M-blocks: a pair would waste a quarter */
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.cluster_m == 1,
          "3 M-blocks: no pairs");
    a = base(129, 1000, 64); /* 2 M-blocks x 4 N-blocks: 4 units, 8 CTAs */
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.cluster_m == 2 &&
              p.num_units == 4 && p.grid == 8,
          "129 rows: pairs, grid %d", p.grid);
    a = base(64, 1300, 64); a.ldd = 1304; /* 2600-byte rows: TMA would write past them */
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.epi_direct == 1,
          "N*2 not a multiple of 16, padded ldd: direct epilogue");
    a = base(64, 4, 64); a.out_type = MKI_DT_F32;
    CHECK(mki_gemm_validate(&a, &h100, &p, msg, sizeof msg) == MKI_GEMM_OK && p.epi_direct == 0,
          "fp32 N = 4 rows are 16 bytes: TMA epilogue");
}

/* Every tile index maps to a distinct in-range tile and back; a band walks
 * down group_m rows before moving right. */
static void test_schedule(void)
{
    static const int shapes[][3] = {{1, 1, 8}, {3, 4, 2}, {64, 32, 8}, {65, 3, 8},
                                    {7, 5, 16}, {128, 4, 8}, {10, 112, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
        int nm = shapes[s][0], nn = shapes[s][1], g = shapes[s][2];
        int tiles = nm * nn, bad = 0;
        char *seen = calloc((size_t)tiles, 1);
        for (int t = 0; t < tiles; ++t) {
            int mb, nb;
            mki_gemm_tile_of(t, nm, nn, g, &mb, &nb);
            if (mb < 0 || mb >= nm || nb < 0 || nb >= nn || seen[mb * nn + nb]++)
                ++bad;
            else if (mki_gemm_index_of(mb, nb, nm, nn, g) != t)
                ++bad;
            if (t + 1 < tiles && g > 1 && nm >= g && t < g * nn) {
                int mb2, nb2; /* inside the first full band: next tile is one row down */
                mki_gemm_tile_of(t + 1, nm, nn, g, &mb2, &nb2);
                if ((t + 1) % g && !(mb2 == mb + 1 && nb2 == nb))
                    ++bad;
            }
        }
        CHECK(bad == 0, "schedule %dx%d group %d: %d bad tiles", nm, nn, g, bad);
        free(seen);
    }
    /* Units of 2 tiles: (unit, rank) covers every tile once; units start on
     * even M-blocks; the second tile of the last unit may lie past M. */
    {
        static const int us[][3] = {{64, 32, 8}, {65, 3, 8}, {7, 5, 16}, {1, 4, 8}, {2, 1, 1}};
        for (size_t s = 0; s < sizeof us / sizeof us[0]; ++s) {
            int nm = us[s][0], nn = us[s][1], g = us[s][2], bad = 0;
            int units = mki_gemm_num_units(nm, nn, 2);
            char *seen = calloc((size_t)(nm * nn), 1);
            for (int u = 0; u < units; ++u) {
                int mb, nb;
                mki_gemm_unit_of(u, nm, nn, g, 2, &mb, &nb);
                if (mb % 2 || mb >= nm || nb >= nn)
                    ++bad;
                for (int r = 0; r < 2; ++r)
                    if (mb + r < nm && seen[(mb + r) * nn + nb]++)
                        ++bad;
            }
            for (int i = 0; i < nm * nn; ++i)
                bad += seen[i] != 1;
            CHECK(bad == 0, "units %dx%d group %d: %d bad", nm, nn, g, bad);
            free(seen);
        }
    }
    /* The documented 3 x 4, group 2 example. */
    {
        static const int want[12][2] = {{0, 0}, {1, 0}, {0, 1}, {1, 1}, {0, 2}, {1, 2},
                                        {0, 3}, {1, 3}, {2, 0}, {2, 1}, {2, 2}, {2, 3}};
        for (int t = 0; t < 12; ++t) {
            int mb, nb;
            mki_gemm_tile_of(t, 3, 4, 2, &mb, &nb);
            CHECK(mb == want[t][0] && nb == want[t][1], "example t=%d -> (%d,%d)", t, mb, nb);
        }
    }
    /* Persistent split: CTAs' tile counts add up and differ by at most one. */
    {
        int tiles = 2048, nctas[] = {132, 116, 1, 7, 2048, 3000};
        for (size_t i = 0; i < sizeof nctas / sizeof nctas[0]; ++i) {
            int sum = 0, lo = 1 << 30, hi = 0;
            for (int r = 0; r < nctas[i]; ++r) {
                int c = mki_gemm_tiles_of_cta(tiles, r, nctas[i]);
                sum += c;
                lo = c < lo ? c : lo;
                hi = c > hi ? c : hi;
            }
            CHECK(sum == tiles, "nctas %d: %d tiles run", nctas[i], sum);
            CHECK(nctas[i] > tiles || hi - lo <= 1, "nctas %d: uneven %d..%d", nctas[i], lo, hi);
        }
        CHECK(mki_gemm_tiles_of_cta(2048, 0, 132) == 16 && mki_gemm_tiles_of_cta(2048, 131, 132) == 15,
              "2048 tiles on 132 CTAs: 16 or 15 each");
    }
    CHECK(mki_gemm_cdiv(8191, 128) == 64 && mki_gemm_cdiv(8192, 128) == 64 &&
              mki_gemm_cdiv(8193, 128) == 65 && mki_gemm_cdiv(1, 256) == 1,
          "cdiv");
}

int main(void)
{
    test_validation();
    test_schedule();
    printf("test_gemm_args: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
