/*
 * log.c - MK_DEBUG levels and subsystems.
 *
 * Every line: "host:pid:tid [rank] MK LEVEL SUBSYS file:line message".
 * The log configuration is read once, on first use.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mki.h"

static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static int log_level = MKI_LOG_WARN;
static unsigned log_mask = MKI_SUB_ALL;
static FILE *log_file;
static int log_rank = -1;
static char log_host[64];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"INIT", MKI_SUB_INIT}, {"BOOT", MKI_SUB_BOOT},   {"TOPO", MKI_SUB_TOPO},
    {"PLAN", MKI_SUB_PLAN}, {"MEM", MKI_SUB_MEM},     {"NET", MKI_SUB_NET},
    {"PROXY", MKI_SUB_PROXY}, {"COLL", MKI_SUB_COLL}, {"GEMM", MKI_SUB_GEMM},
    {"ALL", MKI_SUB_ALL},
};

int mki_log_parse_level(const char *s)
{
    static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, names[i]) == 0) return i;
    return -1;
}

int mki_log_parse_subsys(const char *s, unsigned *mask)
{
    int negate = (s[0] == '^');
    unsigned m = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", s + negate);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        size_t i, n = sizeof(subsys_names) / sizeof(subsys_names[0]);
        for (i = 0; i < n; i++)
            if (strcasecmp(tok, subsys_names[i].name) == 0) break;
        if (i == n) return -1;
        m |= subsys_names[i].bit;
    }
    *mask = negate ? ~m : m;
    return 0;
}

static const char *subsys_name(unsigned sub)
{
    size_t n = sizeof(subsys_names) / sizeof(subsys_names[0]);
    for (size_t i = 0; i < n; i++)
        if (subsys_names[i].bit == sub) return subsys_names[i].name;
    return "ALL";
}

/* Expand %h and %p in MK_DEBUG_FILE. */
static void open_log_file(const char *pattern)
{
    char path[512];
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < sizeof(path); p++) {
        if (p[0] == '%' && p[1] == 'h') {
            o += snprintf(path + o, sizeof(path) - o, "%s", log_host);
            p++;
        } else if (p[0] == '%' && p[1] == 'p') {
            o += snprintf(path + o, sizeof(path) - o, "%d", (int)getpid());
            p++;
        } else {
            path[o++] = *p;
        }
        if (o >= sizeof(path)) o = sizeof(path) - 1;
    }
    path[o] = '\0';
    log_file = fopen(path, "a");
    if (!log_file) {
        log_file = stderr;
        fprintf(stderr, "%s:%d MK WARN cannot open MK_DEBUG_FILE %s: %s\n",
                log_host, (int)getpid(), path, strerror(errno));
    }
}

static void log_setup(void)
{
    gethostname(log_host, sizeof(log_host) - 1);
    char *dot = strchr(log_host, '.');
    if (dot) *dot = '\0';
    log_file = stderr;
    const char *lv = mki_param_str(MKI_P_DEBUG);
    int l = mki_log_parse_level(lv);
    if (l < 0)
        fprintf(stderr, "%s:%d MK WARN MK_DEBUG=%s is not NONE, WARN, INFO "
                "or TRACE; using WARN\n", log_host, (int)getpid(), lv);
    else
        log_level = l;
    const char *ss = mki_param_str(MKI_P_DEBUG_SUBSYS);
    if (mki_log_parse_subsys(ss, &log_mask) != 0) {
        log_mask = MKI_SUB_ALL;
        fprintf(stderr, "%s:%d MK WARN MK_DEBUG_SUBSYS=%s names an unknown "
                "subsystem; logging all\n", log_host, (int)getpid(), ss);
    }
    const char *f = mki_param_str(MKI_P_DEBUG_FILE);
    if (f[0]) open_log_file(f);
}

void mki_log_init(void) { pthread_once(&log_once, log_setup); }

int mki_log_enabled(enum mki_log_level level, unsigned subsys)
{
    mki_log_init();
    /* WARN is shown whatever the subsystem mask says. */
    return (int)level <= log_level &&
           (level == MKI_LOG_WARN || (log_mask & subsys) != 0);
}

void mki_log_set_rank(int rank) { log_rank = rank; }

void mki_log(enum mki_log_level level, unsigned subsys, const char *file,
             int line, const char *fmt, ...)
{
    static const char *lvname[] = {"NONE", "WARN", "INFO", "TRACE"};
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    pthread_mutex_lock(&log_lock);
    fprintf(log_file, "%s:%d:%ld [%d] MK %s %s %s:%d %s\n", log_host,
            (int)getpid(), (long)syscall(SYS_gettid), log_rank, lvname[level],
            subsys_name(subsys), base, line, msg);
    fflush(log_file);
    pthread_mutex_unlock(&log_lock);
}
