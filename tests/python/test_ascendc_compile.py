"""Compiles every printed AscendC golden (tests/golden/ascendc/*_kernel.cpp and *_host.cpp) with
g++ -fsyntax-only against tests/ascendc/include, Tilewright's declaration-faithful stand-ins for
CANN's kernel_operator.h and acl/acl.h, and proves that those headers reject what the real API
rejects: wrong argument counts, swapped parameter structs, constants that do not fit a field,
illegal template arguments, mixed element types.

The host launcher includes aclrtlaunch_<kernel>.h, which CANN's ascendc_library() generates from
the kernel's signature; launch_header() generates it here the same way.

This checks names, signatures, overload resolution, struct fields and their widths. It does not
check values known only at run time, semantics (round-mode legality, dtype support, ranges of
runtime counts), address spaces, or anything bisheng does beyond C++17 type checking.
"""
import glob
import os
import re
import shutil
import subprocess

import pytest

from tw_test_util import ROOT

GOLDEN = os.path.join(ROOT, "tests", "golden", "ascendc")
INCLUDE = os.path.join(ROOT, "tests", "ascendc", "include")

# Errors are what bisheng rejects (narrowing in braces) plus what is certainly a bug (a constant
# that does not fit its parameter: -Woverflow), and every other -Wall warning. Unused variables and
# functions are allowed: the printer emits the block index and the index helpers unconditionally.
FLAGS = ["-std=c++17", "-fsyntax-only", "-Wall", "-Werror", "-Werror=narrowing", "-Werror=overflow",
         "-Wno-unused-variable", "-Wno-unused-function"]

KERNELS = sorted(glob.glob(os.path.join(GOLDEN, "*_kernel.cpp")))
HOSTS = sorted(glob.glob(os.path.join(GOLDEN, "*_host.cpp")))

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not found")

ENTRY = re.compile(r'extern\s+"C"\s+__global__\s+__aicore__\s+void\s+(\w+)\s*\(([^)]*)\)')


def kernel_signature(source):
    """(name, [(type, name), ...]) of the kernel entry (`extern "C" __global__ __aicore__ void ...`)."""
    m = ENTRY.search(source)
    assert m, "no extern \"C\" __global__ __aicore__ entry found"
    params = []
    for p in filter(None, (s.strip() for s in m.group(2).split(","))):
        pm = re.fullmatch(r"(.*?[\s*&])(\w+)", p)
        assert pm, f"cannot split parameter {p!r}"
        params.append((pm.group(1).strip(), pm.group(2)))
    return m.group(1), params


def launch_header(kernel_source):
    """(file name, text) of aclrtlaunch_<kernel>.h as ascendc_library() generates it: an extern "C"
    function aclrtlaunch_<kernel> returning uint32_t, taking blockDim and the stream first, then the
    kernel's parameters with every global-memory pointer as void* (renamed _blockDim/_stream when
    the kernel already uses those names), and the ACLRT_LAUNCH_KERNEL(k) macro naming it."""
    name, params = kernel_signature(kernel_source)
    names = {n for _, n in params}
    args = ["uint32_t " + ("_blockDim" if "blockDim" in names else "blockDim"),
            "aclrtStream " + ("_stream" if "stream" in names else "stream")]
    for t, n in params:
        is_gm_pointer = t == "GM_ADDR" or ("__gm__" in t and t.endswith("*"))
        args.append(("void*" if is_gm_pointer else t) + " " + n)
    guard = f"HEADER_ACLRTLAUNCH_{name.upper()}_H"
    text = (f"#ifndef {guard}\n#define {guard}\n#include \"acl/acl_base.h\"\n\n"
            "#ifndef ACLRT_LAUNCH_KERNEL\n#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func\n#endif\n\n"
            f"extern \"C\" uint32_t aclrtlaunch_{name}({', '.join(args)});\n#endif\n")
    return f"aclrtlaunch_{name}.h", text


# A kernel is compiled as ascendc_library compiles it: once for the AIC and once for the AIV (each
# build type-checks both `if ASCEND_IS_AIC/AIV` branches, but warns only about the live one).
KERNEL_BUILDS = (["-DSPLIT_CORE_CUBE"], ["-DSPLIT_CORE_VEC"])
HOST_BUILDS = ([],)


def compile_cpp(source, tmp_path, file_name="kernel.cpp", extra_headers=(), builds=KERNEL_BUILDS):
    """Runs g++ -fsyntax-only on `source` against the headers once per build (a list of extra
    flags); returns (0 if every build succeeded, their output)."""
    for hname, htext in extra_headers:
        (tmp_path / hname).write_text(htext)
    src = tmp_path / file_name
    src.write_text(source)
    rc, out = 0, ""
    for extra in builds:
        r = subprocess.run(["g++", *FLAGS, *extra, "-I", str(tmp_path), "-I", INCLUDE, str(src)],
                           capture_output=True, text=True, timeout=120)
        rc, out = rc or r.returncode, out + r.stdout + r.stderr
    return rc, out


def read(path):
    with open(path) as f:
        return f.read()


def test_every_golden_is_checked():
    # The globs must find the printed projects; a kernel without host (all_kinds) is allowed.
    assert len(KERNELS) >= 10 and len(HOSTS) >= 9
    for h in HOSTS:
        assert os.path.exists(h.replace("_host.cpp", "_kernel.cpp")), h


@pytest.mark.parametrize("path", KERNELS, ids=os.path.basename)
def test_golden_kernel_compiles(path, tmp_path):
    rc, out = compile_cpp(read(path), tmp_path, os.path.basename(path))
    assert rc == 0 and out == "", f"{os.path.basename(path)} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("case", ["masked_fill", "tiles_both_sides", "bool_mask"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_data_dependent_select_kernel_compiles(case, dtype, tmp_path):
    """The Compare / CompareScalar / Select calls of a data-dependent T.where (test_where_data.py)."""
    import test_where_data
    k = test_where_data.elementwise(19, 40, 8, 16, dtype, "ascend910b", case, "bool" if case == "bool_mask" else "uint8")
    src = k.get_source("ascendc")
    assert "Select(" in src
    rc, out = compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", f"{case} {dtype} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("case", ["xor", "scalars"])
def test_int32_bitwise_kernel_compiles(case, tmp_path):
    """int32 & | ^ (test_int_ops.py): And / Or on ReinterpretCast<int16_t>() views, Duplicate of the
    scalar, the int32 Sub of ^."""
    import test_int_ops as t
    import tilewright as tw
    k = t.binary_kernel("xor", "int32", 300, 64) if case == "xor" else t.bitwise_scalar_kernel(289, 128)
    src = tw.compile(k, target="ascend910b").get_source("ascendc")
    assert "And(" in src and "Or(" in src and "ReinterpretCast<int16_t>()" in src
    rc, out = compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", f"{case} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("case", ["global", "int_where", "argmax"])
def test_index_vector_kernel_compiles(case, tmp_path):
    """CreateVecIndex (the loop index as a value) and the int32 select's Cast / Mul / Add calls
    (test_iota_argmax.py)."""
    import test_iota_argmax as t
    if case == "global":
        k = t.index_values(13, 37, 8, 16, "global", target="ascend910b")
    elif case == "int_where":
        k = t.int_where(13, 37, 8, 16, "tiles", target="ascend910b")
    else:
        k = t.arg_rows(13, 37, 8, "argmax", target="ascend910b")
    src = k.get_source("ascendc")
    assert ("CreateVecIndex(" in src) == (case != "int_where")
    assert ("Select(" in src) == (case != "global")


@pytest.mark.parametrize("case", ["rows", "strided", "one_per_row"])
def test_gather_kernel_compiles(case, tmp_path):
    """The Gather calls (and the iota / offset arithmetic) of test_gather.py's kernels."""
    import test_gather
    k = {"rows": lambda: test_gather.rows_gather(19, 37, 21, 8, "float16", "ascend910b", "clamped_shifted"),
         "strided": lambda: test_gather.strided(21, 64, 8, "bfloat16", "ascend910b"),
         "one_per_row": lambda: test_gather.label_pick(13, 29, 8, "ascend910b")}[case]()
    src = k.get_source("ascendc")
    assert "Gather(" in src and ".ReinterpretCast<uint32_t>()" in src
    rc, out = compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", f"{case} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_moe_grouped_gemm_kernel_compiles(dtype, tmp_path):
    """examples/moe.py grouped_gemm: a DataCopy (Nd2Nz) into row r of an L1 tile and the
    InitConstValue of one row (repeatTimes strips of one block, dstGap the other rows)."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import moe
    k = moe.grouped_gemm(37, 80, 48, 3, 1, block_M=16, dtype=dtype, target="ascend910b")
    src = k.get_source("ascendc")
    assert "InitConstValue(a[(r * 16)]" in src, src
    rc, out = compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", f"grouped_gemm {dtype} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("case", ["store_head_float32", "store_head_int8", "l1_columns"])
def test_stores_and_operands_before_the_tensor_compile(case, tmp_path):
    """test_ascend_negative_origin.py's kernels: a store before column 0 at an unaligned start (the
    head's GetValue / SetValue into the scratch tile and its DataCopyPad, session 17) and a gemm
    operand and result clipped in whole C0 strips / 16-column fractals."""
    import tilewright as tw
    import test_ascend_negative_origin as neg
    if case == "l1_columns":
        k = tw.compile(neg.gemm_cols(45, 72, 48, 16, 32, 16, "float16"), target="ascend910b", out_idx=[-1])
        want = ["DataCopy(", "Fixpipe<"]
    else:
        k = neg.shifted_cols(3, case.rsplit("_", 1)[1], "ascend910b", True)
        want = [".GetValue(", ".SetValue(", "DataCopyPad("]
    src = k.get_source("ascendc")
    for w in want:
        assert w in src, w
    rc, out = compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", f"{case} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("case", ["combine_splits", "qk_rope_proj"])
def test_combine_and_rope_projection_kernels_compile(case, tmp_path):
    """examples/paged_attention.py combine_splits (GetValue of UB tiles, Muls by their quotient, a
    vector operand at a run-time row) and examples/rope.py qk_rope_proj (each AIV's row loop of
    table copies after the gemm)."""
    import sys
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    import paged_attention
    import rope
    if case == "combine_splits":
        k = paged_attention.combine_splits(2, 3, 3, 64, "float16", target="ascend910b")
        want = ["lse.GetValue(", "total.GetValue(", "Muls("]
    else:
        k = rope.qk_rope_proj(45, 96, 2, 64, 96, True, dtype="float16", target="ascend910b")
        want = ["GetSubBlockIdx()", "Pos_gm.GetValue(", "Gather("]
    src = k.get_source("ascendc")
    for w in want:
        assert w in src, w
    rc, out = compile_cpp(src, tmp_path)
    assert rc == 0 and out == "", f"{case} does not compile against {INCLUDE}:\n{out}"


@pytest.mark.parametrize("path", HOSTS, ids=os.path.basename)
def test_golden_host_compiles(path, tmp_path):
    kernel = read(path.replace("_host.cpp", "_kernel.cpp"))
    header = launch_header(kernel)
    host = read(path)
    assert f'#include "{header[0]}"' in host
    rc, out = compile_cpp(host, tmp_path, "main.cpp", [header], HOST_BUILDS)
    assert rc == 0 and out == "", f"{os.path.basename(path)} does not compile against {INCLUDE}:\n{out}"


def test_launch_header_follows_the_kernel_signature():
    name, text = launch_header('extern "C" __global__ __aicore__ void k(GM_ADDR x, GM_ADDR stream, '
                               'int32_t n, __gm__ float* y)\n{\n}\n')
    assert name == "aclrtlaunch_k.h"
    assert ('extern "C" uint32_t aclrtlaunch_k(uint32_t blockDim, aclrtStream _stream, void* x, void* stream, '
            'int32_t n, void* y);') in text
    assert "#define ACLRT_LAUNCH_KERNEL(kernel_func) aclrtlaunch_##kernel_func" in text


# ---------------------------------------------------------------------------------------------
# The headers have teeth: a kernel that compiles, then the same kernel with one statement wrong.

KERNEL_TEMPLATE = """#include "kernel_operator.h"
using namespace AscendC;
extern "C" __global__ __aicore__ void k(GM_ADDR x, GM_ADDR y, GM_ADDR workspace, GM_ADDR tiling)
{
  KERNEL_TASK_TYPE_DEFAULT(%(ktype)s);
  GlobalTensor<half> x_gm;
  x_gm.SetGlobalBuffer(reinterpret_cast<__gm__ half*>(x));
  GlobalTensor<float> y_gm;
  y_gm.SetGlobalBuffer(reinterpret_cast<__gm__ float*>(y));
  if ASCEND_IS_AIC {
    TPipe pipe;
    TBuf<TPosition::A1> l1_buf;
    pipe.InitBuffer(l1_buf, 65536);
    LocalTensor<half> l1 = l1_buf.Get<half>();
    TBuf<TPosition::CO1> l0c_buf;
    pipe.InitBuffer(l0c_buf, 65536);
    LocalTensor<float> l0c = l0c_buf.Get<float>();
    %(aic)s
  }
  if ASCEND_IS_AIV {
    const int32_t n = static_cast<int32_t>(GetBlockIdx()) + 64;
    TPipe pipe;
    TBuf<TPosition::VECCALC> ub_buf;
    pipe.InitBuffer(ub_buf, 131072);
    LocalTensor<uint8_t> ub = ub_buf.Get<uint8_t>();
    LocalTensor<float> a = ub[0].ReinterpretCast<float>();
    LocalTensor<float> b = ub[16384].ReinterpretCast<float>();
    LocalTensor<half> h = ub[32768].ReinterpretCast<half>();
    LocalTensor<bfloat16_t> bf = ub[49152].ReinterpretCast<bfloat16_t>();
    %(aiv)s
  }
}
"""

GOOD_AIC = """InitConstValue(l1, InitConstValueParams<half>{1, static_cast<uint16_t>(512), 0, static_cast<half>(0)});
    DataCopy(l1, x_gm, Nd2NzParams{1, 64, 64, 0, 64, 64, 1, 0});
    SetFlag<HardEvent::MTE2_MTE1>(0);
    WaitFlag<HardEvent::MTE2_MTE1>(0);
    FixpipeParamsV220 fp;
    fp.nSize = 64;
    fp.quantPre = QuantMode_t::NoQuant;
    Fixpipe<float, float, CFG_ROW_MAJOR>(y_gm, l0c, fp);
    CrossCoreSetFlag<2, PIPE_FIX>(3);"""

GOOD_AIV = """CrossCoreWaitFlag<2, PIPE_MTE2>(3);
    CrossCoreWaitFlag(4);
    DataCopyPad(h, x_gm, DataCopyExtParams{1, 128, 0, 0, 0}, DataCopyPadExtParams<half>{false, 0, 0, static_cast<half>(0)});
    Add(a, a, b, n);
    Add(a, a, b, 64, 8, BinaryRepeatParams(1, 1, 1, 8, 8, 8));
    Muls(a, a, static_cast<float>(0.5f), n);
    Cast(a, h, RoundMode::CAST_NONE, 64, 1, UnaryRepeatParams(1, 1, 8, 4));
    Cast(bf, a, RoundMode::CAST_RINT, 128);
    Duplicate(b, static_cast<float>(0), 48, 4, 1, 8);
    WholeReduceMax(a, b, 64, 8, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);
    WholeReduceSum(a, b, 64, 8, 1, 1, 8);
    Brcb(a, b, static_cast<uint8_t>(4), BrcbRepeatParams(1, 8));
    PipeBarrier<PIPE_V>();
    DataCopyPad(y_gm, a, DataCopyExtParams{1, 256, 0, 0, 0});"""


def kernel(aic=GOOD_AIC, aiv=GOOD_AIV, ktype="KERNEL_TYPE_MIX_AIC_1_2"):
    return KERNEL_TEMPLATE % {"aic": aic, "aiv": aiv, "ktype": ktype}


def test_teeth_control_compiles(tmp_path):
    rc, out = compile_cpp(kernel(), tmp_path)
    assert rc == 0 and out == "", out


# (what is wrong, AIV statement replacing `Add(a, a, b, n);` (or AIC statement replacing the
# Fixpipe call when it starts with "aic:"), a regex the compiler's message must match)
BAD = [
    ("level-0 call without its repeat params", "Add(a, a, b, 64, 8);", r"no matching function for call to 'Add"),
    ("level-2 call with an extra argument", "Exp(a, b, n, 1);", r"no matching function for call to 'Exp"),
    ("unary repeat params into a binary call", "Add(a, a, b, 64, 8, UnaryRepeatParams(1, 1, 8, 8));",
     r"no matching function for call to 'Add"),
    ("DataCopyParams where DataCopyExtParams is needed",
     "DataCopyPad(y_gm, a, DataCopyParams{1, 256, 0, 0}, DataCopyPadExtParams<float>{false, 0, 0, 0.0f});",
     r"no matching function for call to 'DataCopyPad"),
    ("pad params of another element type",
     "DataCopyPad(h, x_gm, DataCopyExtParams{1, 128, 0, 0, 0}, DataCopyPadExtParams<float>{false, 0, 0, 0.0f});",
     r"no matching function for call to 'DataCopyPad"),
    ("mixed element types", "Add(a, a, h, n);", r"no matching function for call to 'Add"),
    ("a GM tensor where UB is needed", "Add(a, a, y_gm, n);", r"no matching function for call to 'Add"),
    ("ReduceOrder on WholeReduceSum", "WholeReduceSum(a, b, 64, 8, 1, 1, 8, ReduceOrder::ORDER_ONLY_VALUE);",
     r"no matching function for call to 'WholeReduceSum"),
    ("swapped mask and repeat stride struct", "Duplicate(b, static_cast<float>(0), 48, BinaryRepeatParams());",
     r"no matching function for call to 'Duplicate"),
    ("block count 70000 in a uint16_t field",
     "DataCopyPad(y_gm, a, DataCopyExtParams{70000, 256, 0, 0, 0});", r"narrowing conversion of '70000'"),
    ("left padding 300 in a uint8_t field",
     "DataCopyPad(h, x_gm, DataCopyExtParams{1, 128, 0, 0, 0}, DataCopyPadExtParams<half>{false, 300, 0, static_cast<half>(0)});",
     r"narrowing conversion of '300'"),
    ("repeat stride 256 in a uint8_t constructor parameter", "Add(a, a, b, 64, 8, BinaryRepeatParams(1, 1, 1, 256, 8, 8));",
     r"overflow|changes value from '256'"),
    ("repeat count 256 in a uint8_t parameter", "Brcb(a, b, 256, BrcbRepeatParams(1, 8));",
     r"overflow|changes value from '256'"),
    ("a runtime float narrowed into a half field",
     "DataCopyPad(h, x_gm, DataCopyExtParams{1, 128, 0, 0, 0}, DataCopyPadExtParams<half>{false, 0, 0, a.GetSize() * 0.5f});",
     r"narrowing conversion"),
    ("an implicit float into bfloat16_t", "InitConstValueParams<bfloat16_t> p{1, 1, 0, 1.5f};",
     r"could not convert|conversion from 'float' to|no matching"),
    ("a pipe where an event is needed", "SetFlag<PIPE_V>(0);", r"no matching function for call to 'SetFlag"),
    ("an event where a pipe is needed", "PipeBarrier<HardEvent::V_MTE3>();",
     r"no matching function for call to 'PipeBarrier"),
    ("cross-core mode 256 (uint8_t)", "CrossCoreWaitFlag<256, PIPE_MTE2>(3);", r"narrowing conversion of '256'"),
    ("cross-core set flag without its template arguments", "CrossCoreSetFlag(3);",
     r"no matching function for call to 'CrossCoreSetFlag"),
    ("an integer kernel type", "KTYPE:3", r"KERNEL_TASK_TYPE_DEFAULT takes one KERNEL_TYPE_\* value"),
    ("an integer where a RoundMode is needed", "Cast(a, h, 1, 128);", r"no matching function for call to 'Cast"),
    ("level-0 Add on bfloat16_t", "Add(bf, bf, bf, 64, 4, BinaryRepeatParams(1, 1, 1, 8, 8, 8));",
     r"Add: element type not supported"),
    ("Exp on int32_t", "Exp(a.ReinterpretCast<int32_t>(), b.ReinterpretCast<int32_t>(), 64, 1, UnaryRepeatParams());",
     r"Exp: element type not supported"),
    ("level-2 Muls on bfloat16_t", "Muls(bf, bf, static_cast<bfloat16_t>(2), n);", r"Muls: element type not supported"),
    ("Duplicate on int8_t", "Duplicate(ub.ReinterpretCast<int8_t>(), static_cast<int8_t>(0), n);",
     r"Duplicate: element type not supported"),
    ("aic: a Fixpipe config that is not a FixpipeConfig", "aic:Fixpipe<float, float, 1>(y_gm, l0c, fp);",
     r"no matching function for call to 'Fixpipe"),
    ("aic: a Load3D params of another element type",
     "aic:LoadData(l1, l1, LoadData3DParamsV2<float>());", r"no matching function for call to 'LoadData"),
    ("aic: an unknown Nd2NzParams field",
     "aic:Nd2NzParams p; p.srcStride = 1;", r"has no member named 'srcStride'"),
    ("aic: Mmad without its params", "aic:Mmad(l0c, l1, l1);", r"no matching function for call to 'Mmad"),
    ("aic: repeat count 256 assigned to a uint8_t field", "aic:LoadData2DParams p;\n    p.repeatTimes = 256;",
     r"overflow|changes value from '256'"),
    ("aic: a row stride of 65536 assigned to a uint16_t field", "aic:Nd2NzParams p;\n    p.srcDValue = 65536;",
     r"overflow|changes value from '65536'"),
]


@pytest.mark.parametrize("what,stmt,message", BAD, ids=[b[0] for b in BAD])
def test_header_rejects(what, stmt, message, tmp_path):
    if stmt.startswith("KTYPE:"):
        src = kernel(ktype=stmt[len("KTYPE:"):])
    elif stmt.startswith("aic:"):
        target = "Fixpipe<float, float, CFG_ROW_MAJOR>(y_gm, l0c, fp);"
        assert target in GOOD_AIC
        src = kernel(aic=GOOD_AIC.replace(target, stmt[len("aic:"):]))
    else:
        assert "Add(a, a, b, n);" in GOOD_AIV
        src = kernel(aiv=GOOD_AIV.replace("Add(a, a, b, n);", stmt))
    rc, out = compile_cpp(src, tmp_path)
    assert rc != 0, f"{what}: compiled but must not:\n{stmt}"
    assert re.search(message, out.replace("\u2018", "'").replace("\u2019", "'")), f"{what}: unexpected error:\n{out}"


HOST_TEMPLATE = """#include <cstdint>
#include "acl/acl.h"
#include "aclrtlaunch_k.h"
int main()
{
  if (aclInit(nullptr) != ACL_SUCCESS) return 1;
  aclrtSetDevice(0);
  aclrtStream stream = nullptr;
  aclrtCreateStream(&stream);
  void* x = nullptr;
  void* y = nullptr;
  aclrtMalloc(&x, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  aclrtMalloc(&y, 64, ACL_MEM_MALLOC_HUGE_FIRST);
  char host[64] = {};
  %s
  aclrtSynchronizeStream(stream);
  aclrtFree(x);
  aclrtFree(y);
  aclrtDestroyStream(stream);
  aclrtResetDevice(0);
  aclFinalize();
  return 0;
}
"""
GOOD_HOST = """aclrtMemcpy(x, 64, host, 64, ACL_MEMCPY_HOST_TO_DEVICE);
  ACLRT_LAUNCH_KERNEL(k)(2, stream, x, y, nullptr, nullptr);"""


@pytest.mark.parametrize("stmt,message", [
    (GOOD_HOST, None),
    ("ACLRT_LAUNCH_KERNEL(k)(2, stream, x, y, nullptr);", r"too few arguments"),
    ("ACLRT_LAUNCH_KERNEL(k)(2, 1, x, y, nullptr, nullptr);", r"invalid conversion from .int. to .aclrtStream"),
    ("aclrtMemcpy(x, 64, host, 64, 1);", r"invalid conversion from 'int' to 'aclrtMemcpyKind'"),
    ("aclrtMemset(x, 64, 0);", r"too few arguments"),
], ids=["control", "launch-arg-count", "launch-int-stream", "memcpy-kind-int", "memset-arg-count"])
def test_host_headers(stmt, message, tmp_path):
    header = launch_header(kernel())
    rc, out = compile_cpp(HOST_TEMPLATE % stmt, tmp_path, "main.cpp", [header], HOST_BUILDS)
    if message is None:
        assert rc == 0 and out == "", out
    else:
        assert rc != 0, f"compiled but must not:\n{stmt}"
        assert re.search(message, out.replace("\u2018", "'").replace("\u2019", "'")), out


def test_both_core_branches_are_type_checked_in_each_build(tmp_path):
    # `if ASCEND_IS_AIC` is an `if constexpr`: the AIV build still rejects a type error in the AIC branch.
    src = kernel(aic=GOOD_AIC + "\n    Nd2NzParams p;\n    p.srcStride = 1;")
    rc, out = compile_cpp(src, tmp_path, builds=(["-DSPLIT_CORE_VEC"],))
    assert rc != 0 and "has no member named" in out.replace("\u2018", "'"), out


def test_element_type_checks_are_where_the_real_headers_make_them(tmp_path):
    # Level-0 binary calls check the element type at compile time in the AIV build only (the real
    # implementation guards them with `if ASCEND_IS_AIV`); level-2 binary calls check it at run time.
    level0 = kernel(aiv=GOOD_AIV + "\n    Add(bf, bf, bf, 64, 4, BinaryRepeatParams(1, 1, 1, 8, 8, 8));")
    assert compile_cpp(level0, tmp_path, builds=(["-DSPLIT_CORE_CUBE"],))[0] == 0
    assert compile_cpp(level0, tmp_path, builds=(["-DSPLIT_CORE_VEC"],))[0] != 0
    level2 = kernel(aiv=GOOD_AIV + "\n    Add(bf, bf, bf, n);")
    rc, out = compile_cpp(level2, tmp_path)
    assert rc == 0, out
