! gpu_f.f90 - mkernel's GPU operations from Fortran: buffers from
! mkMemAlloc, filled and read back through the CUDA runtime (bind(C) to
! cudaMemcpy), an fp32 all-reduce and a bf16 all-gather + GEMM, each
! result checked on every rank.  Copy it: the pattern is the same for
! device arrays of CUDA Fortran (c_devloc), OpenACC (host_data
! use_device) or OpenMP (use_device_ptr) passed as type(c_ptr).
!
!   gfortran gpu_f.f90 -o gpu_f -I$PREFIX/include -L$PREFIX/lib \
!       -lmkernel_fortran -lmkernel -L$CUDA_HOME/lib64 -lcudart
!   srun --mpi=pmix -n 2 ./gpu_f      (one rank per GPU, or several under MPS)
!
! Without a GPU it says so and exits with 77 (a skipped test).
program gpu_f
    use, intrinsic :: iso_c_binding
    use mkernel
    implicit none

    interface
        integer(c_int) function cudaMemcpy(dst, src, bytes, kind) bind(C, name="cudaMemcpy")
            import :: c_int, c_ptr, c_size_t
            type(c_ptr), value :: dst, src
            integer(c_size_t), value :: bytes
            integer(c_int), value :: kind
        end function
        integer(c_int) function cudaDeviceSynchronize() bind(C, name="cudaDeviceSynchronize")
            import :: c_int
        end function
    end interface
    integer(c_int), parameter :: H2D = 1, D2H = 2

    integer(c_int64_t), parameter :: n = 1000003_c_int64_t   ! floats to all-reduce
    integer(c_int64_t), parameter :: ml = 128, gn = 256, gk = 64 ! A: ml x gk per rank
    integer(c_int16_t), parameter :: bf16_one = int(z'3F80', c_int16_t)
    integer(c_int16_t), parameter :: bf16_64 = int(z'4280', c_int16_t) ! 64.0 = gk

    type(mk_comm) :: comm
    integer :: ierr, rank, nranks, device, bad
    type(c_ptr) :: x, a, b, c
    real(c_float), allocatable, target :: hx(:)
    integer(c_int16_t), allocatable, target :: ha(:), hb(:), hc(:)
    integer(c_int64_t) :: i
    real(c_float) :: want

    ierr = mkCommInit(comm, c_null_ptr)
    if (ierr /= mkSuccess) call fail('mkCommInit', ierr, mk_last_error())
    ierr = mkCommRank(comm, rank)
    if (ierr == mkSuccess) ierr = mkCommSize(comm, nranks)
    if (ierr == mkSuccess) ierr = mkCommCuDevice(comm, device)
    if (ierr /= mkSuccess) call fail('query', ierr, mk_last_error(comm))
    if (device < 0) then
        print '(a,i0,a)', 'gpu_f rank ', rank, ': no GPU here: skipped'
        ierr = mkCommDestroy(comm)
        stop 77
    end if

    ! ---- all-reduce of n floats: x(i) = rank + mod(i, 7) on every rank
    allocate (hx(n))
    ierr = mkMemAlloc(comm, 4_c_size_t * int(n, c_size_t), x)   ! every rank, same order
    if (ierr /= mkSuccess) call fail('mkMemAlloc', ierr, mk_last_error(comm))
    do i = 1, n
        hx(i) = real(rank + mod(i, 7_c_int64_t), c_float)
    end do
    call cuda(cudaMemcpy(x, c_loc(hx), 4_c_size_t * int(n, c_size_t), H2D), 'cudaMemcpy')
    ierr = mkAllReduce(x, x, int(n, c_size_t), mkFloat32, comm, c_null_ptr)
    if (ierr /= mkSuccess) call fail('mkAllReduce', ierr, mk_last_error(comm))
    call cuda(cudaDeviceSynchronize(), 'cudaDeviceSynchronize')
    call cuda(cudaMemcpy(c_loc(hx), x, 4_c_size_t * int(n, c_size_t), D2H), 'cudaMemcpy')
    bad = 0
    do i = 1, n
        want = real(nranks * (nranks - 1) / 2 + nranks * int(mod(i, 7_c_int64_t)), c_float)
        if (hx(i) /= want) bad = bad + 1
    end do
    print '(a,i0,a,i0,a,i0,a)', 'gpu_f rank ', rank, ': mkAllReduce of ', n, &
        ' floats, ', bad, ' wrong'
    if (bad /= 0) call fail('mkAllReduce result', 0, 'wrong sums')

    ! ---- all-gather + GEMM in bf16: ones x ones = gk everywhere
    allocate (ha(ml * gk), hb(gk * gn), hc(ml * nranks * gn))
    ha = bf16_one
    hb = bf16_one
    hc = 0
    ierr = mkMemAlloc(comm, 2_c_size_t * int(ml * gk, c_size_t), a)
    if (ierr == mkSuccess) ierr = mkMemAlloc(comm, 2_c_size_t * int(gk * gn, c_size_t), b)
    if (ierr == mkSuccess) ierr = mkMemAlloc(comm, 2_c_size_t * int(ml * nranks * gn, c_size_t), c)
    if (ierr /= mkSuccess) call fail('mkMemAlloc', ierr, mk_last_error(comm))
    call cuda(cudaMemcpy(a, c_loc(ha), 2_c_size_t * int(ml * gk, c_size_t), H2D), 'cudaMemcpy')
    call cuda(cudaMemcpy(b, c_loc(hb), 2_c_size_t * int(gk * gn, c_size_t), H2D), 'cudaMemcpy')
    ! C = [A_0; A_1; ...] x B, B stored k x n (transB = 0)
    ierr = mkAllGatherGemm(a, b, c, c_null_ptr, ml, c_null_ptr, gn, gk, 0, mkBfloat16, comm, &
                           c_null_ptr)
    if (ierr /= mkSuccess) call fail('mkAllGatherGemm', ierr, mk_last_error(comm))
    call cuda(cudaDeviceSynchronize(), 'cudaDeviceSynchronize')
    call cuda(cudaMemcpy(c_loc(hc), c, 2_c_size_t * int(ml * nranks * gn, c_size_t), D2H), &
              'cudaMemcpy')
    bad = count(hc /= bf16_64)
    print '(a,i0,a,i0,a,i0,a,i0,a)', 'gpu_f rank ', rank, ': mkAllGatherGemm ', &
        ml * nranks, ' x ', gn, ' (bf16), ', bad, ' wrong'
    if (bad /= 0) call fail('mkAllGatherGemm result', 0, 'elements not 64')

    ierr = mkMemFree(comm, c)
    if (ierr == mkSuccess) ierr = mkMemFree(comm, b)
    if (ierr == mkSuccess) ierr = mkMemFree(comm, a)
    if (ierr == mkSuccess) ierr = mkMemFree(comm, x)
    if (ierr == mkSuccess) ierr = mkCommDestroy(comm)
    if (ierr /= mkSuccess) call fail('cleanup', ierr, mk_last_error())
    print '(a,i0,a)', 'gpu_f rank ', rank, ': PASS'

contains

    subroutine cuda(code, what)
        integer(c_int), intent(in) :: code
        character(len=*), intent(in) :: what
        if (code /= 0) then
            write (0, '(a,a,a,i0)') 'gpu_f: ', what, ' failed: cudaError ', code
            error stop 2
        end if
    end subroutine cuda

    subroutine fail(call_name, code, detail)
        character(len=*), intent(in) :: call_name, detail
        integer, intent(in) :: code
        if (code /= 0) then
            write (0, '(5a)') 'gpu_f: ', call_name, ': ', mk_error_string(code), ': ' // detail
        else
            write (0, '(4a)') 'gpu_f: ', call_name, ': ', detail
        end if
        error stop 1
    end subroutine fail

end program gpu_f
