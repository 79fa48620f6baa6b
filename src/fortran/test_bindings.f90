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
    type(c_ptr) :: p

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

    ! ---- every data call refuses a null communicator, naming it -----------
    call check(mkMemAlloc(none, 64_c_size_t, p) == mkErrInvalidArgument, 'mkMemAlloc, null comm')
    call check(mkMemFree(none, c_null_ptr) == mkErrInvalidArgument, 'mkMemFree, null comm')
    call check(mkCommRegister(none, c_null_ptr, 64_c_size_t, p) == mkErrInvalidArgument, &
               'mkCommRegister, null comm')
    call check(mkCommDeregister(none, c_null_ptr) == mkErrInvalidArgument, &
               'mkCommDeregister, null comm')
    call check(mkAllGather(c_null_ptr, c_null_ptr, 1_c_size_t, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkAllGather, null comm')
    call check(mkReduceScatter(c_null_ptr, c_null_ptr, 1_c_size_t, mkFloat16, none, &
               c_null_ptr) == mkErrInvalidArgument, 'mkReduceScatter, null comm')
    call check(mkAllReduce(c_null_ptr, c_null_ptr, 1_c_size_t, mkFloat32, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkAllReduce, null comm')
    call check(index(mk_last_error(), 'comm') > 0, 'detail names comm: ' // mk_last_error())
    call check(mkAllToAll(c_null_ptr, c_null_ptr, 1_c_size_t, mkFloat32, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkAllToAll, null comm')
    call check(mkAllGatherGemm(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, &
               c_null_ptr, 8_c_int64_t, 8_c_int64_t, 0, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkAllGatherGemm, null comm')
    call check(mkGemmReduceScatter(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, &
               8_c_int64_t, 8_c_int64_t, 1, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkGemmReduceScatter, null comm')
    call check(mkGemmAllReduce(c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, 8_c_int64_t, &
               8_c_int64_t, 1, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkGemmAllReduce, null comm')
    call check(mkMoEDispatch(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
               c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, 8_c_int64_t, 2_c_int64_t, &
               8_c_int64_t, 64_c_int64_t, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkMoEDispatch, null comm')
    call check(mkMoECombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
               c_null_ptr, 8_c_int64_t, 8_c_int64_t, 2_c_int64_t, 8_c_int64_t, 64_c_int64_t, &
               mkFloat32, none, c_null_ptr) == mkErrInvalidArgument, 'mkMoECombine, null comm')
    call check(mkMoEDispatchGemm(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
               c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, 64_c_int64_t, &
               8_c_int64_t, 2_c_int64_t, 8_c_int64_t, 512_c_int64_t, 1, mkBfloat16, none, &
               c_null_ptr) == mkErrInvalidArgument, 'mkMoEDispatchGemm, null comm')
    call check(mkMoEDispatchFfnCombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
               c_null_ptr, c_null_ptr, 8_c_int64_t, 64_c_int64_t, 64_c_int64_t, 2_c_int64_t, &
               8_c_int64_t, 512_c_int64_t, 1, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkMoEDispatchFfnCombine, null comm')
    call check(mkRingAttention(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
               1_c_int64_t, 128_c_int64_t, 8_c_int64_t, 8_c_int64_t, 128_c_int64_t, mkAttnBSHD, &
               mkAttnFull, 0.088_c_float, mkBfloat16, none, c_null_ptr) &
               == mkErrInvalidArgument, 'mkRingAttention, null comm')
    call check(MK_MOE_MAX_EXPERTS == 4096 .and. MK_MOE_MAX_TOPK == 32, 'MoE limits')
    call check(mk_comm_info(none, 'allreduce') == '', 'mk_comm_info, null comm: empty')

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
        call data_calls(comm)
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

    ! The data calls on a real communicator of one rank: bad arguments are
    ! refused (with a GPU: the null buffers; without: no GPU), and
    ! mkCommGetInfo's text comes back whole.
    subroutine data_calls(c)
        type(mk_comm), intent(in) :: c
        integer :: dev, r
        integer(c_size_t) :: size
        character(len=:), allocatable :: info
        character(kind=c_char), target :: small(4)
        type(c_ptr) :: h
        r = mkCommCuDevice(c, dev)
        call check(r == mkSuccess, 'mkCommCuDevice: ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
        r = mkAllReduce(c_null_ptr, c_null_ptr, 1_c_size_t, mkFloat32, c, c_null_ptr)
        ! null buffers: refused for them, or (no GPU) for the missing GPU
        call check((r == mkErrInvalidArgument .and. index(mk_last_error(c), 'sendbuf') > 0) .or. &
                   (dev < 0 .and. r == mkErrUnsupported .and. &
                    index(mk_last_error(c), 'GPU') > 0), &
                   'mkAllReduce of null buffers: ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
        r = mkAllReduce(c_null_ptr, c_null_ptr, 1_c_size_t, 7, c, c_null_ptr)
        call check(r /= mkSuccess, 'mkAllReduce of datatype 7: ' // mk_error_string(r))
        call moe_calls(c, dev)
        call attn_calls(c)
        r = mkMemAlloc(c, 0_c_size_t, h)
        call check(r /= mkSuccess, 'mkMemAlloc of 0 bytes: ' // mk_error_string(r))
        call check(mkCommDeregister(c, c_null_ptr) /= mkSuccess, 'mkCommDeregister(NULL)')
        info = mk_comm_info(c, 'allreduce', 4096_c_int64_t, 1_c_int64_t, 1_c_int64_t, mkFloat32)
        call check(index(info, 'plan of allreduce') > 0 .and. index(info, 'MK_TIMEOUT_MS') > 0, &
                   'mk_comm_info with a plan: ' // info(1:min(len(info), 200)))
        info = mk_comm_info(c)
        call check(index(info, 'MK_TIMEOUT_MS') > 0 .and. index(info, 'plan of') == 0, &
                   'mk_comm_info without an op')
        size = 4
        r = mkCommGetInfo(c, c_null_ptr, 1_c_int64_t, 1_c_int64_t, 1_c_int64_t, mkBfloat16, &
                          c_loc(small), size)
        call check(r == mkErrInvalidArgument .and. size == 4 .and. &
                   index(mk_last_error(c), 'needs') > 0, &
                   'mkCommGetInfo into 4 bytes: refused, size unchanged, says what it needs')
        info = mk_comm_info(c, 'no_such_op')
        call check(info == '' .and. index(mk_last_error(c), 'no_such_op') > 0, &
                   'mk_comm_info of an unknown op: ' // mk_last_error(c))
    end subroutine data_calls

    ! MoE calls on one rank: null buffers are refused (or, without a GPU,
    ! the missing GPU), and so is every size out of its range.
    subroutine moe_calls(c, dev)
        type(mk_comm), intent(in) :: c
        integer, intent(in) :: dev
        integer :: r
        r = mkMoEDispatch(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                          c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, 8_c_int64_t, &
                          2_c_int64_t, 4_c_int64_t, 16_c_int64_t, mkBfloat16, c, c_null_ptr)
        call check(r == mkErrInvalidArgument .or. (dev < 0 .and. r == mkErrUnsupported), &
                   'mkMoEDispatch of null buffers: ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
        r = mkMoECombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                         c_null_ptr, 8_c_int64_t, 8_c_int64_t, 2_c_int64_t, 4_c_int64_t, &
                         16_c_int64_t, mkFloat16, c, c_null_ptr)
        call check(r == mkErrInvalidArgument .or. (dev < 0 .and. r == mkErrUnsupported), &
                   'mkMoECombine of null buffers: ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
        r = mkMoEDispatchGemm(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                              c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, &
                              64_c_int64_t, 8_c_int64_t, 2_c_int64_t, 4_c_int64_t, &
                              512_c_int64_t, 1, mkBfloat16, c, c_null_ptr)
        call check(r == mkErrInvalidArgument .or. (dev < 0 .and. r == mkErrUnsupported), &
                   'mkMoEDispatchGemm of null buffers: ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
        r = mkMoEDispatchFfnCombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                                    c_null_ptr, c_null_ptr, 8_c_int64_t, 64_c_int64_t, &
                                    64_c_int64_t, 2_c_int64_t, 4_c_int64_t, 512_c_int64_t, 1, &
                                    mkFloat16, c, c_null_ptr)
        call check(r == mkErrInvalidArgument .or. (dev < 0 .and. r == mkErrUnsupported), &
                   'mkMoEDispatchFfnCombine of null buffers: ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
        call moe_bad(c, 7_c_int64_t, 2_c_int64_t, 4_c_int64_t, mkBfloat16, 'hidden = 7')
        call moe_bad(c, 8_c_int64_t, 0_c_int64_t, 4_c_int64_t, mkBfloat16, 'topk = 0')
        call moe_bad(c, 8_c_int64_t, int(MK_MOE_MAX_TOPK, c_int64_t) + 1, 4_c_int64_t, &
                     mkBfloat16, 'topk = MK_MOE_MAX_TOPK + 1')
        call moe_bad(c, 8_c_int64_t, 2_c_int64_t, 0_c_int64_t, mkBfloat16, 'experts = 0')
        call moe_bad(c, 8_c_int64_t, 2_c_int64_t, int(MK_MOE_MAX_EXPERTS, c_int64_t) + 1, &
                     mkBfloat16, 'experts = MK_MOE_MAX_EXPERTS + 1')
        call moe_bad(c, 8_c_int64_t, 2_c_int64_t, 4_c_int64_t, 7, 'dtype = 7')
        ! mkMoEDispatchGemm's own rules (no tokens, so that no buffer but
        ! expert_offsets is needed before them)
        call gemm_bad(c, dev, 64_c_int64_t, 7_c_int64_t, 1, mkBfloat16, mkErrInvalidArgument, &
                      'n = 7')
        call gemm_bad(c, dev, 64_c_int64_t, 0_c_int64_t, 1, mkBfloat16, mkErrInvalidArgument, &
                      'n = 0')
        call gemm_bad(c, dev, 64_c_int64_t, 8_c_int64_t, 2, mkBfloat16, mkErrInvalidArgument, &
                      'transW = 2')
        call gemm_bad(c, dev, 8_c_int64_t, 8_c_int64_t, 0, mkBfloat16, mkErrInvalidArgument, &
                      'transW = 0')
        call gemm_bad(c, dev, 64_c_int64_t, 8_c_int64_t, 1, mkFloat32, mkErrUnsupported, &
                      'mkFloat32')
        ! mkMoEDispatchFfnCombine's own rules (no tokens: x, topk_idx,
        ! topk_weights and out may be NULL)
        call ffn_bad(c, dev, 64_c_int64_t, 7_c_int64_t, 1, mkBfloat16, mkErrInvalidArgument, &
                     'inter = 7')
        call ffn_bad(c, dev, 64_c_int64_t, 0_c_int64_t, 1, mkBfloat16, mkErrInvalidArgument, &
                     'inter = 0')
        call ffn_bad(c, dev, 64_c_int64_t, 64_c_int64_t, 2, mkBfloat16, mkErrInvalidArgument, &
                     'transW = 2')
        call ffn_bad(c, dev, 8_c_int64_t, 64_c_int64_t, 0, mkBfloat16, mkErrInvalidArgument, &
                     'transW = 0')
        call ffn_bad(c, dev, 64_c_int64_t, 8_c_int64_t, 0, mkFloat16, mkErrInvalidArgument, &
                     'transW = 0')
        call ffn_bad(c, dev, 64_c_int64_t, 64_c_int64_t, 1, mkFloat32, mkErrUnsupported, &
                     'mkFloat32')
    end subroutine moe_calls

    ! mkRingAttention on one rank: each argument reaches the C call in its
    ! place (its check names it, before any GPU is needed), and its plan.
    subroutine attn_calls(c)
        type(mk_comm), intent(in) :: c
        character(len=:), allocatable :: info
        call attn_bad(c, 128_c_int64_t, 128_c_int64_t, mkAttnBSHD, mkAttnFull, 0.088_c_float, &
                      mkBfloat16, mkErrInvalidArgument, 'q is NULL')
        call attn_bad(c, 128_c_int64_t, 96_c_int64_t, mkAttnBSHD, mkAttnFull, 0.088_c_float, &
                      mkBfloat16, mkErrUnsupported, 'head_dim = 96')
        call attn_bad(c, 127_c_int64_t, 64_c_int64_t, mkAttnBHSD, mkAttnCausalZigzag, &
                      0.125_c_float, mkFloat16, mkErrInvalidArgument, 'seq_local = 127 is odd')
        call attn_bad(c, 128_c_int64_t, 64_c_int64_t, 2, mkAttnCausal, 0.125_c_float, &
                      mkFloat16, mkErrInvalidArgument, 'layout = 2')
        call attn_bad(c, 128_c_int64_t, 64_c_int64_t, mkAttnBSHD, 3, 0.125_c_float, &
                      mkFloat16, mkErrInvalidArgument, 'mask = 3')
        call attn_bad(c, 128_c_int64_t, 64_c_int64_t, mkAttnBSHD, mkAttnCausal, -1.5_c_float, &
                      mkFloat16, mkErrInvalidArgument, 'scale = -1.5')
        call attn_bad(c, 128_c_int64_t, 64_c_int64_t, mkAttnBSHD, mkAttnCausal, 0.125_c_float, &
                      mkFloat32, mkErrUnsupported, 'mkFloat32')
        info = mk_comm_info(c, 'ring_attn', 4096_c_int64_t, 4096_c_int64_t, 1024_c_int64_t)
        call check(index(info, 'plan of ring_attn m=4096 n=4096 k=1024') > 0, &
                   'mk_comm_info of ring_attn: ' // mk_last_error(c))
    end subroutine attn_calls

    ! One call of null buffers with 2 sequences of seq_local rows, 8 query
    ! and 2 key/value heads: refused with code want, the detail naming key.
    subroutine attn_bad(c, seq_local, head_dim, layout, mask, scale, dtype, want, key)
        type(mk_comm), intent(in) :: c
        integer(c_int64_t), intent(in) :: seq_local, head_dim
        integer, intent(in) :: layout, mask, dtype, want
        real(c_float), intent(in) :: scale
        character(len=*), intent(in) :: key
        integer :: r
        r = mkRingAttention(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                            2_c_int64_t, seq_local, 8_c_int64_t, 2_c_int64_t, head_dim, &
                            layout, mask, scale, dtype, c, c_null_ptr)
        call check(r == want .and. index(mk_last_error(c), key) > 0, &
                   'mkRingAttention with ' // key // ': ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
    end subroutine attn_bad

    ! One bad size or dtype: both calls refuse it.
    subroutine moe_bad(c, hidden, topk, experts, dtype, what)
        type(mk_comm), intent(in) :: c
        integer(c_int64_t), intent(in) :: hidden, topk, experts
        integer, intent(in) :: dtype
        character(len=*), intent(in) :: what
        integer :: r
        r = mkMoEDispatch(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                          c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, hidden, topk, &
                          experts, 16_c_int64_t, dtype, c, c_null_ptr)
        call check(r /= mkSuccess, 'mkMoEDispatch with ' // what // ': ' // mk_error_string(r))
        r = mkMoECombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                         c_null_ptr, 8_c_int64_t, hidden, topk, experts, 16_c_int64_t, &
                         dtype, c, c_null_ptr)
        call check(r /= mkSuccess, 'mkMoECombine with ' // what // ': ' // mk_error_string(r))
        r = mkMoEDispatchGemm(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                              c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, 8_c_int64_t, &
                              hidden, 8_c_int64_t, topk, experts, 512_c_int64_t, 1, dtype, c, &
                              c_null_ptr)
        call check(r /= mkSuccess, 'mkMoEDispatchGemm with ' // what // ': ' // &
                   mk_error_string(r))
        r = mkMoEDispatchFfnCombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                                    c_null_ptr, c_null_ptr, 8_c_int64_t, hidden, 8_c_int64_t, &
                                    topk, experts, 512_c_int64_t, 1, dtype, c, c_null_ptr)
        call check(r /= mkSuccess, 'mkMoEDispatchFfnCombine with ' // what // ': ' // &
                   mk_error_string(r))
    end subroutine moe_bad

    ! One bad n, transW or dtype of mkMoEDispatchGemm: refused with code
    ! want, the detail naming it (key), or, without a GPU, for the GPU.
    subroutine gemm_bad(c, dev, hidden, n, transW, dtype, want, key)
        type(mk_comm), intent(in) :: c
        integer, intent(in) :: dev
        integer(c_int64_t), intent(in) :: hidden, n
        integer, intent(in) :: transW, dtype, want
        character(len=*), intent(in) :: key
        integer(c_int64_t), target :: off(5)
        integer :: r
        r = mkMoEDispatchGemm(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                              c_null_ptr, c_null_ptr, c_loc(off), c_null_ptr, 0_c_int64_t, &
                              hidden, n, 2_c_int64_t, 4_c_int64_t, 512_c_int64_t, transW, &
                              dtype, c, c_null_ptr)
        call check((r == want .and. index(mk_last_error(c), key) > 0) .or. &
                   (dev < 0 .and. r == mkErrUnsupported .and. &
                    index(mk_last_error(c), 'GPU') > 0), &
                   'mkMoEDispatchGemm with ' // key // ': ' // mk_error_string(r) // ': ' // &
                   mk_last_error(c))
    end subroutine gemm_bad

    ! One bad inter, transW or dtype of mkMoEDispatchFfnCombine: refused with
    ! code want, the detail naming it (key), or, without a GPU, for the GPU.
    subroutine ffn_bad(c, dev, hidden, inter, transW, dtype, want, key)
        type(mk_comm), intent(in) :: c
        integer, intent(in) :: dev
        integer(c_int64_t), intent(in) :: hidden, inter
        integer, intent(in) :: transW, dtype, want
        character(len=*), intent(in) :: key
        integer :: r
        r = mkMoEDispatchFfnCombine(c_null_ptr, c_null_ptr, c_null_ptr, c_null_ptr, &
                                    c_null_ptr, c_null_ptr, 0_c_int64_t, hidden, inter, &
                                    2_c_int64_t, 4_c_int64_t, 512_c_int64_t, transW, dtype, c, &
                                    c_null_ptr)
        call check((r == want .and. index(mk_last_error(c), key) > 0) .or. &
                   (dev < 0 .and. r == mkErrUnsupported .and. &
                    index(mk_last_error(c), 'GPU') > 0), &
                   'mkMoEDispatchFfnCombine with ' // key // ': ' // mk_error_string(r) // &
                   ': ' // mk_last_error(c))
    end subroutine ffn_bad

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
