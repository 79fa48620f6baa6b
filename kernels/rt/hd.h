/*
 * hd.h - MKI_HD: a function of the headers that host code (C99) and
 * kernels (CUDA C++) share, so that both compute the same arithmetic.
 */
#ifndef MKI_HD_H
#define MKI_HD_H

#ifdef __CUDACC__
#define MKI_HD static __host__ __device__ __forceinline__
#else
#define MKI_HD static inline
#endif

#endif /* MKI_HD_H */
