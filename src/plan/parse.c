/*
 * parse.c - the syntax of the plan's two settings: the transport list
 * (MK_TRANSPORT, config->transports) and the SM split overrides
 * (MK_SM_SPLIT, config->smSplit).  Communicator creation checks them
 * (src/core/config.c), so that a bad value fails there, naming it; a split
 * is checked against the rank's SMs here too (mki_plan_check_ovr).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "mki.h"
#include "plan/plan.h"

/* ---- MK_TRANSPORT --------------------------------------------------- */

static int tr_from_name(const char *s)
{
    for (int i = 0; i < MKI_TR_COUNT; i++)
        if (strcasecmp(s, mki_transport_name((enum mki_transport)i)) == 0) return i;
    return -1;
}

mkResult_t mki_transport_list(const char *list, const char *what,
                              enum mki_transport order[MKI_TR_COUNT],
                              int *count)
{
    char buf[256];
    int neg = list[0] == '^', named[MKI_TR_COUNT] = {0}, n = 0;
    if (strlen(list) >= sizeof(buf))
        return mki_error(NULL, mkErrInvalidArgument, "%s is longer than %zu "
                         "characters", what, sizeof(buf) - 1);
    snprintf(buf, sizeof(buf), "%s", list + neg);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int id = tr_from_name(t);
        if (id < 0)
            return mki_error(NULL, mkErrInvalidArgument, "%s=\"%s\" names "
                             "unknown transport \"%s\"; use a comma list of "
                             "ibverbs, efa, socket (a leading ^ excludes)",
                             what, list, t);
        if (!neg && !named[id]) order[n++] = (enum mki_transport)id;
        named[id] = 1;
    }
    if (neg)
        for (int i = 0; i < MKI_TR_COUNT; i++)
            if (!named[i]) order[n++] = (enum mki_transport)i;
    if (n == 0)
        return mki_error(NULL, mkErrInvalidArgument, "%s=\"%s\" leaves no "
                         "transport; name at least one of ibverbs, efa, "
                         "socket", what, list);
    *count = n;
    return mkSuccess;
}

/* ---- MK_SM_SPLIT ----------------------------------------------------- */

static mkResult_t split_bad(const char *what, const char *spec,
                            const char *item, const char *why)
{
    return mki_error(NULL, mkErrInvalidArgument, "%s=\"%s\": item \"%s\" %s; "
                     "write a comma list of [op:]key=value with key compute, "
                     "intra, inter_send, inter_reduce (CTAs), mover (ce, tma, "
                     "reg), chunk (bytes, K/M suffix) or fused (0, 1), e.g. "
                     "\"ag_gemm:intra=8,fused=1\"", what, spec, item, why);
}

static int parse_count(const char *s, int *v)
{
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < 0 || x > 4096) return -1;
    *v = (int)x;
    return 0;
}

/* Apply key=value to one op's entry; scoped says the op was named. */
static mkResult_t split_item(const char *what, const char *spec, const char *item,
                             const char *key, const char *val, int scoped,
                             enum mki_op op, struct mki_split_ovr *o)
{
    static const struct { const char *key; unsigned bit; size_t off; } roles[] = {
        {"compute", MKI_OVR_COMPUTE, offsetof(struct mki_split, compute)},
        {"intra", MKI_OVR_INTRA, offsetof(struct mki_split, intra)},
        {"inter_send", MKI_OVR_INTER_SEND, offsetof(struct mki_split, inter_send)},
        {"inter_reduce", MKI_OVR_INTER_REDUCE,
         offsetof(struct mki_split, inter_reduce)},
    };
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        if (strcmp(key, roles[i].key)) continue;
        int v;
        if (parse_count(val, &v))
            return split_bad(what, spec, item, "needs a CTA count 0..4096");
        *(int *)((char *)&o->split + roles[i].off) = v;
        o->set |= roles[i].bit;
        return mkSuccess;
    }
    if (!strcmp(key, "mover")) {
        int m = -1;
        for (int i = MKI_MOVER_CE; i < MKI_MOVER_COUNT; i++)
            if (!strcasecmp(val, mki_mover_name((enum mki_mover)i))) m = i;
        if (m < 0) return split_bad(what, spec, item, "names no mover");
        const unsigned movers = mki_plan_movers(op);
        if (!(movers & (1u << m))) {
            if (scoped)
                return split_bad(what, spec, item,
                                 movers == (1u << MKI_MOVER_CE)
                                     ? "names a mover this operation does not have "
                                       "(its fused kernel moves rows with the copy "
                                       "engine only: use ce)"
                                     : "asks the copy engine to reduce, which it "
                                       "cannot (use tma or reg)");
            return mkSuccess; /* an unscoped mover skips ops it cannot serve */
        }
        o->mover = (enum mki_mover)m;
        o->set |= MKI_OVR_MOVER;
        return mkSuccess;
    }
    if (!strcmp(key, "chunk")) {
        int64_t b;
        if (mki_parse_size(val, &b) || b < 4096 || b > (1ll << 34))
            return split_bad(what, spec, item, "needs a size from 4K to 16G");
        o->chunk = (size_t)b;
        o->set |= MKI_OVR_CHUNK;
        return mkSuccess;
    }
    if (!strcmp(key, "fused")) {
        if (strcmp(val, "0") && strcmp(val, "1"))
            return split_bad(what, spec, item, "needs 0 or 1");
        o->fused = val[0] == '1';
        o->set |= MKI_OVR_FUSED;
        return mkSuccess;
    }
    return split_bad(what, spec, item, "has an unknown key");
}

/* One pass over the items: unscoped ones (scoped_pass 0) or op-scoped
 * ones (1), so that "op:key" wins over "key" whatever the order. */
static mkResult_t split_pass(const char *spec, const char *what,
                             int scoped_pass, struct mki_split_ovr *ovr)
{
    char buf[256], item[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        snprintf(item, sizeof(item), "%s", t);
        char *eq = strchr(t, '='), *colon = strchr(t, ':');
        if (!eq || eq == t || !eq[1])
            return split_bad(what, spec, item, "is not key=value");
        *eq = '\0';
        int op = -1;
        if (colon && colon < eq) {
            *colon = '\0';
            op = mki_op_from_name(t);
            if (op < 0)
                return split_bad(what, spec, item, "names an unknown op (use "
                                 "allgather, reducescatter, allreduce, "
                                 "alltoall, ag_gemm, gemm_rs, gemm_ar, moe_dispatch, moe_combine, "
                                 "moe_dispatch_gemm, ring_attn or moe_layer)");
            t = colon + 1;
        }
        if ((op >= 0) != scoped_pass) continue;
        for (int o = 0; o < MKI_OP_COUNT; o++)
            if (op < 0 || o == op)
                MKI_CHECK(split_item(what, spec, item, t, eq + 1, op >= 0,
                                     (enum mki_op)o, &ovr[o]));
    }
    return mkSuccess;
}

mkResult_t mki_split_parse(const char *spec, const char *what,
                           struct mki_split_ovr ovr[MKI_OP_COUNT])
{
    struct mki_split_ovr tmp[MKI_OP_COUNT];
    memset(tmp, 0, sizeof(tmp));
    if (strlen(spec) >= 256)
        return mki_error(NULL, mkErrInvalidArgument, "%s is longer than 255 "
                         "characters", what);
    MKI_CHECK(split_pass(spec, what, 0, tmp));
    MKI_CHECK(split_pass(spec, what, 1, tmp));
    memcpy(ovr, tmp, sizeof(tmp));
    return mkSuccess;
}

/* A user split must fit the rank's SMs. */
mkResult_t mki_plan_check_ovr(const struct mki_split_ovr *o, enum mki_op op, int budget)
{
    if (!o) return mkSuccess;
    const struct mki_split *s = &o->split;
    int given = s->intra + s->inter_send + s->inter_reduce +
                (mki_op_has_gemm(op) ? s->compute : 0);
    if (given > budget)
        return mki_error(NULL, mkErrInvalidArgument, "MK_SM_SPLIT asks for %d "
                         "CTAs for %s but this rank may use %d SMs (the GPU's "
                         "SMs, or MK_SM_BUDGET / ranks sharing the GPU); "
                         "lower the counts", given, mki_op_name(op), budget);
    if (mki_op_has_gemm(op) && (o->set & MKI_OVR_COMPUTE) && s->compute < 1)
        return mki_error(NULL, mkErrInvalidArgument, "MK_SM_SPLIT sets "
                         "compute=0 for %s, which has a GEMM to run; give at "
                         "least 1", mki_op_name(op));
    return mkSuccess;
}
