! test_bindings - every call of the Fortran module reaches the C library
! with the right layout: results, the mk_comm handle by value and by
! reference, mkUniqueId by value (128 bytes), mk_config through c_loc,
! and the C strings coming back as Fortran strings.  One process: a
! communicator of size 1, from mkCommInit (no launcher) and from
! mkGetUniqueId + mkCommInitRank.  Prints "N passed, M failed".
program test_bindings
    use mkernel
    implicit none
    integer :: passed = 0, failed = 0
    type(mk_comm) :: comm, sub, none
    type(mkUniqueId) :: id
    type(mk_config), target :: cfg
    integer :: v, ierr, async

    ! ---- versions, result strings ---------------------------------------
    call check(mkGetVersion(v) == mkSuccess .and. v == MK_VERSION_CODE, 'version')
    call check(mk_error_string(mkSuccess) == 'success', 'error string of mkSuccess')
    call check(mk_error_string(mkErrTimeout) == 'timeout', 'error string of mkErrTimeout')
    call check(index(mk_error_string(99), 'unknown') > 0, 'error string of 99')

    ! ---- bad input comes back as a code and a detail ---------------------
    call check(mkCommInitRank(comm, 0, id, 0, c_null_ptr) == mkErrInvalidArgument, &
               'mkCommInitRank with nranks = 0')
    call check(index(mk_last_error(), 'nranks') > 0, 'detail names nranks: ' // mk_last_error())
    call check(mkCommRank(none, v) == mkErrInvalidArgument, 'mkCommRank of a null handle')
    cfg = mk_config_initializer()
    cfg%magic = 0
    call check(mkCommInit(comm, c_loc(cfg)) == mkErrInvalidArgument, 'config with a bad magic')
    call check(index(mk_last_error(), 'magic') > 0, 'detail names magic: ' // mk_last_error())
    cfg = mk_config_initializer()
    cfg%timeoutMs = -5
    call check(mkCommInit(comm, c_loc(cfg)) == mkErrInvalidArgument, 'config with timeoutMs = -5')
    call check(index(mk_last_error(), 'timeoutMs') > 0, 'detail names timeoutMs: ' // mk_last_error())

    ! ---- unique id (passed by value) ---------------------------------------
    call check(mkGetUniqueId(id) == mkSuccess, 'mkGetUniqueId')
    cfg = mk_config_initializer()
    cfg%timeoutMs = 20000
    ierr = mkCommInitRank(comm, 1, id, 0, c_loc(cfg))
    call check(ierr == mkSuccess, 'mkCommInitRank: ' // mk_last_error())
    if (ierr == mkSuccess) then
        call queries(comm)
        call check(mkCommGetAsyncError(comm, async) == mkSuccess .and. async == mkSuccess, &
                   'mkCommGetAsyncError')
        call check(mk_last_error(comm) == '', 'no last error on a healthy comm')
        ! ---- split (newcomm by reference, NOCOLOR gives a null handle) ----
        call check(mkCommSplit(comm, 3, 0, sub, c_null_ptr) == mkSuccess, 'mkCommSplit')
        call check(c_associated(sub%ptr), 'split gives a communicator')
        if (c_associated(sub%ptr)) then
            call queries(sub)
            call check(mkCommAbort(sub) == mkSuccess, 'mkCommAbort')
        end if
        call check(mkCommSplit(comm, -7, 0, sub, c_null_ptr) == mkErrInvalidArgument, &
                   'mkCommSplit with color -7')
        call check(index(mk_last_error(comm), 'color') > 0, 'detail names color: ' // &
                   mk_last_error(comm))
        call check(mkCommSplit(comm, MK_SPLIT_NOCOLOR, 0, sub, c_null_ptr) == mkSuccess, &
                   'mkCommSplit with MK_SPLIT_NOCOLOR')
        call check(.not. c_associated(sub%ptr), 'MK_SPLIT_NOCOLOR gives a null handle')
        call check(mkCommDestroy(comm) == mkSuccess, 'mkCommDestroy')
    end if

    ! ---- the whole job (no launcher here: size 1), config through c_loc --
    cfg = mk_config_initializer()
    cfg%nodeSize = 1
    ierr = mkCommInit(comm, c_loc(cfg))
    call check(ierr == mkSuccess, 'mkCommInit: ' // mk_last_error())
    if (ierr == mkSuccess) then
        call queries(comm)
        call check(mkCommDestroy(comm) == mkSuccess, 'mkCommDestroy')
    end if

    print '(i0,a,i0,a)', passed, ' passed, ', failed, ' failed'
    if (failed > 0) error stop 1

contains

    subroutine check(ok, what)
        logical, intent(in) :: ok
        character(len=*), intent(in) :: what
        if (ok) then
            passed = passed + 1
        else
            failed = failed + 1
            write (0, '(2a)') 'FAIL: ', what
        end if
    end subroutine check

    subroutine queries(c)
        type(mk_comm), intent(in) :: c
        integer :: x
        call check(mkCommRank(c, x) == mkSuccess .and. x == 0, 'mkCommRank')
        call check(mkCommSize(c, x) == mkSuccess .and. x == 1, 'mkCommSize')
        call check(mkCommLocalRank(c, x) == mkSuccess .and. x == 0, 'mkCommLocalRank')
        call check(mkCommLocalSize(c, x) == mkSuccess .and. x == 1, 'mkCommLocalSize')
        call check(mkCommNodeCount(c, x) == mkSuccess .and. x == 1, 'mkCommNodeCount')
        call check(mkCommCuDevice(c, x) == mkSuccess .and. x >= -1, 'mkCommCuDevice')
    end subroutine queries

end program test_bindings
