# MK_CHECK_CUDA: --with-cuda=DIR (default /usr/local/cuda).  Required: the
# library's kernels are CUDA.  Sets NVCC, CUDA_HOME, CUDA_CPPFLAGS,
# CUDA_LDFLAGS and checks the runtime header and static runtime.
AC_DEFUN([MK_CHECK_CUDA], [
    AC_ARG_WITH([cuda],
        [AS_HELP_STRING([--with-cuda=DIR], [CUDA toolkit (default /usr/local/cuda)])],
        [], [with_cuda=/usr/local/cuda])
    AS_IF([test "x$with_cuda" = xno],
        [AC_MSG_ERROR([mkernel needs CUDA: --without-cuda is not possible])])
    CUDA_HOME=$with_cuda
    AC_PATH_PROG([NVCC], [nvcc], [no], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
    AS_IF([test "x$NVCC" = xno],
        [AC_MSG_ERROR([nvcc not found in $CUDA_HOME/bin; give --with-cuda=DIR])])
    CUDA_CPPFLAGS="-I$CUDA_HOME/include"
    AS_IF([test -d "$CUDA_HOME/lib64"], [CUDA_LIBDIR=$CUDA_HOME/lib64],
          [CUDA_LIBDIR=$CUDA_HOME/lib])
    CUDA_LDFLAGS="-L$CUDA_LIBDIR"
    mk_save_CPPFLAGS=$CPPFLAGS
    CPPFLAGS="$CPPFLAGS $CUDA_CPPFLAGS"
    AC_CHECK_HEADER([cuda_runtime_api.h], [],
        [AC_MSG_ERROR([cuda_runtime_api.h not found under $CUDA_HOME/include])])
    CPPFLAGS=$mk_save_CPPFLAGS
    AC_MSG_CHECKING([for the static CUDA runtime])
    AS_IF([test -f "$CUDA_LIBDIR/libcudart_static.a"], [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([libcudart_static.a not found in $CUDA_LIBDIR])])
    AC_MSG_CHECKING([whether nvcc builds for sm_90a])
    cat > conftest.cu <<MKEOF
__global__ void k(int *p) { *p = 1; }
MKEOF
    AS_IF([$NVCC -gencode=arch=compute_90a,code=sm_90a -c conftest.cu -o conftest.o >&AS_MESSAGE_LOG_FD 2>&1],
        [AC_MSG_RESULT([yes])],
        [AC_MSG_RESULT([no])
         AC_MSG_ERROR([$NVCC cannot build for sm_90a (CUDA 12.0 or newer is needed)])])
    rm -f conftest.cu conftest.o
    mk_nvcc_version=`$NVCC --version | sed -n 's/.*release \([[0-9.]]*\).*/\1/p'`
    AC_SUBST([CUDA_HOME])
    AC_SUBST([CUDA_CPPFLAGS])
    AC_SUBST([CUDA_LDFLAGS])
    AC_SUBST([CUDA_LIBDIR])
    AC_DEFINE_UNQUOTED([MK_CUDA_HOME], ["$CUDA_HOME"], [CUDA toolkit used at build time])
    AC_DEFINE_UNQUOTED([MK_NVCC_VERSION], ["$mk_nvcc_version"], [nvcc version])
])
