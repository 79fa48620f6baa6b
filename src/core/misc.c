/*
 * misc.c - clocks, randomness and host identity.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "mki.h"

uint64_t mki_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

mkResult_t mki_random_bytes(void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = getrandom((char *)buf + got, len - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return mki_error(NULL, mkErrSystem, "getrandom failed: %s",
                             strerror(errno));
        }
        got += (size_t)n;
    }
    return mkSuccess;
}

/* FNV-1a, enough to tell hosts apart. */
static uint64_t hash_bytes(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* Two processes share a host when their host name and kernel boot id
 * agree; the boot id tells apart containers that copy the host name. */
uint64_t mki_host_hash(void)
{
    char buf[256] = {0};
    uint64_t h = 0xcbf29ce484222325ull;
    gethostname(buf, sizeof(buf) - 1);
    h = hash_bytes(h, buf, strlen(buf));
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n > 0) h = hash_bytes(h, buf, (size_t)n);
        close(fd);
    }
    return h;
}

void mki_sb_printf(struct mki_strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    if (sb->oom) return;
    for (;;) {
        size_t room = sb->cap - sb->len;
        va_start(ap, fmt);
        int n = vsnprintf(sb->buf ? sb->buf + sb->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) { sb->oom = 1; return; }
        if ((size_t)n < room) { sb->len += (size_t)n; return; }
        size_t cap = (sb->cap ? sb->cap * 2 : 1024) + (size_t)n;
        char *b = realloc(sb->buf, cap);
        if (!b) { sb->oom = 1; return; }
        sb->buf = b, sb->cap = cap;
    }
}
