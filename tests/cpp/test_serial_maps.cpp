// serial_maps: before/after Tile IR texts.
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"
#include "target/ascend/serial_maps.h"
#include "target/registry.h"

namespace tw::ascend {
namespace {

std::string after(const std::string& text) {
  return ir::print(serial_maps(ir::parse_kernel(text, "maps.tw"), target::find_target("ascend910b2")));
}

// The tile-loops epilogue (stores at [i, j], reads of the written tile there, a column vector at
// [j]) becomes a map; a running sum (reads c[i, j - 1]), a gather (b[x[i]]), a loop from 1 and a
// read of one element stay serial.
TEST(SerialMaps, ElementwiseNestsBecomeMapsOthersStaySerial) {
  const std::string serial_rest = R"(  for i1 in serial(0, 8) {
    for j1 in serial(1, 15) {
      c[i1, j1] = c[i1, j1 - 1] + c[i1, j1]
    }
  }
  for i2 in serial(0, 8) {
    for j2 in serial(0, 16) {
      c[i2, j2] = c[i2, j2] + b[x[i2]]
    }
  }
  for j3 in serial(0, 16) {
    b[j3] = b[j3] + b[0]
  }
  copy c -> Y
}
)";
  const std::string head = R"(kernel k(Y: global float32[8, 16], s: float32)
    grid(bx = 1) {
  alloc c: fragment float32[8, 16]
  alloc b: fragment float32[16]
  alloc x: fragment int32[8]
)";
  EXPECT_EQ(after(head + R"(  for i in serial(0, 8) {
    for j in serial(0, 16) {
      c[i, j] = c[i, j] * s + b[j]
    }
  }
)" + serial_rest),
            head + R"(  for i in parallel(0, 8) {
    for j in parallel(0, 16) {
      c[i, j] = c[i, j] * s + b[j]
    }
  }
)" + serial_rest);
}

// An if inside a T.Parallel map whose arms store one element is the select it computes (hunt30 F5):
// if / else -> where(c, a, b), an if without else -> where(c, a, the element); `if j < n` without
// an else on the innermost index (a runtime column count) stays an if; an if free of the map's variables
// goes around the map (the select would read what cpu skips: hunt31 F1).
TEST(SerialMaps, IfsInsideAMapBecomeSelects) {
  const std::string head = R"(kernel k(Y: global float32[4, 8], n: int32)
    grid(bx = 1) {
  alloc x: fragment float32[4, 8]
  alloc y: fragment float32[4, 8]
)";
  const std::string kept = R"(  for i2 in parallel(0, 4) {
    for j2 in parallel(0, 8) {
      if j2 < n {
        y[i2, j2] = 1.0
      }
    }
  }
}
)";
  const std::string inv = R"(  for i3 in parallel(0, 4) {
    for j3 in parallel(0, 8) {
      if n < 8 {
        y[i3, j3] = x[i3, n]
      }
    }
  }
)";
  const std::string hoisted = R"(  if n < 8 {
    for i3 in parallel(0, 4) {
      for j3 in parallel(0, 8) {
        y[i3, j3] = x[i3, n]
      }
    }
  }
)";
  EXPECT_EQ(after(head + R"(  for i in parallel(0, 4) {
    for j in parallel(0, 8) {
      if x[i, j] > 0.0 {
        y[i, j] = x[i, j]
      } else {
        y[i, j] = 0.0
      }
    }
  }
  for i1 in parallel(0, 4) {
    for j1 in parallel(0, 8) {
      if i1 < 3 {
        x[i1, j1] = 2.0
      }
    }
  }
)" + inv + kept),
            head + R"(  for i in parallel(0, 4) {
    for j in parallel(0, 8) {
      y[i, j] = where(x[i, j] > 0.0, x[i, j], 0.0)
    }
  }
  for i1 in parallel(0, 4) {
    for j1 in parallel(0, 8) {
      x[i1, j1] = where(i1 < 3, 2.0, x[i1, j1])
    }
  }
)" + hoisted + kept);
}

// elif32: an elif chain is nested selects (the inner condition chosen where the outer is false); elif34: a
// nested if needing a guard (the gather's index) binds its condition and the path to its arm (`cond_N`,
// `path_N`: guarded once, stored where the path holds), one needing none stays a select merged into the outer's; arms of several stores are one select
// per element where every value reads the tiles as before the if, else the stores in order (then arm's, else
// arm's), each keeping the element where its arm is not taken; per element, the store of the tile the condition reads goes last; in order, a
// condition reading a tile a store before the last writes is a let bound before the stores (elifcond33:
// legalize_vector computes it into a tile before y's store); a store under a nested if without an else is
// one select of the conjunction (an integer comparison negated as its opposite).
TEST(SerialMaps, ElifChainsAndArmsOfSeveralStores) {
  const std::string head = R"(kernel k(Y: global float32[8])
    grid(bx = 1) {
  alloc x: fragment float32[16]
  alloc ix: fragment int32[8]
  alloc y: fragment float32[8]
  alloc z: fragment float32[8]
)";
  EXPECT_EQ(after(head + R"(  for i in parallel(0, 8) {
    if ix[i] < 0 {
      y[i] = -1.0
    } else {
      if ix[i] >= 16 {
        y[i] = -2.0
      } else {
        y[i] = x[ix[i]]
      }
    }
  }
  for i1 in parallel(0, 8) {
    if y[i1] > 1.0 {
      z[i1] = y[i1]
      x[i1] = 1.0
    } else {
      z[i1] = 0.0
    }
  }
  for i2 in parallel(0, 8) {
    if i2 < 4 {
      y[i2] = x[i2] + 1.0
      z[i2] = y[i2] * 2.0
    } else {
      z[i2] = x[i2]
    }
  }
  for i3 in parallel(0, 8) {
    if y[i3] > 0.0 {
      y[i3] = 0.0
      z[i3] = 1.0
    }
  }
  for i5 in parallel(0, 8) {
    if i5 < 4 {
      if x[i5] > 0.0 {
        y[i5] = 1.0
      }
    } else {
      if i5 >= 6 {
        z[i5] = 2.0
      }
    }
  }
  for i4 in parallel(0, 8) {
    if y[i4] > 0.0 {
      y[i4] = 0.0
      z[i4] = y[i4] + 1.0
    }
  }
}
)"),
            head + R"(  for i in parallel(0, 8) {
    y[i] = where(ix[i] < 0, -1.0, y[i])
    let cond_0: bool = ix[i] >= 16
    let path_1: bool = ix[i] >= 0 and not cond_0
    y[i] = where(ix[i] >= 0, where(cond_0, -2.0, x[where(path_1, ix[i], 0)]), y[i])
  }
  for i1 in parallel(0, 8) {
    z[i1] = where(y[i1] > 1.0, y[i1], 0.0)
    x[i1] = where(y[i1] > 1.0, 1.0, x[i1])
  }
  for i2 in parallel(0, 8) {
    y[i2] = where(i2 < 4, x[i2] + 1.0, y[i2])
    z[i2] = where(i2 < 4, y[i2] * 2.0, z[i2])
    z[i2] = where(i2 < 4, z[i2], x[i2])
  }
  for i3 in parallel(0, 8) {
    z[i3] = where(y[i3] > 0.0, 1.0, z[i3])
    y[i3] = where(y[i3] > 0.0, 0.0, y[i3])
  }
  for i5 in parallel(0, 8) {
    y[i5] = where(i5 < 4 and x[i5] > 0.0, 1.0, y[i5])
    z[i5] = where(i5 >= 4 and i5 >= 6, 2.0, z[i5])
  }
  for i4 in parallel(0, 8) {
    let cond_3: bool = y[i4] > 0.0
    y[i4] = where(cond_3, 0.0, y[i4])
    z[i4] = where(cond_3, y[i4] + 1.0, z[i4])
  }
}
)");
}

}  // namespace
}  // namespace tw::ascend
