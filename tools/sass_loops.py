#!/usr/bin/env python3
"""sass_loops.py - the SASS of a CUDA 12/13 object, kernel by kernel, and its
loops with their instruction mix: for reading what a kernel change did to a
steady loop without a GPU.

  python3 tools/sass_loops.py dump CUBIN OUTDIR [NVDISASM]
      each .text section of CUBIN (nvcc -cubin -gencode=arch=compute_90a,
      code=sm_90a ...) as raw instructions disassembled by nvdisasm's raw
      mode (--binary SM90), into OUTDIR/<kernel>.sass.  Raw mode takes the
      nvdisasm of any CUDA from 11.8 on (Debian's non-free
      nvidia-cuda-toolkit package has 11.8's, which cannot read a newer
      ELF directly); default NVDISASM: nvdisasm on the PATH.
  python3 tools/sass_loops.py loops FILE.sass [OPCODE ...]
      every loop (a backward branch and its target), shortest first, with
      its instruction count and a histogram of the opcodes named (default:
      the ones that matter in the GEMM and attention loops).  A loop's
      count is its code, not what one trip executes: branches inside it
      (e.g. a masked and an unmasked softmax) are all counted.
"""
import collections
import os
import re
import struct
import subprocess
import sys

WANT = ('HGMMA R2UR MUFU FMNMX FFMA FMUL FADD F2FP SHFL UIADD3 IMAD IADD3 LOP3 ISETP FSETP '
        'FSEL SEL BRA BAR SYNCS STS LDS UMOV WARPGROUP VOTE').split()


def dump(cubin, outdir, nvdisasm):
    d = open(cubin, 'rb').read()
    if d[:4] != b'\x7fELF' or d[4] != 2:
        sys.exit('%s: not a 64-bit ELF (a cubin from nvcc -cubin)' % cubin)
    shoff = struct.unpack_from('<Q', d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
    secs = [struct.unpack_from('<IIQQQQ', d, shoff + i * shentsize) for i in range(shnum)]
    stro = secs[shstrndx][4]
    os.makedirs(outdir, exist_ok=True)
    for name, _typ, _flags, _addr, off, size in secs:
        n = d[stro + name:d.index(b'\0', stro + name)].decode()
        if not n.startswith('.text.'):
            continue
        base = os.path.join(outdir, re.sub(r'[^A-Za-z0-9_]', '_', n[6:])[:80])
        open(base + '.bin', 'wb').write(d[off:off + size])
        with open(base + '.sass', 'w') as f:
            subprocess.run([nvdisasm, '--binary', 'SM90', base + '.bin'], stdout=f, check=True)
        os.remove(base + '.bin')
        print(base + '.sass')


def loops(path, want):
    ins = []
    for line in open(path):
        m = re.match(r'\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;', line)
        if m:
            txt = m.group(2)
            op = re.sub(r'^@!?U?P\w+\s+', '', txt).split()
            ins.append((int(m.group(1), 16), op[0] if op else '', txt))
    at = {a: i for i, (a, _, _) in enumerate(ins)}
    found = []
    for i, (a, op, txt) in enumerate(ins):
        if op.startswith('BRA'):
            m = re.search(r'0x([0-9a-f]+)', txt.split('BRA', 1)[1])
            if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in at:
                found.append((at[int(m.group(1), 16)], i))
    for lo, hi in sorted(found, key=lambda x: x[1] - x[0]):
        h = collections.Counter(ins[k][1].split('.')[0] for k in range(lo, hi + 1))
        print('loop 0x%x-0x%x: %d instructions; %s' % (
            ins[lo][0], ins[hi][0], hi - lo + 1, ' '.join('%s %d' % (k, h[k]) for k in want if h[k])))


if __name__ == '__main__':
    if len(sys.argv) >= 4 and sys.argv[1] == 'dump':
        dump(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else 'nvdisasm')
    elif len(sys.argv) >= 3 and sys.argv[1] == 'loops':
        loops(sys.argv[2], sys.argv[3:] or WANT)
    else:
        sys.exit(__doc__)
