"""What an exercise's file may name in each module it may import (a submodule only
where it is a module of ``MODULES``), as ``grader.core.delegation`` reads it.

Written by ``python -m tools.delegation_names`` (make names) from Python 3.11,
NumPy 2.4.6 and torch 2.13.0+cpu, by the rules in its docstring; edit those, not this.
"""

VERSIONS = {"python": "3.11", "numpy": "2.4.6", "torch": "2.13.0+cpu"}

# module -> the attributes a file may name
NAMES: dict[str, frozenset[str]] = {
    # numpy: arrays: ufuncs, array functions, dtypes and array types, constants
    "numpy": frozenset("""
        False_ True_ abs absolute acos acosh add all allclose amax amin angle any append
        apply_along_axis apply_over_axes arange arccos arccosh arcsin arcsinh arctan arctan2
        arctanh argmax argmin argpartition argsort argwhere around array array2string array_equal
        array_equiv array_repr array_split array_str asanyarray asarray asarray_chkfinite
        ascontiguousarray asfortranarray asin asinh asmatrix astype atan atan2 atanh atleast_1d
        atleast_2d atleast_3d average bartlett base_repr binary_repr bincount bitwise_and
        bitwise_count bitwise_invert bitwise_left_shift bitwise_not bitwise_or bitwise_right_shift
        bitwise_xor blackman block bool bool_ broadcast broadcast_arrays broadcast_shapes
        broadcast_to busday_count busday_offset busdaycalendar byte bytes_ c_ can_cast cbrt cdouble
        ceil character choose clip clongdouble column_stack common_type complex128 complex256
        complex64 complexfloating compress concat concatenate conj conjugate convolve copy copysign
        copyto corrcoef correlate cos cosh count_nonzero cov cross csingle cumprod cumsum
        cumulative_prod cumulative_sum datetime64 datetime_as_string datetime_data deg2rad degrees
        delete diag diag_indices diag_indices_from diagflat diagonal diff digitize divide divmod
        dot double dsplit dstack dtype e ediff1d einsum einsum_path empty empty_like equal errstate
        euler_gamma exp exp2 expand_dims expm1 extract eye fabs fill_diagonal finfo fix flatiter
        flatnonzero flexible flip fliplr flipud float128 float16 float32 float64 float_power
        floating floor floor_divide fmax fmin fmod format_float_positional format_float_scientific
        frexp fromfunction fromiter frompyfunc fromstring full full_like gcd generic geomspace
        get_printoptions getbufsize geterr geterrcall gradient greater greater_equal half hamming
        hanning heaviside histogram histogram2d histogram_bin_edges histogramdd hsplit hstack hypot
        i0 identity iinfo imag index_exp indices inexact inf inner insert int16 int32 int64 int8
        int_ intc integer interp intersect1d intp invert is_busday isclose iscomplex iscomplexobj
        isdtype isfinite isfortran isin isinf isnan isnat isneginf isposinf isreal isrealobj
        isscalar issubdtype iterable ix_ kaiser kron lcm ldexp left_shift less less_equal lexsort
        linspace little_endian log log10 log1p log2 logaddexp logaddexp2 logical_and logical_not
        logical_or logical_xor logspace long longdouble longlong mask_indices matmul matrix
        matrix_transpose matvec max maximum may_share_memory mean median meshgrid mgrid min
        min_scalar_type minimum mintypecode mod modf moveaxis multiply nan nan_to_num nanargmax
        nanargmin nancumprod nancumsum nanmax nanmean nanmedian nanmin nanpercentile nanprod
        nanquantile nanstd nansum nanvar ndarray ndenumerate ndim ndindex nditer negative
        nested_iters newaxis nextafter nonzero not_equal number object_ ogrid ones ones_like outer
        packbits pad partition percentile permute_dims pi piecewise place poly poly1d polyadd
        polyder polydiv polyfit polyint polymul polysub polyval positive pow power printoptions
        prod promote_types ptp put put_along_axis putmask quantile r_ rad2deg radians ravel
        ravel_multi_index real real_if_close recarray reciprocal record remainder repeat require
        reshape resize result_type right_shift rint roll rollaxis roots rot90 round row_stack s_
        searchsorted select set_printoptions setbufsize setdiff1d seterr seterrcall setxor1d shape
        shares_memory short sign signbit signedinteger sin sinc single sinh size sort sort_complex
        spacing split sqrt square squeeze stack std str_ subtract sum swapaxes take take_along_axis
        tan tanh tensordot tile timedelta64 trace transpose trapezoid tri tril tril_indices
        tril_indices_from trim_zeros triu triu_indices triu_indices_from true_divide trunc typename
        ubyte ufunc uint uint16 uint32 uint64 uint8 uintc uintp ulong ulonglong union1d unique
        unique_all unique_counts unique_inverse unique_values unpackbits unravel_index
        unsignedinteger unstack unwrap ushort vander var vdot vecdot vecmat vectorize void vsplit
        vstack where zeros zeros_like
    """.split()),
    # numpy.linalg: linear algebra
    "numpy.linalg": frozenset("""
        LinAlgError cholesky cond cross det diagonal eig eigh eigvals eigvalsh inv lstsq matmul
        matrix_norm matrix_power matrix_rank matrix_transpose multi_dot norm outer pinv qr slogdet
        solve svd svdvals tensordot tensorinv tensorsolve trace vecdot vector_norm
    """.split()),
    # numpy.random: random numbers
    "numpy.random": frozenset("""
        BitGenerator Generator MT19937 PCG64 PCG64DXSM Philox RandomState SFC64 SeedSequence beta
        binomial bytes chisquare choice default_rng dirichlet exponential f gamma geometric
        get_bit_generator get_state gumbel hypergeometric laplace logistic lognormal logseries
        multinomial multivariate_normal negative_binomial noncentral_chisquare noncentral_f normal
        pareto permutation poisson power rand randint randn random random_integers random_sample
        ranf rayleigh sample seed set_bit_generator set_state shuffle standard_cauchy
        standard_exponential standard_gamma standard_normal standard_t triangular uniform vonmises
        wald weibull zipf
    """.split()),
    # numpy.testing: the assertions a file's own checks use
    "numpy.testing": frozenset("""
        assert_ assert_allclose assert_almost_equal assert_approx_equal assert_array_almost_equal
        assert_array_almost_equal_nulp assert_array_compare assert_array_equal assert_array_less
        assert_array_max_ulp assert_equal assert_no_warnings assert_raises assert_raises_regex
        assert_string_equal assert_warns
    """.split()),
    # numpy.typing: annotations
    "numpy.typing": frozenset("""
        ArrayLike DTypeLike NBitBase NDArray
    """.split()),
    # numpy.exceptions: NumPy's exceptions
    "numpy.exceptions": frozenset("""
        AxisError ComplexWarning DTypePromotionError ModuleDeprecationWarning RankWarning
        TooHardError VisibleDeprecationWarning
    """.split()),
    # torch: tensors: tensor operations, dtypes and tensor types, gradient modes, random numbers
    "torch": frozenset("""
        AcceleratorError BFloat16Tensor BoolTensor ByteTensor CharTensor DoubleTensor FatalError
        FloatTensor Generator HalfTensor IntTensor JITException LongTensor OutOfMemoryError
        ShortTensor Size Tensor abs abs_ absolute acos acos_ acosh acosh_ adaptive_avg_pool1d
        adaptive_max_pool1d add addbmm addcdiv addcmul addmm addmv addmv_ addr adjoint
        affine_grid_generator alias_copy all allclose alpha_dropout alpha_dropout_ amax amin
        aminmax angle any arange arccos arccos_ arccosh arccosh_ arcsin arcsin_ arcsinh arcsinh_
        arctan arctan2 arctan_ arctanh arctanh_ argmax argmin argsort argwhere as_tensor asarray
        asin asin_ asinh asinh_ atan atan2 atan_ atanh atanh_ atleast_1d atleast_2d atleast_3d
        avg_pool1d baddbmm bartlett_window batch_norm batch_norm_backward_elemt
        batch_norm_backward_reduce batch_norm_elemt batch_norm_gather_stats
        batch_norm_gather_stats_with_counts batch_norm_stats batch_norm_update_stats bernoulli
        bfloat16 bilinear binary_cross_entropy_with_logits bincount binomial bit bits16 bits1x8
        bits2x4 bits4x2 bits8 bitwise_and bitwise_left_shift bitwise_not bitwise_or
        bitwise_right_shift bitwise_xor blackman_window block_diag bmm bool broadcast_shapes
        broadcast_tensors broadcast_to bucketize can_cast cartesian_prod cat ccol_indices_copy
        cdist cdouble ceil ceil_ celu celu_ cfloat chain_matmul chalf channel_shuffle channels_last
        channels_last_3d cholesky cholesky_inverse cholesky_solve choose_qparams_optimized chunk
        clamp clamp_ clamp_max clamp_max_ clamp_min clamp_min_ clip clip_ clone col_indices_copy
        column_stack combinations complex complex128 complex32 complex64 concat concatenate conj
        conj_physical conj_physical_ constant_pad_nd contiguous_format conv1d conv2d conv3d
        conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d convolution copysign corrcoef
        cos cos_ cosh cosh_ cosine_embedding_loss cosine_similarity count_nonzero cov cross
        crow_indices_copy ctc_loss cudnn_affine_grid_generator cudnn_batch_norm cudnn_convolution
        cudnn_convolution_add_relu cudnn_convolution_relu cudnn_convolution_transpose
        cudnn_grid_sampler cudnn_is_acceptable cummax cummin cumprod cumsum cumulative_trapezoid
        deg2rad deg2rad_ dequantize det detach detach_ detach_copy device diag diag_embed diagflat
        diagonal diagonal_copy diagonal_scatter diff digamma dist div divide dot double dropout
        dropout_ dsmm dsplit dstack dtype e eig einsum embedding embedding_bag embedding_renorm_
        empty empty_like empty_permuted empty_quantized enable_grad eq equal erf erf_ erfc erfc_
        erfinv exp exp2 exp2_ exp_ expand_copy expm1 expm1_ eye fake_quantize_per_channel_affine
        fake_quantize_per_tensor_affine fbgemm_linear_fp16_weight
        fbgemm_linear_fp16_weight_fp32_activation fbgemm_linear_int8_weight
        fbgemm_linear_int8_weight_fp32_activation fbgemm_linear_quantize_weight
        fbgemm_pack_gemm_matrix_fp16 fbgemm_pack_quantized_matrix feature_alpha_dropout
        feature_alpha_dropout_ feature_dropout feature_dropout_ fill fill_ finfo fix fix_ flatten
        flip fliplr flipud float float16 float32 float4_e2m1fn_x2 float64 float8_e4m3fn
        float8_e4m3fnuz float8_e5m2 float8_e5m2fnuz float8_e8m0fnu float_power floor floor_
        floor_divide fmax fmin fmod frac frac_ frexp frobenius_norm from_numpy full full_like
        fused_moving_avg_obs_fake_quant gather gcd gcd_ ge geqrf ger get_default_device
        get_default_dtype get_device get_rng_state gradient greater greater_equal grid_sampler
        grid_sampler_2d grid_sampler_3d group_norm gru gru_cell gt half hamming_window hann_window
        hardshrink hash_tensor heaviside hinge_embedding_loss histc histogram histogramdd hsmm
        hsplit hspmm hstack hypot i0 i0_ igamma igammac iinfo imag index_add index_copy index_fill
        index_put index_put_ index_reduce index_select indices_copy inf inference_mode initial_seed
        inner instance_norm int int1 int16 int2 int3 int32 int4 int5 int6 int64 int7 int8 int_repr
        inverse is_complex is_conj is_distributed is_floating_point is_grad_enabled is_inference
        is_inference_mode_enabled is_neg is_nonzero is_same_size is_signed is_tensor
        is_vulkan_available isclose isfinite isin isinf isnan isneginf isposinf isreal istft jagged
        kaiser_window kl_div kron kthvalue layer_norm layout lcm lcm_ ldexp ldexp_ le
        legacy_contiguous_format lerp less less_equal lgamma linspace lobpcg log log10 log10_ log1p
        log1p_ log2 log2_ log_ log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and
        logical_not logical_or logical_xor logit logit_ logspace logsumexp long lstm lstm_cell
        lstsq lt lu lu_solve lu_unpack manual_seed margin_ranking_loss masked_fill masked_scatter
        masked_select matmul matrix_exp matrix_power matrix_rank max max_pool1d
        max_pool1d_with_indices max_pool2d max_pool3d maximum mean median memory_format meshgrid
        min minimum miopen_batch_norm miopen_convolution miopen_convolution_add_relu
        miopen_convolution_relu miopen_convolution_transpose miopen_ctc_loss
        miopen_depthwise_convolution miopen_rnn mkldnn_adaptive_avg_pool2d mkldnn_convolution
        mkldnn_linear_backward_weights mkldnn_max_pool2d mkldnn_max_pool3d mkldnn_rnn_layer mm mode
        moveaxis movedim msort mul multinomial multiply mv mvlgamma nan nan_to_num nan_to_num_
        nanmean nanmedian nanquantile nansum narrow narrow_copy native_batch_norm
        native_channel_shuffle native_dropout native_group_norm native_layer_norm native_norm ne
        neg neg_ negative negative_ newaxis nextafter no_grad nonzero nonzero_static norm
        norm_except_dim normal not_equal nuclear_norm numel ones ones_like orgqr ormqr outer
        pairwise_distance pca_lowrank pdist per_channel_affine per_channel_affine_float_qparams
        per_channel_symmetric per_tensor_affine per_tensor_symmetric permute permute_copy pi
        pinverse pixel_shuffle pixel_unshuffle poisson poisson_nll_loss polar polygamma positive
        pow prelu preserve_format prod promote_types put q_per_channel_axis q_per_channel_scales
        q_per_channel_zero_points q_scale q_zero_point qint32 qint8 qr quantile
        quantize_per_channel quantize_per_tensor quantize_per_tensor_dynamic quantized_batch_norm
        quantized_gru_cell quantized_lstm_cell quantized_max_pool1d quantized_max_pool2d
        quantized_max_pool3d quantized_rnn_relu_cell quantized_rnn_tanh_cell quint2x4 quint4x2
        quint8 rad2deg rad2deg_ rand rand_like randint randint_like randn randn_like randperm range
        ravel real reciprocal reciprocal_ relu relu_ remainder renorm repeat_interleave reshape
        resize_as_ resize_as_sparse_ resolve_conj resolve_neg result_type rms_norm rnn_relu
        rnn_relu_cell rnn_tanh rnn_tanh_cell roll rot90 round round_ row_indices_copy row_stack
        rrelu rrelu_ rsqrt rsqrt_ rsub saddmm scalar_tensor scatter scatter_add scatter_reduce
        searchsorted seed segment_reduce select select_copy select_scatter selu selu_
        set_grad_enabled set_printoptions set_rng_state sgn short sigmoid sigmoid_ sign signbit sin
        sin_ sinc sinc_ sinh sinh_ slice_copy slice_inverse slice_scatter slogdet smm softmax solve
        sort sparse_bsc sparse_bsc_tensor sparse_bsr sparse_bsr_tensor sparse_compressed_tensor
        sparse_coo sparse_coo_tensor sparse_csc sparse_csc_tensor sparse_csr sparse_csr_tensor
        split split_copy split_with_sizes split_with_sizes_copy spmm sqrt sqrt_ square square_
        squeeze squeeze_copy sspaddmm stack std std_mean stft strided sub subtract sum svd
        svd_lowrank swapaxes swapdims sym_constrain_range sym_constrain_range_for_size symeig t
        t_copy take take_along_dim tan tan_ tanh tanh_ tensor tensor_split tensordot threshold
        threshold_ tile topk trace transpose transpose_copy trapezoid trapz triangular_solve tril
        tril_indices triplet_margin_loss triu triu_indices true_divide trunc trunc_ typename uint1
        uint16 uint2 uint3 uint32 uint4 uint5 uint6 uint64 uint7 uint8 unbind unbind_copy unflatten
        unfold_copy unique unique_consecutive unravel_index unsafe_chunk unsafe_split
        unsafe_split_with_sizes unsqueeze unsqueeze_copy values_copy vander var var_mean vdot
        view_as_complex view_as_complex_copy view_as_real view_as_real_copy view_copy vsplit vstack
        where xlogy xlogy_ zero_ zeros zeros_like
    """.split()),
    # torch.nn: layers and their containers, parameters and buffers
    "torch.nn": frozenset("""
        AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveLogSoftmaxWithLoss
        AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d AlphaDropout AvgPool1d AvgPool2d
        AvgPool3d BCELoss BCEWithLogitsLoss BatchNorm1d BatchNorm2d BatchNorm3d Bilinear Buffer
        CELU CTCLoss ChannelShuffle CircularPad1d CircularPad2d CircularPad3d ConstantPad1d
        ConstantPad2d ConstantPad3d Container Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d
        ConvTranspose3d CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss CrossMapLRN2d
        DataParallel Dropout Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag
        FeatureAlphaDropout Flatten Fold FractionalMaxPool2d FractionalMaxPool3d GELU GLU GRU
        GRUCell GaussianNLLLoss GroupNorm Hardshrink Hardsigmoid Hardswish Hardtanh
        HingeEmbeddingLoss HuberLoss Identity InstanceNorm1d InstanceNorm2d InstanceNorm3d
        KLDivLoss L1Loss LPPool1d LPPool2d LPPool3d LSTM LSTMCell LayerNorm LazyBatchNorm1d
        LazyBatchNorm2d LazyBatchNorm3d LazyConv1d LazyConv2d LazyConv3d LazyConvTranspose1d
        LazyConvTranspose2d LazyConvTranspose3d LazyInstanceNorm1d LazyInstanceNorm2d
        LazyInstanceNorm3d LazyLinear LeakyReLU Linear LinearCrossEntropyLoss
        LinearCrossEntropyOptions LocalResponseNorm LogSigmoid LogSoftmax MSELoss MarginRankingLoss
        MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d Mish Module ModuleDict
        ModuleList MultiLabelMarginLoss MultiLabelSoftMarginLoss MultiMarginLoss MultiheadAttention
        NLLLoss NLLLoss2d PReLU PairwiseDistance Parameter ParameterDict ParameterList PixelShuffle
        PixelUnshuffle PoissonNLLLoss RMSNorm RNN RNNBase RNNCell RNNCellBase RReLU ReLU ReLU6
        ReflectionPad1d ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d
        ReplicationPad3d SELU Sequential SiLU Sigmoid SmoothL1Loss SoftMarginLoss Softmax Softmax2d
        Softmin Softplus Softshrink Softsign SyncBatchNorm Tanh Tanhshrink Threshold Transformer
        TransformerDecoder TransformerDecoderLayer TransformerEncoder TransformerEncoderLayer
        TripletMarginLoss TripletMarginWithDistanceLoss Unflatten Unfold UninitializedBuffer
        UninitializedParameter Upsample UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d
        ZeroPad2d ZeroPad3d
    """.split()),
    # torch.nn.functional: the functional form of the layers
    "torch.nn.functional": frozenset("""
        adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
        adaptive_max_pool1d_with_indices adaptive_max_pool2d adaptive_max_pool2d_with_indices
        adaptive_max_pool3d adaptive_max_pool3d_with_indices affine_grid alpha_dropout
        assert_int_or_pair avg_pool1d avg_pool2d avg_pool3d batch_norm bilinear
        binary_cross_entropy binary_cross_entropy_with_logits celu celu_ channel_shuffle conv1d
        conv2d conv3d conv_tbc conv_transpose1d conv_transpose2d conv_transpose3d
        cosine_embedding_loss cosine_similarity cross_entropy ctc_loss dropout dropout1d dropout2d
        dropout3d elu elu_ embedding embedding_bag feature_alpha_dropout fold fractional_max_pool2d
        fractional_max_pool2d_with_indices fractional_max_pool3d fractional_max_pool3d_with_indices
        gaussian_nll_loss gelu glu grid_sample group_norm grouped_mm gumbel_softmax hardshrink
        hardsigmoid hardswish hardtanh hardtanh_ hinge_embedding_loss huber_loss instance_norm
        interpolate kl_div l1_loss layer_norm leaky_relu leaky_relu_ linear linear_cross_entropy
        local_response_norm log_softmax logsigmoid lp_pool1d lp_pool2d lp_pool3d
        margin_ranking_loss max_pool1d max_pool1d_with_indices max_pool2d max_pool2d_with_indices
        max_pool3d max_pool3d_with_indices max_unpool1d max_unpool2d max_unpool3d mish mse_loss
        multi_head_attention_forward multi_margin_loss multilabel_margin_loss
        multilabel_soft_margin_loss native_channel_shuffle nll_loss normalize one_hot pad
        pairwise_distance pdist pixel_shuffle pixel_unshuffle poisson_nll_loss prelu relu relu6
        relu_ rms_norm rrelu rrelu_ scaled_dot_product_attention scaled_grouped_mm scaled_mm selu
        selu_ sigmoid silu smooth_l1_loss soft_margin_loss softmax softmin softplus softshrink
        softsign tanh tanhshrink threshold threshold_ triplet_margin_loss
        triplet_margin_with_distance_loss unfold upsample upsample_bilinear upsample_nearest
    """.split()),
    # torch.nn.init: initialising parameters
    "torch.nn.init": frozenset("""
        calculate_gain constant constant_ dirac dirac_ eye eye_ kaiming_normal kaiming_normal_
        kaiming_uniform kaiming_uniform_ normal normal_ ones_ orthogonal orthogonal_ sparse sparse_
        trunc_normal_ uniform uniform_ xavier_normal xavier_normal_ xavier_uniform xavier_uniform_
        zeros_
    """.split()),
    # torch.linalg: linear algebra
    "torch.linalg": frozenset("""
        LinAlgError cholesky cholesky_ex cond cross det diagonal eig eigh eigvals eigvalsh
        householder_product inv inv_ex ldl_factor ldl_factor_ex ldl_solve lstsq lu lu_factor
        lu_factor_ex lu_solve matmul matrix_exp matrix_norm matrix_power matrix_rank multi_dot norm
        pinv qr slogdet solve solve_ex solve_triangular svd svdvals tensorinv tensorsolve vander
        vecdot vector_norm
    """.split()),
    # torch.special: special functions (expit, logsumexp, softmax)
    "torch.special": frozenset("""
        airy_ai bessel_j0 bessel_j1 bessel_y0 bessel_y1 chebyshev_polynomial_t
        chebyshev_polynomial_u chebyshev_polynomial_v chebyshev_polynomial_w digamma entr erf erfc
        erfcx erfinv exp2 expit expm1 gammainc gammaincc gammaln hermite_polynomial_h
        hermite_polynomial_he i0 i0e i1 i1e laguerre_polynomial_l legendre_polynomial_p log1p
        log_ndtr log_softmax logit logsumexp modified_bessel_i0 modified_bessel_i1
        modified_bessel_k0 modified_bessel_k1 multigammaln ndtr ndtri polygamma psi round
        scaled_modified_bessel_k0 scaled_modified_bessel_k1 shifted_chebyshev_polynomial_t
        shifted_chebyshev_polynomial_u shifted_chebyshev_polynomial_v
        shifted_chebyshev_polynomial_w sinc softmax spherical_bessel_j0 xlog1py xlogy zeta
    """.split()),
    # torch.autograd: gradients: Function, grad, backward and the gradient modes
    "torch.autograd": frozenset("""
        Function Variable backward enable_grad grad gradcheck gradgradcheck inference_mode no_grad
        set_grad_enabled
    """.split()),
    # torch.testing: the assertions a file's own checks use
    "torch.testing": frozenset("""
        assert_allclose assert_close make_tensor
    """.split()),
    # torch.optim: the optimizers, for a file that trains its own model in a main block
    "torch.optim": frozenset("""
        ASGD Adadelta Adafactor Adagrad Adam AdamW Adamax LBFGS Muon NAdam Optimizer RAdam RMSprop
        Rprop SGD SparseAdam
    """.split()),
    # torch.cuda: what a file asks of the GPU (is_available, the device, its seed)
    "torch.cuda": frozenset("""
        current_device device_count get_device_capability get_device_name is_available
        is_bf16_supported manual_seed manual_seed_all synchronize
    """.split()),
    # torch.backends: only as the way to torch.backends.mps
    "torch.backends": frozenset(),
    # torch.backends.mps: whether the Apple GPU is there
    "torch.backends.mps": frozenset("""
        is_available is_built
    """.split()),
    # math: every function and constant
    "math": frozenset("""
        acos acosh asin asinh atan atan2 atanh cbrt ceil comb copysign cos cosh degrees dist e erf
        erfc exp exp2 expm1 fabs factorial floor fmod frexp fsum gamma gcd hypot inf isclose
        isfinite isinf isnan isqrt lcm ldexp lgamma log log10 log1p log2 modf nan nextafter perm pi
        pow prod radians remainder sin sinh sqrt tan tanh tau trunc ulp
    """.split()),
    # itertools: every iterator
    "itertools": frozenset("""
        accumulate chain combinations combinations_with_replacement compress count cycle dropwhile
        filterfalse groupby islice pairwise permutations product repeat starmap takewhile tee
        zip_longest
    """.split()),
    # functools: partial, reduce, caches, total_ordering, cmp_to_key
    "functools": frozenset("""
        cache cached_property cmp_to_key lru_cache partial partialmethod reduce total_ordering
    """.split()),
    # typing: annotations
    "typing": frozenset("""
        AbstractSet Annotated Any AnyStr AsyncContextManager AsyncGenerator AsyncIterable
        AsyncIterator Awaitable BinaryIO ByteString Callable ChainMap ClassVar Collection
        Concatenate Container ContextManager Coroutine Counter DefaultDict Deque Dict Final
        FrozenSet Generator Generic Hashable IO ItemsView Iterable Iterator KeysView List Literal
        LiteralString Mapping MappingView Match MutableMapping MutableSequence MutableSet
        NamedTuple Never NewType NoReturn NotRequired Optional OrderedDict ParamSpec ParamSpecArgs
        ParamSpecKwargs Pattern Protocol Required Reversible Self Sequence Set Sized SupportsAbs
        SupportsBytes SupportsComplex SupportsFloat SupportsIndex SupportsInt SupportsRound
        TYPE_CHECKING Text TextIO Tuple Type TypeAlias TypeGuard TypeVar TypeVarTuple TypedDict
        Union Unpack ValuesView assert_never assert_type cast clear_overloads dataclass_transform
        final get_args get_origin get_overloads is_typeddict no_type_check no_type_check_decorator
        overload reveal_type runtime_checkable
    """.split()),
    # dataclasses: dataclass, field and their helpers
    "dataclasses": frozenset("""
        Field FrozenInstanceError InitVar KW_ONLY MISSING asdict astuple dataclass field fields
        is_dataclass replace
    """.split()),
    # numbers: the numeric ABCs
    "numbers": frozenset("""
        Complex Integral Number Rational Real
    """.split()),
    # collections: the containers
    "collections": frozenset("""
        ChainMap Counter OrderedDict UserDict UserList UserString defaultdict deque namedtuple
    """.split()),
    # collections.abc: the container ABCs
    "collections.abc": frozenset("""
        AsyncGenerator AsyncIterable AsyncIterator Awaitable ByteString Callable Collection
        Container Coroutine Generator Hashable ItemsView Iterable Iterator KeysView Mapping
        MappingView MutableMapping MutableSequence MutableSet Reversible Sequence Set Sized
        ValuesView
    """.split()),
    # copy: copy and deepcopy
    "copy": frozenset("""
        Error copy deepcopy
    """.split()),
    # abc: abstract base classes
    "abc": frozenset("""
        ABC ABCMeta abstractclassmethod abstractmethod abstractproperty abstractstaticmethod
        get_cache_token update_abstractmethods
    """.split()),
    # warnings: warnings and their filters
    "warnings": frozenset("""
        catch_warnings filterwarnings resetwarnings simplefilter warn
    """.split()),
    # __future__: future statements
    "__future__": frozenset("""
        absolute_import all_feature_names annotations barry_as_FLUFL division generator_stop
        generators nested_scopes print_function unicode_literals with_statement
    """.split()),
}
MODULES = frozenset(NAMES)
