#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>
#include "mkernel.h"
static int g_rank; static mkComm_t g_comm;
#include "tests/gpu/check.h"
__global__ void fillv(float *p, size_t n, float v) { for (size_t i = blockIdx.x*blockDim.x+threadIdx.x; i < n; i += gridDim.x*blockDim.x) p[i] = v + (float)(i % 7); }
int main(int argc, char **argv) {
  size_t count = argc > 1 ? strtoull(argv[1], 0, 0) : 327304;
  int calls = argc > 2 ? atoi(argv[2]) : 10;
  int nosync = argc > 3 ? atoi(argv[3]) : 0;
  mkConfig_t cfg = MK_CONFIG_INITIALIZER; int n; MK(mkCommInit(&g_comm, &cfg)); MK(mkCommRank(g_comm, &g_rank)); MK(mkCommSize(g_comm, &n));
  int dev; MK(mkCommCuDevice(g_comm, &dev)); CK(cudaSetDevice(dev)); cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  float *src, *dst; CK(cudaMalloc(&src, count*n*4)); CK(cudaMalloc(&dst, count*4));
  std::vector<float> h(count);
  int bad = 0;
  for (int c = 0; c < calls; c++) {
    fillv<<<256,256,0,st>>>(src, count*n, (float)(g_rank + c));
    MK(mkReduceScatter(src, dst, count, mkFloat32, g_comm, st));
    if (nosync && c != calls - 1) continue;
    CK(cudaMemcpyAsync(h.data(), dst, count*4, cudaMemcpyDeviceToHost, st)); CK(cudaStreamSynchronize(st));
    size_t wrong = 0; for (size_t i = 0; i < count; i++) { size_t gi = g_rank*count + i; float e = 0; for (int q = 0; q < n; q++) e += (float)(q + c) + (float)(gi % 7); if (h[i] != e) wrong++; }
    printf("rank %d call %d count %zu wrong %zu\n", g_rank, c, count, wrong); bad += wrong != 0;
  }
  mkResult_t ae; MK(mkCommGetAsyncError(g_comm, &ae)); printf("rank %d done bad %d async %s\n", g_rank, bad, mkGetErrorString(ae));
  MK(mkCommDestroy(g_comm)); return bad != 0;
}
