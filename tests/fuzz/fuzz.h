/*
 * fuzz.h - the shared driver of the fuzz harnesses (tests/fuzz/fz_*.c).
 *
 * A harness defines fuzz_one(data, size), which must return normally for
 * every input: a crash, a sanitizer report or a hang (alarm) is the
 * failure.  Built two ways:
 *
 *   - plain (make check): this file's main() runs every file of the
 *     corpus folders given, then -runs N inputs made by mutating them
 *     (flips, interesting values, inserts, cuts, splices) from -seed S
 *     (printed; the same seed replays the same inputs), each at most
 *     -max_len bytes; with -time T it runs for T seconds instead;
 *   - with clang -fsanitize=fuzzer -DFUZZ_LIBFUZZER: libFuzzer's own main
 *     drives LLVMFuzzerTestOneInput (tests/fuzz/run.sh --libfuzzer).
 */
#ifndef MK_FUZZ_H
#define MK_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int fuzz_one(const uint8_t *data, size_t size);

#ifdef FUZZ_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_one(data, size);
    return 0;
}
#else
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct fz_input {
    uint8_t *d;
    size_t n;
};

static uint64_t fz_state;
static uint64_t fz_rand(void)
{
    uint64_t x = (fz_state += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static const char *fz_current = "(none)";
static void fz_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "fuzz: an input hung (over 10 s): ";
    ssize_t w = write(2, msg, sizeof(msg) - 1);
    w = write(2, fz_current, strlen(fz_current));
    w = write(2, "\n", 1);
    (void)w;
    _exit(3);
}

static int fz_load(const char *path, struct fz_input *in)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    in->d = malloc(1 << 16);
    in->n = in->d ? fread(in->d, 1, 1 << 16, f) : 0;
    fclose(f);
    return in->d ? 0 : -1;
}

/* One mutation of in (size at most max_len) into out. */
static size_t fz_mutate(const struct fz_input *in, const struct fz_input *other, uint8_t *out,
                        size_t max_len)
{
    size_t n = in->n < max_len ? in->n : max_len;
    memcpy(out, in->d, n);
    int rounds = 1 + (int)(fz_rand() % 4);
    static const uint64_t interesting[] = {0, 1, 0x7f, 0x80, 0xff, 0x7fff, 0x8000, 0xffff,
                                           0x7fffffff, 0x80000000u, 0xffffffffu,
                                           0x7fffffffffffffffull, 0x8000000000000000ull,
                                           0xffffffffffffffffull, 4096, 65536, 1ull << 32};
    for (int r = 0; r < rounds; r++) {
        switch (fz_rand() % 7) {
        case 0: /* flip a bit */
            if (n) out[fz_rand() % n] ^= (uint8_t)(1u << (fz_rand() % 8));
            break;
        case 1: /* a random byte */
            if (n) out[fz_rand() % n] = (uint8_t)fz_rand();
            break;
        case 2: { /* an interesting value, 1/2/4/8 bytes, aligned or not */
            size_t w = (size_t)1 << (fz_rand() % 4);
            if (n >= w) {
                uint64_t v = interesting[fz_rand() % (sizeof(interesting) / sizeof(*interesting))];
                if (fz_rand() % 2) v = ~v + 1 - (fz_rand() % 3);
                size_t at = fz_rand() % (n - w + 1);
                if (fz_rand() % 2) at &= ~(w - 1);
                memcpy(out + at, &v, w);
            }
            break;
        }
        case 3: /* cut */
            if (n) n = fz_rand() % n;
            break;
        case 4: { /* insert random bytes */
            size_t k = 1 + fz_rand() % 16;
            if (n + k <= max_len) {
                size_t at = n ? fz_rand() % (n + 1) : 0;
                memmove(out + at + k, out + at, n - at);
                for (size_t i = 0; i < k; i++) out[at + i] = (uint8_t)fz_rand();
                n += k;
            }
            break;
        }
        case 5: /* splice the other input's tail */
            if (other && other->n) {
                size_t at = n ? fz_rand() % (n + 1) : 0;
                size_t from = fz_rand() % other->n;
                size_t k = other->n - from;
                if (at + k > max_len) k = max_len - at;
                memcpy(out + at, other->d + from, k);
                n = at + k;
            }
            break;
        default: /* duplicate a block (repeated frames) */
            if (n && n * 2 <= max_len && fz_rand() % 2) {
                memcpy(out + n, out, n);
                n *= 2;
            }
            break;
        }
    }
    return n;
}

static int fz_add_dir(const char *dir, struct fz_input **in, int *nin)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz: cannot open corpus folder %s\n", dir);
        return -1;
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        struct fz_input x;
        if (fz_load(path, &x) != 0) continue;
        struct fz_input *m = realloc(*in, sizeof(**in) * (size_t)(*nin + 1));
        if (!m) return -1;
        *in = m;
        (*in)[(*nin)++] = x;
        fz_current = path;
        alarm(10);
        fuzz_one(x.d, x.n);
        alarm(0);
    }
    closedir(d);
    return 0;
}

int main(int argc, char **argv)
{
    long runs = 2000, max_len = 4096;
    double seconds = 0;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    struct fz_input *in = NULL;
    int nin = 0;
    signal(SIGALRM, fz_alarm);
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        if (!strncmp(argv[i], "-runs=", 6)) runs = atol(argv[i] + 6);
        else if (!strncmp(argv[i], "-seed=", 6)) seed = strtoull(argv[i] + 6, NULL, 0);
        else if (!strncmp(argv[i], "-max_len=", 9)) max_len = atol(argv[i] + 9);
        else if (!strncmp(argv[i], "-time=", 6)) seconds = atof(argv[i] + 6);
        else if (fz_add_dir(argv[i], &in, &nin) != 0) return 2;
    }
    if (max_len < 1 || max_len > (1 << 16)) max_len = 4096;
    printf("fuzz %s: %d corpus inputs ran; seed %llu (-seed=%llu replays)\n", argv[0], nin,
           (unsigned long long)seed, (unsigned long long)seed);
    fflush(stdout);
    fz_state = seed;
    uint8_t *buf = malloc((size_t)max_len);
    struct fz_input empty = {(uint8_t *)"", 0};
    if (!buf) return 2;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long done = 0;
    fz_current = "a mutated input (replay it with the seed printed above)";
    for (;; done++) {
        if (seconds > 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > seconds) break;
        } else if (done >= runs) {
            break;
        }
        const struct fz_input *a = nin ? &in[fz_rand() % (uint64_t)nin] : &empty;
        const struct fz_input *b = nin ? &in[fz_rand() % (uint64_t)nin] : NULL;
        size_t n = fz_mutate(a, b, buf, (size_t)max_len);
        /* A private copy of exactly n bytes: a read past it is caught. */
        uint8_t *x = malloc(n ? n : 1);
        if (!x) return 2;
        memcpy(x, buf, n);
        alarm(10);
        fuzz_one(x, n);
        alarm(0);
        free(x);
    }
    printf("fuzz %s: %d corpus + %ld mutated inputs, no crash, no hang\n", argv[0], nin, done);
    for (int i = 0; i < nin; i++) free(in[i].d);
    free(in);
    free(buf);
    return 0;
}
#endif /* FUZZ_LIBFUZZER */
#endif /* MK_FUZZ_H */
