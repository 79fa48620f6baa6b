/*
 * fz_live - the liveness ring's frame parser (src/core/live.h): bytes as
 * they come off a link, cut at the places the first bytes choose, fed to
 * mki_live_feed the way the thread does.  Checks what it can besides not
 * crashing: a feed never leaves more than a partial frame behind, and a
 * callback only ever sees valid frames.
 */
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "core/live.h"
#include "fuzz.h"

struct seen {
    int nranks;
    uint32_t check;
    long frames;
};

static int on_frame(void *arg, const struct mki_live_frame *f)
{
    struct seen *s = arg;
    if (f->magic != MKI_LIVE_MAGIC || f->check != s->check || f->rank < 0 ||
        f->rank >= s->nranks || f->type < MKI_LIVE_HELLO || f->type > MKI_LIVE_SILENT)
        abort(); /* the parser let a bad frame through */
    s->frames++;
    return f->type == MKI_LIVE_HELLO; /* as the thread: HELLO stops the feed */
}

int fuzz_one(const uint8_t *d, size_t n)
{
    if (n < 2) return 0;
    struct seen s = {1 + d[0] % 8, mki_live_check(0x1234), 0};
    unsigned step = 1 + d[1] % 23; /* read sizes: 1..23 bytes */
    d += 2;
    n -= 2;
    struct mki_live_rx rx;
    memset(&rx, 0, sizeof(rx));
    while (n > 0) {
        size_t k = step < n ? step : n;
        int r = mki_live_feed(&rx, d, k, s.nranks, s.check, on_frame, &s);
        if (rx.have >= sizeof(rx.buf)) abort();
        if (r != 0) break;
        d += k;
        n -= k;
    }
    return 0;
}
