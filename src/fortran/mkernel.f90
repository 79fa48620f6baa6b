! mkernel.f90 - the Fortran 2008 interface to libmkernel's communicators.
!
!   use mkernel
!   type(mk_comm) :: comm
!   integer :: rank
!   if (mkCommInit(comm, c_null_ptr) /= mkSuccess) &
!       print *, mk_last_error()
!   ierr = mkCommRank(comm, rank)
!   ierr = mkCommDestroy(comm)
!
! Every call is the C function itself (bind(C)); it returns an integer
! result code (mkSuccess, mkErrInvalidArgument, ...).  Link with
! -lmkernel_fortran -lmkernel.
!
! Device buffers and CUDA streams are type(c_ptr) (c_null_ptr: the
! default stream); counts are integer(c_size_t), shapes integer(c_int64_t):
!
!   type(c_ptr) :: buf
!   ierr = mkMemAlloc(comm, 4_c_size_t * n, buf)            ! n floats
!   ierr = mkAllReduce(buf, buf, int(n, c_size_t), mkFloat32, comm, c_null_ptr)
!   print *, mk_comm_info(comm, 'allreduce', int(n, c_int64_t), 1_c_int64_t, &
!                         1_c_int64_t, mkFloat32)
!   ierr = mkMemFree(comm, buf)
!
! The handle type mk_comm is an interoperable struct holding the C
! pointer: passed by reference it is the C mkComm_t *, by value the C
! mkComm_t.  mkUniqueId has the C layout, so it can be broadcast with
! MPI_Bcast(id, 128, MPI_BYTE, ...).  A config is passed as c_loc() of a
! type(mk_config) made by mk_config_initializer(), or as c_null_ptr.
!
! The constants below must equal those of mkernel.h; src/fortran/consts.sh
! checks that in make check.
module mkernel
    use, intrinsic :: iso_c_binding
    implicit none
    private
    ! Re-exported so that `use mkernel` is enough for the common cases.
    public :: c_null_ptr, c_loc, c_ptr, c_associated, c_null_char
    public :: c_int, c_int64_t, c_size_t, c_char, c_float

    ! ---- versions -------------------------------------------------------
    integer(c_int), parameter, public :: MK_VERSION_MAJOR = 0
    integer(c_int), parameter, public :: MK_VERSION_MINOR = 1
    integer(c_int), parameter, public :: MK_VERSION_PATCH = 0
    integer(c_int), parameter, public :: MK_VERSION_CODE = &
        MK_VERSION_MAJOR * 10000 + MK_VERSION_MINOR * 100 + MK_VERSION_PATCH

    ! ---- results (mkResult_t) -------------------------------------------
    enum, bind(c)
        enumerator :: mkSuccess = 0, mkErrInvalidArgument = 1, mkErrUnsupported = 2, &
            mkErrInvalidUsage = 3, mkErrCuda = 4, mkErrSystem = 5, mkErrBootstrap = 6, &
            mkErrTransport = 7, mkErrTimeout = 8, mkErrRemote = 9, mkErrNoMemory = 10, &
            mkErrInternal = 11, mkNumResults = 12
    end enum
    public :: mkSuccess, mkErrInvalidArgument, mkErrUnsupported, mkErrInvalidUsage
    public :: mkErrCuda, mkErrSystem, mkErrBootstrap, mkErrTransport, mkErrTimeout
    public :: mkErrRemote, mkErrNoMemory, mkErrInternal, mkNumResults

    ! ---- configuration --------------------------------------------------
    integer(c_int), parameter, public :: MK_CONFIG_MAGIC = int(z'6d6b6366', c_int)
    integer(c_int), parameter, public :: MK_CONFIG_UNDEF_INT = -huge(0_c_int) - 1
    integer(c_size_t), parameter, public :: MK_CONFIG_UNDEF_SIZE = 0

    ! The C mkConfig_t (version 1).  transports is a C string: c_loc() of a
    ! character(kind=c_char) array ending in c_null_char, kept alive until
    ! the call returns.
    type, bind(C), public :: mk_config
        integer(c_size_t) :: size = 0
        integer(c_int) :: magic = 0
        integer(c_int) :: version = 0
        integer(c_int) :: cudaDev = MK_CONFIG_UNDEF_INT
        integer(c_int) :: timeoutMs = MK_CONFIG_UNDEF_INT
        type(c_ptr) :: transports = c_null_ptr
        integer(c_int) :: smBudget = MK_CONFIG_UNDEF_INT
        integer(c_size_t) :: workspaceSize = MK_CONFIG_UNDEF_SIZE
        integer(c_int) :: nodeSize = MK_CONFIG_UNDEF_INT
    end type mk_config

    ! ---- element types (mkDataType_t) -----------------------------------
    enum, bind(c)
        enumerator :: mkBfloat16 = 0, mkFloat16 = 1, mkFloat32 = 2, mkNumDataTypes = 3
    end enum
    public :: mkBfloat16, mkFloat16, mkFloat32, mkNumDataTypes

    ! ---- mixture of experts ---------------------------------------------
    integer(c_int), parameter, public :: MK_MOE_MAX_EXPERTS = 4096
    integer(c_int), parameter, public :: MK_MOE_MAX_TOPK = 32

    ! ---- attention (mkAttnLayout_t, mkAttnMask_t) --------------------------
    enum, bind(c)
        enumerator :: mkAttnBSHD = 0, mkAttnBHSD = 1
    end enum
    enum, bind(c)
        enumerator :: mkAttnFull = 0, mkAttnCausal = 1, mkAttnCausalZigzag = 2
    end enum
    public :: mkAttnBSHD, mkAttnBHSD, mkAttnFull, mkAttnCausal, mkAttnCausalZigzag

    ! ---- communicators --------------------------------------------------
    integer(c_int), parameter, public :: MK_SPLIT_NOCOLOR = -1
    integer, parameter, public :: MK_UNIQUE_ID_BYTES = 128

    type, bind(C), public :: mk_comm
        type(c_ptr) :: ptr = c_null_ptr
    end type mk_comm

    type, bind(C), public :: mkUniqueId
        character(kind=c_char) :: internal(MK_UNIQUE_ID_BYTES)
    end type mkUniqueId

    public :: mkGetVersion, mkGetErrorString, mkGetLastError
    public :: mkCommInit, mkGetUniqueId, mkCommInitRank, mkCommSplit
    public :: mkCommDestroy, mkCommAbort, mkCommGetAsyncError
    public :: mkCommRank, mkCommSize, mkCommLocalRank, mkCommLocalSize
    public :: mkCommNodeCount, mkCommCuDevice
    public :: mkMemAlloc, mkMemFree, mkCommRegister, mkCommDeregister
    public :: mkAllGather, mkReduceScatter, mkAllReduce, mkAllToAll
    public :: mkAllGatherGemm, mkGemmReduceScatter, mkGemmAllReduce, mkCommGetInfo
    public :: mkMoEDispatch, mkMoECombine, mkMoEDispatchGemm, mkMoEDispatchFfnCombine
    public :: mkRingAttention
    public :: mk_config_initializer, mk_error_string, mk_last_error, mk_comm_info


    interface
        integer(c_int) function mkGetVersion(version) bind(C, name="mkGetVersion")
            import :: c_int
            integer(c_int), intent(out) :: version
        end function

        type(c_ptr) function mkGetErrorString(result) &
                bind(C, name="mkGetErrorString")
            import :: c_int, c_ptr
            integer(c_int), value :: result
        end function

        type(c_ptr) function mkGetLastError(comm) bind(C, name="mkGetLastError")
            import :: mk_comm, c_ptr
            type(mk_comm), value :: comm
        end function

        integer(c_int) function mkCommInit(comm, config) bind(C, name="mkCommInit")
            import :: mk_comm, c_int, c_ptr
            type(mk_comm), intent(out) :: comm
            type(c_ptr), value :: config
        end function

        integer(c_int) function mkGetUniqueId(uniqueId) &
                bind(C, name="mkGetUniqueId")
            import :: mkUniqueId, c_int
            type(mkUniqueId), intent(out) :: uniqueId
        end function

        integer(c_int) function mkCommInitRank(comm, nranks, uniqueId, rank, &
                config) bind(C, name="mkCommInitRank")
            import :: mk_comm, mkUniqueId, c_int, c_ptr
            type(mk_comm), intent(out) :: comm
            integer(c_int), value :: nranks
            type(mkUniqueId), value :: uniqueId
            integer(c_int), value :: rank
            type(c_ptr), value :: config
        end function

        integer(c_int) function mkCommSplit(comm, color, key, newcomm, config) &
                bind(C, name="mkCommSplit")
            import :: mk_comm, c_int, c_ptr
            type(mk_comm), value :: comm
            integer(c_int), value :: color, key
            type(mk_comm), intent(out) :: newcomm
            type(c_ptr), value :: config
        end function

        integer(c_int) function mkCommDestroy(comm) bind(C, name="mkCommDestroy")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
        end function

        integer(c_int) function mkCommAbort(comm) bind(C, name="mkCommAbort")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
        end function

        integer(c_int) function mkCommGetAsyncError(comm, asyncError) &
                bind(C, name="mkCommGetAsyncError")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: asyncError
        end function

        integer(c_int) function mkCommRank(comm, rank) &
                bind(C, name="mkCommRank")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: rank
        end function

        integer(c_int) function mkCommSize(comm, size) &
                bind(C, name="mkCommSize")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: size
        end function

        integer(c_int) function mkCommLocalRank(comm, localRank) &
                bind(C, name="mkCommLocalRank")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: localRank
        end function

        integer(c_int) function mkCommLocalSize(comm, localSize) &
                bind(C, name="mkCommLocalSize")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: localSize
        end function

        integer(c_int) function mkCommNodeCount(comm, nodeCount) &
                bind(C, name="mkCommNodeCount")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: nodeCount
        end function

        integer(c_int) function mkCommCuDevice(comm, device) &
                bind(C, name="mkCommCuDevice")
            import :: mk_comm, c_int
            type(mk_comm), value :: comm
            integer(c_int), intent(out) :: device
        end function

        integer(c_int) function mkAllGather(sendbuf, recvbuf, count, datatype, comm, stream) &
                bind(C, name="mkAllGather")
            import :: mk_comm, c_int, c_ptr, c_size_t
            type(c_ptr), value :: sendbuf, recvbuf
            integer(c_size_t), value :: count
            integer(c_int), value :: datatype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        integer(c_int) function mkReduceScatter(sendbuf, recvbuf, count, datatype, comm, stream) &
                bind(C, name="mkReduceScatter")
            import :: mk_comm, c_int, c_ptr, c_size_t
            type(c_ptr), value :: sendbuf, recvbuf
            integer(c_size_t), value :: count
            integer(c_int), value :: datatype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        integer(c_int) function mkAllReduce(sendbuf, recvbuf, count, datatype, comm, stream) &
                bind(C, name="mkAllReduce")
            import :: mk_comm, c_int, c_ptr, c_size_t
            type(c_ptr), value :: sendbuf, recvbuf
            integer(c_size_t), value :: count
            integer(c_int), value :: datatype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        integer(c_int) function mkAllToAll(sendbuf, recvbuf, count, datatype, comm, stream) &
                bind(C, name="mkAllToAll")
            import :: mk_comm, c_int, c_ptr, c_size_t
            type(c_ptr), value :: sendbuf, recvbuf
            integer(c_size_t), value :: count
            integer(c_int), value :: datatype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! Device memory of the communicator's GPU, mapped by the node's ranks.
        integer(c_int) function mkMemAlloc(comm, size, ptr) bind(C, name="mkMemAlloc")
            import :: mk_comm, c_int, c_ptr, c_size_t
            type(mk_comm), value :: comm
            integer(c_size_t), value :: size
            type(c_ptr), intent(out) :: ptr
        end function

        integer(c_int) function mkMemFree(comm, ptr) bind(C, name="mkMemFree")
            import :: mk_comm, c_int, c_ptr
            type(mk_comm), value :: comm
            type(c_ptr), value :: ptr
        end function

        integer(c_int) function mkCommRegister(comm, buf, size, handle) &
                bind(C, name="mkCommRegister")
            import :: mk_comm, c_int, c_ptr, c_size_t
            type(mk_comm), value :: comm
            type(c_ptr), value :: buf
            integer(c_size_t), value :: size
            type(c_ptr), intent(out) :: handle
        end function

        integer(c_int) function mkCommDeregister(comm, handle) &
                bind(C, name="mkCommDeregister")
            import :: mk_comm, c_int, c_ptr
            type(mk_comm), value :: comm
            type(c_ptr), value :: handle
        end function

        ! m_all: c_loc of an integer(c_int64_t) array of every rank's rows,
        ! or c_null_ptr when every rank holds m_local rows.
        integer(c_int) function mkAllGatherGemm(A, B, C, gatheredA, m_local, m_all, n, k, &
                transB, dtype, comm, stream) bind(C, name="mkAllGatherGemm")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: A, B, C, gatheredA
            integer(c_int64_t), value :: m_local
            type(c_ptr), value :: m_all
            integer(c_int64_t), value :: n, k
            integer(c_int), value :: transB, dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! m_all: c_loc of an integer(c_int64_t) array of the rows of D each
        ! rank receives, or c_null_ptr for m split evenly.
        integer(c_int) function mkGemmReduceScatter(A, B, C, m_all, m, n, k, &
                transB, dtype, comm, stream) bind(C, name="mkGemmReduceScatter")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: A, B, C, m_all
            integer(c_int64_t), value :: m, n, k
            integer(c_int), value :: transB, dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! C (m x n) receives the sum over ranks on every rank, the same bits.
        integer(c_int) function mkGemmAllReduce(A, B, C, m, n, k, transB, dtype, &
                comm, stream) bind(C, name="mkGemmAllReduce")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: A, B, C
            integer(c_int64_t), value :: m, n, k
            integer(c_int), value :: transB, dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! Every array is device memory (type(c_ptr)): x and recv of dtype;
        ! topk_idx, recv_src, send_rows int32; topk_weights, recv_weights
        ! float; expert_offsets int64 (experts / nranks + 1 of them).
        ! recv_src and recv_weights may be c_null_ptr, recv_weights must be
        ! when topk_weights is.  One node only in this version.
        integer(c_int) function mkMoEDispatch(x, topk_idx, topk_weights, recv, &
                recv_weights, recv_src, expert_offsets, send_rows, &
                tokens, hidden, topk, experts, recv_capacity, dtype, comm, stream) &
                bind(C, name="mkMoEDispatch")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: x, topk_idx, topk_weights, recv
            type(c_ptr), value :: recv_weights, recv_src, expert_offsets, send_rows
            integer(c_int64_t), value :: tokens, hidden, topk, experts, recv_capacity
            integer(c_int), value :: dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! mkMoEDispatch and every local expert's GEMM: y (recv_capacity x n
        ! of dtype) receives each expert's rows times its weights W (El x
        ! (n x hidden) with transW = 1, El x (hidden x n) with transW = 0),
        ! in the layout mkMoEDispatch gives recv.  bf16 or fp16 only; one
        ! node only in this version.
        integer(c_int) function mkMoEDispatchGemm(x, topk_idx, topk_weights, W, y, &
                recv_weights, recv_src, expert_offsets, send_rows, tokens, hidden, n, &
                topk, experts, recv_capacity, transW, dtype, comm, stream) &
                bind(C, name="mkMoEDispatchGemm")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: x, topk_idx, topk_weights, W, y
            type(c_ptr), value :: recv_weights, recv_src, expert_offsets, send_rows
            integer(c_int64_t), value :: tokens, hidden, n, topk, experts, recv_capacity
            integer(c_int), value :: transW, dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! out (tokens x hidden) receives each token's weighted sum of its
        ! experts' rows of y; expert_offsets, topk_idx and send_rows are
        ! those of the dispatch; topk_weights c_null_ptr: weights of 1.
        integer(c_int) function mkMoECombine(y, expert_offsets, topk_idx, topk_weights, &
                send_rows, out, tokens, hidden, topk, experts, recv_capacity, &
                dtype, comm, stream) bind(C, name="mkMoECombine")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: y, expert_offsets, topk_idx, topk_weights
            type(c_ptr), value :: send_rows, out
            integer(c_int64_t), value :: tokens, hidden, topk, experts, recv_capacity
            integer(c_int), value :: dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! The whole expert layer: mkMoEDispatch, each local expert's SwiGLU
        ! network (W13: gate and up projections, El x (2 inter x hidden)
        ! with transW = 1, El x (hidden x 2 inter) with transW = 0; W2: down
        ! projections, El x (hidden x inter) or El x (inter x hidden)), and
        ! mkMoECombine into out (tokens x hidden of dtype).  topk_weights
        ! c_null_ptr: weights of 1.  bf16 or fp16 only; across nodes as a
        ! sequence of collectives (mkMoEDispatchFfnCombine(3)).
        integer(c_int) function mkMoEDispatchFfnCombine(x, topk_idx, topk_weights, &
                W13, W2, out, tokens, hidden, inter, topk, experts, recv_capacity, &
                transW, dtype, comm, stream) bind(C, name="mkMoEDispatchFfnCombine")
            import :: mk_comm, c_int, c_int64_t, c_ptr
            type(c_ptr), value :: x, topk_idx, topk_weights, W13, W2, out
            integer(c_int64_t), value :: tokens, hidden, inter, topk, experts, recv_capacity
            integer(c_int), value :: transW, dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! Device memory (type(c_ptr)): q and o batch x seq_local x heads x
        ! head_dim, k and v batch x seq_local x kv_heads x head_dim of dtype,
        ! in the order layout names (mkAttnBSHD or mkAttnBHSD); lse batch x
        ! heads x seq_local floats, or c_null_ptr.  mask: mkAttnFull,
        ! mkAttnCausal or mkAttnCausalZigzag; scale: usually
        ! 1 / sqrt(head_dim).  head_dim 64 or 128; bf16 or fp16.
        integer(c_int) function mkRingAttention(q, k, v, o, lse, batch, seq_local, heads, &
                kv_heads, head_dim, layout, mask, scale, dtype, comm, stream) &
                bind(C, name="mkRingAttention")
            import :: mk_comm, c_int, c_int64_t, c_float, c_ptr
            type(c_ptr), value :: q, k, v, o, lse
            integer(c_int64_t), value :: batch, seq_local, heads, kv_heads, head_dim
            integer(c_int), value :: layout, mask
            real(c_float), value :: scale
            integer(c_int), value :: dtype
            type(mk_comm), value :: comm
            type(c_ptr), value :: stream
        end function

        ! op: c_loc of a NUL-terminated character(kind=c_char) string, or
        ! c_null_ptr (no plan); mk_comm_info below does this for you.
        integer(c_int) function mkCommGetInfo(comm, op, m, n, k, datatype, buf, size) &
                bind(C, name="mkCommGetInfo")
            import :: mk_comm, c_int, c_int64_t, c_ptr, c_size_t
            type(mk_comm), value :: comm
            type(c_ptr), value :: op
            integer(c_int64_t), value :: m, n, k
            integer(c_int), value :: datatype
            type(c_ptr), value :: buf
            integer(c_size_t), intent(inout) :: size
        end function

        function c_strlen(s) bind(C, name="strlen")
            import :: c_ptr, c_size_t
            type(c_ptr), value :: s
            integer(c_size_t) :: c_strlen
        end function
    end interface

contains

    ! A config with every field undefined, as MK_CONFIG_INITIALIZER.
    function mk_config_initializer() result(cfg)
        type(mk_config) :: cfg
        cfg%size = c_sizeof(cfg)
        cfg%magic = MK_CONFIG_MAGIC
        cfg%version = MK_VERSION_CODE
    end function mk_config_initializer

    ! What a result code means, e.g. "timeout" for mkErrTimeout.
    function mk_error_string(code) result(s)
        integer(c_int), intent(in) :: code
        character(len=:), allocatable :: s
        s = f_string(mkGetErrorString(code))
    end function mk_error_string

    ! The detail of the last failure on comm; without comm, of the last
    ! failure in this thread of a call that had no communicator (mkCommInit,
    ! mkCommInitRank, mkGetUniqueId).
    function mk_last_error(comm) result(s)
        type(mk_comm), intent(in), optional :: comm
        character(len=:), allocatable :: s
        type(mk_comm) :: none
        if (present(comm)) then
            s = f_string(mkGetLastError(comm))
        else
            s = f_string(mkGetLastError(none))
        end if
    end function mk_last_error

    ! What mkinfo prints for comm, as one string (lines end in new_line('a')):
    ! the topology, the parameters the communicator read and, with op
    ! ("allreduce", "ag_gemm", ...), the plan of that operation for the
    ! global shape m x n x k of dtype.  On failure, '' (mk_last_error(comm)
    ! says why).
    function mk_comm_info(comm, op, m, n, k, dtype) result(s)
        type(mk_comm), intent(in) :: comm
        character(len=*), intent(in), optional :: op
        integer(c_int64_t), intent(in), optional :: m, n, k
        integer(c_int), intent(in), optional :: dtype
        character(len=:), allocatable :: s
        character(kind=c_char, len=:), allocatable, target :: cop
        character(kind=c_char), allocatable, target :: buf(:)
        type(c_ptr) :: pop
        integer(c_int64_t) :: mm, nn, kk
        integer(c_int) :: dt
        integer(c_size_t) :: size
        integer :: i
        s = ''
        pop = c_null_ptr
        if (present(op)) then
            cop = op // c_null_char
            pop = c_loc(cop)
        end if
        mm = 1; nn = 1; kk = 1; dt = mkBfloat16
        if (present(m)) mm = m
        if (present(n)) nn = n
        if (present(k)) kk = k
        if (present(dtype)) dt = dtype
        size = 0
        if (mkCommGetInfo(comm, pop, mm, nn, kk, dt, c_null_ptr, size) /= mkSuccess) return
        allocate(buf(size))
        if (mkCommGetInfo(comm, pop, mm, nn, kk, dt, c_loc(buf), size) /= mkSuccess) return
        deallocate(s)
        allocate(character(len=int(size) - 1) :: s)
        do i = 1, int(size) - 1
            s(i:i) = buf(i)
        end do
    end function mk_comm_info

    ! Copy a NUL-terminated C string (the library's, not to be freed).
    function f_string(p) result(s)
        type(c_ptr), intent(in) :: p
        character(len=:), allocatable :: s
        character(kind=c_char), pointer :: chars(:)
        integer :: n, i
        if (.not. c_associated(p)) then
            s = ''
            return
        end if
        n = int(c_strlen(p))
        call c_f_pointer(p, chars, [n])
        allocate(character(len=n) :: s)
        do i = 1, n
            s(i:i) = chars(i)
        end do
    end function f_string

end module mkernel
