// gzip decoding with zlib's inflate, member after member (concatenated gzip files are valid gzip).
#include "data/gzip.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

#include "core/error.h"
#include "core/io/file_io.h"

namespace ember::data {

bool is_gzip(const std::vector<uint8_t>& bytes) { return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b; }

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& compressed, const std::string& path) {
  EMBER_CHECK(is_gzip(compressed), "gunzip: '", path, "' is not gzip data (expected the magic bytes 1f 8b)");
  std::vector<uint8_t> out;
  // The trailer's ISIZE (the size mod 2^32 of the last member) is a good first guess.
  if (compressed.size() >= 18) {
    const uint8_t* t = compressed.data() + compressed.size() - 4;
    uint32_t isize = t[0] | (t[1] << 8) | (t[2] << 16) | (static_cast<uint32_t>(t[3]) << 24);
    out.reserve(std::min<size_t>(isize, compressed.size() * 64));
  }

  z_stream stream{};
  // 16 + MAX_WBITS: expect a gzip header and trailer (with its CRC check), not a raw zlib stream.
  EMBER_CHECK(inflateInit2(&stream, 16 + MAX_WBITS) == Z_OK, "gunzip: zlib could not initialise for '", path, "'");
  size_t in_pos = 0;
  size_t out_pos = 0;
  int status = Z_OK;
  std::string failure;
  while (true) {
    if (out_pos == out.size()) out.resize(std::max<size_t>(out.size() * 2, 1 << 16));
    size_t in_chunk = std::min<size_t>(compressed.size() - in_pos, UINT_MAX);
    size_t out_chunk = std::min<size_t>(out.size() - out_pos, UINT_MAX);
    stream.next_in = const_cast<Bytef*>(compressed.data() + in_pos);
    stream.avail_in = static_cast<uInt>(in_chunk);
    stream.next_out = out.data() + out_pos;
    stream.avail_out = static_cast<uInt>(out_chunk);
    status = inflate(&stream, Z_NO_FLUSH);
    in_pos += in_chunk - stream.avail_in;
    out_pos += out_chunk - stream.avail_out;
    if (status == Z_STREAM_END) {
      if (in_pos == compressed.size()) break;
      bool another_member =
          compressed.size() - in_pos >= 2 && compressed[in_pos] == 0x1f && compressed[in_pos + 1] == 0x8b;
      if (!another_member) {
        failure = "bad gzip stream: " + std::to_string(compressed.size() - in_pos) +
                  " trailing bytes after the end of the compressed data";
        break;
      }
      inflateReset(&stream);
      continue;
    }
    if (status == Z_OK) continue;
    if (status == Z_BUF_ERROR && in_pos == compressed.size() && stream.avail_out > 0) {
      failure = "truncated gzip stream: the compressed data ends after " + std::to_string(compressed.size()) +
                " bytes, before the end of the stream";
      break;
    }
    if (status == Z_BUF_ERROR) continue;  // needs more output room: the loop grows `out`
    failure = std::string("bad gzip stream: ") + (stream.msg ? stream.msg : "zlib error " + std::to_string(status));
    break;
  }
  inflateEnd(&stream);
  EMBER_CHECK(failure.empty(), "gunzip: '", path, "': ", failure);
  out.resize(out_pos);
  return out;
}

std::vector<uint8_t> read_file_maybe_gzip(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  return is_gzip(bytes) ? gunzip(bytes, path) : bytes;
}

}  // namespace ember::data
