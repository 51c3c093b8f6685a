// MOCK of the AscendC ("kernel_operator.h") and ACL ("acl/acl.h", "aclrtlaunch_*.h") names that
// Tilewright's AscendC printer emits, used only by tests/cpp/test_ascendc_printer.cpp to run
// `g++ -fsyntax-only` on printed kernels and host launchers.
//
// This checks C++ syntax and that the printed code uses only the names declared here. It does NOT
// check semantics, parameter types or the real signatures of CANN's API: functions are templates
// taking anything. Written from the documented API names; it is not CANN code.
#pragma once

#include <cstddef>
#include <cstdint>

#define __global__
#define __aicore__
#define __gm__
using GM_ADDR = uint8_t*;

namespace tw_mock {
inline int core_type = 0;  // 0 = AIC, 1 = AIV
}
#define ASCEND_IS_AIC (::tw_mock::core_type == 0)
#define ASCEND_IS_AIV (::tw_mock::core_type == 1)

enum KernelTypeMock { KERNEL_TYPE_AIV_ONLY, KERNEL_TYPE_AIC_ONLY, KERNEL_TYPE_MIX_AIC_1_2 };
#define KERNEL_TASK_TYPE_DEFAULT(type) static_cast<void>(type)

enum pipe_t { PIPE_S, PIPE_V, PIPE_M, PIPE_MTE1, PIPE_MTE2, PIPE_MTE3, PIPE_FIX, PIPE_ALL };

namespace AscendC {

struct half {
  template <class T>
  half(T) {}
  half() = default;
};
struct bfloat16_t {
  template <class T>
  bfloat16_t(T) {}
  bfloat16_t() = default;
};

enum class TPosition { GM, A1, A2, B1, B2, CO1, CO2, VECIN, VECOUT, VECCALC };
enum class HardEvent {
  MTE2_MTE1, MTE1_MTE2, MTE1_M, M_MTE1, MTE2_M, M_MTE2, M_FIX, FIX_M, FIX_MTE1, MTE1_FIX, MTE1_MTE3,
  MTE2_V, V_MTE2, V_MTE3, MTE3_V, MTE2_MTE3, MTE3_MTE2, MTE3_MTE1, S_V, V_S, S_MTE2, MTE2_S, S_MTE3, MTE3_S
};
enum class RoundMode { CAST_NONE, CAST_RINT, CAST_FLOOR, CAST_CEIL, CAST_ROUND, CAST_TRUNC, CAST_ODD };
enum class ReduceOrder { ORDER_VALUE_INDEX, ORDER_INDEX_VALUE, ORDER_ONLY_VALUE, ORDER_ONLY_INDEX };
enum QuantMode_t { NoQuant, F322F16, F322BF16, DEQF16, VDEQF16, QF322B8_PRE, VQF322B8_PRE, REQ8, VREQ8 };

template <class T>
class LocalTensor {
 public:
  LocalTensor operator[](int64_t) const { return *this; }
  template <class U>
  LocalTensor<U> ReinterpretCast() const { return {}; }
};
template <class T>
class GlobalTensor {
 public:
  void SetGlobalBuffer(T*) {}
  GlobalTensor operator[](int64_t) const { return *this; }
};
template <TPosition P>
class TBuf {
 public:
  template <class T>
  LocalTensor<T> Get() { return {}; }
};
class TPipe {
 public:
  template <class B>
  void InitBuffer(B&, uint32_t) {}
  void Destroy() {}
};

struct Nd2NzParams {
  uint16_t ndNum, nValue, dValue, srcNdMatrixStride, srcDValue, dstNzC0Stride, dstNzNStride, dstNzMatrixStride;
};
struct LoadData2DParams {
  uint16_t startIndex;
  uint8_t repeatTimes;
  uint16_t srcStride;
  uint8_t sid;
  uint16_t dstGap;
  bool ifTranspose;
  uint8_t addrMode;
};
template <class T>
struct LoadData3DParamsV2 {
  uint8_t padList[4];
  uint16_t l1H, l1W, channelSize, kExtension, mExtension, kStartPt, mStartPt;
  uint8_t strideW, strideH, filterW, filterH, dilationFilterW, dilationFilterH;
  bool enTranspose, enSmallK;
  T padValue;
  bool filterSizeW, filterSizeH, fMatrixCtrl;
};
struct MmadParams {
  uint16_t m, n, k;
  bool isBias, cmatrixInitVal, cmatrixSource;
};
struct FixpipeParamsV220 {
  uint16_t nSize, mSize, srcStride;
  uint32_t dstStride;
  QuantMode_t quantPre;
  bool reluEn;
  uint16_t ndNum;
};
struct FixpipeConfig {
  int format;
};
inline constexpr FixpipeConfig CFG_ROW_MAJOR{1};
struct DataCopyParams {
  uint16_t blockCount, blockLen, srcStride, dstStride;
};
struct DataCopyExtParams {
  uint16_t blockCount;
  uint32_t blockLen, srcStride, dstStride, rsv;
};
template <class T>
struct DataCopyPadExtParams {
  bool isPad;
  uint8_t leftPadding, rightPadding;
  T paddingValue;
};
template <class T>
struct InitConstValueParams {
  uint16_t repeatTimes, blockNum, dstGap;
  T initValue;
};
struct BinaryRepeatParams {
  BinaryRepeatParams(int, int, int, int, int, int) {}
};
struct UnaryRepeatParams {
  UnaryRepeatParams(int, int, int, int) {}
};
struct BrcbRepeatParams {
  BrcbRepeatParams(int, int) {}
};

inline int64_t GetBlockIdx() { return 0; }
inline int64_t GetSubBlockIdx() { return 0; }
inline int64_t GetBlockNum() { return 1; }

#define TW_MOCK_ANY(name) \
  template <class... A>   \
  void name(A&&...) {}
TW_MOCK_ANY(DataCopy)
TW_MOCK_ANY(DataCopyPad)
TW_MOCK_ANY(InitConstValue)
TW_MOCK_ANY(LoadData)
TW_MOCK_ANY(Mmad)
TW_MOCK_ANY(Add)
TW_MOCK_ANY(Sub)
TW_MOCK_ANY(Mul)
TW_MOCK_ANY(Div)
TW_MOCK_ANY(Max)
TW_MOCK_ANY(Min)
TW_MOCK_ANY(Adds)
TW_MOCK_ANY(Muls)
TW_MOCK_ANY(Maxs)
TW_MOCK_ANY(Mins)
TW_MOCK_ANY(Exp)
TW_MOCK_ANY(Ln)
TW_MOCK_ANY(Sqrt)
TW_MOCK_ANY(Rsqrt)
TW_MOCK_ANY(Abs)
TW_MOCK_ANY(Relu)
TW_MOCK_ANY(Reciprocal)
TW_MOCK_ANY(Cast)
TW_MOCK_ANY(Duplicate)
TW_MOCK_ANY(WholeReduceSum)
TW_MOCK_ANY(WholeReduceMax)
TW_MOCK_ANY(WholeReduceMin)
TW_MOCK_ANY(Brcb)
#undef TW_MOCK_ANY

template <class T, class U, const FixpipeConfig& C, class... A>
void Fixpipe(A&&...) {}
template <HardEvent E>
void SetFlag(int32_t) {}
template <HardEvent E>
void WaitFlag(int32_t) {}
template <pipe_t P>
void PipeBarrier() {}
template <uint8_t Mode, pipe_t P>
void CrossCoreSetFlag(uint16_t) {}
template <uint8_t Mode, pipe_t P>
void CrossCoreWaitFlag(uint16_t) {}

}  // namespace AscendC

#ifdef TW_MOCK_ACL
using aclError = int;
using aclrtStream = void*;
enum aclrtMemMallocPolicy { ACL_MEM_MALLOC_HUGE_FIRST, ACL_MEM_MALLOC_HUGE_ONLY, ACL_MEM_MALLOC_NORMAL_ONLY };
enum aclrtMemcpyKind { ACL_MEMCPY_HOST_TO_HOST, ACL_MEMCPY_HOST_TO_DEVICE, ACL_MEMCPY_DEVICE_TO_HOST, ACL_MEMCPY_DEVICE_TO_DEVICE };
inline constexpr aclError ACL_SUCCESS = 0;
inline aclError aclInit(const char*) { return 0; }
inline aclError aclFinalize() { return 0; }
inline aclError aclrtSetDevice(int32_t) { return 0; }
inline aclError aclrtResetDevice(int32_t) { return 0; }
inline aclError aclrtCreateStream(aclrtStream*) { return 0; }
inline aclError aclrtDestroyStream(aclrtStream) { return 0; }
inline aclError aclrtSynchronizeStream(aclrtStream) { return 0; }
inline aclError aclrtMalloc(void**, size_t, aclrtMemMallocPolicy) { return 0; }
inline aclError aclrtFree(void*) { return 0; }
inline aclError aclrtMemset(void*, size_t, int32_t, size_t) { return 0; }
inline aclError aclrtMemcpy(void*, size_t, const void*, size_t, aclrtMemcpyKind) { return 0; }
namespace tw_mock {
template <class... A>
uint32_t launch(uint32_t, aclrtStream, A...) { return 0; }
}  // namespace tw_mock
#define ACLRT_LAUNCH_KERNEL(kernel) ::tw_mock::launch
#endif
