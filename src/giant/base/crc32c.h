// CRC-32C (Castagnoli), the checksum of TFRecord framing (TensorBoard's
// event files) among others.
#pragma once

#include <cstdint>
#include <string_view>

namespace giant {

// Reflected polynomial 0x82F63B78, initial value and final xor 0xFFFFFFFF:
// crc32c("123456789") == 0xE3069283.
uint32_t crc32c(std::string_view data);
// The CRC of a || data given crc = crc32c(a): a CRC computed block by block
// (crc32c_extend(0, x) == crc32c(x)). Uses the SSE 4.2 instruction where the
// processor has it (several GB/s: checkpoints checksum gigabytes).
uint32_t crc32c_extend(uint32_t crc, std::string_view data);

// TFRecord's masked form, ((crc >> 15) | (crc << 17)) + 0xA282EAD8: a CRC of
// data that itself holds CRCs is then not a CRC of a CRC.
uint32_t masked_crc32c(std::string_view data);

}  // namespace giant
