/*
 * param.h - the one declarative table of MK_* environment parameters, and
 * the only place of the library that reads the environment.
 *
 * Each X(ID, NAME, TYPE, DEFAULT, MIN, MAX, DOC) row of params.def
 * declares a parameter; param.c turns the same rows into the table that
 * mkinfo and mkernel-env(7) print.  Integers and sizes are range-checked; a malformed value is an
 * error (mkErrInvalidArgument) naming it, never silently replaced by the
 * default.  A communicator reads every parameter once, at its creation
 * (struct mki_params, comm->params); no call reads the environment.
 */
#ifndef MKI_PARAM_H
#define MKI_PARAM_H

#include <stdint.h>
#include "mkernel.h"

enum mki_param_type { MKI_PT_INT, MKI_PT_SIZE, MKI_PT_STR };

enum mki_param_id {
#define X(id, name, type, def, mn, mx, doc) MKI_P_##id,
#include "params.def"
#undef X
    MKI_P_COUNT
};

struct mki_param_desc {
    const char *name;
    enum mki_param_type type;
    const char *def;
    int64_t min, max;
    const char *doc;
};

const struct mki_param_desc *mki_param_desc(enum mki_param_id id);
/* The value as set in the environment, or the default (never NULL). */
const char *mki_param_str(enum mki_param_id id);
/* 1 when the variable is set in the environment. */
int mki_param_is_set(enum mki_param_id id);
/* Parse an INT or SIZE parameter; mkErrInvalidArgument with a message in
 * the thread error when the value is malformed or out of range. */
mkResult_t mki_param_int(enum mki_param_id id, int64_t *value);
/* Parse "123", "64K", "256M", "2G" into bytes; -1 when malformed. */
int mki_parse_size(const char *s, int64_t *value);

/* Every parameter's value as read at one moment (a communicator reads
 * them once, at its creation, and keeps this copy). */
#define MKI_PARAM_STR_MAX 256
struct mki_params {
    uint64_t set;                             /* bit id: set in the environment */
    int64_t num[MKI_P_COUNT];                 /* INT and SIZE parameters */
    char str[MKI_P_COUNT][MKI_PARAM_STR_MAX]; /* every parameter as text */
};
/* Read and check them all; the first malformed one is an error naming it
 * (in the thread error). */
mkResult_t mki_params_read(struct mki_params *out);
static inline int64_t mki_params_int(const struct mki_params *p, enum mki_param_id id)
{
    return p->num[id];
}
static inline const char *mki_params_str(const struct mki_params *p, enum mki_param_id id)
{
    return p->str[id];
}
static inline int mki_params_is_set(const struct mki_params *p, enum mki_param_id id)
{
    return (int)((p->set >> id) & 1u);
}

/* The variable that shows a launcher started more than one process
 * (Slurm, Open MPI, MPICH/Hydra, PMIx), or NULL. */
const char *mki_env_launcher(void);

#endif /* MKI_PARAM_H */
