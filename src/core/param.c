/*
 * param.c - the MK_* parameter table and its parsers: the library's only
 * reader of the environment.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"

static const struct mki_param_desc params[MKI_P_COUNT] = {
#define X(id, name, type, def, mn, mx, doc) {name, type, def, mn, mx, doc},
#include "params.def"
#undef X
};

const struct mki_param_desc *mki_param_desc(enum mki_param_id id)
{
    return ((unsigned)id < MKI_P_COUNT) ? &params[id] : NULL;
}

int mki_param_is_set(enum mki_param_id id)
{
    return getenv(params[id].name) != NULL;
}

const char *mki_param_str(enum mki_param_id id)
{
    const char *v = getenv(params[id].name);
    return v ? v : params[id].def;
}

int mki_parse_size(const char *s, int64_t *value)
{
    char *end;
    while (isspace((unsigned char)*s)) s++;
    if (*s == '-' || *s == '\0') return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    unsigned long long mult = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mult = 1ull << 10; end++; break;
    case 'M': mult = 1ull << 20; end++; break;
    case 'G': mult = 1ull << 30; end++; break;
    case 'T': mult = 1ull << 40; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;
    if (*end != '\0') return -1;
    if (v > (unsigned long long)INT64_MAX / mult) return -1;
    *value = (int64_t)(v * mult);
    return 0;
}

static int parse_int(const char *s, int64_t *value)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s) return -1;
    while (isspace((unsigned char)*end)) end++;
    if (*end != '\0') return -1;
    *value = v;
    return 0;
}

mkResult_t mki_param_int(enum mki_param_id id, int64_t *value)
{
    const struct mki_param_desc *d = &params[id];
    const char *s = mki_param_str(id);
    int64_t v;
    int rc = d->type == MKI_PT_SIZE ? mki_parse_size(s, &v) : parse_int(s, &v);
    if (rc != 0)
        return mki_error(NULL, mkErrInvalidArgument,
                         "%s=\"%s\" is not a valid %s; unset it or give "
                         "e.g. %s", d->name, s,
                         d->type == MKI_PT_SIZE ? "size" : "integer", d->def);
    if (v < d->min || v > d->max)
        return mki_error(NULL, mkErrInvalidArgument,
                         "%s=%s is out of range [%lld, %lld]", d->name, s,
                         (long long)d->min, (long long)d->max);
    *value = v;
    return mkSuccess;
}

_Static_assert(MKI_P_COUNT <= 64, "struct mki_params.set has 64 bits");

mkResult_t mki_params_read(struct mki_params *out)
{
    memset(out, 0, sizeof(*out));
    for (int i = 0; i < MKI_P_COUNT; i++) {
        const enum mki_param_id id = (enum mki_param_id)i;
        const char *v = mki_param_str(id);
        if (strlen(v) >= MKI_PARAM_STR_MAX)
            return mki_error(NULL, mkErrInvalidArgument, "%s is longer than %d "
                             "characters", params[i].name, MKI_PARAM_STR_MAX - 1);
        snprintf(out->str[i], MKI_PARAM_STR_MAX, "%s", v);
        if (mki_param_is_set(id)) out->set |= 1ull << i;
        if (params[i].type != MKI_PT_STR) MKI_CHECK(mki_param_int(id, &out->num[i]));
    }
    return mkSuccess;
}

const char *mki_env_launcher(void)
{
    static const char *vars[] = {"SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE",
                                 "PMI_SIZE", "PMIX_RANK"};
    for (unsigned i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && (i == 3 || atoi(v) > 1)) return vars[i];
    }
    return NULL;
}
