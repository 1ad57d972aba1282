// FPDU building of the transmit context (design: qp.h "Transmit", tx_context.h).
#include "soft/qp/tx_context.h"

#include <algorithm>
#include <cstring>

#include "soft/wire/crc32c.h"

namespace netdirect::soft {

using namespace wire;

void TxBatch::append_fpdu(const DdpHeader& h, const uint8_t* body, size_t body_len, const LocalSge* sge,
                          uint32_t nsge, uint64_t offset, uint32_t len, bool crc_on) {
  const int slot = fpdus++;
  uint8_t* hp = hdr[slot];
  const size_t ulpdu_len = ddp_header_size(h.opcode) + body_len + len;
  size_t n = encode_fpdu_header(h, static_cast<uint16_t>(ulpdu_len), hp);
  if (body_len > 0) {
    std::memcpy(hp + n, body, body_len);
    n += body_len;
  }
  if (len <= kPackMax) {
    // Small payload: header, payload, pad and CRC in the slot, one iovec.
    uint8_t* p = hp + n;
    for_each_sge_piece(sge, nsge, offset, len, [&](uint8_t* src, uint32_t take) {
      std::memcpy(p, src, take);
      p += take;
    });
    const size_t m = n + len;
    const size_t t = encode_fpdu_trailer(crc_on ? crc32c_update(kCrc32cInit, hp, m) : 0, ulpdu_len, crc_on, hp + m);
    iov[iov_count++] = iovec{hp, m + t};
    bytes += m + t;
    return;
  }
  iov[iov_count++] = iovec{hp, n};
  uint32_t crc = crc_on ? crc32c_update(kCrc32cInit, hp, n) : 0;
  for_each_sge_piece(sge, nsge, offset, len, [&](uint8_t* p, uint32_t take) {
    iov[iov_count++] = iovec{p, take};
    if (crc_on) crc = crc32c_update(crc, p, take);
  });
  const size_t t = encode_fpdu_trailer(crc, ulpdu_len, crc_on, trailer[slot]);
  iov[iov_count++] = iovec{trailer[slot], t};
  bytes += n + len + t;
}

}  // namespace netdirect::soft
