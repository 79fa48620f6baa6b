/* test_config - mkConfig_t versioning and validation (no GPU, no launcher). */
#include <stddef.h>
#include <stdlib.h>
#include "mki.h"
#include "check.h"

/* What a binary built against the first, smaller header passes: the
 * struct as it was before workspaceSize and nodeSize existed. */
typedef struct {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int cudaDev;
    int timeoutMs;
} old_config_t;

int main(void)
{
    struct mki_config r;
    unsetenv("MK_TIMEOUT_MS");
    unsetenv("MK_TRANSPORT");
    unsetenv("MK_NODE_SIZE");

    /* NULL and the initializer give the defaults. */
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkSuccess);
    CHECK(r.timeoutMs == 300000 && r.cudaDev == -1 && r.nodeSize == 0);
    CHECK(r.workspaceSize == 0); /* automatic */
    mkConfig_t c = MK_CONFIG_INITIALIZER;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkSuccess);
    CHECK(r.timeoutMs == 300000);

    /* Fields set by the user win over the environment. */
    setenv("MK_TIMEOUT_MS", "1234", 1);
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkSuccess);
    CHECK(r.timeoutMs == 1234);
    c.timeoutMs = 99;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkSuccess);
    CHECK(r.timeoutMs == 99);
    unsetenv("MK_TIMEOUT_MS");

    /* Bad magic. */
    mkConfig_t bad = MK_CONFIG_INITIALIZER;
    bad.magic = 0x1234;
    CHECK_RES(mki_config_resolve(&bad, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "MK_CONFIG_INITIALIZER");

    /* Garbage sizes. */
    bad = (mkConfig_t)MK_CONFIG_INITIALIZER;
    bad.size = 4;
    CHECK_RES(mki_config_resolve(&bad, NULL, &r), mkErrInvalidArgument);
    bad.size = 1 << 20;
    CHECK_RES(mki_config_resolve(&bad, NULL, &r), mkErrInvalidArgument);

    /* An unknown (too old / not a version) version. */
    bad = (mkConfig_t)MK_CONFIG_INITIALIZER;
    bad.version = 3;
    CHECK_RES(mki_config_resolve(&bad, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "version");

    /* A newer header's config (larger struct, newer version) is accepted;
     * the fields we know are read. */
    struct { mkConfig_t c; int future_field; } newer;
    newer.c = (mkConfig_t)MK_CONFIG_INITIALIZER;
    newer.c.size = sizeof(newer);
    newer.c.version = MK_VERSION_CODE + 100;
    newer.c.timeoutMs = 777;
    newer.future_field = 42;
    CHECK_RES(mki_config_resolve(&newer.c, NULL, &r), mkSuccess);
    CHECK(r.timeoutMs == 777);

    /* A smaller, older struct: the missing fields take their defaults
     * (the bytes after it must not be read as fields). */
    struct { old_config_t c; char junk[64]; } older;
    memset(&older, 0x7f, sizeof(older));
    older.c.size = sizeof(old_config_t);
    older.c.magic = MK_CONFIG_MAGIC;
    older.c.version = MK_VERSION_CODE;
    older.c.cudaDev = MK_CONFIG_UNDEF_INT;
    older.c.timeoutMs = 555;
    CHECK_RES(mki_config_resolve((const mkConfig_t *)&older.c, NULL, &r), mkSuccess);
    CHECK(r.timeoutMs == 555 && r.nodeSize == 0 && r.smBudget == 0);
    CHECK(r.workspaceSize == 0); /* automatic */

    /* A size that ends inside a pointer field: the field is not taken
     * (half a pointer would crash when the library follows it). */
    mkConfig_t cut = MK_CONFIG_INITIALIZER;
    cut.transports = "socket";
    cut.size = offsetof(mkConfig_t, transports) + 4;
    CHECK_RES(mki_config_resolve(&cut, NULL, &r), mkSuccess);
    CHECK(strcmp(r.transports, "socket") != 0 || getenv("MK_TRANSPORT") != NULL);

    /* Out-of-range fields. */
    c = (mkConfig_t)MK_CONFIG_INITIALIZER;
    c.timeoutMs = 0;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "timeoutMs");
    c = (mkConfig_t)MK_CONFIG_INITIALIZER;
    c.cudaDev = -3;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);
    c = (mkConfig_t)MK_CONFIG_INITIALIZER;
    c.workspaceSize = 100;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "workspaceSize");
    setenv("MK_WORKSPACE_SIZE", "1K", 1);
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "MK_WORKSPACE_SIZE=1K");
    setenv("MK_WORKSPACE_SIZE", "0", 1);
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkSuccess);
    CHECK(r.workspaceSize == 0);
    setenv("MK_WORKSPACE_SIZE", "3M", 1);
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkSuccess);
    CHECK(r.workspaceSize == 3u << 20);
    unsetenv("MK_WORKSPACE_SIZE");
    c = (mkConfig_t)MK_CONFIG_INITIALIZER;
    c.nodeSize = -1;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);

    /* Transport lists. */
    c = (mkConfig_t)MK_CONFIG_INITIALIZER;
    c.transports = "socket";
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkSuccess);
    CHECK(strcmp(r.transports, "socket") == 0);
    c.transports = "^efa,ibverbs";
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkSuccess);
    c.transports = "socket,carrier-pigeon";
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "carrier-pigeon");
    c.transports = "";
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);
    setenv("MK_TRANSPORT", "tcp", 1);
    c.transports = NULL;
    CHECK_RES(mki_config_resolve(&c, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "MK_TRANSPORT");
    unsetenv("MK_TRANSPORT");

    /* A malformed environment value is an error, not the default. */
    setenv("MK_NODE_SIZE", "four", 1);
    CHECK_RES(mki_config_resolve(NULL, NULL, &r), mkErrInvalidArgument);
    CHECK_CONTAINS(mki_thread_error(), "MK_NODE_SIZE");
    unsetenv("MK_NODE_SIZE");
    TEST_DONE();
}
