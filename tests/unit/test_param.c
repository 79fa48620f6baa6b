/* test_param - the MK_* parameter table, parsers and log settings. */
#include <stdlib.h>
#include "mki.h"
#include "check.h"

int main(void)
{
    int64_t v;
    /* Every row is complete, every name is MK_*, no name twice. */
    for (int i = 0; i < MKI_P_COUNT; i++) {
        const struct mki_param_desc *d = mki_param_desc((enum mki_param_id)i);
        CHECK(d && d->name && strncmp(d->name, "MK_", 3) == 0);
        CHECK(d->def && d->doc && strlen(d->doc) > 10);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(d->name, mki_param_desc((enum mki_param_id)j)->name));
        if (d->type != MKI_PT_STR) {
            unsetenv(d->name);
            CHECK_RES(mki_param_int((enum mki_param_id)i, &v), mkSuccess);
            CHECK(v >= d->min && v <= d->max);
        }
    }
    CHECK(mki_param_desc(MKI_P_COUNT) == NULL);

    /* Sizes. */
    CHECK(mki_parse_size("4096", &v) == 0 && v == 4096);
    CHECK(mki_parse_size("64K", &v) == 0 && v == 65536);
    CHECK(mki_parse_size("256M", &v) == 0 && v == 256ll << 20);
    CHECK(mki_parse_size("2g", &v) == 0 && v == 2ll << 30);
    CHECK(mki_parse_size("1GB", &v) == 0 && v == 1ll << 30);
    CHECK(mki_parse_size("-1", &v) != 0);
    CHECK(mki_parse_size("12Q", &v) != 0);
    CHECK(mki_parse_size("", &v) != 0);
    CHECK(mki_parse_size("99999999999999999999", &v) != 0);
    CHECK(mki_parse_size("9000000000T", &v) != 0);

    /* Integers with ranges. */
    setenv("MK_TIMEOUT_MS", "2500", 1);
    CHECK_RES(mki_param_int(MKI_P_TIMEOUT_MS, &v), mkSuccess);
    CHECK(v == 2500);
    setenv("MK_TIMEOUT_MS", "0", 1);
    CHECK_RES(mki_param_int(MKI_P_TIMEOUT_MS, &v), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "out of range");
    setenv("MK_TIMEOUT_MS", "12ms", 1);
    CHECK_RES(mki_param_int(MKI_P_TIMEOUT_MS, &v), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "MK_TIMEOUT_MS");
    unsetenv("MK_TIMEOUT_MS");
    setenv("MK_WORKSPACE_SIZE", "1X", 1);
    CHECK_RES(mki_param_int(MKI_P_WORKSPACE_SIZE, &v), mkErrInvalidArgument);
    setenv("MK_WORKSPACE_SIZE", "1G", 1);
    CHECK_RES(mki_param_int(MKI_P_WORKSPACE_SIZE, &v), mkSuccess);
    CHECK(v == 1ll << 30);
    unsetenv("MK_WORKSPACE_SIZE");
    CHECK(!mki_param_is_set(MKI_P_WORKSPACE_SIZE));
    CHECK(strcmp(mki_param_str(MKI_P_WORKSPACE_SIZE), "0") == 0);

    /* Log level and subsystem parsing. */
    CHECK(mki_log_parse_level("info") == MKI_LOG_INFO);
    CHECK(mki_log_parse_level("TRACE") == MKI_LOG_TRACE);
    CHECK(mki_log_parse_level("loud") == -1);
    unsigned m;
    CHECK(mki_log_parse_subsys("INIT,NET", &m) == 0 &&
          m == (MKI_SUB_INIT | MKI_SUB_NET));
    CHECK(mki_log_parse_subsys("^NET", &m) == 0 && !(m & MKI_SUB_NET) &&
          (m & MKI_SUB_INIT));
    CHECK(mki_log_parse_subsys("INIT,BOGUS", &m) == -1);
    TEST_DONE();
}
