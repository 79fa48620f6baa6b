/*
 * transport.c - the built-in transport list and MK_TRANSPORT selection.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "transport.h"

static const struct mki_transport_ops *const builtin[] = {
    &mki_transport_ibverbs,
    &mki_transport_efa,
    &mki_transport_socket,
};
#define NBUILTIN ((int)(sizeof(builtin) / sizeof(builtin[0])))

const struct mki_transport_ops *const *mki_transports(int *count)
{
    *count = NBUILTIN;
    return builtin;
}

static int find(const char *name)
{
    for (int i = 0; i < NBUILTIN; i++)
        if (strcmp(builtin[i]->name, name) == 0) return i;
    return -1;
}

/* Parse a comma list into builtin indices; -1 and an error on an unknown
 * name. */
static mkResult_t parse_list(const char *list, int *idx, int *n)
{
    char buf[256];
    char *save = NULL;
    snprintf(buf, sizeof(buf), "%s", list);
    *n = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int i = find(t);
        if (i < 0)
            return mki_error(NULL, mkErrInvalidArgument, "MK_TRANSPORT names "
                             "an unknown transport \"%s\"; known: ibverbs, "
                             "efa, socket", t);
        if (*n < NBUILTIN) idx[(*n)++] = i;
    }
    return mkSuccess;
}

mkResult_t mki_transport_select(const char *spec,
                                const struct mki_transport_ops **out,
                                int *count)
{
    int idx[NBUILTIN], n = 0, negate = spec[0] == '^';
    MKI_CHECK(parse_list(spec + negate, idx, &n));
    if (n == 0 && !negate)
        return mki_error(NULL, mkErrInvalidArgument, "MK_TRANSPORT is empty; "
                         "name at least one of ibverbs, efa, socket");
    int k = 0;
    if (!negate) {
        for (int i = 0; i < n; i++) out[k++] = builtin[idx[i]];
    } else {
        for (int b = 0; b < NBUILTIN; b++) {
            int drop = 0;
            for (int i = 0; i < n; i++) drop |= idx[i] == b;
            if (!drop) out[k++] = builtin[b];
        }
    }
    *count = k;
    return mkSuccess;
}

int mki_signal_ok(const struct mki_net_signal *s, const uint64_t *sizes,
                  int nregions)
{
    if (s->op == MKI_SIG_NONE) return 1;
    if (s->op != MKI_SIG_SET && s->op != MKI_SIG_ADD && s->op != MKI_SIG_MAX)
        return 0;
    if ((int)s->region >= nregions || (s->offset & 7)) return 0;
    return mki_span_ok(s->offset, 8, sizes[s->region]);
}

/* Try every candidate here; bit i of *mask: candidate i initialised (its
 * context kept in ctxs[i]); why[] collects the reasons of the others. */
static void try_all(const struct mki_transport_ops **cand, int n,
                    const struct mki_net_args *args, void **ctxs,
                    uint64_t *mask, char *why, size_t len)
{
    size_t o = 0;
    *mask = 0;
    for (int i = 0; i < n; i++) {
        ctxs[i] = NULL;
        mkResult_t r = cand[i]->init ? cand[i]->init(args, &ctxs[i])
                                     : mkErrUnsupported;
        if (r == mkSuccess) {
            *mask |= 1ull << i;
            continue;
        }
        if (o < len)
            o += (size_t)snprintf(why + o, len - o, "%s%s: %s", o ? "; " : "",
                                  cand[i]->name, mki_thread_error());
    }
}

mkResult_t mki_transport_open(const char *spec,
                              const struct mki_net_args *args,
                              const struct mki_transport_ops **ops,
                              void **ctx)
{
    const struct mki_transport_ops *cand[NBUILTIN];
    void *ctxs[NBUILTIN];
    int n;
    char why[768] = "";
    MKI_CHECK(mki_transport_select(spec, cand, &n));
    uint64_t *masks = calloc((size_t)args->nranks, sizeof(uint64_t));
    if (!masks) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    try_all(cand, n, args, ctxs, &masks[args->rank], why, sizeof(why));
    mkResult_t res = args->boot->allgather(args->boot_ctx, masks,
                                           sizeof(uint64_t));
    uint64_t all = ~0ull;
    for (int r = 0; res == mkSuccess && r < args->nranks; r++) all &= masks[r];
    int pick = -1;
    for (int i = 0; i < n && res == mkSuccess; i++)
        if (all & (1ull << i)) { pick = i; break; }
    for (int i = 0; i < n; i++)
        if (i != pick && ctxs[i]) cand[i]->close(ctxs[i]);
    free(masks);
    if (res != mkSuccess) return res;
    if (pick < 0)
        return mki_error(NULL, mkErrUnsupported, "no transport of "
                         "MK_TRANSPORT=\"%s\" works on every rank (here: "
                         "%s)", spec, why[0] ? why : "all of them work; "
                         "another rank lacks them");
    MKI_INFO(MKI_SUB_NET, "inter-node transport: %s", cand[pick]->name);
    *ops = cand[pick];
    *ctx = ctxs[pick];
    return mkSuccess;
}
