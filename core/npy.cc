// SPDX-License-Identifier: Apache-2.0
// .npy encoding and decoding.
#include "core/npy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <vector>

#include "core/mapped_file.h"

namespace kiln {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The numpy type character and size of each dtype ('b' is bool, 'V' the void type used for bf16).
struct NpyType {
  DType dtype;
  char kind;
  int size;
};
constexpr NpyType kNpyTypes[] = {
    {DType::kF32, 'f', 4},  {DType::kF16, 'f', 2}, {DType::kF64, 'f', 8},
    {DType::kBF16, 'V', 2}, {DType::kI8, 'i', 1},  {DType::kU8, 'u', 1},
    {DType::kI16, 'i', 2},  {DType::kU16, 'u', 2}, {DType::kI32, 'i', 4},
    {DType::kU32, 'u', 4},  {DType::kI64, 'i', 8}, {DType::kU64, 'u', 8},
    {DType::kBool, 'b', 1},
};

// A cursor over the header dict: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name) : text_(text), name_(name) {}

  Status parse(std::string* descr, bool* fortran, std::vector<int64_t>* shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    KILN_RETURN_IF_ERROR(expect('{'));
    while (true) {
      skip_space();
      if (peek() == '}') break;
      KILN_ASSIGN_OR_RETURN(std::string key, string_literal());
      KILN_RETURN_IF_ERROR(expect(':'));
      skip_space();
      if (key == "descr") {
        KILN_ASSIGN_OR_RETURN(*descr, string_literal());
        have_descr = true;
      } else if (key == "fortran_order") {
        KILN_ASSIGN_OR_RETURN(*fortran, bool_literal());
        have_order = true;
      } else if (key == "shape") {
        KILN_RETURN_IF_ERROR(tuple(shape));
        have_shape = true;
      } else {
        return error(fmt::format("unexpected key '{}'", key));
      }
      skip_space();
      if (peek() == ',') ++pos_;
    }
    if (!have_descr || !have_order || !have_shape) {
      return error("the header lacks one of 'descr', 'fortran_order', 'shape'");
    }
    return Status();
  }

 private:
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  Status error(std::string_view what) const {
    return invalid_argument_error(
        fmt::format("\"{}\" is not a valid .npy file: {} at header offset {}", name_, what, pos_));
  }
  Status expect(char c) {
    skip_space();
    if (peek() != c) return error(fmt::format("expected '{}'", c));
    ++pos_;
    return Status();
  }
  Result<std::string> string_literal() {
    skip_space();
    char quote = peek();
    if (quote != '\'' && quote != '"') return error("expected a string");
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }
  Result<bool> bool_literal() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    return error("expected True or False");
  }
  Status tuple(std::vector<int64_t>* out) {
    KILN_RETURN_IF_ERROR(expect('('));
    out->clear();
    while (true) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return Status();
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) return error("expected a dimension");
      int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (INT64_MAX - 9) / 10) return error("dimension too large");
        v = v * 10 + (peek() - '0');
        ++pos_;
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      out->push_back(v);
      skip_space();
      if (peek() == ',') ++pos_;
    }
  }

  std::string_view text_;
  std::string_view name_;
  size_t pos_ = 0;
};

Result<DType> dtype_from_descr(const std::string& descr, std::string_view name, bool* swap) {
  *swap = false;
  if (descr.size() >= 3) {
    char order = descr[0];
    char kind = descr[1];
    int size = 0;
    bool digits = true;
    for (size_t i = 2; i < descr.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(descr[i])) || size > 1000) {
        digits = false;
        break;
      }
      size = size * 10 + (descr[i] - '0');
    }
    if (digits && (order == '<' || order == '>' || order == '|' || order == '=')) {
      for (const NpyType& t : kNpyTypes) {
        if (t.kind == kind && t.size == size) {
          *swap = order == '>' && size > 1;
          return t.dtype;
        }
      }
    }
  }
  return invalid_argument_error(fmt::format(
      "\"{}\": unsupported .npy element type '{}' (kiln reads bool, ints, floats and |V2 as bf16)",
      name, descr));
}

const NpyType& npy_type(DType dtype) {
  for (const NpyType& t : kNpyTypes) {
    if (t.dtype == dtype) return t;
  }
  KILN_CHECK(false, "npy_type called for string");
  __builtin_unreachable();
}

void byteswap(uint8_t* data, int64_t count, size_t size) {
  for (int64_t i = 0; i < count; ++i) std::reverse(data + i * size, data + (i + 1) * size);
}

// Copies Fortran-ordered elements into C order.
void fortran_to_c(const uint8_t* src, uint8_t* dst, const Shape& shape, size_t elem) {
  const int rank = shape.rank();
  std::vector<int64_t> f_strides(static_cast<size_t>(rank));
  int64_t s = 1;
  for (int i = 0; i < rank; ++i) {
    f_strides[static_cast<size_t>(i)] = s;
    s *= shape[i];
  }
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  const int64_t n = shape.numel();
  for (int64_t c = 0; c < n; ++c) {
    int64_t offset = 0;
    for (int i = 0; i < rank; ++i) offset += index[static_cast<size_t>(i)] * f_strides[static_cast<size_t>(i)];
    std::memcpy(dst + c * static_cast<int64_t>(elem), src + offset * static_cast<int64_t>(elem), elem);
    for (int i = rank - 1; i >= 0; --i) {
      if (++index[static_cast<size_t>(i)] < shape[i]) break;
      index[static_cast<size_t>(i)] = 0;
    }
  }
}

}  // namespace

Result<Tensor> parse_npy(std::span<const uint8_t> bytes, std::string_view name) {
  auto invalid = [&](std::string_view what) {
    return invalid_argument_error(fmt::format("\"{}\" is not a valid .npy file: {}", name, what));
  };
  if (bytes.size() < kMagicSize + 4 || std::memcmp(bytes.data(), kMagic, kMagicSize) != 0) {
    return invalid("missing the \\x93NUMPY magic");
  }
  const uint8_t major = bytes[6];
  size_t header_len = 0;
  size_t header_start = 0;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid("truncated header");
    header_len = bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) |
                 (size_t{bytes[11]} << 24);
    header_start = 12;
  } else {
    return invalid(fmt::format("unsupported format version {}", major));
  }
  if (header_len > bytes.size() - header_start) return invalid("truncated header");
  std::string_view header(reinterpret_cast<const char*>(bytes.data() + header_start), header_len);

  std::string descr;
  bool fortran = false;
  std::vector<int64_t> dims;
  KILN_RETURN_IF_ERROR(HeaderParser(header, name).parse(&descr, &fortran, &dims));
  bool swap = false;
  KILN_ASSIGN_OR_RETURN(DType dtype, dtype_from_descr(descr, name, &swap));
  Shape shape(std::move(dims));
  Result<int64_t> numel = shape.checked_numel(INT64_MAX / 8);
  if (!numel.ok()) return invalid(numel.status().message());

  const size_t data_start = header_start + header_len;
  const size_t elem = dtype_size(dtype);
  const size_t available = bytes.size() - data_start;
  if (static_cast<uint64_t>(*numel) > available / elem) {
    return invalid(fmt::format("truncated data: shape {} of {} needs {} bytes, the file has {}",
                               shape.to_string(), dtype_name(dtype), *numel * static_cast<int64_t>(elem),
                               available));
  }
  KILN_ASSIGN_OR_RETURN(Tensor tensor, Tensor::allocate(dtype, shape));
  const uint8_t* src = bytes.data() + data_start;
  auto* dst = static_cast<uint8_t*>(tensor.raw_data());
  if (fortran && shape.rank() > 1) {
    fortran_to_c(src, dst, shape, elem);
  } else if (tensor.nbytes() > 0) {
    std::memcpy(dst, src, tensor.nbytes());
  }
  if (swap) byteswap(dst, *numel, elem);
  if (dtype == DType::kBool) {
    for (int64_t i = 0; i < *numel; ++i) dst[i] = dst[i] != 0;
  }
  return tensor;
}

Result<Tensor> read_npy(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  return parse_npy(file->bytes(), path);
}

Result<std::string> encode_npy(const TensorView& tensor) {
  if (tensor.dtype() == DType::kString) {
    return invalid_argument_error("a string tensor cannot be written as .npy");
  }
  if (dtype_is_narrow(tensor.dtype())) {
    const DType d = tensor.dtype();
    const std::string_view wider = dtype_is_narrow_float(d)             ? "f32"
                                   : d == DType::kI4 || d == DType::kI2 ? "i8"
                                                                        : "u8";
    return invalid_argument_error(fmt::format(
        "a {} tensor cannot be written as .npy: numpy has no {} type; Cast it to {} first",
        dtype_name(d), dtype_name(d), wider));
  }
  const NpyType& t = npy_type(tensor.dtype());
  const char order = t.size == 1 || t.kind == 'V' ? '|' : '<';
  std::string shape;
  for (int64_t d : tensor.shape()) shape += fmt::format("{}, ", d);
  if (tensor.shape().rank() == 1) {
    shape.pop_back();  // "(5,)"
  } else if (tensor.shape().rank() > 1) {
    shape.resize(shape.size() - 2);  // "(2, 3)"
  }
  std::string dict = fmt::format("{{'descr': '{}{}{}', 'fortran_order': False, 'shape': ({}), }}",
                                 order, t.kind, t.size, shape);
  // Pad with spaces so that magic + length + header + '\n' is a multiple of 64.
  size_t prefix = kMagicSize + 2 + 2;
  int major = 1;
  if (dict.size() + 1 + prefix > 65535) {
    major = 2;
    prefix = kMagicSize + 2 + 4;
  }
  size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict.push_back('\n');

  std::string out(kMagic, kMagicSize);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const size_t len = dict.size();
  out.push_back(static_cast<char>(len & 0xff));
  out.push_back(static_cast<char>((len >> 8) & 0xff));
  if (major == 2) {
    out.push_back(static_cast<char>((len >> 16) & 0xff));
    out.push_back(static_cast<char>((len >> 24) & 0xff));
  }
  out += dict;
  out.append(static_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  return out;
}

Status write_npy(const std::string& path, const TensorView& tensor) {
  KILN_ASSIGN_OR_RETURN(std::string bytes, encode_npy(tensor));
  return write_file_atomic(
      path, std::span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
}

}  // namespace kiln
