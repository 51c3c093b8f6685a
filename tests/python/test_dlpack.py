"""DLPack arguments on another device: a clear error naming the parameter and the device.
The array is a hand-made DLPack capsule (ctypes) that claims to live on CUDA device 1, so the
check runs without torch or a GPU; its data pointer is never read."""
import ctypes

import numpy as np
import pytest

import tilewright as tw
import tilewright.language as T


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class FakeDeviceArray:
    """A float32 array of `shape` that says it lives on (device_type, device_id)."""

    def __init__(self, shape, device_type=2, device_id=1):
        self.host = np.zeros(shape, np.float32)
        self.shape_c = (ctypes.c_int64 * len(shape))(*shape)
        self.device = (device_type, device_id)
        self.deleter = DELETER(lambda p: None)
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = self.host.ctypes.data
        t.device = DLDevice(device_type, device_id)
        t.ndim = len(shape)
        t.dtype = DLDataType(2, 32, 1)  # float32
        t.shape = self.shape_c
        t.strides = None
        self.managed.deleter = self.deleter

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), b"dltensor", None)


@tw.jit(out_idx=[-1])
def copy_kernel(n):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(n):
                B[i] = A[i]
    return main


def test_host_dlpack_object_runs():
    x = FakeDeviceArray((8,), device_type=1, device_id=0)
    x.host[:] = np.arange(8)
    tw.testing.assert_close(copy_kernel(8)(x), np.arange(8, dtype=np.float32))


def test_device_mismatch_names_the_parameter_and_the_device():
    with pytest.raises(tw.TilewrightError) as ei:
        copy_kernel(8)(FakeDeviceArray((8,)))
    msg = ei.value.message
    assert msg.startswith("argument 'A' of kernel 'main' is on device cuda:1 (DLPack device type 2)")
    assert "runs on host memory" in msg and "cpu()" in ei.value.hint
