/*
 * discover.c - this host's GPUs and RDMA devices.
 *
 * Order of discovery, each step optional:
 *   1. GPUs from CUDA (bus id, name, UUID, SMs) and peer access between
 *      them, or invented ones (MK_TOPO_FAKE_GPUS, a testing aid);
 *   2. RDMA devices from libibverbs (the names a transport can open);
 *   3. hwloc: NUMA node and CPUs of each GPU, PCI locality of each NIC,
 *      the nearest NICs of each GPU (hwloc.c);
 *   4. NVML: NVLink counts between the GPUs (nvml.c).
 * A missing source leaves its facts unknown and adds a note; only a
 * malformed variable or an unreadable MK_TOPO_XML is an error.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cuda_runtime_api.h>

#include "config.h"
#include "mki.h"
#include "topo.h"

#if HAVE_VERBS
#include <infiniband/verbs.h>
#endif

void mki_topo_note(struct mki_host_topo *h, const char *fmt, ...)
{
    size_t l = strlen(h->notes);
    if (l + 3 >= sizeof(h->notes)) return;
    if (l) { strcat(h->notes, "; "); l += 2; }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(h->notes + l, sizeof(h->notes) - l, fmt, ap);
    va_end(ap);
}

int mki_busid_norm(const char *in, char out[MKI_BUSID_LEN])
{
    unsigned dom, bus, dev, fn;
    int end = -1;
    if (!in || sscanf(in, "%x:%x:%x.%1x%n", &dom, &bus, &dev, &fn, &end) != 4 ||
        end < 0 || in[end] != '\0')
        return -1;
    if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7) return -1;
    snprintf(out, MKI_BUSID_LEN, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
    return 0;
}

int mki_topo_gpu_by_busid(const struct mki_host_topo *h, const char *busid)
{
    char b[MKI_BUSID_LEN];
    if (mki_busid_norm(busid, b)) return -1;
    for (int i = 0; i < h->ngpus; i++)
        if (!strcmp(h->gpu[i].busid, b)) return i;
    return -1;
}

void mki_topo_opts_env(struct mki_topo_opts *o)
{
    const char *x = mki_param_str(MKI_P_TOPO_XML), *f = mki_param_str(MKI_P_TOPO_FAKE_GPUS);
    memset(o, 0, sizeof(*o));
    o->xml = x && *x ? x : NULL;
    o->fake_gpus = f && *f ? f : NULL;
    o->net_devices = mki_param_str(MKI_P_NET_DEVICES);
    /* A fixture describes another machine: this host's verbs devices
     * would not match it. */
    o->verbs = o->xml == NULL;
}

/* ---- GPUs ----------------------------------------------------------- */

static void cuda_links(struct mki_host_topo *h)
{
    for (int i = 0; i < h->ngpus; i++)
        for (int j = 0; j < h->ngpus; j++) {
            int can = 0, atomics = 0;
            if (i == j) { h->link[i][j] = MKI_GL_SAME; continue; }
            if (cudaDeviceCanAccessPeer(&can, h->gpu[i].dev, h->gpu[j].dev)
                != cudaSuccess) {
                (void)cudaGetLastError();
                can = 0;
            }
            /* Without NVML, native peer atomics hint at NVLink (PCIe
             * peers lack them); nvml.c replaces the guess with counts. */
            if (can && cudaDeviceGetP2PAttribute(&atomics,
                           cudaDevP2PAttrNativeAtomicSupported,
                           h->gpu[i].dev, h->gpu[j].dev) != cudaSuccess) {
                (void)cudaGetLastError();
                atomics = 0;
            }
            h->link[i][j] = !can ? MKI_GL_NONE
                          : atomics ? MKI_GL_NVLINK : MKI_GL_PCIE;
            h->nvlinks[i][j] = atomics ? -1 : 0;
        }
}

static void cuda_gpus(struct mki_host_topo *h)
{
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        (void)cudaGetLastError();
        mki_topo_note(h, "no GPU found (%s)", err != cudaSuccess
                          ? cudaGetErrorString(err) : "CUDA sees 0 devices");
        return;
    }
    for (int d = 0; d < count && h->ngpus < MKI_TOPO_MAX_GPUS; d++) {
        struct mki_gpu *g = &h->gpu[h->ngpus];
        struct cudaDeviceProp prop;
        char bus[32];
        if (cudaGetDeviceProperties(&prop, d) != cudaSuccess ||
            cudaDeviceGetPCIBusId(bus, sizeof(bus), d) != cudaSuccess) {
            mki_topo_note(h, "CUDA device %d: %s", d,
                          cudaGetErrorString(cudaGetLastError()));
            continue;
        }
        memset(g, 0, sizeof(*g));
        g->dev = d;
        g->numa = -1;
        g->nvlinks = -1;
        g->nic_loc = MKI_LOC_UNKNOWN;
        g->sm_count = prop.multiProcessorCount;
        snprintf(g->name, sizeof(g->name), "%.47s", prop.name);
        memcpy(g->uuid, prop.uuid.bytes, sizeof(g->uuid));
        if (mki_busid_norm(bus, g->busid)) snprintf(g->busid, sizeof(g->busid), "?");
        h->ngpus++;
    }
    if (count > MKI_TOPO_MAX_GPUS)
        mki_topo_note(h, "%d GPUs, only the first %d described", count,
                      MKI_TOPO_MAX_GPUS);
    cuda_links(h);
}

mkResult_t mki_topo_parse_fake(const char *spec, int *n, enum mki_gpulink *link,
                               int *nvlinks, int *sms)
{
    char buf[128];
    *n = 0, *link = MKI_GL_NVLINK, *nvlinks = 18, *sms = 132;
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *v = strchr(t, '='), *end = NULL;
        long x = -1;
        if (v) *v++ = '\0';
        if (v && !strcmp(t, "link")) {
            if (!strcmp(v, "pcie")) *link = MKI_GL_PCIE, *nvlinks = 0;
            else if (!strcmp(v, "none")) *link = MKI_GL_NONE, *nvlinks = 0;
            else if (!strncmp(v, "nv", 2) && (x = strtol(v + 2, &end, 10)) > 0 &&
                     !*end && x <= 64) *link = MKI_GL_NVLINK, *nvlinks = (int)x;
            else goto bad;
            continue;
        }
        if (v) x = strtol(v, &end, 10);
        if (!v || !*v || *end || x < 0) goto bad;
        if (!strcmp(t, "n") && x <= MKI_TOPO_MAX_GPUS) *n = (int)x;
        else if (!strcmp(t, "sms") && x >= 1 && x <= 4096) *sms = (int)x;
        else goto bad;
    }
    return mkSuccess;
bad:
    return mki_error(NULL, mkErrInvalidArgument, "MK_TOPO_FAKE_GPUS=\"%s\" is "
                     "malformed; a testing aid: give e.g. \"n=8,link=nv18,"
                     "sms=132\" (link: nvN, pcie or none; n <= %d)", spec,
                     MKI_TOPO_MAX_GPUS);
}

/* Invented GPUs; bus ids come later from the XML's NVIDIA devices when a
 * fixture is loaded, else 0000:N1:00.0. */
static mkResult_t fake_gpus(const struct mki_topo_opts *o, struct mki_host_topo *h)
{
    int n, links, sms;
    enum mki_gpulink link;
    MKI_CHECK(mki_topo_parse_fake(o->fake_gpus, &n, &link, &links, &sms));
    if (n == 0 && !o->xml)
        return mki_error(NULL, mkErrInvalidArgument, "MK_TOPO_FAKE_GPUS=\"%s\""
                         " needs n=COUNT unless MK_TOPO_XML names a fixture "
                         "with NVIDIA devices", o->fake_gpus);
    h->fake = 1;
    h->ngpus = n ? n : MKI_TOPO_MAX_GPUS; /* hwloc.c trims to the XML's */
    for (int i = 0; i < h->ngpus; i++) {
        struct mki_gpu *g = &h->gpu[i];
        memset(g, 0, sizeof(*g));
        g->dev = -1, g->numa = -1, g->nic_loc = MKI_LOC_UNKNOWN;
        g->sm_count = sms;
        g->nvlinks = link == MKI_GL_NVLINK ? links : 0;
        g->uuid[0] = (unsigned char)(i + 1);
        snprintf(g->name, sizeof(g->name), "fake GPU");
        if (!o->xml)
            snprintf(g->busid, sizeof(g->busid), "0000:%02x:00.0", 0x10 * (i + 1));
        for (int j = 0; j < MKI_TOPO_MAX_GPUS; j++) {
            h->link[i][j] = i == j ? MKI_GL_SAME : link;
            h->nvlinks[i][j] = i == j ? 0 : g->nvlinks;
        }
    }
    return mkSuccess;
}

/* ---- RDMA devices ----------------------------------------------------- */

#if HAVE_VERBS
static enum mki_nic_kind kind_by_name(const char *name)
{
    return !strncmp(name, "efa", 3) || !strncmp(name, "rdmap", 5) ? MKI_NIC_EFA
                                                                 : MKI_NIC_IB;
}

static void add_nic(struct mki_host_topo *h, const char *name)
{
    if (h->nnics >= MKI_TOPO_MAX_NICS) return;
    struct mki_nic *n = &h->nic[h->nnics++];
    memset(n, 0, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->port = 1;
    n->numa = -1;
    n->kind = kind_by_name(name);
}

static void verbs_nics(struct mki_host_topo *h)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    h->have_verbs = 1;
    if (!list || n == 0) {
        mki_topo_note(h, "no RDMA device (libibverbs lists none)");
        if (list) ibv_free_device_list(list);
        return;
    }
    for (int i = 0; i < n; i++) add_nic(h, ibv_get_device_name(list[i]));
    ibv_free_device_list(list);
}
#else
static void verbs_nics(struct mki_host_topo *h)
{
    mki_topo_note(h, "built without libibverbs: no RDMA devices");
}
#endif

/* ---- MK_NET_DEVICES ------------------------------------------------- */

static int nic_named(const struct mki_host_topo *h, const char *name)
{
    for (int i = 0; i < h->nnics; i++)
        if (!strcmp(h->nic[i].name, name)) return i;
    return -1;
}

static mkResult_t parse_dev(const char *spec, char *tok, int *port)
{
    char *colon = strchr(tok, ':'), *end;
    *port = 1;
    if (!colon) return mkSuccess;
    long p = strtol(colon + 1, &end, 10);
    if (colon == tok || end == colon + 1 || *end || p < 1 || p > 255)
        return mki_error(NULL, mkErrInvalidArgument, "MK_NET_DEVICES=\"%s\": "
                         "\"%s\" is not NAME or NAME:PORT (e.g. mlx5_0:1)",
                         spec, tok);
    *colon = '\0';
    *port = (int)p;
    return mkSuccess;
}

mkResult_t mki_topo_filter_nics(const char *spec, struct mki_host_topo *h)
{
    if (!spec || !*spec) return mkSuccess;
    int neg = spec[0] == '^', keep[MKI_TOPO_MAX_NICS], port[MKI_TOPO_MAX_NICS];
    char buf[256], found[256] = "";
    if (strlen(spec) >= sizeof(buf))
        return mki_error(NULL, mkErrInvalidArgument, "MK_NET_DEVICES is longer "
                         "than 255 characters");
    for (int i = 0; i < h->nnics; i++) keep[i] = neg, port[i] = h->nic[i].port;
    snprintf(buf, sizeof(buf), "%s", spec + neg);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int p;
        MKI_CHECK(parse_dev(spec, t, &p));
        int i = nic_named(h, t);
        if (i < 0) {
            mki_topo_note(h, "MK_NET_DEVICES names %s, not an RDMA device here", t);
            continue;
        }
        keep[i] = !neg, port[i] = p;
    }
    int n = 0, had = h->nnics;
    for (int i = 0; i < had; i++) {
        size_t l = strlen(found);
        snprintf(found + l, sizeof(found) - l, "%s%s", l ? " " : "", h->nic[i].name);
        if (!keep[i]) continue;
        h->nic[n] = h->nic[i];
        h->nic[n++].port = port[i];
    }
    h->nnics = n;
    if (n == 0 && had > 0 && !neg)
        return mki_error(NULL, mkErrInvalidArgument, "MK_NET_DEVICES=\"%s\" "
                         "names none of this host's RDMA devices (%s); fix the "
                         "names or unset it", spec, found);
    return mkSuccess;
}

double mki_topo_nic_share(const struct mki_host_topo *h, int g)
{
    const struct mki_gpu *gp = &h->gpu[g];
    double sum = 0;
    for (int k = 0; k < gp->nnics; k++) {
        int users = 0, i = gp->nic[k];
        for (int o = 0; o < h->ngpus; o++)
            for (int j = 0; j < h->gpu[o].nnics; j++)
                users += h->gpu[o].nic[j] == i;
        sum += 1.0 / (users > 0 ? users : 1);
    }
    return gp->nnics ? sum / gp->nnics : 0;
}

void mki_topo_nics_without_locality(struct mki_host_topo *h)
{
    for (int g = 0; g < h->ngpus; g++) {
        struct mki_gpu *gp = &h->gpu[g];
        gp->nnics = 0;
        gp->nic_loc = MKI_LOC_UNKNOWN;
        for (int i = 0; i < h->nnics && gp->nnics < MKI_TOPO_NICS_PER_GPU; i++)
            gp->nic[gp->nnics++] = i;
    }
}

/* ---- the whole host --------------------------------------------------- */

static void describe_source(const struct mki_topo_opts *o, struct mki_host_topo *h)
{
    snprintf(h->source, sizeof(h->source), "%s%s%s%s%s%s",
             o->xml ? "hwloc XML " : "this machine",
             o->xml ? o->xml : h->have_hwloc ? " via hwloc" : "",
             h->fake ? ", fake GPUs (MK_TOPO_FAKE_GPUS)" : "",
             h->ngpus && !h->fake ? ", CUDA" : "", h->have_nvml ? ", NVML" : "",
             h->have_verbs ? ", libibverbs" : "");
}

mkResult_t mki_topo_discover(const struct mki_topo_opts *o,
                             struct mki_host_topo *out)
{
    struct mki_host_topo *h = calloc(1, sizeof(*h));
    if (!h) return mki_error(NULL, mkErrNoMemory, "out of host memory");
    mkResult_t res;
    if (o->fake_gpus) MKI_CHECK_GOTO(fake_gpus(o, h), res, out);
    else cuda_gpus(h);
    if (o->verbs) verbs_nics(h);
    if (!HAVE_HWLOC && o->xml) {
        res = mki_error(NULL, mkErrUnsupported, "MK_TOPO_XML is set but this "
                        "mkernel was built without hwloc");
        goto out;
    }
    res = HAVE_HWLOC ? mki_topo_hwloc(o, h) : mkErrUnsupported;
    if (res == mkErrUnsupported && !o->xml) {
        /* No PCI view of this machine: every NIC ties for every GPU. */
        mki_topo_note(h, HAVE_HWLOC ? "hwloc cannot load this machine's "
                      "topology: NUMA and PCI locality unknown" : "built "
                      "without hwloc: NUMA and PCI locality unknown");
        MKI_CHECK_GOTO(mki_topo_filter_nics(o->net_devices, h), res, out);
        mki_topo_nics_without_locality(h);
        res = mkSuccess;
    }
    if (res != mkSuccess) goto out;
    if (!h->fake) mki_topo_nvml(h);
    describe_source(o, h);
    *out = *h;
    res = mkSuccess;
out:
    free(h);
    return res;
}
