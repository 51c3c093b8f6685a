// drop_gemm_bands: first Tile IR pass of both Ascend pipelines (see pipeline.cpp), expert and
// automatic.
//
// T.gemm's a_band / c_band (docs/language.md "Bands") are a performance hint that the Cube does not
// use: it multiplies whole tiles, a valid result of either band (a_band: the skipped terms are 0;
// c_band: the elements outside the band may hold anything), nor the rectangle a band may be met
// with (T.gemm's rows / cols: the same promise over a smaller region). Each banded gemm becomes the
// same gemm without its band and rectangle, before any pass reads the gemms, so the bounds'
// expressions (scalar reads) do not reach the Cube's code. Nothing else changes.
#pragma once

#include "tilewright/ir.h"

namespace tw::ascend {

ir::Kernel drop_gemm_bands(const ir::Kernel& kernel);

}  // namespace tw::ascend
