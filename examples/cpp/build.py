"""Installs the Tilewright C++ runtime from a source build into a prefix and builds this
consumer project against the installed package (docs/deploying.md, steps 3 and 4).

Usage: python examples/cpp/build.py WORK_DIR   -> prints the path of the consumer executable
(WORK_DIR/prefix holds the installed runtime, WORK_DIR/build the consumer's build)."""
import os
import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def build_consumer(work_dir, source_build=ROOT / "build" / "py") -> pathlib.Path:
    """cmake --install <source_build> --component runtime, then configure and build examples/cpp
    against it; returns the consumer executable. Raises RuntimeError with the tool's output."""
    work = pathlib.Path(work_dir)
    if not (pathlib.Path(source_build) / "cmake_install.cmake").exists():
        raise RuntimeError(f"{source_build} has no CMake build: run `make build` first")
    steps = [
        ["cmake", "--install", str(source_build), "--component", "runtime", "--prefix", str(work / "prefix")],
        ["cmake", "-S", str(HERE), "-B", str(work / "build"), f"-DCMAKE_PREFIX_PATH={work / 'prefix'}",
         "-DCMAKE_BUILD_TYPE=Release"],
        ["cmake", "--build", str(work / "build")],
    ]
    for cmd in steps:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return work / "build" / "consumer"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    print(build_consumer(os.path.abspath(sys.argv[1])))
