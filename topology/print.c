/*
 * print.c - the host's topology as text (mkinfo, mkCommGetInfo).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mki.h"
#include "topo.h"

static const char *loc_name(enum mki_locality l)
{
    static const char *n[] = {"same PCIe switch", "same host bridge",
                              "same NUMA node", "other NUMA node", "unknown"};
    return (unsigned)l <= MKI_LOC_UNKNOWN ? n[l] : "?";
}

static void link_cell(char *b, size_t n, enum mki_gpulink l, int nv)
{
    if (l == MKI_GL_SAME) snprintf(b, n, "X");
    else if (l == MKI_GL_NVLINK && nv > 0) snprintf(b, n, "NV%d", nv);
    else if (l == MKI_GL_NVLINK) snprintf(b, n, "NV?");
    else if (l == MKI_GL_PCIE) snprintf(b, n, "PCIe");
    else snprintf(b, n, "--");
}

static void print_links(struct mki_strbuf *sb, const struct mki_host_topo *h)
{
    char cell[16];
    mki_sb_printf(sb, "links (NVn: n NVLinks; PCIe: peer access over PCIe; "
                  "--: no peer access):\n        ");
    for (int j = 0; j < h->ngpus; j++) {
        snprintf(cell, sizeof(cell), "GPU%d", j);
        mki_sb_printf(sb, j + 1 < h->ngpus ? "%-7s" : "%s", cell);
    }
    mki_sb_printf(sb, "\n");
    for (int i = 0; i < h->ngpus; i++) {
        snprintf(cell, sizeof(cell), "GPU%d", i);
        mki_sb_printf(sb, "  %-6s", cell);
        for (int j = 0; j < h->ngpus; j++) {
            link_cell(cell, sizeof(cell), h->link[i][j], h->nvlinks[i][j]);
            mki_sb_printf(sb, j + 1 < h->ngpus ? "%-7s" : "%s", cell);
        }
        mki_sb_printf(sb, "\n");
    }
}

static void print_gpu(struct mki_strbuf *sb, const struct mki_host_topo *h, int i)
{
    const struct mki_gpu *g = &h->gpu[i];
    char nv[16] = "?", numa[16] = "?";
    if (g->nvlinks >= 0) snprintf(nv, sizeof(nv), "%d", g->nvlinks);
    if (g->numa >= 0) snprintf(numa, sizeof(numa), "%d", g->numa);
    mki_sb_printf(sb, "  GPU%d  %s  %s, %d SMs, NUMA %s, CPUs %s, %s "
                  "NVLinks\n", i, g->busid, g->name, g->sm_count, numa,
                  g->cpuset[0] ? g->cpuset : "?", nv);
    mki_sb_printf(sb, "        NICs:");
    if (!g->nnics) mki_sb_printf(sb, " none");
    for (int k = 0; k < g->nnics; k++)
        mki_sb_printf(sb, " %s", h->nic[g->nic[k]].name);
    mki_sb_printf(sb, g->nnics ? " (%s)\n" : "\n", loc_name(g->nic_loc));
}

void mki_topo_print_host(struct mki_strbuf *sb, const struct mki_host_topo *h)
{
    mki_sb_printf(sb, "topology (%s):\n", h->source);
    mki_sb_printf(sb, "  NUMA nodes: %d%s\n", h->nnuma,
                  h->have_hwloc ? "" : " (unknown without hwloc)");
    if (h->ngpus == 0) mki_sb_printf(sb, "  GPUs: none\n");
    for (int i = 0; i < h->ngpus; i++) print_gpu(sb, h, i);
    if (h->ngpus > 1) print_links(sb, h);
    mki_sb_printf(sb, "RDMA devices:%s\n", h->nnics ? "" : " none");
    for (int i = 0; i < h->nnics; i++) {
        const struct mki_nic *n = &h->nic[i];
        mki_sb_printf(sb, "  %-12s %s, port %d, PCI %s, NUMA %d\n", n->name,
                      n->kind == MKI_NIC_EFA ? "efa" : "ib", n->port,
                      n->busid[0] ? n->busid : "?", n->numa);
    }
    if (h->notes[0]) mki_sb_printf(sb, "notes: %s\n", h->notes);
}
