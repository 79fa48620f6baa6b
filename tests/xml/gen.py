#!/usr/bin/env python3
"""gen.py - write the hwloc XML fixtures of tests/topo/test_topo_xml.

Machines shaped like the ones mkernel runs on, reduced to what the
topology code reads (sockets, NUMA nodes, a few cores, the PCI tree with
its bridges, GPUs and RDMA devices).  Every CPU-side object carries
complete_cpuset/complete_nodeset: hwloc 2.9 crashes on XML without them.
ci.xml is different: it is this CI machine as hwloc exported it.

    python3 tests/xml/gen.py tests/xml      (rewrites the four fixtures)
"""
import os
import sys

CORES = 8  # cores (one PU each) per socket


class Gen:
    def __init__(self):
        self.gp = 1
        self.out = []

    def idx(self):
        self.gp += 1
        return self.gp

    def emit(self, depth, text):
        self.out.append("  " * depth + text)


def mask(bits):
    """hwloc's bitmap string: 32-bit words, most significant first."""
    v = 0
    for b in bits:
        v |= 1 << b
    words = []
    while True:
        words.append(v & 0xFFFFFFFF)
        v >>= 32
        if not v:
            break
    return ",".join("0x%08x" % w for w in reversed(words))


def cpu_attrs(cpus, nodes):
    c, n = mask(cpus), mask(nodes)
    return ('cpuset="%s" complete_cpuset="%s" nodeset="%s" complete_nodeset="%s"'
            % (c, c, n, n))


def pci_dev(g, d, busid, cls, ven, dev, osdev=None, osdev_type=3):
    attrs = ('type="PCIDev" gp_index="%d" pci_busid="%s" pci_type="%s [%s:%s] '
             '[%s:0000] 00" pci_link_speed="32.000000"' %
             (g.idx(), busid, cls, ven, dev, ven))
    if osdev is None:
        g.emit(d, "<object %s/>" % attrs)
        return
    g.emit(d, "<object %s>" % attrs)
    g.emit(d + 1, '<object type="OSDev" gp_index="%d" name="%s" osdev_type="%d"/>'
           % (g.idx(), osdev, osdev_type))
    g.emit(d, "</object>")


def gpu(g, d, busid):
    pci_dev(g, d, busid, "0302", "10de", "2330")


def mlx(g, d, busid, name):
    pci_dev(g, d, busid, "0207", "15b3", "1021", name)


def efa(g, d, busid, name):
    pci_dev(g, d, busid, "0200", "1d0f", "efa2", name)


def bridge(g, d, busid, lo, hi, body, host=False):
    """A host bridge (host=True) or a PCIe switch port; body(d) fills it."""
    if host:
        g.emit(d, '<object type="Bridge" gp_index="%d" bridge_type="0-1" '
               'depth="0" bridge_pci="0000:[%02x-%02x]">' % (g.idx(), lo, hi))
    else:
        g.emit(d, '<object type="Bridge" gp_index="%d" bridge_type="1-1" '
               'depth="1" pci_busid="%s" pci_type="0604 [1000:c030] '
               '[0000:0000] 00" pci_link_speed="32.000000" '
               'bridge_pci="0000:[%02x-%02x]">' % (g.idx(), busid, lo, hi))
    body(d + 1)
    g.emit(d, "</object>")


def machine(sockets, io_of_socket, name):
    g = Gen()
    ncpu = sockets * CORES
    g.emit(0, '<?xml version="1.0" encoding="UTF-8"?>')
    g.emit(0, '<!DOCTYPE topology SYSTEM "hwloc2.dtd">')
    g.emit(0, '<topology version="2.0">')
    allc, alln = mask(range(ncpu)), mask(range(sockets))
    g.emit(1, '<object type="Machine" os_index="0" %s allowed_cpuset="%s" '
           'allowed_nodeset="%s" gp_index="1">'
           % (cpu_attrs(range(ncpu), range(sockets)), allc, alln))
    g.emit(2, '<info name="HostName" value="%s"/>' % name)
    for s in range(sockets):
        cpus = range(s * CORES, (s + 1) * CORES)
        g.emit(2, '<object type="Package" os_index="%d" %s gp_index="%d">'
               % (s, cpu_attrs(cpus, [s]), g.idx()))
        g.emit(3, '<object type="NUMANode" os_index="%d" %s gp_index="%d" '
               'local_memory="1099511627776"/>' % (s, cpu_attrs(cpus, [s]), g.idx()))
        for c in cpus:
            g.emit(3, '<object type="Core" os_index="%d" %s gp_index="%d">'
                   % (c, cpu_attrs([c], [s]), g.idx()))
            g.emit(4, '<object type="PU" os_index="%d" %s gp_index="%d"/>'
                   % (c, cpu_attrs([c], [s]), g.idx()))
            g.emit(3, "</object>")
        io_of_socket(g, 3, s)
        g.emit(2, "</object>")
    g.emit(1, "</object>")
    g.emit(0, "</topology>")
    return "\n".join(g.out) + "\n"


# ---- DGX-H100-like: 2 sockets; per socket two host bridges, each with a
# switch holding two (GPU, ConnectX-7) pairs on their own sub-switches; a
# storage NIC (mlx5_8) on socket 0's first host bridge, outside the switch.
def dgx_io(g, d, s):
    for hb in range(2):
        base = 0x10 + s * 0x80 + hb * 0x40
        pair0, pair1 = (s * 2 + hb) * 2, (s * 2 + hb) * 2 + 1

        def sub(dd, p, b):
            def body(ddd):
                gpu(g, ddd, "0000:%02x:00.0" % (b + 1))
                mlx(g, ddd, "0000:%02x:00.0" % (b + 2), "mlx5_%d" % p)
            bridge(g, dd, "0000:%02x:00.0" % b, b + 1, b + 2, body)

        def switch(dd):
            sub(dd, pair0, base + 2)
            sub(dd, pair1, base + 0x10)

        def host(dd):
            bridge(g, dd, "0000:%02x:00.0" % (base + 1), base + 2, base + 0x20,
                   switch)
            if s == 0 and hb == 0:
                mlx(g, dd, "0000:%02x:00.0" % (base + 0x30), "mlx5_8")
        bridge(g, d, None, base, base + 0x3f, host, host=True)


# ---- p5en-like: 8 H200, 16 EFA; each GPU under a switch with two EFAs.
def p5en_io(g, d, s):
    for k in range(4):
        i = s * 4 + k
        base = 0x10 + i * 0x10

        def switch(dd):
            gpu(g, dd, "0000:%02x:00.0" % (base + 2))
            efa(g, dd, "0000:%02x:00.0" % (base + 3), "rdmap%ds0" % (base + 3))
            efa(g, dd, "0000:%02x:00.0" % (base + 4), "rdmap%ds0" % (base + 4))

        def host(dd):
            bridge(g, dd, "0000:%02x:00.0" % (base + 1), base + 2, base + 4,
                   switch)
        bridge(g, d, None, base, base + 0xf, host, host=True)


# ---- PCIe-only box: 4 GPUs straight on their own host bridges, no
# switch, one NIC on GPU0's host bridge.
def pcie4_io(g, d, s):
    for k in range(2):
        i = s * 2 + k
        base = 0x20 + i * 0x20

        def host(dd):
            gpu(g, dd, "0000:%02x:00.0" % (base + 1))
            if i == 0:
                mlx(g, dd, "0000:%02x:00.0" % (base + 2), "mlx5_0")
        bridge(g, d, None, base, base + 0x1f, host, host=True)


# ---- more GPUs than NICs: 8 GPUs, 2 NICs; per socket one host bridge
# with two switches of two GPUs; the NIC sits in the first switch.
def fewnics_io(g, d, s):
    base = 0x10 + s * 0x80

    def host(dd):
        for sw in range(2):
            b = base + 1 + sw * 0x20

            def switch(ddd, sw=sw, b=b):
                gpu(g, ddd, "0000:%02x:00.0" % (b + 1))
                gpu(g, ddd, "0000:%02x:00.0" % (b + 2))
                if sw == 0:
                    mlx(g, ddd, "0000:%02x:00.0" % (b + 3), "mlx5_%d" % s)
            bridge(g, dd, "0000:%02x:00.0" % b, b + 1, b + 3, switch)
    bridge(g, d, None, base, base + 0x7f, host, host=True)


FIXTURES = {
    "dgx-h100.xml": (2, dgx_io, "dgx-h100"),
    "p5en.xml": (2, p5en_io, "p5en"),
    "pcie4.xml": (2, pcie4_io, "pcie4"),
    "fewnics.xml": (2, fewnics_io, "fewnics"),
}

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(__file__)
    for name, (sockets, io, host) in FIXTURES.items():
        with open(os.path.join(out, name), "w") as f:
            f.write(machine(sockets, io, host))
