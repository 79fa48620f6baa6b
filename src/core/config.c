/*
 * config.c - accept an mkConfig_t from any header version and resolve it.
 *
 * The first three fields (size, magic, version) tell how much of the
 * caller's struct exists: a binary built against an older, smaller
 * mkConfig_t passes a smaller size, and the fields it does not have take
 * their defaults; one built against a newer header passes a larger size,
 * and the fields this library does not know are ignored.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mki.h"
#include "plan/plan.h"

#define MKI_CONFIG_MIN_SIZE (offsetof(mkConfig_t, version) + sizeof(unsigned))
#define MKI_CONFIG_MAX_SIZE 4096 /* larger is garbage, not a newer header */
#define MKI_CONFIG_OLDEST MK_VERSION(0, 1, 0)

/* The transport list and SM split syntax belong to the plan (src/plan.c);
 * checking them here makes a bad value fail at mkCommInit, naming it. */
static mkResult_t check_transports(const char *list, const char *what)
{
    enum mki_transport order[MKI_TR_COUNT];
    int n;
    return mki_transport_list(list, what, order, &n);
}

static mkResult_t resolve_split(const mkConfig_t *cfg, const struct mki_params *pr,
                                struct mki_config *r)
{
    struct mki_split_ovr ovr[MKI_OP_COUNT];
    const char *s = cfg->smSplit ? cfg->smSplit : mki_params_str(pr, MKI_P_SM_SPLIT);
    MKI_CHECK(mki_split_parse(s, cfg->smSplit ? "config->smSplit"
                                              : "MK_SM_SPLIT", ovr));
    snprintf(r->smSplit, sizeof(r->smSplit), "%s", s);
    return mkSuccess;
}

static mkResult_t int_field(int user, const struct mki_params *pr, enum mki_param_id id,
                            int64_t min, const char *field, int *out)
{
    if (user == MK_CONFIG_UNDEF_INT) {
        *out = (int)mki_params_int(pr, id);
        return mkSuccess;
    }
    const struct mki_param_desc *d = mki_param_desc(id);
    if (user < min || user > d->max)
        return mki_error(NULL, mkErrInvalidArgument,
                         "config->%s = %d is out of range [%lld, %lld]",
                         field, user, (long long)min, (long long)d->max);
    *out = user;
    return mkSuccess;
}

static mkResult_t copy_user_config(const mkConfig_t *config, mkConfig_t *cfg)
{
    if (config->magic != MK_CONFIG_MAGIC)
        return mki_error(NULL, mkErrInvalidArgument,
                         "config->magic is 0x%x, not MK_CONFIG_MAGIC: "
                         "initialise the config with MK_CONFIG_INITIALIZER",
                         config->magic);
    if (config->size < MKI_CONFIG_MIN_SIZE || config->size > MKI_CONFIG_MAX_SIZE)
        return mki_error(NULL, mkErrInvalidArgument,
                         "config->size is %zu; it must be sizeof(mkConfig_t) "
                         "as set by MK_CONFIG_INITIALIZER", config->size);
    if (config->version < MKI_CONFIG_OLDEST)
        return mki_error(NULL, mkErrInvalidArgument,
                         "config->version %u is not an mkernel version "
                         "(oldest %d): initialise the config with "
                         "MK_CONFIG_INITIALIZER", config->version,
                         MKI_CONFIG_OLDEST);
    if (config->version > MK_VERSION_CODE)
        MKI_INFO(MKI_SUB_INIT, "config comes from mkernel %u, newer than this "
                 "library (%d); its new fields are ignored", config->version,
                 MK_VERSION_CODE);
    /* Whole fields only: a size that ends inside a field (not one any
     * header produced) must not leave half a pointer behind. */
    static const size_t ends[] = {
        offsetof(mkConfig_t, cudaDev) + sizeof(int),
        offsetof(mkConfig_t, timeoutMs) + sizeof(int),
        offsetof(mkConfig_t, transports) + sizeof(const char *),
        offsetof(mkConfig_t, smBudget) + sizeof(int),
        offsetof(mkConfig_t, workspaceSize) + sizeof(size_t),
        offsetof(mkConfig_t, nodeSize) + sizeof(int),
        offsetof(mkConfig_t, smSplit) + sizeof(const char *),
    };
    _Static_assert(offsetof(mkConfig_t, smSplit) + sizeof(const char *) == sizeof(mkConfig_t),
                   "a field was added to mkConfig_t: add where it ends to ends[]");
    size_t n = MKI_CONFIG_MIN_SIZE;
    for (size_t i = 0; i < sizeof(ends) / sizeof(*ends); i++)
        if (ends[i] <= config->size) n = ends[i];
    memcpy(cfg, config, n);
    return mkSuccess;
}

mkResult_t mki_config_resolve(const mkConfig_t *config, const struct mki_params *pr,
                              struct mki_config *out)
{
    mkConfig_t cfg = MK_CONFIG_INITIALIZER;
    struct mki_config r;
    struct mki_params now;
    memset(&r, 0, sizeof(r));
    if (!pr) {
        MKI_CHECK(mki_params_read(&now));
        pr = &now;
    }
    if (config) MKI_CHECK(copy_user_config(config, &cfg));

    if (cfg.cudaDev != MK_CONFIG_UNDEF_INT && cfg.cudaDev < 0)
        return mki_error(NULL, mkErrInvalidArgument,
                         "config->cudaDev = %d; give a device ordinal >= 0 "
                         "or leave it undefined", cfg.cudaDev);
    r.cudaDev = cfg.cudaDev == MK_CONFIG_UNDEF_INT ? -1 : cfg.cudaDev;
    MKI_CHECK(int_field(cfg.timeoutMs, pr, MKI_P_TIMEOUT_MS, 1, "timeoutMs", &r.timeoutMs));
    MKI_CHECK(int_field(cfg.smBudget, pr, MKI_P_SM_BUDGET, 0, "smBudget", &r.smBudget));
    MKI_CHECK(int_field(cfg.nodeSize, pr, MKI_P_NODE_SIZE, 0, "nodeSize", &r.nodeSize));
    /* 0: sized by the node's rank count when the communicator is made
     * (mki_ws_bytes). */
    if (cfg.workspaceSize == MK_CONFIG_UNDEF_SIZE) {
        int64_t v = mki_params_int(pr, MKI_P_WORKSPACE_SIZE);
        if (v != 0 && v < MKI_WS_MIN_BYTES)
            return mki_error(NULL, mkErrInvalidArgument,
                             "MK_WORKSPACE_SIZE=%s is below the 1 MiB "
                             "minimum; give at least 1M, or 0 for the "
                             "automatic size", mki_params_str(pr, MKI_P_WORKSPACE_SIZE));
        r.workspaceSize = (size_t)v;
    } else if (cfg.workspaceSize != 0 && cfg.workspaceSize < MKI_WS_MIN_BYTES) {
        return mki_error(NULL, mkErrInvalidArgument,
                         "config->workspaceSize = %zu is below the 1 MiB "
                         "minimum; give at least 1 MiB, or 0 for the "
                         "automatic size", cfg.workspaceSize);
    } else {
        r.workspaceSize = cfg.workspaceSize;
    }
    const char *tr = cfg.transports ? cfg.transports : mki_params_str(pr, MKI_P_TRANSPORT);
    MKI_CHECK(check_transports(tr, cfg.transports ? "config->transports"
                                                  : "MK_TRANSPORT"));
    snprintf(r.transports, sizeof(r.transports), "%s", tr);
    MKI_CHECK(resolve_split(&cfg, pr, &r));
    *out = r;
    return mkSuccess;
}
