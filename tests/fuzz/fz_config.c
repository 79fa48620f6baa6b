/*
 * fz_config - what a user (or a launcher's environment) hands the library
 * before any peer is involved: the bytes of an mkUniqueId
 * (mki_unique_id_parse), an mkConfig_t of any size and version
 * (mki_config_resolve; its two string fields point at strings taken from
 * the input), and the text of every MK_* parameter (mki_params_read), the
 * SM split syntax and the transport lists.  The first input byte picks
 * the target; each must return a result, never crash or read past the
 * input.
 */
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "bootstrap/bootstrap.h"
#include "plan/plan.h"
#include "fuzz.h"

/* A NUL-terminated copy of the input (NULs become spaces). */
static char *text(const uint8_t *d, size_t n)
{
    char *s = malloc(n + 1);
    if (!s) abort();
    for (size_t i = 0; i < n; i++) s[i] = d[i] ? (char)d[i] : ' ';
    s[n] = 0;
    return s;
}

int fuzz_one(const uint8_t *d, size_t n)
{
    if (n < 1) return 0;
    const unsigned which = d[0] % 5;
    d++;
    n--;
    switch (which) {
    case 0: { /* unique id bytes */
        struct mki_unique_id id;
        uint8_t *b = malloc(n ? n : 1);
        if (!b) abort();
        memcpy(b, d, n);
        if (mki_unique_id_parse(b, n, &id) == mkSuccess) {
            const int fam = id.root.sa.sa_family;
            if (fam != AF_INET && fam != AF_INET6) abort(); /* accepted a bad address */
        }
        free(b);
        break;
    }
    case 1: { /* a config of the input's size; strings from its tail */
        size_t cut = n < 2 ? n : d[0] % (n + 1);
        size_t csize = cut < 4096 + 64 ? cut : 4096 + 64;
        uint8_t *c = calloc(1, csize + sizeof(mkConfig_t));
        if (!c) abort();
        memcpy(c, d, csize);
        char *str = text(d + cut, n - cut);
        mkConfig_t *cfg = (mkConfig_t *)c;
        /* Pointer fields hold a real string or NULL, as a caller's would,
         * wherever the size field says the struct ends (the buffer holds a
         * whole mkConfig_t past the input's bytes). */
        cfg->transports = (n & 1) ? str : NULL;
        cfg->smSplit = (n & 2) ? str : NULL;
        struct mki_config out;
        (void)mki_config_resolve(cfg, NULL, &out);
        free(str);
        free(c);
        break;
    }
    case 2: { /* one MK_* parameter's text */
        if (n < 1) break;
        const enum mki_param_id id = (enum mki_param_id)(d[0] % MKI_P_COUNT);
        char *val = text(d + 1, n - 1);
        const char *name = mki_param_desc(id)->name;
        setenv(name, val, 1);
        struct mki_params p;
        (void)mki_params_read(&p);
        int64_t v;
        if (mki_param_desc(id)->type != MKI_PT_STR) (void)mki_param_int(id, &v);
        unsetenv(name);
        free(val);
        break;
    }
    case 3: { /* the SM split syntax (MK_SM_SPLIT, config->smSplit) */
        char *s = text(d, n);
        struct mki_split_ovr ovr[MKI_OP_COUNT];
        (void)mki_split_parse(s, "MK_SM_SPLIT", ovr);
        free(s);
        break;
    }
    default: { /* transport lists (MK_TRANSPORT, config->transports) */
        char *s = text(d, n);
        enum mki_transport order[MKI_TR_COUNT];
        int cnt = -1;
        if (mki_transport_list(s, "MK_TRANSPORT", order, &cnt) == mkSuccess &&
            (cnt < 0 || cnt > MKI_TR_COUNT))
            abort();
        free(s);
        break;
    }
    }
    mki_thread_error_clear();
    return 0;
}
