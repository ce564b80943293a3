// The stream-K partition of the wgmma prefill GEMM (src/backend/cuda/wgemm_split.h): simulated on
// the host for many shapes and grid sizes, every (tile, group) iteration is computed exactly once,
// every tile has one owner piece starting at group 0, helper pieces are the first of their block,
// and an owner's helper blocks hold exactly the rest of its tile, contiguous and in group order.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "backend/cuda/wgemm_split.h"

namespace {

using namespace mere::cuda;

struct Walk {
  int block;
  wsplit::Piece p;
  bool first_of_block, last_of_block;
};

void check_split(int64_t tiles, int ng, int P) {
  SCOPED_TRACE(::testing::Message() << "tiles " << tiles << ", ng " << ng << ", P " << P);
  const int64_t I = tiles * ng;
  ASSERT_LE(P, I);  // the launcher never uses more blocks than iterations
  std::vector<int> seen(static_cast<size_t>(I), 0);
  std::map<int64_t, std::vector<Walk>> by_tile;
  for (int b = 0; b < P; ++b) {
    const int64_t begin = wsplit::first(I, P, b), end = wsplit::first(I, P, b + 1);
    ASSERT_LT(begin, end) << "block " << b << " has an empty range";
    for (int64_t it = begin; it < end;) {
      const wsplit::Piece p = wsplit::piece(it, end, ng);
      ASSERT_LT(p.k0, p.k1);
      ASSERT_LE(p.k1, ng);
      for (int k = p.k0; k < p.k1; ++k) ++seen[static_cast<size_t>(p.tile * ng + k)];
      const int64_t next = it + (p.k1 - p.k0);
      by_tile[p.tile].push_back(Walk{b, p, it == begin, next == end});
      it = next;
    }
  }
  for (int64_t i = 0; i < I; ++i) {
    ASSERT_EQ(seen[static_cast<size_t>(i)], 1) << "iteration " << i;
  }
  ASSERT_EQ(static_cast<int64_t>(by_tile.size()), tiles);
  for (const auto& [tile, pieces] : by_tile) {
    ASSERT_EQ(pieces.front().p.k0, 0) << "tile " << tile << ": the first piece must start at group 0";
    const int owner = pieces.front().block;
    if (pieces.size() > 1) {
      EXPECT_TRUE(pieces.front().last_of_block) << "an owner of a split tile ends its range";
    }
    EXPECT_EQ(wsplit::helpers_end(I, P, owner, tile, ng), owner + static_cast<int>(pieces.size()));
    for (size_t j = 1; j < pieces.size(); ++j) {
      EXPECT_EQ(pieces[j].block, owner + static_cast<int>(j)) << "helpers are the next blocks in order";
      EXPECT_TRUE(pieces[j].first_of_block) << "a helper piece is the first of its block (one partial slot)";
      EXPECT_EQ(pieces[j].p.k0, pieces[j - 1].p.k1) << "helpers continue the tile in group order";
    }
    EXPECT_EQ(pieces.back().p.k1, ng);
  }
}

TEST(WgemmSplit, RealShapesOnH100AndH200Grids) {
  // 27B at T = 512 (4 token tiles): gate/up, down, in_proj_qkv, out_proj, k/v; 264 resident blocks
  const int64_t shapes[][2] = {{136 * 4, 80}, {40 * 4, 272}, {80 * 4, 80}, {40 * 4, 96}, {8 * 4, 80}, {1, 80}};
  for (const auto& s : shapes)
    for (int P : {264, 132, 7, 1}) {
      check_split(s[0], static_cast<int>(s[1]), static_cast<int>(std::min<int64_t>(P, s[0] * s[1])));
    }
}

TEST(WgemmSplit, SmallAndRaggedShapes) {
  for (int64_t tiles = 1; tiles <= 9; ++tiles)
    for (int ng = 1; ng <= 11; ++ng)
      for (int P = 1; P <= tiles * ng && P <= 40; ++P) check_split(tiles, ng, P);
}

TEST(WgemmSplit, GridSize) {
  // the launchers' grid: capped by the resident blocks and the iterations, at least kMinGroups
  // groups a block unless tiles outnumber that, and a valid partition whatever it picks
  EXPECT_EQ(wsplit::grid(272, 80, 132), 132);  // 27B gate/up at T = 512, 256-token tiles: all blocks
  EXPECT_EQ(wsplit::grid(16, 80, 132), 40);    // k/v: 1,280 groups, 32 a block
  EXPECT_EQ(wsplit::grid(2, 80, 132), 5);      // GDN b/a: 160 groups
  EXPECT_EQ(wsplit::grid(200, 1, 132), 132);   // one group a tile: tiles win over the minimum
  EXPECT_EQ(wsplit::grid(3, 2, 132), 3);       // fewer groups than kMinGroups: one block a tile
  EXPECT_EQ(wsplit::grid(1, 1, 132), 1);
  for (int64_t tiles : {1, 2, 5, 16, 40, 136, 544})
    for (int ng : {1, 3, 32, 80, 272})
      for (int resident : {1, 7, 132, 264}) {
        const int P = wsplit::grid(tiles, ng, resident);
        ASSERT_GE(P, 1);
        ASSERT_LE(P, resident);
        ASSERT_LE(P, tiles * ng);
        if (P < std::min<int64_t>(resident, tiles * ng)) {  // shrunk by the minimum: still >= one block a tile
          EXPECT_GE(P, std::min<int64_t>(tiles, resident));
          if (P > tiles) {
            EXPECT_GT(tiles * ng, (P - 1) * wsplit::kMinGroups) << "more blocks than the minimum allows";
          }
        }
        if (tiles <= 40 && ng <= 80) check_split(tiles, ng, P);
      }
}

TEST(WgemmSplit, HelpersEndWithoutHelpers) {
  // 4 tiles of 10 groups on 4 blocks: every block owns one whole tile
  for (int b = 0; b < 4; ++b) {
    EXPECT_EQ(wsplit::helpers_end(40, 4, b, b, 10), b + 1);
  }
}

}  // namespace
