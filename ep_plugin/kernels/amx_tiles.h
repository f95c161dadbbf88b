// The AMX tile configuration both AMX GEMMs use (palette 1): all eight tiles 16 rows of 64 bytes; by convention
// tiles 0-3 hold C, 4-5 A and 6-7 B. Included only by *_amx.cc files (compiled with -mamx-tile).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace optim::kernels {
namespace {  // internal linkage: AMX files only

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Per kernel call: the configuration belongs to the thread, and a call may run on a new pool thread.
inline void load_amx_tile_config() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

}  // namespace
}  // namespace optim::kernels
