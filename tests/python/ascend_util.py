"""Helpers shared by the Ascend tests of the automatic pipeline (tests/python/test_ascend_auto*.py)."""
import tilewright as tw

TARGET = "ascend910b"


def build(factory, *args, **kwargs):
    """The example's @tw.jit kernel for the Ascend target: the same factory, only the target differs."""
    return factory(*args, target=TARGET, **kwargs)


def run_checked(kernel, *inputs):
    """Runs in the simulator with the checker; asserts it found nothing; returns the output."""
    prof = kernel.profile(*inputs)
    assert prof["reports"] == [], "\n".join(prof["reports"])
    return prof.outputs


def assert_close(got, ref, tolerances, what):
    """|got - ref| <= atol + rtol |ref| elementwise, with (atol, rtol) = tolerances."""
    atol, rtol = tolerances
    tw.testing.assert_close(got, ref, atol=atol, rtol=rtol, msg=what)
