// Tilewright's stand-in for the AscendC kernel header "kernel_operator.h" (NPU arch 2201,
// Ascend910B1..B4), for checking the printed AscendC kernels with g++ -fsyntax-only.
//
// Written for Tilewright from the public AscendC documentation and the declarations published in
// asc-devkit 8.5 (include/basic_api/*.h): every name, signature, overload, template parameter
// (with its default), struct field (with its type, order and default value) and enumerator value
// below is the documented one. It declares only the part of the API that the AscendC printer
// (src/target/ascend/ascendc_printer.cpp) uses, with the whole overload family of each call it
// uses so that overload resolution picks what the real headers would pick.
//
// Declarations only: nothing here can run. The only function bodies are the compile-time element
// type checks the real headers make (see "Vector" below). Compile with -fsyntax-only.
//
// Where g++ differs from bisheng (the device compiler):
// - `half` is bisheng's builtin 16-bit float; here it is g++'s _Float16, which behaves the same way
//   for conversions and narrowing.
// - `bfloat16_t` is a builtin in bisheng; g++ 12 has none on x86, so here it is a class that only
//   converts explicitly (static_cast) from arithmetic types and implicitly to float. That is
//   stricter than the builtin (an implicit int/float -> bfloat16_t conversion, legal but narrowing
//   for non-constants, is rejected here) so every narrowing into bfloat16_t is caught.
// - The __global__/__aicore__/__gm__ qualifiers are empty: address spaces are not checked.
// - Values are not checked (a runtime repeat count of 300 into a uint8_t parameter converts
//   silently, as it does with bisheng); constants are: -Werror=narrowing (brace initialisers) and
//   -Werror=overflow (constant arguments that do not fit a parameter) reject them.
#pragma once

#include <cstdint>
#include <type_traits>

// ---------------------------------------------------------------------------------------------
// Qualifiers, entry macros and compiler builtins (global namespace, as in bisheng)

#define __global__
#define __aicore__
#define __gm__
#define GM_ADDR __gm__ uint8_t*

using half = _Float16;

class bfloat16_t {
 public:
  bfloat16_t() = default;
  template <typename U, typename std::enable_if<std::is_arithmetic<U>::value || std::is_same<U, half>::value,
                                                bool>::type = true>
  explicit bfloat16_t(U value);
  operator float() const;
};

// The pipes of an AI core (bisheng builtin enum).
typedef enum {
  PIPE_S = 0,
  PIPE_V,
  PIPE_M,
  PIPE_MTE1,
  PIPE_MTE2,
  PIPE_MTE3,
  PIPE_ALL,
  PIPE_MTE4 = 7,
  PIPE_MTE5 = 8,
  PIPE_V2 = 9,
  PIPE_FIX = 10,
} pipe_t;

// Fixpipe pre-quantisation modes (bisheng builtin enum; documented with Fixpipe).
enum QuantMode_t {
  NoQuant,
  F322F16,
  F322BF16,
  DEQF16,
  VDEQF16,
  QF322B8_PRE,
  VQF322B8_PRE,
  REQ8,
  VREQ8,
};

// Kernel types for KERNEL_TASK_TYPE_DEFAULT.
enum KernelMetaType : uint8_t {
  KERNEL_TYPE_AIV_ONLY,
  KERNEL_TYPE_AIC_ONLY,
  KERNEL_TYPE_MIX_AIV_1_0,
  KERNEL_TYPE_MIX_AIC_1_0,
  KERNEL_TYPE_MIX_AIC_1_1,
  KERNEL_TYPE_MIX_AIC_1_2,
  KERNEL_TYPE_AICORE,
  KERNEL_TYPE_VECTORCORE,
  KERNEL_TYPE_MIX_AICORE,
  KERNEL_TYPE_MIX_VECTOR_CORE,
  KERNEL_TYPE_MAX,
};

// The real macro expands to nothing in a device build (and to a variable initialised with the
// value when the build checks features); here it insists that the value is one KernelMetaType.
#define KERNEL_TASK_TYPE_DEFAULT(type)                                                   \
  static_assert(std::is_same<decltype(type), KernelMetaType>::value,                    \
                "KERNEL_TASK_TYPE_DEFAULT takes one KERNEL_TYPE_* value")

namespace AscendC {
constexpr int32_t MIX = 0;
constexpr int32_t AIC = 1;
constexpr int32_t AIV = 2;
}  // namespace AscendC

// ascendc_library compiles a kernel once per core kind (SPLIT_CORE_CUBE for the AIC binary,
// SPLIT_CORE_VEC for the AIV one). `if ASCEND_IS_AIC { ... }` is an `if constexpr`, so in a
// non-template kernel both branches are type-checked in every build; value warnings (a constant
// that does not fit) are only given in the build where the branch is live, so check both builds.
#if defined(SPLIT_CORE_CUBE)
constexpr int32_t g_coreType = AscendC::AIC;
#elif defined(SPLIT_CORE_VEC)
constexpr int32_t g_coreType = AscendC::AIV;
#else
constexpr int32_t g_coreType = AscendC::MIX;
#endif
#define ASCEND_IS_AIC constexpr(g_coreType == AscendC::AIC)
#define ASCEND_IS_AIV constexpr(g_coreType == AscendC::AIV)
#define ASCEND_IS_NOT_AIC constexpr(g_coreType != AscendC::AIC)
#define ASCEND_IS_NOT_AIV constexpr(g_coreType != AscendC::AIV)

namespace AscendC {

// ---------------------------------------------------------------------------------------------
// Enumerations

enum class TPosition : uint8_t {
  GM,
  A1,
  A2,
  B1,
  B2,
  C1,
  C2,
  CO1,
  CO2,
  VECIN,
  VECOUT,
  VECCALC,
  LCM = VECCALC,
  SPM,
  SHM = SPM,
  TSCM,
  C2PIPE2GM,
  C2PIPE2LOCAL,
  MAX,
};

// Source pipe _ destination pipe.
enum class HardEvent : uint8_t {
  MTE2_MTE1,
  MTE1_MTE2,
  MTE1_M,
  M_MTE1,
  MTE2_V,
  V_MTE2,
  MTE3_V,
  V_MTE3,
  M_V,
  V_M,
  V_V,
  MTE3_MTE1,
  MTE1_MTE3,
  MTE1_V,
  MTE2_M,
  M_MTE2,
  V_MTE1,
  M_FIX,
  FIX_M,
  MTE3_MTE2,
  MTE2_MTE3,
  S_V,
  V_S,
  S_MTE2,
  MTE2_S,
  S_MTE3,
  MTE3_S,
  MTE2_FIX,
  FIX_MTE2,
  FIX_S,
  M_S,
  FIX_MTE3,
  MTE1_FIX,
  FIX_MTE1,
  FIX_FIX,
  MAX,
};

enum class RoundMode : uint8_t {
  CAST_NONE = 0,
  CAST_RINT,
  CAST_FLOOR,
  CAST_CEIL,
  CAST_ROUND,
  CAST_TRUNC,
  CAST_ODD,
};

enum class ReduceOrder : uint8_t {
  ORDER_VALUE_INDEX = 0,
  ORDER_INDEX_VALUE,
  ORDER_ONLY_VALUE,
  ORDER_ONLY_INDEX,
};

// The element type of a tensor type (the real one also unwraps TensorTrait<T>, not used here).
template <typename T>
using PrimT = T;

// Defaults the parameter structs use.
const int32_t DEFAULT_BLK_NUM = 8;
const int32_t DEFAULT_BLK_STRIDE = 1;
const uint8_t DEFAULT_REPEAT_STRIDE = 8;
const uint8_t DEFAULT_DATA_COPY_NBURST = 1;
const uint8_t DEFAULT_DATA_COPY_STRIDE = 0;
const uint8_t PAD_SIZE = 4;

// ---------------------------------------------------------------------------------------------
// Tensors and buffers

template <typename T>
class LocalTensor {
 public:
  using PrimType = PrimT<T>;
  LocalTensor();
  LocalTensor operator[](const uint32_t offset) const;
  template <typename U>
  LocalTensor<U> ReinterpretCast() const;
  uint32_t GetSize() const;
  // LocalTensor::GetValue / SetValue (asc-devkit docs/api/context/LocalTensor简介.md; SetValue:
  // atlasascendc_api_07_00102): __inout_pipe__(S), index in elements.
  PrimType GetValue(const uint32_t index) const;
  template <typename T1>
  void SetValue(const uint32_t index, const T1 value) const;
};

template <typename T>
class GlobalTensor {
 public:
  using PrimType = PrimT<T>;
  GlobalTensor();
  void SetGlobalBuffer(__gm__ PrimType* buffer, uint64_t bufferSize);
  void SetGlobalBuffer(__gm__ PrimType* buffer);
  GlobalTensor operator[](const uint64_t offset) const;
  uint64_t GetSize() const;
  // GlobalTensor::GetValue (atlasascendc_api_07_00026): a scalar read on pipe S, through the core's
  // DataCache
  PrimType GetValue(const uint64_t offset) const;
};

template <TPosition pos = TPosition::LCM>
class TBuf {
 public:
  template <typename T>
  LocalTensor<T> Get();
  template <typename T>
  LocalTensor<T> Get(uint32_t len);
};

class TPipe {
 public:
  TPipe();
  ~TPipe();
  void Init();
  template <TPosition pos>
  bool InitBuffer(TBuf<pos>& buf, uint32_t len);
  void Destroy();
  void Reset();
};

// ---------------------------------------------------------------------------------------------
// Parameter structs (fields in the documented order, with their documented types and defaults)

struct DataCopyParams {
  DataCopyParams();
  DataCopyParams(const uint16_t count, const uint16_t len, const uint16_t srcStrideIn, const uint16_t dstStrideIn);
  uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
  uint16_t blockLen = 0;
  union {
    uint16_t srcGap = 0;
    uint16_t srcStride;
  };
  union {
    uint16_t dstGap = 0;
    uint16_t dstStride;
  };
};

struct DataCopyPadParams {
  DataCopyPadParams();
  DataCopyPadParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue,
                    const uint64_t padValue);
  bool isPad = false;
  uint8_t leftPadding = 0;
  uint8_t rightPadding = 0;
  uint64_t paddingValue = 0;
};

struct DataCopyExtParams {
  DataCopyExtParams();
  DataCopyExtParams(const uint16_t count, const uint32_t len, const uint32_t srcStrideIn, const uint32_t dstStrideIn,
                    const uint32_t rsvIn);
  uint16_t blockCount = DEFAULT_DATA_COPY_NBURST;
  uint32_t blockLen = 0;
  uint32_t srcStride = DEFAULT_DATA_COPY_STRIDE;
  uint32_t dstStride = DEFAULT_DATA_COPY_STRIDE;
  uint32_t rsv = 0;
};

template <typename T>
struct DataCopyPadExtParams {
  DataCopyPadExtParams();
  DataCopyPadExtParams(const bool isPadValue, const uint8_t leftPadValue, const uint8_t rightPadValue, T padValue);
  bool isPad = false;
  uint8_t leftPadding = 0;
  uint8_t rightPadding = 0;
  T paddingValue{};  // documented default: 0
};

struct Nd2NzParams {
  Nd2NzParams();
  Nd2NzParams(const uint16_t ndNumIn, const uint16_t nValueIn, const uint16_t dValueIn,
              const uint16_t srcNdMatrixStrideIn, const uint16_t srcDValueIn, const uint16_t dstNzC0StrideIn,
              const uint16_t dstNzNStrideIn, const uint16_t dstNzMatrixStrideIn);
  uint16_t ndNum = 0;
  uint16_t nValue = 0;
  uint16_t dValue = 0;
  uint16_t srcNdMatrixStride = 0;
  uint16_t srcDValue = 0;
  uint16_t dstNzC0Stride = 0;
  uint16_t dstNzNStride = 0;
  uint16_t dstNzMatrixStride = 0;
};

struct LoadData2DParams {
  LoadData2DParams();
  LoadData2DParams(const uint16_t startIndexIn, const uint8_t repeatTimesIn, const uint16_t srcStrideIn,
                   const uint8_t sidIn, const uint16_t dstGapIn, const bool ifTransposeIn, const uint8_t addrModeIn);
  uint16_t startIndex = 0;
  uint16_t dstGap = 0;
  uint16_t srcStride = 0;
  bool ifTranspose = 0;
  uint8_t repeatTimes = 0;
  uint8_t sid = 0;
  uint8_t addrMode = 0;
};

template <typename T>
struct LoadData3DParamsV2 {
  LoadData3DParamsV2();
  LoadData3DParamsV2(const uint8_t padListIn[PAD_SIZE], const uint16_t l1HIn, const uint16_t l1WIn,
                     const uint16_t channelSizeIn, const uint16_t kExtensionIn, const uint16_t mExtensionIn,
                     const uint16_t kStartPtIn, const uint16_t mStartPtIn, const uint8_t strideWIn,
                     const uint8_t strideHIn, const uint8_t filterWIn, const uint8_t filterHIn,
                     const uint8_t dilationFilterWIn, const uint8_t dilationFilterHIn, const bool enTransposeIn,
                     const bool enSmallKIn, const T padValueIn);
  LoadData3DParamsV2(const uint8_t padListIn[PAD_SIZE], const uint16_t l1HIn, const uint16_t l1WIn,
                     const uint16_t channelSizeIn, const uint16_t kExtensionIn, const uint16_t mExtensionIn,
                     const uint16_t kStartPtIn, const uint16_t mStartPtIn, const uint8_t strideWIn,
                     const uint8_t strideHIn, const uint8_t filterWIn, const uint8_t filterHIn,
                     const uint8_t dilationFilterWIn, const uint8_t dilationFilterHIn, const bool enTransposeIn,
                     const bool enSmallKIn, const T padValueIn, const bool filterSizeWIn, const bool filterSizeHIn,
                     const bool fMatrixCtrlIn);
  uint8_t padList[PAD_SIZE] = {0};
  uint16_t l1H = 0;
  uint16_t l1W = 0;
  uint16_t channelSize = 0;
  uint16_t kExtension = 0;
  uint16_t mExtension = 0;
  uint16_t kStartPt = 0;
  uint16_t mStartPt = 0;
  uint8_t strideW = 1;
  uint8_t strideH = 1;
  uint8_t filterW = 1;
  uint8_t filterH = 1;
  uint8_t dilationFilterW = 1;
  uint8_t dilationFilterH = 1;
  bool enTranspose = false;
  bool enSmallK = false;
  T padValue{};  // documented default: 0
  bool filterSizeW = false;
  bool filterSizeH = false;
  bool fMatrixCtrl = false;
};

// Whether a Load3D call sets FMATRIX and the padding value itself (the template argument of LoadData).
struct IsResetLoad3dConfig {
  constexpr IsResetLoad3dConfig(const bool isSetFMatrixIn, const bool isSetPaddingIn)
      : isSetFMatrix(isSetFMatrixIn), isSetPadding(isSetPaddingIn) {}
  bool isSetFMatrix = true;
  bool isSetPadding = true;
};
constexpr IsResetLoad3dConfig IS_RESER_LOAD3D_DEFAULT_CONFIG = {true, true};

struct MmadParams {
  MmadParams();
  MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const bool isBiasIn, const int32_t fmOffsetIn,
             const bool enSsparseIn, const bool enWinogradAIn, const bool enWinogradBIn);
  MmadParams(const uint16_t mIn, const uint16_t nIn, const uint16_t kIn, const uint8_t unitFlagIn,
             const bool cmatrixSourceIn, const bool cmatrixInitValIn);
  uint16_t m = 0;
  uint16_t n = 0;
  uint16_t k = 0;
  bool isBias = false;
  int32_t fmOffset = 0;
  bool enSsparse = false;
  bool enWinogradA = false;
  bool enWinogradB = false;
  uint8_t unitFlag = 0;
  bool kDirectionAlign = false;
  bool cmatrixSource = false;
  bool cmatrixInitVal = true;
};

template <typename T>
struct InitConstValueParams {
  InitConstValueParams();
  InitConstValueParams(const uint16_t repeatTimesIn, const uint16_t blockNumIn, const uint16_t dstGapIn,
                       const T initValueIn);
  InitConstValueParams(const uint16_t repeatTimesIn, const T initValueIn);
  uint16_t repeatTimes = 0;
  uint16_t blockNum = 0;
  uint16_t dstGap = 0;
  T initValue{};  // documented default: 0
};

enum class CO2Layout : uint8_t {
  NZ = 0,
  ROW_MAJOR,
  COLUMN_MAJOR,
};

struct FixpipeConfig {
  CO2Layout format;
};
constexpr FixpipeConfig CFG_NZ = {CO2Layout::NZ};
constexpr FixpipeConfig CFG_ROW_MAJOR = {CO2Layout::ROW_MAJOR};
constexpr FixpipeConfig CFG_COLUMN_MAJOR = {CO2Layout::COLUMN_MAJOR};

struct FixpipeParamsV220 {
  FixpipeParamsV220();
  FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                    const uint32_t dstStrideIn, const bool reluEnIn);
  FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                    const uint32_t dstStrideIn, const bool reluEnIn, const QuantMode_t quantPreIn,
                    const int64_t deqScalarIn, const uint16_t ndNumIn, const uint16_t srcNdStrideIn,
                    const uint16_t dstNdStrideIn, const uint8_t unitFlagIn);
  FixpipeParamsV220(const uint16_t nSizeIn, const uint16_t mSizeIn, const uint16_t srcStrideIn,
                    const uint32_t dstStrideIn, const bool reluEnIn, const QuantMode_t quantPreIn,
                    const int64_t deqScalarIn, const uint16_t ndNumIn, const uint16_t srcNdStrideIn,
                    const uint16_t dstNdStrideIn, const uint8_t unitFlagIn, const bool isChannelSplitIn);
  uint16_t nSize = 0;
  uint16_t mSize = 0;
  uint16_t srcStride = 0;
  uint32_t dstStride = 0;
  QuantMode_t quantPre = QuantMode_t::NoQuant;
  uint64_t deqScalar;
  uint16_t ndNum = 1;
  uint16_t srcNdStride = 0;
  uint16_t dstNdStride = 0;
  bool reluEn = false;
  uint8_t unitFlag = 0;
  bool isChannelSplit = false;
};

struct BinaryRepeatParams {
  BinaryRepeatParams();
  BinaryRepeatParams(const uint8_t dstBlkStrideIn, const uint8_t src0BlkStrideIn, const uint8_t src1BlkStrideIn,
                     const uint8_t dstRepStrideIn, const uint8_t src0RepStrideIn, const uint8_t src1RepStrideIn);
  uint32_t blockNumber = DEFAULT_BLK_NUM;
  uint8_t dstBlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src0BlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src1BlkStride = DEFAULT_BLK_STRIDE;
  uint8_t dstRepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t src0RepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t src1RepStride = DEFAULT_REPEAT_STRIDE;
  bool repeatStrideMode = false;
  bool strideSizeMode = false;
};

struct UnaryRepeatParams {
  UnaryRepeatParams();
  UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn, const uint8_t dstRepStrideIn,
                    const uint8_t srcRepStrideIn);
  UnaryRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t srcBlkStrideIn, const uint8_t dstRepStrideIn,
                    const uint8_t srcRepStrideIn, const bool halfBlockIn);
  uint32_t blockNumber = DEFAULT_BLK_NUM;
  uint16_t dstBlkStride = DEFAULT_BLK_STRIDE;
  uint16_t srcBlkStride = DEFAULT_BLK_STRIDE;
  uint8_t dstRepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t srcRepStride = DEFAULT_REPEAT_STRIDE;
  bool repeatStrideMode = false;
  bool strideSizeMode = false;
  bool halfBlock = false;
};

struct BrcbRepeatParams {
  BrcbRepeatParams();
  BrcbRepeatParams(const uint16_t dstBlkStrideIn, const uint16_t dstRepStrideIn);
  uint32_t blockNumber = DEFAULT_BLK_NUM;
  uint16_t dstRepStride = DEFAULT_REPEAT_STRIDE;
  uint16_t dstBlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src0BlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src1BlkStride = DEFAULT_BLK_STRIDE;
  uint8_t src0RepStride = DEFAULT_REPEAT_STRIDE;
  uint8_t src1RepStride = DEFAULT_REPEAT_STRIDE;
  bool repeatStrideMode = false;
  bool strideSizeMode = false;
};

// ---------------------------------------------------------------------------------------------
// System values

int64_t GetBlockNum();
int64_t GetBlockIdx();
int64_t GetSubBlockIdx();

// ---------------------------------------------------------------------------------------------
// Data movement

template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const Nd2NzParams& intriParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const Nd2NzParams& intriParams);
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& repeatParams);
template <typename T, typename U>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<U>& src, const DataCopyParams& repeatParams);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const uint32_t count);
template <typename T>
void DataCopy(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);
template <typename T>
void DataCopy(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint32_t count);

template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyParams& dataCopyParams,
                 const DataCopyPadParams& padParams);
template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& dataCopyParams);
template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyParams& dataCopyParams,
                 const Nd2NzParams& nd2nzParams);
template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& dataCopyParams,
                 const DataCopyPadExtParams<T>& padParams);
template <typename T, typename U,
          typename std::enable_if<std::is_same<PrimT<T>, U>::value && (!std::is_same<T, U>::value), bool>::type = true>
void DataCopyPad(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const DataCopyExtParams& dataCopyParams,
                 const DataCopyPadExtParams<U>& padParams);
template <typename T>
void DataCopyPad(const GlobalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& dataCopyParams);
template <typename T>
void DataCopyPad(const LocalTensor<T>& dst, const LocalTensor<T>& src, const DataCopyExtParams& dataCopyParams,
                 const Nd2NzParams& nd2nzParams);

// ---------------------------------------------------------------------------------------------
// Cube

template <typename T, typename U = PrimT<T>,
          typename std::enable_if<std::is_same<PrimT<T>, U>::value, bool>::type = true>
void InitConstValue(const LocalTensor<T>& dst, const InitConstValueParams<U>& initConstValueParams);

template <typename T>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData2DParams& loadDataParams);
template <typename T>
void LoadData(const LocalTensor<T>& dst, const GlobalTensor<T>& src, const LoadData2DParams& loadDataParams);
template <typename T, const IsResetLoad3dConfig& defaultConfig = IS_RESER_LOAD3D_DEFAULT_CONFIG,
          typename U = PrimT<T>, typename std::enable_if<std::is_same<PrimT<T>, U>::value, bool>::type = true>
void LoadData(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LoadData3DParamsV2<U>& loadDataParams);

template <typename T, typename U, typename S>
void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
          const MmadParams& mmadParams);
template <typename T, typename U, typename S, typename V>
void Mmad(const LocalTensor<T>& dst, const LocalTensor<U>& fm, const LocalTensor<S>& filter,
          const LocalTensor<V>& bias, const MmadParams& mmadParams);

template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const LocalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams);
template <typename T, typename U, const FixpipeConfig& config = CFG_ROW_MAJOR>
void Fixpipe(const GlobalTensor<T>& dst, const LocalTensor<U>& src, const FixpipeParamsV220& intriParams);

// ---------------------------------------------------------------------------------------------
// Vector: each call in its level-0 forms (mask bits or mask count, repeat count, repeat strides)
// and its level-2 form (element count).
//
// Element types: where the real headers reject an unsupported element type at compile time (a
// static_assert in the dav-c220 implementation), so do these, in the same forms and builds: the
// level-0 forms of the binary and unary calls and every form of the tensor-scalar calls, in code
// the real implementation guards with `if ASCEND_IS_AIV` (so only in the AIV build), and every
// form of Duplicate. Everywhere else the real check is a run-time assertion and is not made here.

namespace tw_check {
template <typename T, typename... Supported>
constexpr bool one_of = (std::is_same<T, Supported>::value || ...);
}  // namespace tw_check

#define TW_ASCENDC_AIV_DTYPE_CHECK(name, ...)                                                          \
  {                                                                                                    \
    if constexpr (g_coreType == AIV)                                                                   \
      static_assert(tw_check::one_of<T, __VA_ARGS__>, #name ": element type not supported on dav-c220 " \
                                                              "(supported: " #__VA_ARGS__ ")");        \
  }

#define TW_ASCENDC_BINARY(name, ...)                                                                      \
  template <typename T, bool isSetMask = true>                                                            \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,            \
            uint64_t mask[], const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)            \
      TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                                                       \
  template <typename T, bool isSetMask = true>                                                            \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,            \
            uint64_t mask, const uint8_t repeatTime, const BinaryRepeatParams& repeatParams)              \
      TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                                                       \
  template <typename T>                                                                                   \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1,            \
            const int32_t& count);
TW_ASCENDC_BINARY(Add, half, float, int16_t, int32_t)
TW_ASCENDC_BINARY(Sub, half, float, int16_t, int32_t)
TW_ASCENDC_BINARY(Mul, half, float, int16_t, int32_t)
TW_ASCENDC_BINARY(Div, half, float)
TW_ASCENDC_BINARY(Max, half, float, int16_t, int32_t)
TW_ASCENDC_BINARY(Min, half, float, int16_t, int32_t)
// And.md / Or.md (Atlas A2): int16_t / uint16_t only
TW_ASCENDC_BINARY(And, int16_t, uint16_t)
TW_ASCENDC_BINARY(Or, int16_t, uint16_t)
#undef TW_ASCENDC_BINARY

// Tensor-scalar calls: the scalar is either the element type or (second form) a type whose
// element type it is.
#define TW_ASCENDC_SCALAR(name, ...)                                                                     \
  template <typename T, bool isSetMask = true>                                                           \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, uint64_t mask[], \
            const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)                             \
      TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                                                      \
  template <typename T, typename U, bool isSetMask = true,                                               \
            typename std::enable_if<std::is_same<PrimT<T>, U>::value, bool>::type = true>                \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const U& scalarValue, uint64_t mask[], \
            const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)                             \
      TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                                                      \
  template <typename T, bool isSetMask = true>                                                           \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue, uint64_t mask,   \
            const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)                             \
      TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                                                      \
  template <typename T, typename U, bool isSetMask = true,                                               \
            typename std::enable_if<std::is_same<PrimT<T>, U>::value, bool>::type = true>                \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const U& scalarValue, uint64_t mask,   \
            const uint8_t repeatTime, const UnaryRepeatParams& repeatParams)                             \
      TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                                                      \
  template <typename T, bool isSetMask = true>                                                           \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const T& scalarValue,                  \
            const int32_t& count) TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)                          \
  template <typename T, typename U, bool isSetMask = true,                                               \
            typename std::enable_if<std::is_same<PrimT<T>, U>::value, bool>::type = true>                \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const U& scalarValue,                  \
            const int32_t& count) TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)
TW_ASCENDC_SCALAR(Adds, half, float, int16_t, int32_t)
TW_ASCENDC_SCALAR(Muls, half, float, int16_t, int32_t)
TW_ASCENDC_SCALAR(Maxs, half, float, int16_t, int32_t)
TW_ASCENDC_SCALAR(Mins, half, float, int16_t, int32_t)
// ShiftLeft.md / ShiftRight.md (Atlas A2): the same three forms, int16/uint16/int32/uint32
TW_ASCENDC_SCALAR(ShiftLeft, int16_t, uint16_t, int32_t, uint32_t)
TW_ASCENDC_SCALAR(ShiftRight, int16_t, uint16_t, int32_t, uint32_t)
#undef TW_ASCENDC_SCALAR

#define TW_ASCENDC_UNARY(name, ...)                                                                     \
  template <typename T, bool isSetMask = true>                                                          \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask[], const uint8_t repeatTime, \
            const UnaryRepeatParams& repeatParams) TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)        \
  template <typename T, bool isSetMask = true>                                                          \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, uint64_t mask, const uint8_t repeatTime, \
            const UnaryRepeatParams& repeatParams) TW_ASCENDC_AIV_DTYPE_CHECK(name, __VA_ARGS__)        \
  template <typename T>                                                                                 \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t& count);
TW_ASCENDC_UNARY(Exp, half, float)
TW_ASCENDC_UNARY(Ln, half, float)
TW_ASCENDC_UNARY(Sqrt, half, float)
TW_ASCENDC_UNARY(Rsqrt, half, float)
TW_ASCENDC_UNARY(Abs, half, float)
TW_ASCENDC_UNARY(Relu, half, float, int32_t)
TW_ASCENDC_UNARY(Reciprocal, half, float)
#undef TW_ASCENDC_UNARY
#undef TW_ASCENDC_AIV_DTYPE_CHECK

template <typename T, typename U, bool isSetMask = true>
void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint64_t mask[],
          const uint8_t repeatTime, const UnaryRepeatParams& repeatParams);
template <typename T, typename U, bool isSetMask = true>
void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint64_t mask,
          const uint8_t repeatTime, const UnaryRepeatParams& repeatParams);
template <typename T, typename U>
void Cast(const LocalTensor<T>& dst, const LocalTensor<U>& src, const RoundMode& roundMode, const uint32_t count);

// Compare / CompareScalar / Select: the prototypes of the AscendC Compare and Select pages
// (docs/ascend.md "Data-dependent selects"); dst of a compare and selMask are uint8_t bit masks.
// The enumerators are in the documented order; their numeric values are not checked here.
enum class CMPMODE : uint8_t { LT = 0, GT, EQ, LE, GE, NE };
enum class SELMODE : uint8_t { VSEL_CMPMASK_SPR = 0, VSEL_TENSOR_SCALAR_MODE, VSEL_TENSOR_TENSOR_MODE };
template <typename T, typename U>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
             uint32_t count);
template <typename T, typename U, bool isSetMask = true>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
             const uint64_t mask[], uint8_t repeatTime, const BinaryRepeatParams& repeatParams);
template <typename T, typename U, bool isSetMask = true>
void Compare(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const LocalTensor<T>& src1, CMPMODE cmpMode,
             const uint64_t mask, uint8_t repeatTime, const BinaryRepeatParams& repeatParams);
template <typename T, typename U>
void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode,
                   uint32_t count);
template <typename T, typename U, bool isSetMask = true>
void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode,
                   const uint64_t mask[], uint8_t repeatTime, const UnaryRepeatParams& repeatParams);
template <typename T, typename U, bool isSetMask = true>
void CompareScalar(const LocalTensor<U>& dst, const LocalTensor<T>& src0, const T src1Scalar, CMPMODE cmpMode,
                   const uint64_t mask, uint8_t repeatTime, const UnaryRepeatParams& repeatParams);
template <typename T, typename U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0, T src1,
            SELMODE selMode, uint32_t count);
template <typename T, typename U>
void Select(const LocalTensor<T>& dst, const LocalTensor<U>& selMask, const LocalTensor<T>& src0,
            const LocalTensor<T>& src1, SELMODE selMode, uint32_t count);

#define TW_ASCENDC_DUPLICATE_DTYPE_CHECK                                                                  \
  {                                                                                                        \
    static_assert(tw_check::one_of<T, half, bfloat16_t, int16_t, uint16_t, int32_t, uint32_t, float>,      \
                  "Duplicate: element type not supported on dav-c220 (supported: half, bfloat16_t, int16_t, " \
                  "uint16_t, int32_t, uint32_t, float)");                                                  \
  }
template <typename T, bool isSetMask = true>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, uint64_t mask, const uint8_t repeatTime,
               const uint16_t dstBlockStride, const uint8_t dstRepeatStride) TW_ASCENDC_DUPLICATE_DTYPE_CHECK
template <typename T, bool isSetMask = true>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, uint64_t mask[], const uint8_t repeatTime,
               const uint16_t dstBlockStride, const uint8_t dstRepeatStride) TW_ASCENDC_DUPLICATE_DTYPE_CHECK
template <typename T>
void Duplicate(const LocalTensor<T>& dst, const T& scalarValue, const int32_t& count) TW_ASCENDC_DUPLICATE_DTYPE_CHECK
#undef TW_ASCENDC_DUPLICATE_DTYPE_CHECK

// CreateVecIndex (docs: CreateVecIndex.md, Atlas A2: int16_t/half/int32_t/float): dst[e] = firstValue + e.
// The count form takes dst by value, the level-0 forms by reference (as documented).
template <typename T>
void CreateVecIndex(LocalTensor<T> dst, const T& firstValue, uint32_t count);
template <typename T>
void CreateVecIndex(LocalTensor<T>& dst, const T& firstValue, uint64_t mask, uint8_t repeatTime, uint16_t dstBlkStride,
                    uint8_t dstRepStride);

// WholeReduceSum has no ReduceOrder; Max and Min take one (default: value then index).
template <typename T, bool isSetMask = true>
void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask[],
                    const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                    const int32_t srcRepStride);
template <typename T, bool isSetMask = true>
void WholeReduceSum(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask,
                    const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,
                    const int32_t srcRepStride);
#define TW_ASCENDC_WHOLE_REDUCE(name)                                                                        \
  template <typename T, bool isSetMask = true>                                                               \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const uint64_t mask[],                     \
            const int32_t repeatTime, const int32_t dstRepStride, const int32_t srcBlkStride,                \
            const int32_t srcRepStride, ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX);                 \
  template <typename T, bool isSetMask = true>                                                               \
  void name(const LocalTensor<T>& dst, const LocalTensor<T>& src, const int32_t mask, const int32_t repeatTime, \
            const int32_t dstRepStride, const int32_t srcBlkStride, const int32_t srcRepStride,              \
            ReduceOrder order = ReduceOrder::ORDER_VALUE_INDEX);
TW_ASCENDC_WHOLE_REDUCE(WholeReduceMax)
TW_ASCENDC_WHOLE_REDUCE(WholeReduceMin)
#undef TW_ASCENDC_WHOLE_REDUCE

template <typename T>
void Brcb(const LocalTensor<T>& dst, const LocalTensor<T>& src0, const uint8_t repeatTime,
          const BrcbRepeatParams& repeatParams);

// Gather.md (the "first count elements" form): srcOffset holds uint32 byte offsets.
template <typename T>
void Gather(const LocalTensor<T>& dst, const LocalTensor<T>& src, const LocalTensor<uint32_t>& srcOffset,
            const uint32_t srcBaseAddr, const uint32_t count);

// ---------------------------------------------------------------------------------------------
// Synchronisation

template <HardEvent event>
void SetFlag(int32_t eventID);
template <HardEvent event>
void WaitFlag(int32_t eventID);
template <pipe_t pipe>
void PipeBarrier();
template <uint8_t modeId, pipe_t pipe>
void CrossCoreSetFlag(uint16_t flagId);
template <uint8_t modeId = 0, pipe_t pipe = PIPE_S>
void CrossCoreWaitFlag(uint16_t flagId);

// ---------------------------------------------------------------------------------------------
// Atomic add into GM (include/basic_api/kernel_operator_set_atomic_intf.h): the GM-bound copies
// (UB / L0C / L1 -> GM) after SetAtomicAdd<T>() add into GM; SetAtomicNone() ends the mode.

template <typename T>
void SetAtomicAdd();
void SetAtomicNone();

}  // namespace AscendC
