/*
 * test_nvml - NVLink counting (topology/nvml.c) against fake_nvml.c,
 * loaded as libnvidia-ml.so.1 by tests/topo/nvml.sh.
 */
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "topology/topo.h"
#include "../unit/check.h"

static struct mki_host_topo h;

/* GPUs as CUDA would leave them: peer access, NVLink guessed. */
static void host(int n, enum mki_gpulink guess)
{
    static const char *bus[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                                "0000:5d:00.0"};
    memset(&h, 0, sizeof(h));
    h.ngpus = n;
    for (int i = 0; i < n; i++) {
        snprintf(h.gpu[i].busid, sizeof(h.gpu[i].busid), "%s", bus[i]);
        h.gpu[i].nvlinks = -1;
        for (int j = 0; j < n; j++) {
            h.link[i][j] = i == j ? MKI_GL_SAME : guess;
            h.nvlinks[i][j] = i == j ? 0 : -1;
        }
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "direct";
    setenv("FAKE_NVML", mode, 1);
    if (!strcmp(mode, "direct")) {
        host(2, MKI_GL_NVLINK);
        mki_topo_nvml(&h);
        CHECK(h.have_nvml == 1);
        if (!h.have_nvml) fprintf(stderr, "notes: %s\n", h.notes);
        CHECK(h.gpu[0].nvlinks == 18 && h.gpu[1].nvlinks == 18);
        CHECK(h.link[0][1] == MKI_GL_NVLINK && h.nvlinks[0][1] == 18);
        CHECK(h.link[1][0] == MKI_GL_NVLINK && h.nvlinks[1][0] == 18);
    } else if (!strcmp(mode, "switch")) {
        host(4, MKI_GL_PCIE);
        mki_topo_nvml(&h);
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++)
                if (i != j)
                    CHECK(h.link[i][j] == MKI_GL_NVLINK && h.nvlinks[i][j] == 18);
    } else if (!strcmp(mode, "down")) {
        host(2, MKI_GL_NVLINK);
        mki_topo_nvml(&h);
        CHECK(h.gpu[0].nvlinks == 0);
        CHECK(h.link[0][1] == MKI_GL_PCIE && h.nvlinks[0][1] == 0);
        /* No peer access stays none, whatever NVML says. */
        host(2, MKI_GL_NONE);
        setenv("FAKE_NVML", "direct", 1);
        mki_topo_nvml(&h);
        CHECK(h.link[0][1] == MKI_GL_NONE);
    } else if (!strcmp(mode, "missing")) {
        host(2, MKI_GL_NVLINK);
        mki_topo_nvml(&h);
        CHECK(h.have_nvml == 0 && h.link[0][1] == MKI_GL_NVLINK);
        CHECK_CONTAINS(h.notes, "NVML unavailable");
    }
    TEST_DONE();
}
