/*
 * nvml.c - NVLink counts through NVML, loaded with dlopen.
 *
 * Debian ships no NVML header and machines without the NVIDIA driver have
 * no libnvidia-ml, so the few entry points used are declared here and
 * resolved at run time; when the library or a symbol is missing the links
 * stay as CUDA's peer-access test left them and a note says so.
 *
 * For each GPU pair: the links of GPU i whose remote end is GPU j's PCI
 * device are direct NVLinks; when there are none but NVML reports NVLink
 * peer-to-peer between them, they meet through NVSwitch and the count is
 * the smaller number of active links of the two.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "mki.h"
#include "topo.h"

/* ---- the declarations we need from nvml.h ------------------------------ */
typedef int nvmlReturn_t;              /* 0: NVML_SUCCESS */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device;
    unsigned int pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
#define NVML_OK 0
#define NVML_LINKS_MAX 18              /* NVML_NVLINK_MAX_LINKS (Hopper) */
#define NVML_P2P_NVLINK 2              /* NVML_P2P_CAPS_INDEX_NVLINK */
#define NVML_P2P_STATUS_OK 0

struct nvml_api {
    void *lib;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*by_busid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*link_state)(nvmlDevice_t, unsigned, int *);
    nvmlReturn_t (*remote_pci)(nvmlDevice_t, unsigned, nvmlPciInfo_t *);
    nvmlReturn_t (*p2p)(nvmlDevice_t, nvmlDevice_t, int, int *);
    const char *(*errstr)(nvmlReturn_t);
};

static int nvml_open(struct nvml_api *a, struct mki_host_topo *h)
{
    memset(a, 0, sizeof(*a));
    a->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) {
        mki_topo_note(h, "NVML unavailable (%s): NVLink counts unknown",
                      dlerror());
        return -1;
    }
#define SYM(f, n) *(void **)&a->f = dlsym(a->lib, n)
    SYM(init, "nvmlInit_v2");
    SYM(shutdown, "nvmlShutdown");
    SYM(by_busid, "nvmlDeviceGetHandleByPciBusId_v2");
    SYM(link_state, "nvmlDeviceGetNvLinkState");
    SYM(remote_pci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    SYM(p2p, "nvmlDeviceGetP2PStatus");
    SYM(errstr, "nvmlErrorString");
#undef SYM
    if (!a->init || !a->shutdown || !a->by_busid || !a->link_state ||
        !a->remote_pci || !a->errstr) {
        mki_topo_note(h, "libnvidia-ml.so.1 lacks an NVLink entry point: "
                      "NVLink counts unknown");
        dlclose(a->lib);
        return -1;
    }
    nvmlReturn_t r = a->init();
    if (r != NVML_OK) {
        mki_topo_note(h, "nvmlInit: %s: NVLink counts unknown", a->errstr(r));
        dlclose(a->lib);
        return -1;
    }
    return 0;
}

/* Active links of GPU i and, per other GPU, the links that end on it. */
static void count_links(struct nvml_api *a, struct mki_host_topo *h, int i,
                        nvmlDevice_t dev, int *direct)
{
    int active = 0;
    for (unsigned l = 0; l < NVML_LINKS_MAX; l++) {
        int on = 0;
        nvmlPciInfo_t pci;
        char b[MKI_BUSID_LEN];
        if (a->link_state(dev, l, &on) != NVML_OK || !on) continue;
        active++;
        if (a->remote_pci(dev, l, &pci) != NVML_OK) continue;
        if (mki_busid_norm(pci.busId, b) && mki_busid_norm(pci.busIdLegacy, b))
            continue;
        int j = mki_topo_gpu_by_busid(h, b);
        if (j >= 0 && j != i) direct[j]++;
    }
    h->gpu[i].nvlinks = active;
}

static void set_links(struct nvml_api *a, struct mki_host_topo *h,
                      nvmlDevice_t *dev, int direct[][MKI_TOPO_MAX_GPUS])
{
    for (int i = 0; i < h->ngpus; i++)
        for (int j = 0; j < h->ngpus; j++) {
            int st = -1;
            if (i == j || !dev[i] || !dev[j]) continue;
            if (a->p2p && a->p2p(dev[i], dev[j], NVML_P2P_NVLINK, &st) != NVML_OK)
                st = -1;
            int n = direct[i][j];
            if (!n && st == NVML_P2P_STATUS_OK) {
                int x = h->gpu[i].nvlinks, y = h->gpu[j].nvlinks;
                n = x < y ? x : y;
            }
            if (n > 0 && h->link[i][j] != MKI_GL_NONE) {
                h->link[i][j] = MKI_GL_NVLINK;
                h->nvlinks[i][j] = n;
            } else if (h->link[i][j] == MKI_GL_NVLINK) {
                h->link[i][j] = MKI_GL_PCIE; /* the atomics guess was wrong */
                h->nvlinks[i][j] = 0;
            }
        }
}

void mki_topo_nvml(struct mki_host_topo *h)
{
    struct nvml_api a;
    if (h->ngpus == 0 || nvml_open(&a, h) != 0) return;
    nvmlDevice_t dev[MKI_TOPO_MAX_GPUS] = {0};
    int direct[MKI_TOPO_MAX_GPUS][MKI_TOPO_MAX_GPUS];
    memset(direct, 0, sizeof(direct));
    for (int i = 0; i < h->ngpus; i++) {
        nvmlReturn_t r = a.by_busid(h->gpu[i].busid, &dev[i]);
        if (r != NVML_OK) {
            mki_topo_note(h, "NVML does not know GPU %s (%s)", h->gpu[i].busid,
                          a.errstr(r));
            dev[i] = NULL;
            continue;
        }
        count_links(&a, h, i, dev[i], direct[i]);
    }
    set_links(&a, h, dev, direct);
    h->have_nvml = 1;
    a.shutdown();
    dlclose(a.lib);
}
