/*
 * hwloc.c - PCI locality: the NUMA node and CPUs of each GPU, and the
 * nearest RDMA devices of each GPU.
 *
 * Debian's hwloc has no CUDA backend, so a GPU is found as the PCI device
 * with its CUDA bus id.  Distance between a GPU and a NIC is measured by
 * walking ->parent from both PCI devices to their first common ancestor
 * (hwloc_get_common_ancestor_obj is not safe on I/O objects of uneven
 * depth), and classed by what that ancestor is:
 *
 *     PCIe switch port  <  host bridge  <  same NUMA node  <  elsewhere
 *
 * then by the number of hops.  Every NIC at the best (class, hops) is kept,
 * so a GPU with two NICs behind its switch (p5en) drives both.
 */
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "mki.h"
#include "topo.h"

#if HAVE_HWLOC
#include <errno.h>
#include <hwloc.h>

#define MAX_DEPTH 64

static mkResult_t load(const struct mki_topo_opts *o, hwloc_topology_t *out)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0)
        return o->xml ? mki_error(NULL, mkErrNoMemory, "hwloc_topology_init: "
                                  "%s", strerror(errno))
                      : mkErrUnsupported;
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (o->xml && hwloc_topology_set_xml(t, o->xml) != 0) {
        int e = errno;
        hwloc_topology_destroy(t);
        return mki_error(NULL, mkErrInvalidArgument, "MK_TOPO_XML=%s cannot "
                         "be read as an hwloc XML file (%s)", o->xml, strerror(e));
    }
    if (hwloc_topology_load(t) != 0) {
        int e = errno;
        hwloc_topology_destroy(t);
        if (!o->xml) return mkErrUnsupported; /* the caller notes it */
        return mki_error(NULL, mkErrInvalidArgument, "MK_TOPO_XML=%s: hwloc "
                         "cannot load it: %s", o->xml, strerror(e));
    }
    *out = t;
    return mkSuccess;
}

static void busid_of(hwloc_obj_t pci, char out[MKI_BUSID_LEN])
{
    snprintf(out, MKI_BUSID_LEN, "%04x:%02x:%02x.%x", pci->attr->pcidev.domain,
             pci->attr->pcidev.bus, pci->attr->pcidev.dev,
             pci->attr->pcidev.func);
}

/* The single NUMA node of an I/O object's CPU-side parent, or -1. */
static int numa_of(hwloc_topology_t t, hwloc_obj_t io)
{
    hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t, io);
    if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) != 1) return -1;
    return hwloc_bitmap_first(a->nodeset);
}

static int is_nvidia_gpu(hwloc_obj_t o)
{
    unsigned cls = o->attr->pcidev.class_id;
    return o->attr->pcidev.vendor_id == 0x10de && (cls == 0x0302 || cls == 0x0300);
}

/* Fake GPUs over a fixture take the fixture's NVIDIA devices. */
static void fake_busids(hwloc_topology_t t, struct mki_host_topo *h)
{
    int n = 0;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t, NULL); o;
         o = hwloc_get_next_pcidev(t, o))
        if (is_nvidia_gpu(o) && n < h->ngpus) busid_of(o, h->gpu[n++].busid);
    if (n < h->ngpus && (n == 0 || h->ngpus < MKI_TOPO_MAX_GPUS))
        mki_topo_note(h, "the fixture has %d NVIDIA GPU(s); %d fake GPU(s) "
                      "kept", n, n);
    h->ngpus = n;
}

static void gpu_locality(hwloc_topology_t t, struct mki_host_topo *h,
                         hwloc_obj_t *pci)
{
    for (int i = 0; i < h->ngpus; i++) {
        struct mki_gpu *g = &h->gpu[i];
        pci[i] = hwloc_get_pcidev_by_busidstring(t, g->busid);
        if (!pci[i]) {
            if (!h->fake) /* invented bus ids are in no PCI tree */
                mki_topo_note(h, "GPU %s is not in hwloc's PCI view", g->busid);
            continue;
        }
        g->numa = numa_of(t, pci[i]);
        hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t, pci[i]);
        if (a && a->cpuset &&
            hwloc_bitmap_list_snprintf(g->cpuset, sizeof(g->cpuset), a->cpuset)
                >= (int)sizeof(g->cpuset))
            g->cpuset[0] = '\0'; /* too long to keep whole: unknown */
    }
}

static hwloc_obj_t osdev_named(hwloc_topology_t t, const char *name)
{
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o;
         o = hwloc_get_next_osdev(t, o))
        if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name &&
            !strcmp(o->name, name))
            return o;
    return NULL;
}

/* hwloc's RDMA devices join the list (unless verbs already gave the names
 * that can actually be opened) and lend their PCI facts. */
static void nic_facts(hwloc_topology_t t, struct mki_host_topo *h)
{
    if (!h->have_verbs)
        for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o;
             o = hwloc_get_next_osdev(t, o))
            if (o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS && o->name &&
                h->nnics < MKI_TOPO_MAX_NICS) {
                struct mki_nic *n = &h->nic[h->nnics++];
                memset(n, 0, sizeof(*n));
                snprintf(n->name, sizeof(n->name), "%s", o->name);
                n->port = 1;
            }
    for (int i = 0; i < h->nnics; i++) {
        struct mki_nic *n = &h->nic[i];
        hwloc_obj_t o = osdev_named(t, n->name), pci = o ? o->parent : NULL;
        n->numa = -1;
        if (!pci || pci->type != HWLOC_OBJ_PCI_DEVICE) continue;
        busid_of(pci, n->busid);
        n->numa = numa_of(t, pci);
        n->kind = pci->attr->pcidev.vendor_id == 0x1d0f ? MKI_NIC_EFA : n->kind;
        if (!strncmp(n->name, "efa", 3) || !strncmp(n->name, "rdmap", 5))
            n->kind = MKI_NIC_EFA;
    }
}

/* Class and hops from a GPU's PCI device to a NIC's. */
static void distance(hwloc_obj_t gpu, int gpu_numa, hwloc_obj_t nic, int nic_numa,
                     enum mki_locality *loc, int *hops)
{
    hwloc_obj_t anc[MAX_DEPTH];
    int n = 0, up = 0;
    for (hwloc_obj_t o = gpu; o && n < MAX_DEPTH; o = o->parent) anc[n++] = o;
    for (hwloc_obj_t o = nic; o; o = o->parent, up++)
        for (int j = 0; j < n; j++) {
            if (anc[j] != o) continue;
            *hops = j + up;
            if (o->type == HWLOC_OBJ_BRIDGE)
                *loc = o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST
                           ? MKI_LOC_HOSTBRIDGE : MKI_LOC_SWITCH;
            else if (o->type == HWLOC_OBJ_PCI_DEVICE)
                *loc = MKI_LOC_SWITCH;
            else
                *loc = gpu_numa >= 0 && gpu_numa == nic_numa ? MKI_LOC_NUMA
                                                             : MKI_LOC_SYS;
            return;
        }
    *loc = MKI_LOC_SYS;
    *hops = MAX_DEPTH * 2;
}

static void choose_nics(hwloc_topology_t t, struct mki_host_topo *h,
                        hwloc_obj_t *gpu_pci)
{
    for (int g = 0; g < h->ngpus; g++) {
        struct mki_gpu *gp = &h->gpu[g];
        enum mki_locality best = MKI_LOC_UNKNOWN;
        int best_hops = 1 << 30;
        gp->nnics = 0;
        for (int i = 0; i < h->nnics; i++) {
            hwloc_obj_t o = osdev_named(t, h->nic[i].name);
            enum mki_locality loc = MKI_LOC_UNKNOWN;
            int hops = 1 << 29;
            if (o && gpu_pci[g])
                distance(gpu_pci[g], gp->numa, o->parent, h->nic[i].numa, &loc,
                         &hops);
            if (loc > best || (loc == best && hops > best_hops)) continue;
            if (loc < best || hops < best_hops) gp->nnics = 0;
            best = loc, best_hops = hops;
            if (gp->nnics < MKI_TOPO_NICS_PER_GPU) gp->nic[gp->nnics++] = i;
        }
        gp->nic_loc = gp->nnics ? best : MKI_LOC_UNKNOWN;
    }
}

mkResult_t mki_topo_hwloc(const struct mki_topo_opts *o, struct mki_host_topo *h)
{
    hwloc_topology_t t = NULL;
    hwloc_obj_t gpu_pci[MKI_TOPO_MAX_GPUS] = {0};
    MKI_CHECK(load(o, &t));
    h->have_hwloc = 1;
    h->nnuma = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    if (h->fake && o->xml) fake_busids(t, h);
    gpu_locality(t, h, gpu_pci);
    nic_facts(t, h);
    mkResult_t res = mki_topo_filter_nics(o->net_devices, h);
    if (res == mkSuccess) choose_nics(t, h, gpu_pci);
    hwloc_topology_destroy(t);
    return res;
}

#else

mkResult_t mki_topo_hwloc(const struct mki_topo_opts *o, struct mki_host_topo *h)
{
    (void)o; (void)h;
    return mkErrUnsupported;
}

#endif
