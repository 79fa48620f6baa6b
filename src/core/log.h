/*
 * log.h - MK_DEBUG levels and MK_DEBUG_SUBSYS subsystems.
 *
 * MK_DEBUG=NONE|WARN|INFO|TRACE (default WARN).  MK_DEBUG_SUBSYS is a comma
 * list of subsystems (INIT,BOOT,TOPO,PLAN,MEM,NET,PROXY,COLL,GEMM,ALL); a
 * leading '^' selects all but the listed ones.  MK_DEBUG_FILE names a file
 * (%h is replaced by the host name, %p by the pid) instead of stderr.
 */
#ifndef MKI_LOG_H
#define MKI_LOG_H

enum mki_log_level {
    MKI_LOG_NONE = 0,
    MKI_LOG_WARN = 1,
    MKI_LOG_INFO = 2,
    MKI_LOG_TRACE = 3
};

enum mki_log_subsys {
    MKI_SUB_INIT = 1u << 0,
    MKI_SUB_BOOT = 1u << 1,
    MKI_SUB_TOPO = 1u << 2,
    MKI_SUB_PLAN = 1u << 3,
    MKI_SUB_MEM = 1u << 4,
    MKI_SUB_NET = 1u << 5,
    MKI_SUB_PROXY = 1u << 6,
    MKI_SUB_COLL = 1u << 7,
    MKI_SUB_GEMM = 1u << 8,
    MKI_SUB_ALL = 0xffffffffu
};

/* Parse MK_DEBUG / MK_DEBUG_SUBSYS once (thread-safe, idempotent). */
void mki_log_init(void);
/* 1 when a message of this level and subsystem would be printed. */
int mki_log_enabled(enum mki_log_level level, unsigned subsys);
void mki_log(enum mki_log_level level, unsigned subsys, const char *file,
             int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* The rank printed in every line of this process (set by comm init). */
void mki_log_set_rank(int rank);

/* Parsers exposed for unit tests; return -1 on an unknown word. */
int mki_log_parse_level(const char *s);
int mki_log_parse_subsys(const char *s, unsigned *mask);

#define MKI_LOG_(lvl, sub, ...)                                            \
    do {                                                                   \
        if (mki_log_enabled(lvl, sub))                                     \
            mki_log(lvl, sub, __FILE__, __LINE__, __VA_ARGS__);            \
    } while (0)
#define MKI_WARN(sub, ...) MKI_LOG_(MKI_LOG_WARN, sub, __VA_ARGS__)
#define MKI_INFO(sub, ...) MKI_LOG_(MKI_LOG_INFO, sub, __VA_ARGS__)
#define MKI_TRACE(sub, ...) MKI_LOG_(MKI_LOG_TRACE, sub, __VA_ARGS__)

#endif /* MKI_LOG_H */
