/* test_errors - result strings and version, through the public API. */
#include "mkernel.h"
#include "check.h"

int main(void)
{
    for (int r = 0; r < mkNumResults; r++) {
        const char *s = mkGetErrorString((mkResult_t)r);
        CHECK(s && s[0] && strcmp(s, "unknown mkResult_t value") != 0);
        for (int q = 0; q < r; q++)
            CHECK(strcmp(s, mkGetErrorString((mkResult_t)q)) != 0);
    }
    CHECK(strcmp(mkGetErrorString(mkSuccess), "success") == 0);
    CHECK(strcmp(mkGetErrorString(mkErrTimeout), "timeout") == 0);
    CHECK(strcmp(mkGetErrorString((mkResult_t)1000), "unknown mkResult_t value") == 0);
    CHECK(strcmp(mkGetErrorString((mkResult_t)-1), "unknown mkResult_t value") == 0);
    int v = -1;
    CHECK_RES(mkGetVersion(&v), mkSuccess);
    CHECK(v == MK_VERSION_CODE);
    CHECK_RES(mkGetVersion(NULL), mkErrInvalidArgument);
    CHECK_CONTAINS(mkGetLastError(NULL), "version is NULL");
    TEST_DONE();
}
