// tw_cpu/tw_cpu.h -- umbrella header included by every generated CPU kernel TU.
#pragma once

#include "types.h"
#include "simd.h"
#include "math.h"
#include "gemm.h"
