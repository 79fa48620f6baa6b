/*
 * param.c - the MK_* parameter table and its parsers.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"

static const struct mki_param_desc params[MKI_P_COUNT] = {
#define MKI_PARAM_ROW_(id, name, type, def, mn, mx, doc) \
    {name, type, def, mn, mx, doc},
    MKI_PARAMS(MKI_PARAM_ROW_)
#undef MKI_PARAM_ROW_
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
