/*
 * fake_nvml.c - a stand-in for libnvidia-ml.so.1 with just the entry
 * points topology/nvml.c resolves, so its link counting runs in CI.
 *
 * FAKE_NVML selects the machine:
 *   direct   GPUs 0000:18:00.0 and 0000:2a:00.0, 18 links each, wired to
 *            each other (the 2 x H200 test machine);
 *   switch   4 GPUs (0000:18, 2a, 3a, 5d), 18 links each to an NVSwitch
 *            at 0000:c0:00.0; NVML reports NVLink P2P between all;
 *   down     the direct pair with every link inactive.
 * Signatures follow NVML's; the types are reduced to what is read.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;

static const char *gpus[] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0",
                             "0000:5d:00.0"};

static const char *mode(void)
{
    const char *m = getenv("FAKE_NVML");
    return m ? m : "direct";
}

static int ngpus(void) { return strcmp(mode(), "switch") ? 2 : 4; }

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r ? "fake error" : "success"; }

int nvmlDeviceGetHandleByPciBusId_v2(const char *bus, void **dev)
{
    for (int i = 0; i < ngpus(); i++)
        if (!strcmp(bus, gpus[i])) {
            *dev = (void *)(intptr_t)(i + 1);
            return 0;
        }
    return 6; /* NVML_ERROR_NOT_FOUND */
}

int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *active)
{
    (void)dev;
    if (link >= 18) return 2;
    *active = strcmp(mode(), "down") != 0;
    return 0;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, pci_t *pci)
{
    int me = (int)(intptr_t)dev - 1;
    (void)link;
    memset(pci, 0, sizeof(*pci));
    const char *peer = !strcmp(mode(), "switch") ? "00000000:c0:00.0"
                     : me == 0 ? "00000000:2a:00.0" : "00000000:18:00.0";
    snprintf(pci->busId, sizeof(pci->busId), "%s", peer);
    return 0;
}

int nvmlDeviceGetP2PStatus(void *a, void *b, int index, int *status)
{
    (void)a, (void)b;
    *status = index == 2 && strcmp(mode(), "down") ? 0 : 5;
    return 0;
}
