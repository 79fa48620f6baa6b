! hello_f.f90 - the smallest mkernel program in Fortran: create a
! communicator for the whole job, say what it looks like, release it.
!
!   gfortran hello_f.f90 -o hello_f -I$PREFIX/include \
!       -L$PREFIX/lib -lmkernel_fortran -lmkernel
!   srun --mpi=pmix -n 4 ./hello_f      (or mpirun -np 4 ./hello_f)
!
! Started without a launcher it runs as a communicator of size 1.
program hello_f
    use mkernel
    implicit none
    type(mk_comm) :: comm
    integer :: ierr, rank, nranks, local_rank, local_size, nodes, device, version

    ierr = mkGetVersion(version)
    if (version /= MK_VERSION_CODE) &
        print '(a,i0,a,i0)', 'hello_f: built for mkernel ', MK_VERSION_CODE, &
            ', running with ', version

    ! c_null_ptr: no config, every setting from MK_* variables or defaults.
    ierr = mkCommInit(comm, c_null_ptr)
    if (ierr /= mkSuccess) call fail('mkCommInit', ierr, mk_last_error())

    ierr = mkCommRank(comm, rank)
    if (ierr == mkSuccess) ierr = mkCommSize(comm, nranks)
    if (ierr == mkSuccess) ierr = mkCommLocalRank(comm, local_rank)
    if (ierr == mkSuccess) ierr = mkCommLocalSize(comm, local_size)
    if (ierr == mkSuccess) ierr = mkCommNodeCount(comm, nodes)
    if (ierr == mkSuccess) ierr = mkCommCuDevice(comm, device)
    if (ierr /= mkSuccess) call fail('query', ierr, mk_last_error(comm))

    print '(a,i0,a,i0,a,i0,a,i0,a,i0,a,i0)', 'hello from Fortran rank ', rank, &
        ' of ', nranks, ': local rank ', local_rank, ' of ', local_size, &
        ', ', nodes, ' node(s), CUDA device ', device

    ierr = mkCommDestroy(comm)
    if (ierr /= mkSuccess) call fail('mkCommDestroy', ierr, mk_last_error())

contains

    subroutine fail(call_name, code, detail)
        character(len=*), intent(in) :: call_name, detail
        integer, intent(in) :: code
        write (0, '(5a)') 'hello_f: ', call_name, ': ', mk_error_string(code), &
            ': ' // detail
        error stop 1
    end subroutine fail

end program hello_f
